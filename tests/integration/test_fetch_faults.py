"""The fetch path across dropped connections: nothing lost, nothing repeated.

A dedicated Tansu broker advertises the port of a TcpProxy in front of it, so
every connection clients open after bootstrap (metadata, fetch, produce) goes
through the proxy, and ``proxy.cut()`` drops them all.
"""

from __future__ import annotations

import asyncio
import logging

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.protocol import offset

import consumergroup as cg
from consumergroup.errors import NotLeaderOrFollowerError
from consumergroup.message import ConsumerMessage
from consumergroup.testing import EmbeddedBroker, free_port

from ..conftest import unique
from ..helpers import KafkaFrameProxy, TcpProxy, produce
from .test_fetch import eventually

_LIST_OFFSETS_RESPONSES = {v: getattr(offset, f"OffsetResponse_v{v}") for v in range(1, 4)}

PARTITIONS = 3
ROUNDS = 30
PER_ROUND = 40  # messages per partition per round


def fault_config() -> cg.Config:
    config = cg.Config(client_id="test-fetch-faults")
    config.consumer.max_wait_time = 0.1
    config.consumer.retry.backoff = 0.1
    config.metadata.retry.backoff = 0.1
    config.metadata.retry.max = 10
    config.net.dial_timeout = 2.0
    config.channel_buffer_size = 64
    return config


async def _produce_rounds(bootstrap: str, topic: str) -> None:
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, linger_ms=5, retry_backoff_ms=50, request_timeout_ms=10000
    )
    await producer.start()
    try:
        for r in range(ROUNDS):
            futures = [
                await producer.send(topic, b"p%d-r%d-%d" % (p, r, i), partition=p)
                for p in range(PARTITIONS)
                for i in range(PER_ROUND)
            ]
            await asyncio.gather(*futures)
            await asyncio.sleep(0.02)
    finally:
        await producer.stop()


async def _collect(pc: cg.PartitionConsumer, sink: list[ConsumerMessage]) -> None:
    async for message in pc.messages():
        sink.append(message)


async def test_connection_cuts_lose_and_repeat_nothing(caplog: pytest.LogCaptureFixture) -> None:
    """Cut every connection several times mid-stream: each partition reads 0..N-1 exactly once."""
    caplog.set_level(logging.INFO, logger="consumergroup.consumer")
    proxy_port = free_port()
    broker = EmbeddedBroker(advertised_port=proxy_port)
    topic = "cut-me"
    async with TcpProxy("127.0.0.1", broker.port, listen_port=proxy_port) as proxy, broker:
        await broker.create_topic(topic, PARTITIONS)
        config = fault_config()
        async with cg.Consumer([proxy.address], config) as consumer:
            pcs = await consumer.consume_partitions(
                {(topic, p): cg.OFFSET_OLDEST for p in range(PARTITIONS)}
            )
            got: dict[int, list[ConsumerMessage]] = {p: [] for p in range(PARTITIONS)}
            readers = [
                asyncio.create_task(_collect(pcs[(topic, p)], got[p])) for p in range(PARTITIONS)
            ]
            producing = asyncio.create_task(_produce_rounds(proxy.address, topic))
            cuts = 0
            async with asyncio.timeout(60):
                while not producing.done():
                    await asyncio.sleep(0.15)
                    proxy.cut()
                    cuts += 1
                await producing
                await asyncio.sleep(0.3)
                proxy.cut()  # once more while the fetches are idle long-polls
                cuts += 1

                # The log as stored (the producer may have written retried duplicates).
                async with cg.Consumer([proxy.address], fault_config()) as reference:
                    expected: dict[int, list[bytes | None]] = {}
                    for p in range(PARTITIONS):
                        ref = await reference.consume_partition(topic, p, cg.OFFSET_OLDEST)
                        end = await _log_end(ref)
                        expected[p] = []
                        async for message in ref.messages():
                            expected[p].append(message.value)
                            if message.offset == end - 1:
                                break

                await eventually(
                    lambda: all(len(got[p]) >= len(expected[p]) for p in range(PARTITIONS))
                )
                await asyncio.sleep(0.3)  # anything repeated would show up now
            for pc in pcs.values():
                await pc.close()
            for task in readers:
                async with asyncio.timeout(5):
                    await task

        assert cuts >= 4
        reroutes = [r for r in caplog.records if "re-routing" in r.getMessage()]
        assert reroutes, "no cut hit a fetch: the test exercised nothing"
        for p in range(PARTITIONS):
            offsets = [m.offset for m in got[p]]
            assert offsets == list(range(len(expected[p]))), f"partition {p}"
            assert [m.value for m in got[p]] == expected[p]
            assert len(expected[p]) >= ROUNDS * PER_ROUND


async def _log_end(pc: cg.PartitionConsumer) -> int:
    """The partition's high watermark, as reported by the first fetch that lands."""
    async with asyncio.timeout(10):
        await eventually(lambda: pc.high_water_mark_offset >= 0)
    return pc.high_water_mark_offset


class NotLeaderOnce(KafkaFrameProxy):
    """Answers the first ListOffsets with NOT_LEADER_OR_FOLLOWER for every partition, as
    Apache Kafka does while it names a new topic's leader before that leader serves it."""

    def __init__(self, target_port: int, listen_port: int) -> None:
        super().__init__(target_port, listen_port)
        self.refused = 0

    def rewrite_response(self, key: int, version: int, client_id: str, frame: bytes) -> bytes:
        if key != 2 or self.refused:
            return frame
        self.refused += 1
        response = _LIST_OFFSETS_RESPONSES[version]
        resp = response.decode(frame[4:]).to_object()
        topics = [
            (t["topic"], [_not_leader(p["partition"]) for p in t["partitions"]])
            for t in resp["topics"]
        ]
        head = (resp["throttle_time_ms"],) if version >= 2 else ()
        return frame[:4] + response(*head, topics).encode()


def _not_leader(partition: int) -> tuple[int, ...]:
    """A ListOffsets v1+ partition answer: partition, error, timestamp, offset."""
    return (partition, NotLeaderOrFollowerError.errno, -1, -1)


async def test_list_offsets_answered_not_leader_is_asked_again() -> None:
    proxy_port = free_port()
    topic = unique("not-leader")
    async with (
        EmbeddedBroker(advertised_port=proxy_port) as broker,
        NotLeaderOnce(broker.port, proxy_port) as proxy,
    ):
        await broker.create_topic(topic, 1)
        await produce(broker.bootstrap, topic, [b"a", b"b"])
        async with cg.Consumer([proxy.address]) as consumer:
            pc = await consumer.consume_partition(topic, 0, cg.OFFSET_OLDEST)
            first = await asyncio.wait_for(anext(aiter(pc.messages())), 10)
    assert proxy.refused == 1
    assert (first.offset, first.value) == (0, b"a")
