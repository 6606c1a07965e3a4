"""Broker failover under a consuming group, on a 3-node Apache Kafka.

Needs a real cluster: partition leadership moving to another replica, and the group
coordinator moving with the leadership of its ``__consumer_offsets`` partition, exist
only in a replicated cluster (the embedded Tansu broker is a single node; the
fault-injection proxies of test_fetch_resilience.py only stage them).

One node at a time is killed with SIGKILL, never two: that would lose the KRaft quorum
and ``min.insync.replicas=2``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest
from aiokafka import AIOKafkaProducer

import consumergroup as cg
from consumergroup.admin import ClusterAdmin
from consumergroup.client import Client
from consumergroup.testing import KafkaCluster
from tests.conftest import unique
from tests.helpers import produce
from tests.integration.group_support import Recorder, group_config, wait_for

pytestmark = [
    pytest.mark.slow,
    pytest.mark.kafka,
    pytest.mark.timeout(240),
    pytest.mark.xdist_group("kafka3"),  # one 3-node cluster per worker, shared
]

PARTITIONS = 6


class AckedFeeder:
    """Produces unique values with acks=all until stopped; keeps those acknowledged."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.acked: set[bytes] = set()
        self._stop = asyncio.Event()

    async def run(self) -> None:
        producer = AIOKafkaProducer(
            bootstrap_servers=self.bootstrap.split(","),
            acks="all",
            enable_idempotence=True,
            linger_ms=5,
            request_timeout_ms=10000,
            retry_backoff_ms=100,
        )
        await producer.start()
        try:
            i = 0
            while not self._stop.is_set():
                batch = [f"{i + n}".encode() for n in range(20)]
                i += len(batch)
                sent = [
                    (v, await producer.send(self.topic, v, partition=int(v) % PARTITIONS))
                    for v in batch
                ]
                for value, future in sent:
                    with contextlib.suppress(Exception):  # not acknowledged: not promised
                        await future
                        self.acked.add(value)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), 0.05)
        finally:
            await producer.stop()

    def stop(self) -> None:
        self._stop.set()


class Values(Recorder):
    """A Recorder that also keeps every value handled."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.values: set[bytes] = set()

    async def consume_claim(
        self, session: cg.ConsumerGroupSession, claim: cg.ConsumerGroupClaim
    ) -> None:
        async for msg in claim.messages():
            assert msg.value is not None
            self.values.add(msg.value)
            session.mark_message(msg)


@contextlib.asynccontextmanager
async def members(
    bootstrap: str, group: str, topic: str, n: int
) -> AsyncIterator[tuple[list[Values], list[asyncio.Task[None]]]]:
    """``n`` of our members running ``run()``; closed (bounded) on exit."""
    config = group_config()
    config.net.dial_timeout = 2.0
    handlers = [Values(f"m{i}") for i in range(n)]
    groups = [cg.ConsumerGroup(bootstrap.split(","), group, config) for _ in range(n)]
    runs = [asyncio.create_task(g.run([topic], h)) for g, h in zip(groups, handlers, strict=True)]
    try:
        yield handlers, runs
    finally:
        await asyncio.gather(*(asyncio.wait_for(g.close(), 30) for g in groups))
        for run in runs:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait_for(run, 10)


async def test_killing_a_leader_then_the_coordinator_loses_nothing_and_ends_no_run(
    kafka_cluster3: KafkaCluster,
) -> None:
    kc = kafka_cluster3
    topic = unique("failover")
    group = unique()
    await kc.create_topic(topic, PARTITIONS, replication_factor=3)
    feeder = AckedFeeder(kc.bootstrap, topic)
    feeding = asyncio.create_task(feeder.run())
    async with (
        Client(kc.bootstrap.split(",")) as client,
        members(kc.bootstrap, group, topic, 2) as (handlers, runs),
    ):

        def handled() -> set[bytes]:
            return set().union(*(h.values for h in handlers))

        def alive() -> bool:
            for run in runs:
                if run.done():
                    raise AssertionError(f"run() ended: {run}")
            return True

        async def caught_up(what: str) -> None:
            mark = len(feeder.acked)
            await wait_for(
                lambda: alive() and len(feeder.acked) > mark + 100 and feeder.acked <= handled(),
                90,
                f"every acknowledged record handled ({what})",
            )

        await wait_for(
            lambda: alive() and sum(h.owned() for h in handlers) == PARTITIONS, 60, "claims"
        )
        await caught_up("before any failure")
        # 1. The leader of partition 0 (and of others) dies mid-stream.
        await client.refresh_metadata(topic)
        leader = client.leader_id(topic, 0)
        await kc.kill_node(leader)
        await caught_up(f"node {leader}, a partition leader, killed")
        await kc.start_node(leader)
        await caught_up(f"node {leader} back")
        # 2. Then the group coordinator.
        client.invalidate_coordinator(group)
        coordinator = (await client.coordinator(group)).node_id
        await kc.kill_node(coordinator)
        await caught_up(f"node {coordinator}, the group coordinator, killed")
        await kc.start_node(coordinator)
        await caught_up(f"node {coordinator} back")
        feeder.stop()
        await asyncio.wait_for(feeding, 30)
        await wait_for(lambda: alive() and feeder.acked <= handled(), 60, "the last records")
        assert alive()
    async with ClusterAdmin(kc.bootstrap.split(",")) as admin:
        committed = await admin.list_consumer_group_offsets(group)
        ends = await admin.end_offsets([(topic, p) for p in range(PARTITIONS)])
    assert committed == ends


async def test_the_cluster_bootstrap_string_in_a_list_reaches_every_node(
    kafka_cluster3: KafkaCluster,
) -> None:
    """``[kc.bootstrap]`` ("127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3" in a list), one string,
    and a list: each constructor consumes. Before, the list's one string was read as host
    "127.0.0.1:P1,127.0.0.1:P2,127.0.0.1" and retried "could not connect" for ever."""
    kc = kafka_cluster3
    topic = unique("bootstrap")
    await kc.create_topic(topic, 3, replication_factor=3)
    await produce(kc.bootstrap, topic, [b"a", b"b", b"c"])
    for given in ([kc.bootstrap], kc.bootstrap, kc.bootstrap.split(",")):
        handler = Values("m")
        config = group_config()
        config.consumer.offsets.initial = cg.OFFSET_OLDEST
        async with cg.ConsumerGroup(given, unique(), config) as group:
            run = asyncio.create_task(group.run([topic], handler))
            await wait_for(lambda h=handler: len(h.values) == 3, 60, f"3 records via {given!r}")
            await group.close()
            await run
        async with ClusterAdmin(given) as admin:
            assert topic in {t.name for t in await admin.list_topics()}
            ends = await admin.end_offsets([(topic, p) for p in range(3)])
        async with cg.Consumer(given) as consumer, asyncio.timeout(60):
            read = 0
            for (_, partition), end in ends.items():
                if not end:
                    continue
                pc = await consumer.consume_partition(topic, partition, cg.OFFSET_OLDEST)
                async for batch in pc.batches():
                    read += len(batch)
                    if batch[-1].offset + 1 >= end:
                        break
                await pc.close()
            assert read == 3
