"""A group member in its own process, for crash and chaos tests.

``python -m tests.integration.member_process BOOTSTRAP GROUP TOPIC`` prints one JSON
line per event to stdout: ``{"claims": {topic: [partition]}}`` when partitions are
assigned, ``{"revoked": [...]}`` / ``{"lost": [...]}`` when they go, and
``{"p": partition, "offsets": [...]}`` for each batch handled, ``{"commit_failed":
error}`` when an OffsetCommit fails; each with ``"t"``, the time it happened.
``--instance-id ID`` makes it a static member (``consumer.group.instance_id``);
``--protocol consumer`` a member on the consumer group protocol (KIP-848).
``--held`` starts the process, imports everything, prints ``{"ready": true}`` and joins
only when a line arrives on stdin (a restart test times our rejoin, not the interpreter's
start: that takes seconds at a CI load of 16).

With ``--record FILE --status FILE`` (the chaos suite) it appends the events to
FILE instead (flushed per batch, before the batch is marked, so every committed
offset was recorded first), leaves committing to auto-commit and the final commit,
stops on SIGTERM with ``close(timeout=--close-timeout)``, and writes a status JSON:
whether ``run()`` ended on its own and why, how long ``close()`` took, the tasks
left after it, and exceptions the loop saw in tasks nobody awaited.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
import time
import traceback
from collections.abc import Sequence
from typing import Any, TextIO

import consumergroup as cg
from tests.integration.group_support import consumer_protocol_config, group_config

#: ``--assignor`` names: eager ones revoke everything at each rebalance, the cooperative
#: one only what moves.
ASSIGNORS: dict[str, type[cg.BalanceStrategy]] = {
    "range": cg.RangeAssignor,
    "roundrobin": cg.RoundRobinAssignor,
    "sticky": cg.StickyAssignor,
    "cooperative-sticky": cg.CooperativeStickyAssignor,
}


class Printer(cg.ConsumerGroupHandler):
    """Writes claims and every handled batch's offsets (after marking them) to ``sink``."""

    def __init__(self, sink: TextIO, commit_each_batch: bool) -> None:
        self.sink = sink
        self.commit_each_batch = commit_each_batch

    def _emit(self, event: dict[str, Any]) -> None:
        self.sink.write(json.dumps(event) + "\n")
        self.sink.flush()

    async def setup(self, session: cg.ConsumerGroupSession) -> None:
        self._emit({"claims": session.claims, "t": time.time()})

    async def on_assigned(
        self, session: cg.ConsumerGroupSession, partitions: Sequence[tuple[str, int]]
    ) -> None:
        # A cooperative session's claims change without a new setup().
        self._emit({"claims": session.claims, "t": time.time()})

    async def on_revoked(
        self, session: cg.ConsumerGroupSession, partitions: Sequence[tuple[str, int]]
    ) -> None:
        self._emit({"revoked": [p for _, p in partitions], "t": time.time()})

    async def on_lost(self, partitions: Sequence[tuple[str, int]]) -> None:
        self._emit({"lost": [p for _, p in partitions], "t": time.time()})

    async def consume_claim(
        self, session: cg.ConsumerGroupSession, claim: cg.ConsumerGroupClaim
    ) -> None:
        async for batch in claim.batches():
            for msg in batch:
                session.mark_message(msg)
            if self.commit_each_batch:
                await session.commit()
            # No await between marking and this write: no commit can land before it.
            offsets = [m.offset for m in batch]
            self._emit({"p": claim.partition, "offsets": offsets, "t": time.time()})


class CommitFailures(cg.GroupObserver):
    """Writes each failed OffsetCommit to the Printer's sink (the chaos ledger puts a
    repeat after a hand-over whose commit failed down to the fault that failed it)."""

    def __init__(self, printer: Printer) -> None:
        self.printer = printer

    def on_commit(self, group_id: str, latency: float, error: BaseException | None) -> None:
        if error is not None:
            self.printer._emit({"commit_failed": repr(error)[:200], "t": time.time()})


async def _exit_with_parent(stop: asyncio.Event) -> None:
    """Stop when the process that started us is gone (no orphan outlives a killed driver)."""
    parent = os.getppid()
    while os.getppid() == parent:  # noqa: ASYNC110 - no event tells us; poll
        await asyncio.sleep(1.0)
    stop.set()


