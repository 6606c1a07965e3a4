"""``consumergroup consume``: join a group and print what it consumes."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from dataclasses import dataclass

import click

from ..config import OFFSET_NEWEST, OFFSET_OLDEST, Config
from ..errors import ConfigurationError, ConsumerGroupError, UnknownTopicOrPartitionError
from ..group import (
    ConsumerGroup,
    ConsumerGroupClaim,
    ConsumerGroupHandler,
    ConsumerGroupSession,
)
from ..message import ConsumerMessage
from ._common import (
    EXIT_FAILURE,
    EXIT_OK,
    CliError,
    Output,
    Stopper,
    explain_connect_error,
    format_claims,
    preflight,
    ranged,
    render_bytes,
    run_command,
    signals,
    split_bootstrap,
    status,
)


def format_message(msg: ConsumerMessage, width: int) -> str:
    """``topic/partition@offset key=... value=...`` for one message."""
    return (
        f"{msg.topic}/{msg.partition}@{msg.offset} "
        f"key={render_bytes(msg.key, min(width, 80))} value={render_bytes(msg.value, width)}"
    )


@dataclass
class _ConsumeOptions:
    bootstrap: str
    group: str
    topics: list[str]
    from_beginning: bool
    rate: bool
    max_messages: int | None
    timeout: float | None
    width: int
    session_timeout: float
    connect_timeout: float


@click.command()
@click.option(
    "--bootstrap",
    "-b",
    envvar="KAFKA_BOOTSTRAP_SERVERS",
    required=True,
    metavar="HOST:PORT",
    help="Broker address(es), comma-separated (default: $KAFKA_BOOTSTRAP_SERVERS).",
)
@click.option("--group", "-g", required=True, help="Consumer group id to join.")
@click.option(
    "--topic", "-t", "topics", multiple=True, required=True, help="Topic to consume (repeatable)."
)
@click.option(
    "--from-beginning",
    is_flag=True,
    help="Start from the oldest message where the group has no committed offset "
    "(default: only new messages).",
)
@click.option("--rate", is_flag=True, help="Print a messages/s line per second, not messages.")
@click.option(
    "--max-messages",
    "-n",
    type=click.IntRange(min=1),
    default=None,
    help="Stop cleanly after this many messages.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    metavar="SECONDS",
    help="Stop cleanly after this many seconds (joining included).",
)
@ranged("--width", click.IntRange(min=8), 200, "Truncate values to this many characters.")
@ranged(
    "--session-timeout",
    click.FloatRange(min=1),
    10.0,
    "Group session timeout (heartbeats every tenth of it, at least every 0.5 s).",
    seconds=True,
)
@ranged(
    "--connect-timeout",
    click.FloatRange(min=0, min_open=True),
    10.0,
    "Give up dialing a broker after this long.",
    seconds=True,
)
def consume(
    bootstrap: str,
    group: str,
    topics: tuple[str, ...],
    from_beginning: bool,
    rate: bool,
    max_messages: int | None,
    timeout: float | None,
    width: int,
    session_timeout: float,
    connect_timeout: float,
) -> None:
    """Join GROUP and print the messages of TOPIC(s), marking each one.

    Ctrl-C or SIGTERM closes cleanly: handlers stop, marked offsets are
    committed, the member leaves the group, exit code 0.
    """
    opts = _ConsumeOptions(
        bootstrap=bootstrap,
        group=group,
        topics=list(dict.fromkeys(topics)),
        from_beginning=from_beginning,
        rate=rate,
        max_messages=max_messages,
        timeout=timeout,
        width=width,
        session_timeout=session_timeout,
        connect_timeout=connect_timeout,
    )
    sys.exit(run_command(lambda: _consume(opts)))


class _PrintHandler(ConsumerGroupHandler):
    """Prints (or counts) every message and marks it; stops at ``max_messages``."""

    def __init__(self, opts: _ConsumeOptions, out: Output, stopper: Stopper) -> None:
        self._opts = opts
        self._out = out
        self._stopper = stopper
        self.count = 0
        self.claims: dict[str, list[int]] = {}

    async def setup(self, session: ConsumerGroupSession) -> None:
        """Report the session's claims."""
        self.claims = session.claims
        status(
            f"joined group {session.group_id!r} (generation {session.generation_id}, member "
            f"{session.member_id}): {format_claims(session.claims)}"
        )

    async def cleanup(self, session: ConsumerGroupSession) -> None:
        """Forget the claims until the next session."""
        self.claims = {}

    async def consume_claim(self, session: ConsumerGroupSession, claim: ConsumerGroupClaim) -> None:
        """Print and mark each message of the claim."""
        limit = self._opts.max_messages
        width = self._opts.width
        quiet = self._opts.rate
        async for msg in claim.messages():
            if limit is not None and self.count >= limit:
                return  # another claim reached the limit: leave the rest unmarked
            self.count += 1
            if not quiet:
                self._out.write(format_message(msg, width) + "\n")
            session.mark_message(msg)
            if limit is not None and self.count >= limit:
                self._stopper.stop(f"--max-messages {limit} reached")
                return


