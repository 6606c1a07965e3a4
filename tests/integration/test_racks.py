"""Racks on a 3-node Apache Kafka: fetching from the closest replica (KIP-392).

Kafka only: Tansu is a single node with no replicas and no replica selector, so there
is no other replica to read from. The shared ``kafka_cluster3`` puts node i in rack
``RACKS[i]`` and runs Kafka's ``RackAwareReplicaSelector``. Each node is reached through
its own proxy (they share their routes), which records what every Fetch answer carried:
which node served which partition's records is seen on the wire, not inferred.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

import consumergroup as cg
from consumergroup.client import Client
from consumergroup.testing import KafkaCluster
from tests.conftest import RACKS, unique
from tests.helpers import produce
from tests.integration.fetch_proxy import FetchProxy
from tests.integration.group_support import Recorder, group_config, running_member, wait_for

pytestmark = [
    pytest.mark.slow,
    pytest.mark.kafka,
    pytest.mark.timeout(240),
    pytest.mark.xdist_group("kafka3"),  # one 3-node cluster per worker, shared
]

PARTITIONS = 3


@contextlib.asynccontextmanager
async def node_proxies(kc: KafkaCluster) -> AsyncIterator[list[FetchProxy]]:
    """One FetchProxy per node, sharing routes: every connection goes through them."""
    routes: dict[int, int] = {}
    ports = [int(address.rsplit(":", 1)[1]) for address in kc.bootstrap.split(",")]
    async with contextlib.AsyncExitStack() as stack:
        yield [await stack.enter_async_context(FetchProxy(port, routes)) for port in ports]


def served(proxy: FetchProxy, since: int = 0) -> set[tuple[str, int]]:
    """The partitions whose records this node's answers carried (from fetch ``since`` on)."""
    return {key for fetch in proxy.fetches[since:] for key in fetch.served}


def handled(recorder: Recorder, topic: str) -> dict[int, set[int]]:
    out: dict[int, set[int]] = {p: set() for p in range(PARTITIONS)}
    for t, partition, offset in recorder.seen:
        if t == topic:
            out[partition].add(offset)
    return out


async def test_a_member_reads_from_its_racks_replica_and_falls_back_to_the_leaders(
    kafka_cluster3: KafkaCluster,
) -> None:
    """A member in rack-b gets every partition's records from node 1 (rack-b), leader or
    not; with node 1 killed it reads from the leaders, and no record is lost."""
    kc = kafka_cluster3
    topic, group = unique("racks"), unique()
    await kc.create_topic(topic, PARTITIONS, replication_factor=3)
    async with Client(kc.bootstrap.split(",")) as client:
        await client.refresh_metadata(topic)
        leaders = {p: client.leader_id(topic, p) for p in range(PARTITIONS)}
    assert set(leaders.values()) - {1}, f"every partition is led by node 1: {leaders}"
    first = [f"a{i}".encode() for i in range(300)]
    await produce(kc.bootstrap, topic, first, acks="all")
    config = group_config(client_rack=RACKS[1])
    config.net.dial_timeout = 2.0
    recorder = Recorder()
    try:
        async with (
            node_proxies(kc) as proxies,
            running_member(proxies[0].address, group, [topic], recorder, config) as (_, task),
        ):

            def got(n: int) -> bool:
                if task.done():
                    raise AssertionError(f"run() ended: {task}")
                return sum(len(o) for o in handled(recorder, topic).values()) >= n

            await wait_for(lambda: got(len(first)), 60, "the first records")
            everything = {(topic, p) for p in range(PARTITIONS)}
            assert served(proxies[1]) == everything, leaders
            assert served(proxies[0]) == served(proxies[2]) == set(), leaders
            marks = [len(proxy.fetches) for proxy in proxies]
            await kc.kill_node(1)
            second = [f"b{i}".encode() for i in range(300)]
            await produce(kc.bootstrap, topic, second, acks="all")
            await wait_for(lambda: got(len(first) + len(second)), 90, "records after the kill")
            after = served(proxies[0], marks[0]) | served(proxies[2], marks[2])
            assert after == everything
    finally:
        await kc.start_node(1)
    ends = handled(recorder, topic)
    assert sum(len(offsets) for offsets in ends.values()) == len(first) + len(second)
    for partition, offsets in ends.items():
        assert offsets == set(range(len(offsets))), f"partition {partition}: a gap"


async def test_without_a_rack_the_leaders_serve(kafka_cluster3: KafkaCluster) -> None:
    """No client_rack: the rack-aware selector answers with the leader, as Java's client
    sees it; every partition is served by its leader only."""
    kc = kafka_cluster3
    topic = unique("norack")
    await kc.create_topic(topic, PARTITIONS, replication_factor=3)
    async with Client(kc.bootstrap.split(",")) as client:
        await client.refresh_metadata(topic)
        leaders = {p: client.leader_id(topic, p) for p in range(PARTITIONS)}
    await produce(kc.bootstrap, topic, [b"x"] * 30, acks="all")
    async with node_proxies(kc) as proxies, cg.Consumer([proxies[0].address]) as consumer:
        pcs = [await consumer.consume_partition(topic, p, cg.OFFSET_OLDEST) for p in leaders]
        for pc in pcs:
            async with asyncio.timeout(30):
                async for batch in pc.batches():
                    if batch[-1].offset == 9:
                        break
        for node, proxy in enumerate(proxies):
            assert served(proxy) == {(topic, p) for p, lead in leaders.items() if lead == node}
