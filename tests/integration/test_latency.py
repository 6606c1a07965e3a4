"""A member reading a steady stream does not stop the event loop for full collections.

The consumer used to steer CPython's collector (``gcpolicy.decode_step``: every decoded
list built with the collector off, then everything tracked moved into the oldest
generation, and a full collection run once the young objects moved passed a quarter of
the heap). In a steady stream decoded a message or two at a time, every object a fetch
round leaves alive between two decodes was counted, so a full collection (a pause of the
whole loop that grows with the heap) ran about every half second: one member at
2,000 records/s on Kafka, 137 in 76 s, and its records reached the handler up to 0.6 s
after those of an aiokafka member of another group. Decoded messages are now untracked
instead and the collector is left to CPython, which in a steady stream runs no full
collection at all.
"""

from __future__ import annotations

import asyncio
import gc
import json
import sys
import time
from array import array
from pathlib import Path

import consumergroup as cg
from tests.conftest import TopicFactory, unique
from tests.integration.group_support import group_config, running_member, wait_for

ROOT = Path(__file__).resolve().parents[2]
RATE = 5_000  # records/s, over 8 partitions
SECONDS = 8.0


class LatencyLog(cg.ConsumerGroupHandler):
    """A lean handler: each record's send time (its value's first 8 bytes) and arrival."""

    def __init__(self) -> None:
        self.pairs = array("q")  # untracked: the handler's own data adds no GC work
        self.owned = 0

    async def setup(self, session: cg.ConsumerGroupSession) -> None:
        self.owned = sum(len(p) for p in session.claims.values())

    async def consume_claim(
        self, session: cg.ConsumerGroupSession, claim: cg.ConsumerGroupClaim
    ) -> None:
        now = time.monotonic_ns
        add = self.pairs.extend
        async for msg in claim.messages():
            add((int.from_bytes((msg.value or b"")[:8], "big"), now()))
            session.mark_message(msg)


async def test_a_steady_stream_runs_no_full_collection(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    topic = await new_topic(partitions=8)
    handler = LatencyLog()
    full: list[float] = []

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and info["generation"] == 2:
            full.append(time.monotonic())

    async with running_member(bootstrap, unique(), [topic], handler, group_config()):
        await wait_for(lambda: handler.owned == 8, 60, "the member to claim the 8 partitions")
        gc.collect()  # start from a clean slate: what follows is the stream's doing
        gc.callbacks.append(on_gc)
        try:
            # The neutral producer of the latency benchmark, in a process of its own.
            producer = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "bench.latency",
                "--produce",
                json.dumps([bootstrap, topic, 8, RATE, SECONDS, 0.0, 100]),
                cwd=ROOT,
                stdout=asyncio.subprocess.PIPE,
            )
            out, _ = await asyncio.wait_for(producer.communicate(), SECONDS + 60)
            assert producer.returncode == 0
            sent = json.loads(out.decode().splitlines()[-1])["sent"]
            await wait_for(lambda: len(handler.pairs) // 2 >= sent, 60, "every record")
        finally:
            gc.callbacks.remove(on_gc)
    assert len(handler.pairs) // 2 == sent
    assert len(full) <= 1, f"{len(full)} full collections during {SECONDS:.0f} s of stream"