async def _report(opts: _ConsumeOptions, handler: _PrintHandler, out: Output) -> None:
    """Flush stdout regularly; with --rate print a messages/s line every second."""
    loop = asyncio.get_running_loop()
    last_t, last_n = loop.time(), 0
    next_rate = last_t + 1.0
    while True:
        await asyncio.sleep(0.2)
        now = loop.time()
        if opts.rate and now >= next_rate:
            n = handler.count
            rate = (n - last_n) / (now - last_t)
            line = (
                f"{time.strftime('%H:%M:%S')} {rate:>10,.0f} msg/s   total {n:>12,}   "
                f"{format_claims(handler.claims)}"
            )
            out.write(f"\r\x1b[K{line}" if out.tty else f"{line}\n")
            last_t, last_n = now, n
            next_rate += 1.0
        out.flush()


def _consume_config(opts: _ConsumeOptions) -> Config:
    config = Config(client_id="consumergroup-cli")
    config.net.dial_timeout = opts.connect_timeout
    config.consumer.offsets.initial = OFFSET_OLDEST if opts.from_beginning else OFFSET_NEWEST
    config.consumer.group.session_timeout = opts.session_timeout
    config.consumer.group.heartbeat_interval = max(0.5, opts.session_timeout / 10)
    config.consumer.group.rebalance.timeout = max(opts.session_timeout, 10.0)
    config.validate()
    return config


async def _consume(opts: _ConsumeOptions) -> int:
    addrs = split_bootstrap(opts.bootstrap)
    try:
        config = _consume_config(opts)
    except ConfigurationError as exc:
        raise CliError(str(exc)) from None
    await preflight(addrs, opts.topics, config)

    stopper = Stopper()
    out = Output(sys.stdout, lambda: stopper.stop("stdout closed"))
    handler = _PrintHandler(opts, out, stopper)
    group = ConsumerGroup(addrs, opts.group, config)
    loop = asyncio.get_running_loop()
    started = loop.time()
    with signals(stopper.on_signal):
        runner = asyncio.create_task(group.run(opts.topics, handler), name="consume-run")
        reporter = asyncio.create_task(_report(opts, handler, out), name="consume-report")
        stop_wait = asyncio.create_task(stopper.event.wait())
        try:
            done, _ = await asyncio.wait(
                {runner, stop_wait}, timeout=opts.timeout, return_when=asyncio.FIRST_COMPLETED
            )
            if not done:
                stopper.stop(f"--timeout {opts.timeout:g}s reached")
        finally:
            stop_wait.cancel()
            try:
                await group.close()
            finally:
                reporter.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await reporter
                if opts.rate and out.tty:
                    out.write("\n")
                out.flush()
        try:
            await runner
        except ConsumerGroupError as exc:
            explained = explain_connect_error(exc, opts.bootstrap)
            if isinstance(exc, UnknownTopicOrPartitionError):
                explained = CliError(f"{exc} (check --topic)")
            raise explained or CliError(f"consuming failed: {exc}", EXIT_FAILURE) from None
    elapsed = loop.time() - started
    why = f" ({stopper.reason})" if stopper.reason else ""
    status(
        f"consumed {handler.count} messages in {elapsed:.1f}s{why}; offsets committed, "
        f"left group {opts.group!r}"
    )
    return EXIT_OK
