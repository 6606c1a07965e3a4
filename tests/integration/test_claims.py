"""A claim's state is fixed before anything can move it: its start offset (and first mark),
its paused flag and its revocation, whatever else the member awaits meanwhile."""

from __future__ import annotations

import asyncio

import pytest

import consumergroup as cg
from consumergroup.admin import ClusterAdmin
from tests.conftest import TopicFactory, unique
from tests.helpers import produce
from tests.integration.cluster_proxy import FakeCluster
from tests.integration.group_support import consumer_protocol_config, group_config, wait_for
from tests.integration.test_connection import split
from tests.integration.test_examples import committed

pytestmark = pytest.mark.timeout(120)


class HandlesTen(cg.ConsumerGroupHandler):
    """Handles (and marks) the first ten records of partition 0, then holds until the
    session ends; records the claims' initial offsets."""

    def __init__(self) -> None:
        self.handled: list[int] = []
        self.initial: dict[int, int] = {}

    async def consume_claim(
        self, session: cg.ConsumerGroupSession, claim: cg.ConsumerGroupClaim
    ) -> None:
        self.initial[claim.partition] = claim.initial_offset
        if claim.partition == 0:
            async for msg in claim.messages():
                self.handled.append(msg.offset)
                session.mark_message(msg)
                if len(self.handled) == 10:
                    break
        await session.done.wait()


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
async def test_a_claim_starts_where_it_was_resolved_while_another_waits_for_its_leader(
    bootstrap: str, new_topic: TopicFactory, on_tansu: bool, protocol: str
) -> None:
    """Partition 1 turns leaderless between resolving the start offsets and routing them to
    the fetch tasks (the member learns it from a metadata refresh while it dials its fetch
    connection): routing it waits ~0.75 s for a leader while partition 0, routed first, is
    already fetched. The claim on partition 0 must start, and mark, at 0, where it was
    resolved: before the fix it took the moved fetch position (200), the first commit stored
    it and offsets 10-199 were never handled by anyone. The consumer protocol (Apache Kafka
    only: Tansu has no KIP-848) opens its claims on the reconciler's path, the classic one in
    the session factory."""
    if protocol == "consumer" and on_tansu:
        pytest.skip("Tansu has no consumer group protocol (KIP-848)")
    topic = await new_topic(partitions=2)
    await produce(bootstrap, topic, [b"%d" % i for i in range(200)], partition=0)
    group = unique()
    async with ClusterAdmin([bootstrap]) as admin:
        # Committed offsets start the partitions in assignment order (0 first) with one probe.
        await admin.commit_offsets(group, {(topic, 0): 0, (topic, 1): 0})
    config = consumer_protocol_config() if protocol == "consumer" else group_config()
    handler = HandlesTen()
    async with FakeCluster(split(bootstrap)[1], nodes=1) as cluster:
        member = cg.ConsumerGroup([cluster.address()], group, config)
        resolved = False

        def watch(key: int, version: int, frame: bytes) -> bytes:
            nonlocal resolved
            resolved = resolved or key == 1  # the probe Fetch: the start offsets are resolved
            return frame

        async def hold(node: int) -> None:
            nonlocal resolved
            if resolved:  # the next dial is the fetch connection's: routing has begun
                resolved = False
                cluster.leaders[(topic, 1)] = -1
                await member._client.refresh_metadata(topic)

        cluster.rewrite_response = watch
        cluster.on_accept = hold
        task = asyncio.create_task(member.run([topic], handler))
        try:
            await wait_for(lambda: len(handler.handled) == 10, 30, "ten records handled")
            cluster.leaders.pop((topic, 1))
        finally:
            await asyncio.wait_for(member.close(), 30)
            await asyncio.wait_for(task, 10)
    done = (await committed(bootstrap, group, topic, 2))[0]
    assert done == 10, f"committed {done} with only {handler.handled} handled"
    assert set(range(done)) <= set(handler.handled)
    assert handler.initial[0] == 0