async def supervised(args: argparse.Namespace, sink: TextIO) -> dict[str, Any]:
    """Run until SIGTERM (or ``run()`` ends), close bounded; return the status to write."""
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("consumergroup.group").setLevel(logging.INFO)  # each rebalance step
    loop = asyncio.get_running_loop()
    loop_errors: list[str] = []
    loop.set_exception_handler(lambda _loop, ctx: loop_errors.append(_describe(ctx)))
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    # From here a SIGTERM means close(): the driver waits for this mark before one.
    os.close(os.open(args.status + ".ready", os.O_CREAT | os.O_WRONLY, 0o644))
    status: dict[str, Any] = {"pid": os.getpid(), "run_error": None, "close_error": None}
    make_config = consumer_protocol_config if args.protocol == "consumer" else group_config
    config = make_config(net__dial_timeout=2.0, net__read_timeout=args.net_timeout)
    if args.protocol == "classic":
        config.consumer.group.rebalance.strategies = [ASSIGNORS[args.assignor]()]
    member = cg.ConsumerGroup(args.bootstrap.split(","), args.group, config)
    printer = Printer(sink, False)
    member.add_observer(CommitFailures(printer))
    run = asyncio.create_task(member.run([args.topic], printer), name="run")
    stopping = asyncio.create_task(stop.wait(), name="stop-wait")
    orphan = asyncio.create_task(_exit_with_parent(stop), name="parent-watch")
    await asyncio.wait({run, stopping}, return_when=asyncio.FIRST_COMPLETED)
    if run.done():
        status["run_error"] = _outcome(run) or "run() returned before close()"
    started = time.monotonic()
    try:
        await member.close(timeout=args.close_timeout)
    except Exception:
        status["close_error"] = traceback.format_exc()
    status["close_s"] = time.monotonic() - started
    status["close_bound"] = args.close_timeout
    for task in (stopping, orphan):
        task.cancel()
    await asyncio.gather(stopping, orphan, return_exceptions=True)
    try:
        await asyncio.wait_for(run, 5.0)
    except (Exception, asyncio.CancelledError):
        # run() ending with an error after close() is a failure to report, not to hide.
        status["run_error"] = status["run_error"] or traceback.format_exc()
    me = asyncio.current_task()
    status["leftover_tasks"] = [repr(t) for t in asyncio.all_tasks() if t is not me]
    status["loop_errors"] = loop_errors
    return status


def _outcome(task: asyncio.Task[None]) -> str | None:
    if task.cancelled():
        return "run() was cancelled"
    exc = task.exception()
    if exc is None:
        return None
    return "".join(traceback.format_exception(exc))


def _describe(context: dict[str, Any]) -> str:
    exc = context.get("exception")
    detail = "".join(traceback.format_exception(exc)) if exc else ""
    return f"{context.get('message')}: {context.get('task', '')} {detail}"


async def main(
    bootstrap: str, group: str, topic: str, instance_id: str | None, protocol: str
) -> None:
    config = consumer_protocol_config() if protocol == "consumer" else group_config()
    config.consumer.group.instance_id = instance_id
    # On the consumer protocol auto-commit does the committing: a member frozen past the
    # session timeout is fenced, and a commit() in the handler would raise that into it.
    commit_each_batch = protocol != "consumer"
    async with cg.ConsumerGroup([bootstrap], group, config) as member:
        await member.run([topic], Printer(sys.stdout, commit_each_batch))


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("bootstrap")
    parser.add_argument("group")
    parser.add_argument("topic")
    parser.add_argument("--record", help="append handled offsets here (chaos mode)")
    parser.add_argument("--status", help="write the exit status JSON here (chaos mode)")
    parser.add_argument("--close-timeout", type=float, default=10.0)
    parser.add_argument("--net-timeout", type=float, default=5.0, help="net.read_timeout")
    parser.add_argument("--instance-id", help="static membership: consumer.group.instance_id")
    parser.add_argument("--protocol", choices=["classic", "consumer"], default="classic")
    parser.add_argument("--held", action="store_true", help="join when stdin has a line")
    parser.add_argument(
        "--assignor",
        choices=sorted(ASSIGNORS),
        default="range",
        help="the one strategy (classic protocol)",
    )
    return parser.parse_args(argv)


if __name__ == "__main__":
    ns = _parse(sys.argv[1:])
    if ns.record and ns.status:
        with open(ns.record, "a") as record:
            outcome = asyncio.run(supervised(ns, record))
        with open(ns.status, "w") as out:
            json.dump(outcome, out)
        sys.exit(1 if outcome["run_error"] or outcome["close_error"] else 0)
    if ns.held:
        print(json.dumps({"ready": True}), flush=True)
        sys.stdin.readline()
    asyncio.run(main(ns.bootstrap, ns.group, ns.topic, ns.instance_id, ns.protocol))
