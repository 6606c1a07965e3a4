"""Racks on a 3-node Apache Kafka: fetching from the closest replica (KIP-392) and
rack-aware assignment (KIP-881).

Kafka only: Tansu is a single node with no replicas, no replica selector and no racks,
so there is no other replica to read from and every partition is in the one rack. The
shared ``kafka_cluster3`` puts node i in rack ``RACKS[i]`` and runs Kafka's
``RackAwareReplicaSelector``. For the fetch tests each node is reached through its own
proxy (they share their routes), which records what every Fetch answer carried: which
node served which partition's records is seen on the wire, not inferred.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator

import pytest

import consumergroup as cg
from consumergroup.admin import ClusterAdmin
from consumergroup.client import Client
from consumergroup.testing import KafkaCluster
from tests.conftest import RACKS, unique
from tests.helpers import produce
from tests.integration.fetch_proxy import FetchProxy
from tests.integration.group_support import (
    Recorder,
    consumer_protocol_config,
    group_config,
    running_member,
    wait_for,
)

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


@pytest.mark.parametrize(
    "protocol", ["range", "cooperative-sticky", "consumer"], ids=lambda p: p.replace("-", "_")
)
async def test_partitions_stay_in_their_members_racks(
    kafka_cluster3: KafkaCluster, protocol: str
) -> None:
    """Three members, one per rack; a topic with one replica per partition: every member
    gets two partitions, as many as can be of them with their replica in its rack (KIP-881),
    on eager range and cooperative-sticky (the members join one by one: the first ones'
    partitions move into their racks as the others come). The coordinator reports each
    member's rack, from its subscription (classic) or its heartbeats (consumer protocol;
    there the broker assigns, and Kafka 4.4's assignors do not use racks, so only the rack
    reaching it is checked)."""
    kc = kafka_cluster3
    topic, group = unique("rackassign"), unique()
    await kc.create_topic(topic, 6, replication_factor=1)
    async with Client(kc.bootstrap.split(",")) as client:
        await client.refresh_metadata(topic)
        racks = client.replica_racks([topic])
    # Kafka spreads the replicas over the nodes, not always evenly: the fewest partitions
    # out of their member's rack that two per member allows.
    best = min(
        sum(racks[(topic, p)] != {RACKS[i // 2]} for i, p in enumerate(order))
        for order in itertools.permutations(range(6))
    )

    def config(rack: str) -> cg.Config:
        if protocol == "consumer":
            return consumer_protocol_config(client_rack=rack)
        strategy = cg.RangeAssignor() if protocol == "range" else cg.CooperativeStickyAssignor()
        return group_config(client_rack=rack, consumer__group__rebalance__strategies=[strategy])

    async with contextlib.AsyncExitStack() as stack:
        groups: list[cg.ConsumerGroup] = []
        for rack in RACKS:
            member, _ = await stack.enter_async_context(
                running_member(kc.bootstrap.split(",")[0], group, [topic], Recorder(), config(rack))
            )
            groups.append(member)

        def owned() -> list[set[tuple[str, int]]]:
            return [set(g.stats().partitions) for g in groups]

        def settled() -> bool:
            claims = owned()
            return all(len(c) == 2 for c in claims) and len(set().union(*claims)) == 6

        await wait_for(settled, 90, "two partitions per member")
        async with ClusterAdmin(kc.bootstrap.split(",")) as admin:
            (described,) = await admin.describe_groups([group])
        by_member = {m.member_id: m.rack_id for m in described.members}
        assert by_member == {
            g.stats().member_id: rack for g, rack in zip(groups, RACKS, strict=True)
        }
        if protocol != "consumer":
            away = sum(
                racks[tp] != {rack} for rack, c in zip(RACKS, owned(), strict=True) for tp in c
            )
            assert away == best, (owned(), racks)
