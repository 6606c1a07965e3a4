"""A member whose handler swallows its cancellation, in its own process (so its CPU time
is its own): ``python -m tests.integration.runaway_member BOOTSTRAP TOPIC CLOSE_TIMEOUT``.

The handler marks what it reads, then catches every ``CancelledError`` and goes on
waiting. Once it has a record, ``close(timeout=CLOSE_TIMEOUT)`` is called; then ``run()``
gets a few seconds more. Prints one JSON line: how long ``close()`` took, whether ``run()``
returned, the process CPU seconds and wall seconds from ``close()`` until ``run()``
returned (or gave up), the cancellations the handler swallowed, the errors ``errors()``
yielded, ``stats().runaway_handlers`` and ``/health/live``'s status code and body. Then it
exits at once (``os._exit``): the abandoned handler cannot be awaited.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import time

import consumergroup as cg
from consumergroup.integrations._service import ServiceHealth
from tests.integration.group_support import group_config

#: How long run() may take to return after close() did.
RUN_GRACE = 5.0


class Stubborn(cg.ConsumerGroupHandler):
    """Catches its cancellation and keeps waiting (a user's bug)."""

    def __init__(self) -> None:
        self.read = asyncio.Event()
        self.swallowed = 0

    async def consume_claim(
        self, session: cg.ConsumerGroupSession, claim: cg.ConsumerGroupClaim
    ) -> None:
        async for msg in claim.messages():
            session.mark_message(msg)
            self.read.set()
        while True:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                self.swallowed += 1


async def main(bootstrap: str, topic: str, close_timeout: float) -> dict[str, object]:
    config = group_config()
    config.consumer.return_errors = True
    handler = Stubborn()
    group = cg.ConsumerGroup([bootstrap], f"runaway-{os.getpid()}", config)
    health = ServiceHealth([group], metrics=False)
    errors: list[str] = []

    async def collect() -> None:
        async for err in group.errors():
            errors.append(str(err))

    collector = asyncio.create_task(collect())
    run = asyncio.create_task(group.run([topic], handler))
    await asyncio.wait_for(handler.read.wait(), 60)
    wall, cpu = time.monotonic(), time.process_time()
    await group.close(timeout=close_timeout)
    closed = time.monotonic() - wall
    done, _ = await asyncio.wait({run}, timeout=RUN_GRACE)
    wall, cpu = time.monotonic() - wall, time.process_time() - cpu
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(asyncio.shield(collector), 1)
    code, body = health.live()
    return {
        "close_seconds": closed,
        "run_returned": bool(done),
        "run_error": repr(run.exception()) if done and run.exception() else None,
        "wall_seconds": wall,
        "cpu_seconds": cpu,
        "swallowed": handler.swallowed,
        "errors": errors,
        "runaway_handlers": getattr(group.stats(), "runaway_handlers", None),
        "live": [code, body],
    }


if __name__ == "__main__":
    loop = asyncio.new_event_loop()
    out = loop.run_until_complete(main(sys.argv[1], sys.argv[2], float(sys.argv[3])))
    print(json.dumps(out, default=str), flush=True)
    os._exit(0)
