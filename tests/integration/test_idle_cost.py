"""An idle member costs next to nothing: no loop in the client spins while nothing arrives.

A member of a group whose topic gets no records still has work: a fetch long poll per
``consumer.max_wait_time`` (0.5 s by default), a heartbeat per ``heartbeat_interval``
(3 s), the offset committer's ticker. A loop among them that woke far more often than
its period (a zero or near-zero wait, a retry without backoff, a ticker with a short
period) would burn CPU while the application does nothing, and a process of many idle
members (or a short job waiting for its first record) would pay it.

Measured as the event loop's wake-ups (calls of its selector: one per loop iteration),
which are deterministic, plus the process's CPU time over the same seconds with a
generous bound (an idle member used ~4 ms of CPU a second and ~15 wake-ups a second,
Kafka 4.4.0 at load ~6; a spinning loop wakes thousands of times a second).
"""

from __future__ import annotations

import asyncio
import selectors
import time
from typing import Any

import consumergroup as cg
from consumergroup.client import Client
from tests.conftest import unique

IDLE_SECONDS = 5.0
#: Wake-ups per second allowed: the fetch long poll (2/s with the defaults), a heartbeat,
#: the committer, and the reads and writes of each, with room to spare.
MAX_WAKEUPS_PER_S = 60
#: CPU seconds per idle second allowed (measured ~0.004; a spin costs ~1).
MAX_CPU_PER_S = 0.1


class CountingSelector(selectors.DefaultSelector):
    """The loop's selector, counting its ``select()`` calls: one per loop iteration."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def select(self, timeout: float | None = None) -> list[Any]:
        self.calls += 1
        return super().select(timeout)


class Claimed(cg.ConsumerGroupHandler):
    def __init__(self) -> None:
        self.claimed = asyncio.Event()

    async def setup(self, session: cg.ConsumerGroupSession) -> None:
        self.claimed.set()

    async def consume_claim(
        self, session: cg.ConsumerGroupSession, claim: cg.ConsumerGroupClaim
    ) -> None:
        async for batch in claim.batches():
            session.mark_message(batch[-1])


async def _idle(bootstrap: str, selector: CountingSelector) -> tuple[int, float, float]:
    """Wake-ups, CPU seconds and wall seconds of one member idling (default settings but
    the oldest offset) after it claimed its partitions."""
    topic = f"idle-{unique()}"
    async with Client([bootstrap]) as client:
        await client.create_topic(topic, 8)
    config = cg.Config(client_id="idle-test")
    config.consumer.offsets.initial = cg.OFFSET_OLDEST
    handler = Claimed()
    async with cg.ConsumerGroup([bootstrap], unique(), config) as member:
        task = asyncio.create_task(member.run([topic], handler))
        try:
            await asyncio.wait_for(handler.claimed.wait(), 60)
            await asyncio.sleep(1.0)  # the first fetches and the first commit are out
            calls, cpu, wall = selector.calls, time.process_time(), time.monotonic()
            await asyncio.sleep(IDLE_SECONDS)
            return (
                selector.calls - calls,
                time.process_time() - cpu,
                time.monotonic() - wall,
            )
        finally:
            await member.close()
            await asyncio.wait_for(task, 30)


def _run_idle(bootstrap: str) -> tuple[int, float, float]:
    selector = CountingSelector()
    with asyncio.Runner(loop_factory=lambda: asyncio.SelectorEventLoop(selector)) as runner:
        return runner.run(_idle(bootstrap, selector))


async def test_an_idle_member_neither_spins_nor_burns_cpu(bootstrap: str) -> None:
    # Its own event loop (in a thread), so that every wake-up counted is the member's.
    wakeups, cpu, wall = await asyncio.to_thread(_run_idle, bootstrap)
    assert wakeups <= MAX_WAKEUPS_PER_S * wall, f"{wakeups} loop wake-ups in {wall:.1f} s idle"
    assert cpu <= MAX_CPU_PER_S * wall, f"{cpu:.3f} s of CPU in {wall:.1f} s idle"
