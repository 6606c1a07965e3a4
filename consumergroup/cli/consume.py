"""``consumergroup consume``: join a group (or read partitions) and print what arrives.

Two modes: ``--group G`` joins G and marks every message it prints (the final
commit and LeaveGroup happen on a clean stop); ``--partition N`` reads
partitions directly with :class:`~consumergroup.Consumer`, no group, nothing
committed. Output is a line of text per message, one JSON object per line
(``--format json``), or a messages/s line per second (``--rate``).

Stopping (Ctrl-C, SIGTERM, ``--timeout``, ``--max-messages``) takes effect at
once in every phase: while a session runs it is a clean close (final commit,
LeaveGroup); while the member is still joining there is nothing to commit, so
the join is abandoned and the member closed with a short bound.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import sys
import time
from collections.abc import AsyncIterator, Iterable

import click
from click.core import ParameterSource

from .._dataclass import dataclass
from .._lifecycle import cancel_and_wait
from ..config import OFFSET_NEWEST, OFFSET_OLDEST, Config
from ..consumer import Consumer, PartitionConsumer
from ..errors import ConsumerGroupError, UnknownTopicOrPartitionError
from ..group import (
    ConsumerGroup,
    ConsumerGroupClaim,
    ConsumerGroupHandler,
    ConsumerGroupSession,
    GroupState,
)
from ..message import ConsumerMessage
from ._cluster import ClusterOptions, cluster_options
from ._common import (
    EXIT_OK,
    CliError,
    CliFailure,
    Output,
    Stopper,
    explain_connect_error,
    format_claims,
    leaf_error,
    preflight,
    ranged,
    render_bytes,
    run_command,
    signals,
    status,
    topics_option,
)

log = logging.getLogger(__name__)

#: How long a clean close may take (final commit + LeaveGroup) before it is cut short.
CLOSE_BOUND = 10.0
#: How long close() may take while the member is still joining (nothing to commit yet).
JOINING_CLOSE_BOUND = 1.0
#: How long run() may take to return once close() has.
RUN_END_BOUND = 0.5


def format_message(msg: ConsumerMessage, width: int) -> str:
    """``topic/partition@offset key=... value=...`` for one message."""
    return (
        f"{msg.topic}/{msg.partition}@{msg.offset} "
        f"key={render_bytes(msg.key, min(width, 80))} value={render_bytes(msg.value, width)}"
    )


def _encoded(data: bytes | None) -> tuple[str | None, str | None]:
    """(text, encoding): UTF-8 text as is, anything else base64; None stays None."""
    if data is None:
        return None, None
    try:
        return data.decode("utf-8"), "text"
    except UnicodeDecodeError:
        return base64.b64encode(data).decode("ascii"), "base64"


def message_json(msg: ConsumerMessage) -> str:
    """One message as one line of JSON.

    Keys: topic, partition, offset, timestamp (ISO 8601, null when unknown),
    key and value (UTF-8 text, or base64 with ``key_encoding`` /
    ``value_encoding`` saying which; null for a null key or value), headers
    (a list of ``{"key", "value", "value_encoding"}``).
    """
    key, key_encoding = _encoded(msg.key)
    value, value_encoding = _encoded(msg.value)
    headers = []
    for name, raw in msg.headers:
        text, encoding = _encoded(raw)
        headers.append({"key": name, "value": text, "value_encoding": encoding})
    return json.dumps(
        {
            "topic": msg.topic,
            "partition": msg.partition,
            "offset": msg.offset,
            "timestamp": msg.timestamp.isoformat() if msg.timestamp_ms >= 0 else None,
            "key": key,
            "key_encoding": key_encoding,
            "value": value,
            "value_encoding": value_encoding,
            "headers": headers,
        },
        ensure_ascii=False,
    )


@dataclass
class _ConsumeOptions:
    group: str | None
    topics: list[str]
    partitions: list[int]
    offset: int
    from_beginning: bool
    rate: bool
    as_json: bool
    max_messages: int | None
    timeout: float | None
    width: int
    session_timeout: float
    group_protocol: str


def _parse_offset(text: str | None, from_beginning: bool) -> int:
    if text is None:
        return OFFSET_OLDEST if from_beginning else OFFSET_NEWEST
    named = {"oldest": OFFSET_OLDEST, "earliest": OFFSET_OLDEST}
    named |= {"newest": OFFSET_NEWEST, "latest": OFFSET_NEWEST}
    if text.lower() in named:
        return named[text.lower()]
    if text.isdigit():
        return int(text)
    raise click.BadParameter(
        f"{text!r} is not an offset: give N >= 0, oldest or newest", param_hint="--offset"
    )


@click.command()
@click.option("--group", "-g", help="Consumer group id to join (or use --partition).")
@topics_option("Topic to consume (repeatable).", required=True)
@click.option(
    "--partition",
    "-p",
    "partitions",
    type=click.IntRange(min=0),
    multiple=True,
    help="Read this partition of the (one) --topic without a group (repeatable).",
)
@click.option(
    "--offset",
    metavar="N|oldest|newest",
    help="With --partition: where to start (default: newest, oldest with --from-beginning).",
)
@click.option(
    "--from-beginning",
    is_flag=True,
    help="Start from the oldest message where the group has no committed offset "
    "(default: only new messages).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="One line of text per message, or one JSON object per line.",
)
@click.option("--rate", is_flag=True, help="Print a messages/s line per second, not messages.")
@ranged(
    "--max-messages",
    click.IntRange(min=1),
    None,
    "Stop cleanly after this many messages.",
    short="-n",
)
@ranged(
    "--timeout",
    click.FloatRange(min=0, min_open=True),
    None,
    "Stop cleanly after this many seconds (joining included).",
    seconds=True,
)
@ranged("--width", click.IntRange(min=8), 200, "Truncate text values to this many characters.")
@ranged(
    "--session-timeout",
    click.FloatRange(min=1),
    10.0,
    "Group session timeout (heartbeats every tenth of it, at least every 0.5 s).",
    seconds=True,
)
@click.option(
    "--group-protocol",
    type=click.Choice(["classic", "consumer"]),
    default="classic",
    show_default=True,
    help="The group protocol: classic, or consumer (KIP-848, Apache Kafka 4.0+: the broker "
    "assigns and sets the session timeout).",
)
@cluster_options
def consume(
    group: str | None,
    topics: tuple[str, ...],
    partitions: tuple[int, ...],
    offset: str | None,
    from_beginning: bool,
    fmt: str,
    rate: bool,
    max_messages: int | None,
    timeout: float | None,
    width: int,
    session_timeout: float,
    group_protocol: str,
    cluster: ClusterOptions,
) -> None:
    """Join GROUP and print the messages of TOPIC(s), marking each one;
    or, with --partition, read partitions without a group.

    Ctrl-C or SIGTERM closes cleanly: handlers stop, marked offsets are
    committed, the member leaves the group, exit code 0 (a second Ctrl-C
    forces the stop: 130).
    """
    if group is not None and not group.strip():
        raise click.BadParameter(
            "the group id must not be empty: give the id of the group to join", param_hint="--group"
        )
    if (group is None) == (not partitions):
        raise click.UsageError("give either --group GROUP or --partition N (without a group)")
    if partitions and len(set(topics)) != 1:
        raise click.UsageError("--partition reads one topic: give exactly one --topic")
    if offset is not None and not partitions:
        raise click.UsageError("--offset needs --partition (a group starts at its commits)")
    session_given = click.get_current_context().get_parameter_source("session_timeout")
    if group_protocol == "consumer" and session_given is not ParameterSource.DEFAULT:
        raise click.UsageError(
            "--session-timeout does not apply with --group-protocol consumer: the broker sets "
            "it (group.consumer.session.timeout.ms); leave it out"
        )
    opts = _ConsumeOptions(
        group=group,
        topics=list(dict.fromkeys(topics)),
        partitions=sorted(set(partitions)),
        offset=_parse_offset(offset, from_beginning),
        from_beginning=from_beginning,
        rate=rate,
        as_json=fmt == "json",
        max_messages=max_messages,
        timeout=timeout,
        width=width,
        session_timeout=session_timeout,
        group_protocol=group_protocol,
    )
    runner = _consume_partitions if partitions else _consume_group
    sys.exit(run_command(lambda: runner(opts, cluster)))


class _Printer:
    """Prints (or counts) messages; asks for a stop at ``max_messages``."""

    def __init__(self, opts: _ConsumeOptions, out: Output, stopper: Stopper) -> None:
        self._opts = opts
        self._out = out
        self._stopper = stopper
        self.count = 0
        self.claims: dict[str, list[int]] = {}
        self.joined = False  # a session has started (errors after it are runtime failures)

    def take(self, msg: ConsumerMessage) -> bool:
        """Print one message; False when the limit was already reached (leave it unmarked)."""
        limit = self._opts.max_messages
        if limit is not None and self.count >= limit:
            return False
        self.count += 1
        if not self._opts.rate:
            line = (
                message_json(msg) if self._opts.as_json else format_message(msg, self._opts.width)
            )
            self._out.write(line + "\n")
        if limit is not None and self.count >= limit:
            self._stopper.stop(f"--max-messages {limit} reached")
        return True


class _PrintHandler(ConsumerGroupHandler):
    """Prints every message of its claims and marks it."""

    def __init__(self, printer: _Printer) -> None:
        self._printer = printer

    async def setup(self, session: ConsumerGroupSession) -> None:
        """Report the session's claims."""
        self._printer.claims = session.claims
        self._printer.joined = True
        status(
            f"joined group {session.group_id!r} (generation {session.generation_id}, member "
            f"{session.member_id}): {format_claims(session.claims)}"
        )

    async def cleanup(self, session: ConsumerGroupSession) -> None:
        """Forget the claims until the next session."""
        self._printer.claims = {}

    async def consume_claim(self, session: ConsumerGroupSession, claim: ConsumerGroupClaim) -> None:
        """Print and mark each message of the claim."""
        async for msg in claim.messages():
            if not self._printer.take(msg):
                return
            session.mark_message(msg)


