"""A share-group member in its own process, for the kill -9 and SIGSTOP tests.

``python -m tests.integration.share_member_process BOOTSTRAP GROUP TOPIC [--delay S]
[--concurrency N]`` runs a :class:`~consumergroup.ShareGroup` whose handler sleeps
``--delay`` seconds per record, and prints one JSON line per event to stdout (flushed at
once): ``{"ev": "start" | "done", "p": partition, "o": offset, "dc": delivery count,
"t": monotonic time}`` around each handler call, ``{"ev": "stats", ...}`` (the member's
``stats().as_dict()``) every 0.5 s and once more after the close. SIGTERM closes it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import time
from typing import Any

import consumergroup as cg
from tests.integration.share_support import share_config


def emit(event: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


class Sleeper(cg.ShareGroupHandler):
    """Sleeps ``delay`` per record, reporting the start and the end of each call."""

    def __init__(self, delay: float) -> None:
        self.delay = delay

    async def consume(self, session: cg.ShareSession, record: cg.ShareRecord) -> None:
        where = {"p": record.partition, "o": record.offset, "dc": record.delivery_count}
        emit({"ev": "start", **where, "t": time.monotonic()})
        await asyncio.sleep(self.delay)
        emit({"ev": "done", **where, "t": time.monotonic()})


async def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("bootstrap")
    parser.add_argument("group")
    parser.add_argument("topic")
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--concurrency", type=int, default=10)
    args = parser.parse_args(argv)
    member = cg.ShareGroup([args.bootstrap], args.group, share_config())
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, lambda: asyncio.ensure_future(member.close()))

    async def report() -> None:
        while True:
            emit({"ev": "stats", **member.stats().as_dict()})
            await asyncio.sleep(0.5)

    reporter = asyncio.create_task(report())
    try:
        await member.run([args.topic], Sleeper(args.delay), concurrency=args.concurrency)
    finally:
        reporter.cancel()
        await member.close()
        emit({"ev": "stats", "final": True, **member.stats().as_dict()})


if __name__ == "__main__":
    asyncio.run(main())
