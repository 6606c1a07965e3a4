"""The consumer group protocol (KIP-848) across broker restarts, on a 3-node Apache Kafka.

Needs a real replicated cluster: a coordinator that moves to another broker while the
old one keeps running (what a rolling restart does when the controller gives leadership
back to a restarted broker), leader elections, a follower that lags behind a leader.
The embedded Tansu broker is one node and has no consumer group protocol.
"""

from __future__ import annotations

import contextlib

import pytest

import consumergroup as cg
from consumergroup.client import Client
from consumergroup.testing import KafkaCluster
from tests.conftest import unique
from tests.helpers import produce
from tests.integration.cluster_ops import move_coordinator, restore_replicas
from tests.integration.group_support import (
    consumer_protocol_config,
    heartbeats,
    running_member,
    wait_for,
)
from tests.integration.test_consumer_protocol import committed_equals_end
from tests.integration.test_cooperative import Tracker

pytestmark = [
    pytest.mark.slow,
    pytest.mark.kafka,
    pytest.mark.timeout(240),
    pytest.mark.xdist_group("kafka3"),  # one 3-node cluster per worker, shared
]


async def test_an_idle_member_follows_its_coordinator_to_another_broker(
    kafka_cluster3: KafkaCluster,
) -> None:
    """The coordinator moves while the old broker keeps running and answers
    NOT_COORDINATOR: the member looks the coordinator up again and heartbeats there,
    keeping its partitions (no on_lost, one session), and its commits land there."""
    kc = kafka_cluster3
    seed = kc.bootstrap.split(",")[0]
    topic, group = unique("moving"), unique()
    await kc.create_topic(topic, 3)
    member = Tracker("a")
    config = consumer_protocol_config()
    async with (
        Client(kc.bootstrap.split(",")) as admin,
        running_member(seed, group, [topic], member, config) as (group_member, task),
    ):
        await wait_for(lambda: len(member.owned_now()) == 3, 60, "all three partitions")
        await heartbeats(group_member, 2, 30)
        # Idle: nothing to commit, so only heartbeats talk to the coordinator.
        old, new, replicas = await move_coordinator(admin, group)
        try:
            # Heartbeats answered by the new coordinator, beyond the broker's session
            # timeout (6 s) and the member's own (10 s): it was never taken for dead.
            await heartbeats(group_member, 30, 60)
            await produce(kc.bootstrap, topic, [b"r%d" % i for i in range(30)])
            await wait_for(lambda: len(member.seen) == 30, 60, "the records after the move")
            await wait_for(
                lambda: all(
                    group_member.stats().partitions[tp].committed
                    == group_member.stats().partitions[tp].high_water_mark
                    for tp in member.owned_now()
                ),
                30,
                "commits at the new coordinator",
            )
            assert member.lost == [], f"coordinator {old} -> {new}: the member was lost"
            assert len(member.sessions) == 1
            assert not task.done()
            assert group_member.state is cg.GroupState.STABLE
        finally:
            with contextlib.suppress(Exception):
                await restore_replicas(admin, group, replicas)
    await committed_equals_end(seed, group, topic)