async def _report(opts: _ConsumeOptions, printer: _Printer, out: Output) -> None:
    """Flush stdout regularly; with --rate print a messages/s line every second."""
    loop = asyncio.get_running_loop()
    last_t, last_n = loop.time(), 0
    next_rate = last_t + 1.0
    while True:
        await asyncio.sleep(0.2)
        now = loop.time()
        if opts.rate and now >= next_rate:
            n = printer.count
            rate = (n - last_n) / (now - last_t)
            line = (
                f"{time.strftime('%H:%M:%S')} {rate:>10,.0f} msg/s   total {n:>12,}   "
                f"{format_claims(printer.claims)}"
            )
            out.write(f"\r\x1b[K{line}" if out.tty else f"{line}\n")
            last_t, last_n = now, n
            next_rate += 1.0
        out.flush()


def _consume_config(opts: _ConsumeOptions, cluster: ClusterOptions) -> Config:
    config = cluster.config()
    config.consumer.offsets.initial = OFFSET_OLDEST if opts.from_beginning else OFFSET_NEWEST
    config.consumer.group.rebalance.timeout = max(opts.session_timeout, 10.0)
    if opts.group_protocol == "consumer":
        config.consumer.group.protocol = "consumer"  # the broker's timeouts and assignor
    else:
        config.consumer.group.session_timeout = opts.session_timeout
        config.consumer.group.heartbeat_interval = max(0.5, opts.session_timeout / 10)
    config.validate()
    return config


