"""The fetch path through broker outages: partitions come back by themselves, and fast.

The consumer talks to a :class:`FakeCluster`, fake brokers in front of the real
one, so a test can make one broker unreachable (refused, or black-holed: the
connection is accepted and never answered) and move partition leadership the
way a controller would. Records are produced straight to the real broker.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Callable

import pytest
from aiokafka.protocol import fetch

import consumergroup as cg
from consumergroup.message import ConsumerMessage
from consumergroup.net.fetch import decode_fetch_response
from consumergroup.testing import EmbeddedBroker

from .. import fetch_v12_wire
from ..conftest import TopicFactory, unique
from ..helpers import produce
from .cluster_proxy import FakeCluster
from .group_support import group_config, wait_for
from .test_connection import split

pytestmark = pytest.mark.timeout(90)


def outage_config() -> cg.Config:
    config = cg.Config(client_id="test-fetch-resilience")
    config.net.dial_timeout = 1.5
    config.net.read_timeout = 1.5
    config.consumer.max_wait_time = 0.1
    config.consumer.retry.backoff = 0.2
    config.metadata.retry.max = 3
    config.metadata.retry.backoff = 0.1
    config.metadata.refresh_frequency = 0
    return config


class Reader:
    """Reads every partition into ``got`` in background tasks."""

    def __init__(self, pcs: dict[tuple[str, int], cg.PartitionConsumer]) -> None:
        self.got: dict[int, list[ConsumerMessage]] = {p: [] for _, p in pcs}
        self._tasks = [asyncio.create_task(self._read(pc)) for pc in pcs.values()]

    async def _read(self, pc: cg.PartitionConsumer) -> None:
        async for message in pc.messages():
            self.got[pc.partition].append(message)

    def values(self, partition: int) -> list[bytes | None]:
        return [m.value for m in self.got[partition]]

    async def wait_for(self, value: bytes, timeout: float) -> float:
        """Seconds until every partition has read ``value`` (fails after ``timeout``)."""
        start = time.monotonic()
        async with asyncio.timeout(timeout):
            while True:
                if all(value in self.values(p) for p in self.got):
                    return time.monotonic() - start
                await asyncio.sleep(0.05)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


async def produce_everywhere(bootstrap: str, topic: str, partitions: int, value: bytes) -> None:
    for p in range(partitions):
        await produce(bootstrap, topic, [value], partition=p)


async def test_orphans_survive_no_broker_answering_and_come_back(
    bootstrap: str, new_topic: TopicFactory, caplog: pytest.LogCaptureFixture
) -> None:
    # Issue 8 #3: NoBrokersAvailableError killed the re-routing task ("Task exception was
    # never retrieved" for fetch-reroute) and orphaned partitions were never fetched again.
    caplog.set_level(logging.INFO, logger="consumergroup")
    topic = await new_topic(partitions=3)
    async with (
        FakeCluster(split(bootstrap)[1], nodes=1) as cluster,
        cg.Consumer([cluster.address()], outage_config()) as consumer,
    ):
        pcs = await consumer.consume_partitions({(topic, p): cg.OFFSET_OLDEST for p in range(3)})
        reader = Reader(pcs)
        try:
            await produce_everywhere(bootstrap, topic, 3, b"before")
            await reader.wait_for(b"before", timeout=15)
            cluster.refuse(1)  # every connection cut, every dial refused
            await produce_everywhere(bootstrap, topic, 3, b"during")
            await asyncio.sleep(2.5)  # several re-routing rounds with nobody answering
            task = consumer._reroute_task
            assert task is not None and not task.done(), "the re-routing task died"
            cluster.restore(1)
            await produce_everywhere(bootstrap, topic, 3, b"after")
            await reader.wait_for(b"after", timeout=15)
        finally:
            await reader.stop()
    for p in range(3):
        assert reader.values(p) == [b"before", b"during", b"after"], p  # nothing lost
    assert not [r for r in caplog.records if r.name == "asyncio"], "an unretrieved task error"


async def test_an_outage_is_one_warning_naming_each_address_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Every re-routing round logged the same warning (every consumer.retry.backoff), each
    # listing the address twice and blaming net.dial_timeout for a refused connection.
    caplog.set_level(logging.DEBUG, logger="consumergroup.consumer")

    def refresh_failures() -> list[logging.LogRecord]:
        return [r for r in caplog.records if "metadata refresh failed" in r.getMessage()]

    async with EmbeddedBroker() as broker, cg.Consumer([broker.bootstrap], outage_config()) as c:
        await broker.create_topic("t", 2)
        pcs = await c.consume_partitions({("t", p): cg.OFFSET_OLDEST for p in range(2)})
        reader = Reader(pcs)
        try:
            await produce_everywhere(broker.bootstrap, "t", 2, b"before")
            await reader.wait_for(b"before", timeout=15)
            await broker.close()  # every dial refused from now on
            await wait_for(lambda: len(refresh_failures()) >= 3, 30, "three failed rounds")
        finally:
            await reader.stop()
    [warning] = [r for r in refresh_failures() if r.levelno == logging.WARNING]
    text = warning.getMessage()
    assert text.count(broker.bootstrap) == 1, text
    assert "Connection refused" in text and "dial_timeout" not in text, text


async def test_a_black_holed_leader_costs_one_dial_per_round_not_one_per_partition(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    # Issue 8 #12: leader() retried the cached dead leader without refreshing metadata
    # (retry.max + 1 dials of dial_timeout each) and re-routing went one partition at a
    # time: each orphan of a black-holed broker cost retries x dial_timeout in turn.
    partitions = 8
    topic = await new_topic(partitions=partitions)
    async with FakeCluster(split(bootstrap)[1], nodes=2) as cluster:
        for p in range(partitions):
            cluster.leaders[(topic, p)] = 1 + p % 2  # odd partitions on broker 2
        async with cg.Consumer([cluster.address(1)], outage_config()) as consumer:
            pcs = await consumer.consume_partitions(
                {(topic, p): cg.OFFSET_OLDEST for p in range(partitions)}
            )
            reader = Reader(pcs)
            try:
                await produce_everywhere(bootstrap, topic, partitions, b"before")
                await reader.wait_for(b"before", timeout=20)
                # Broker 2's host goes away: its connections are reset, new ones hang.
                cluster.refuse(2)
                cluster.blackhole(2)
                await produce_everywhere(bootstrap, topic, partitions, b"after")
                # The controller notices and moves broker 2's partitions, 2 s later.
                await asyncio.sleep(2.0)
                for p in range(1, partitions, 2):
                    cluster.leaders[(topic, p)] = 1
                # Before the fix: 4 orphans x 4 dials x 1.5 s, one after the other.
                took = await reader.wait_for(b"after", timeout=30)
            finally:
                await reader.stop()
    assert took < 8, f"partitions of the dead broker took {took:.1f}s to come back"
    for p in range(partitions):
        assert reader.values(p) == [b"before", b"after"], p


def cap_fetched_records(limit: int) -> Callable[[int, int, bytes], bytes]:
    """A response rewriter that cuts every partition's records to ``limit`` bytes, as
    Kafka does for a partition whose next batch exceeds the partition's fetch size."""

    def rewrite(key: int, version: int, frame: bytes) -> bytes:
        if key != 1:
            return frame
        if version >= 12:  # aiokafka has no v12 codec: read it, write it with the test's own
            v12 = decode_fetch_response(version, frame)
            topics = [
                (topic, [(*p[:-1], bytes(p[-1][:limit]) if p[-1] else p[-1]) for p in parts])
                for topic, parts in v12.topics or []
            ]
            head = (v12.throttle_time_ms, v12.error_code, v12.session_id)
            return fetch_v12_wire.encode_response(int.from_bytes(frame[:4], "big"), *head, topics)
        resp = getattr(fetch, f"FetchResponse_v{version}").decode(frame[4:])
        resp.topics = [
            (topic, [(*p[:-1], p[-1][:limit] if p[-1] else p[-1]) for p in parts])
            for topic, parts in resp.topics
        ]
        encoded: bytes = resp.encode()
        return frame[:4] + encoded

    return rewrite


