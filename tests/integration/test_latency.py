"""The latency benchmark's parts on a real broker.

A member reading a steady stream does not stop the event loop for full collections.

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
import statistics
import struct
import sys
import time
from array import array
from pathlib import Path

import consumergroup as cg
from tests.conftest import TopicFactory, unique
from tests.helpers import ProxyLink, skip_tags, uvarint
from tests.integration.group_support import group_config, running_member, wait_for
from tests.integration.produce_proxy import ProduceProxy

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


def produce_partitions(frame: bytes) -> int:
    """How many partitions a Produce request (v3+, header included) names, all topics."""
    _key, version = struct.unpack_from(">hh", frame)
    flexible = version >= 9
    (n,) = struct.unpack_from(">h", frame, 8)  # after key, version, correlation id
    pos = 10 + max(n, 0)  # the client id
    if flexible:
        pos = skip_tags(frame, pos)
        n, pos = uvarint(frame, pos)  # transactional id, compact
        pos += max(n - 1, 0)
    else:
        (n,) = struct.unpack_from(">h", frame, pos)
        pos += 2 + max(n, 0)
    pos += 6  # acks, timeout
    if flexible:
        topics, pos = uvarint(frame, pos)
        topics -= 1
    else:
        (topics,) = struct.unpack_from(">i", frame, pos)
        pos += 4
    named = 0
    for _ in range(topics):
        if version >= 13:  # a topic id
            pos += 16
        elif flexible:
            n, pos = uvarint(frame, pos)
            pos += n - 1
        else:
            (n,) = struct.unpack_from(">h", frame, pos)
            pos += 2 + n
        if flexible:
            parts, pos = uvarint(frame, pos)
            parts -= 1
        else:
            (parts,) = struct.unpack_from(">i", frame, pos)
            pos += 4
        named += parts
        for _ in range(parts):
            pos += 4  # the partition index
            if flexible:
                n, pos = uvarint(frame, pos)
                pos += max(n - 1, 0)
                pos = skip_tags(frame, pos)
            else:
                (n,) = struct.unpack_from(">i", frame, pos)
                pos += 4 + max(n, 0)
        if flexible:
            pos = skip_tags(frame, pos)
    return named


class PartitionsPerProduce(ProduceProxy):
    """Notes how many partitions each Produce request names."""

    def __init__(self, target_port: int) -> None:
        super().__init__(target_port)
        self.named: list[int] = []

    async def forward_request(self, link: ProxyLink, frame: bytes) -> None:
        if struct.unpack_from(">h", frame)[0] == 0:
            self.named.append(produce_partitions(frame))
        await super().forward_request(link, frame)


async def test_the_latency_producer_sends_every_partition_in_one_request(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    """The benchmark's neutral producer, at a steady rate over 8 partitions with one
    request in flight, sends the records of every partition that has some in one request.

    A producer that sends one partition a request (librdkafka) makes a record wait for
    up to 8 round trips in turn: the stall common to every peer of the latency
    benchmark (max 149-418 ms at 5,000 records/s, all of it in the write)."""
    topic = await new_topic(partitions=8)
    port = int(bootstrap.rsplit(":", 1)[1])
    async with PartitionsPerProduce(port) as proxy:
        producer = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bench.latency",
            "--produce",
            json.dumps([proxy.address, topic, 8, RATE, 3.0, 0.0, 100]),
            cwd=ROOT,
            stdout=asyncio.subprocess.PIPE,
        )
        out, _ = await asyncio.wait_for(producer.communicate(), 120)
    assert producer.returncode == 0
    sent = json.loads(out.decode().splitlines()[-1])["sent"]
    assert sent >= RATE  # it ran
    # Each 1 ms tick queues ~5 records for 5 partitions before a request can leave, and
    # the longer a round trip the more partitions wait: never one a request on average.
    assert statistics.mean(proxy.named) >= 2, proxy.named[:50]