@contextlib.asynccontextmanager
async def _running(opts: _ConsumeOptions, printer: _Printer, out: Output) -> AsyncIterator[None]:
    """The reporter task around the body; a final flush (and newline after --rate)."""
    reporter = asyncio.create_task(_report(opts, printer, out), name="consume-report")
    try:
        yield
    finally:
        await cancel_and_wait(reporter)
        if opts.rate and out.tty:
            out.write("\n")
        out.flush()


async def _until_stopped(opts: _ConsumeOptions, stopper: Stopper, work: asyncio.Task[None]) -> None:
    """Wait for ``work`` to end, a stop request, or ``--timeout``."""
    stop_wait = asyncio.create_task(stopper.event.wait())
    try:
        done, _ = await asyncio.wait(
            {work, stop_wait}, timeout=opts.timeout, return_when=asyncio.FIRST_COMPLETED
        )
        if not done:
            stopper.stop(f"--timeout {opts.timeout:g}s reached")
    finally:
        stop_wait.cancel()


def _failure(exc: ConsumerGroupError, cluster: ClusterOptions, *, joined: bool) -> CliError:
    """The one line for an error that ended consuming: until the first session started,
    the connection's explanation (see :func:`explain_connect_error` for its code); after,
    a runtime failure (1)."""
    if isinstance(exc, UnknownTopicOrPartitionError):
        return CliError(f"{exc} (check --topic)")
    explained = None if joined else explain_connect_error(exc, cluster.bootstrap or "")
    return explained or CliFailure(f"consuming failed: {exc}")