class Marker(cg.ConsumerGroupHandler):
    """Marks and records every message value."""

    def __init__(self) -> None:
        self.values: list[bytes | None] = []

    async def consume_claim(
        self, session: cg.ConsumerGroupSession, claim: cg.ConsumerGroupClaim
    ) -> None:
        async for message in claim.messages():
            self.values.append(message.value)
            session.mark_message(message)


async def test_an_oversized_batch_ends_run_with_an_error_naming_it(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    # Issue 8 #9: with fetch.max set, such a batch was skipped one offset per round and
    # only logged: its records (and the README's "nothing skipped") were lost.
    topic = await new_topic(partitions=1)
    for value in (b"small", b"x" * 100_000, b"after"):
        await produce(bootstrap, topic, [value], partition=0, linger_ms=0)
    config = group_config()
    config.consumer.fetch.default = 16_384
    config.consumer.fetch.max = 65_536
    handler = Marker()
    async with FakeCluster(split(bootstrap)[1], nodes=1) as cluster:
        cluster.rewrite_response = cap_fetched_records(50_000)
        async with cg.ConsumerGroup([cluster.address()], unique(), config) as group:
            with pytest.raises(cg.ConsumerError) as info:
                async with asyncio.timeout(30):
                    await group.run([topic], handler)
    text = str(info.value)
    assert f"{topic}/0" in text
    assert "offset 1" in text and "consumer.fetch.max=65536" in text
    size = re.search(r"is (\d+) bytes", text)
    assert size is not None and int(size.group(1)) > 100_000  # the batch's own size
    assert handler.values == [b"small"]  # nothing after the batch was handed out


async def test_cancelling_consume_partitions_while_routing_leaves_nothing_registered(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    # Issue 8 #3: partition consumers registered before a failure (or a cancellation)
    # stayed registered, so every later attempt failed with "already being consumed".
    # Here the cancellation lands while routing dials broker 2 for fetching.
    topic = await new_topic(partitions=2)
    async with FakeCluster(split(bootstrap)[1], nodes=2) as cluster:
        cluster.leaders[(topic, 1)] = 2
        config = outage_config()
        config.net.dial_timeout = 10.0
        async with cg.Consumer([cluster.address(1)], config) as consumer:
            wanted = {(topic, 0): 0, (topic, 1): 0}
            for pc in (await consumer.consume_partitions(wanted)).values():
                await pc.close()
            # Broker 2 stops taking connections; the fetch connection to it is gone.
            cluster.blackhole(2, live=False)
            (await consumer.client.connection(2, "fetch")).abort()
            attempt = asyncio.create_task(consumer.consume_partitions(wanted))
            await asyncio.sleep(1.0)
            assert not attempt.done()
            attempt.cancel()
            with pytest.raises(asyncio.CancelledError):
                await attempt
            assert not list(consumer.consuming())
            cluster.restore(2)
            pcs = await consumer.consume_partitions(wanted)  # not "already being consumed"
            assert sorted(pcs) == sorted(wanted)