async def _consume_group(opts: _ConsumeOptions, cluster: ClusterOptions) -> int:
    assert opts.group is not None
    config = _consume_config(opts, cluster)
    await preflight(cluster.addrs, opts.topics, config)
    stopper = Stopper()
    out = Output(sys.stdout, lambda: stopper.stop("stdout closed"))
    printer = _Printer(opts, out, stopper)
    group = ConsumerGroup(cluster.addrs, opts.group, config)
    loop = asyncio.get_running_loop()
    started = loop.time()
    with signals(stopper.on_signal):
        status(f"joining group {opts.group!r} (Ctrl-C or SIGTERM stops at any time)")
        runner = asyncio.create_task(group.run(opts.topics, _PrintHandler(printer)), name="run")
        joining, closed = True, False
        async with _running(opts, printer, out):
            try:
                await _until_stopped(opts, stopper, runner)
            finally:
                joining = group.state in (GroupState.STARTING, GroupState.JOINING)
                closed = await _close(group, runner, joining)
        raised = None if runner.cancelled() else runner.exception()
        error = None if raised is None else leaf_error(raised)
        if error is not None and joining and stopper.event.is_set():
            # Stopped mid-join: the join failed because the member closed under it.
            log.info("join abandoned on stop: %s", error)
        elif isinstance(error, ConsumerGroupError):
            raise _failure(error, cluster, joined=printer.joined) from None
        elif raised is not None:
            raise raised
    elapsed = loop.time() - started
    why = f" ({stopper.reason})" if stopper.reason else ""
    if joining:
        ending = f"stopped while joining group {opts.group!r} (nothing to commit)"
    elif closed:
        ending = f"offsets committed, left group {opts.group!r}"
    else:
        ending = f"the final commit may not have reached group {opts.group!r}"
    status(f"consumed {printer.count} messages in {elapsed:.1f}s{why}; {ending}")
    return EXIT_OK


async def _close(group: ConsumerGroup, runner: asyncio.Task[None], joining: bool) -> bool:
    """close() within a bound fitting the phase, enforced here; then run() must end.
    Returns whether close() finished (final commit and LeaveGroup done).

    A close that overruns its bound (say a broker that stopped answering) is
    abandoned, and so is run(): the broker expires the member after its session
    timeout. Nothing marked is lost that
    way: a member still joining has no session, hence nothing to commit.
    """
    bound = JOINING_CLOSE_BOUND if joining else CLOSE_BOUND
    closed = True
    try:
        async with asyncio.timeout(bound):
            await group.close(timeout=bound)
    except TimeoutError:
        closed = False
        status(f"close() took over {bound:g}s; exiting without waiting for it")
    done, _ = await asyncio.wait({runner}, timeout=RUN_END_BOUND)
    if not done:
        runner.cancel()
        await asyncio.wait({runner})
    return closed


async def _drain(pc: PartitionConsumer, printer: _Printer) -> None:
    async for batch in pc.batches():
        for msg in batch:
            if not printer.take(msg):
                return


async def _consume_partitions(opts: _ConsumeOptions, cluster: ClusterOptions) -> int:
    config = _consume_config(opts, cluster)
    [topic] = opts.topics
    await preflight(cluster.addrs, opts.topics, config)
    stopper = Stopper()
    out = Output(sys.stdout, lambda: stopper.stop("stdout closed"))
    printer = _Printer(opts, out, stopper)
    printer.claims = {topic: opts.partitions}
    loop = asyncio.get_running_loop()
    started = loop.time()
    with signals(stopper.on_signal):
        async with Consumer(cluster.addrs, config) as consumer, _running(opts, printer, out):
            try:
                pcs = await consumer.consume_partitions(
                    {(topic, p): opts.offset for p in opts.partitions}
                )
            except ConsumerGroupError as exc:
                raise _failure(exc, cluster, joined=False) from None
            readers = _gather(pcs.values(), printer)
            await _until_stopped(opts, stopper, readers)
            await cancel_and_wait(readers)
    elapsed = loop.time() - started
    why = f" ({stopper.reason})" if stopper.reason else ""
    status(f"consumed {printer.count} messages in {elapsed:.1f}s{why}")
    return EXIT_OK


def _gather(pcs: Iterable[PartitionConsumer], printer: _Printer) -> asyncio.Task[None]:
    async def read_all() -> None:
        await asyncio.gather(*(_drain(pc, printer) for pc in pcs))

    return asyncio.create_task(read_all(), name="consume-partitions")
