"""Topics that change under a running group: new partitions, a brand-new topic.

Needs a real cluster: the embedded Tansu broker has no CreatePartitions (see
test_partition_watch.py for the proxy-staged version), and the metadata of a topic just
created reaches the brokers of a real cluster some time after CreateTopics returned.
"""

from __future__ import annotations

import asyncio

import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions

import consumergroup as cg
from consumergroup.admin import ClusterAdmin
from consumergroup.testing import KafkaCluster
from tests.conftest import unique
from tests.helpers import produce
from tests.integration.group_support import Recorder, group_config, running_member, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.kafka, pytest.mark.timeout(120)]


async def grow(bootstrap: str, topic: str, total: int) -> None:
    """CreatePartitions: ``topic`` now has ``total`` partitions."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_partitions({topic: NewPartitions(total_count=total)})
    finally:
        await admin.close()


def running(*runs: asyncio.Task[None]) -> bool:
    """True while every ``run()`` task goes on; fails the test with its outcome otherwise."""
    for run in runs:
        if run.done():
            raise AssertionError(f"run() ended: {run.exception() if not run.cancelled() else run}")
    return True


def offsets(recorder: Recorder, topic: str, partition: int) -> list[int]:
    return sorted(o for t, p, o in recorder.seen if (t, p) == (topic, partition))


async def test_partitions_created_while_the_group_consumes_are_read_from_the_initial_offset(
    kafka_cluster: KafkaCluster,
) -> None:
    bootstrap = kafka_cluster.bootstrap
    topic = unique("grow")
    await kafka_cluster.create_topic(topic, 2)
    await produce(bootstrap, topic, [b"old"] * 20)
    a, b = Recorder("a"), Recorder("b")
    group = unique()
    config = group_config()  # initial offset: oldest
    async with (
        running_member(bootstrap, group, [topic], a, config),
        running_member(bootstrap, group, [topic], b, config),
    ):
        await wait_for(lambda: len(a.seen) + len(b.seen) == 20, 60, "the first 20 records")
        # Both members in one generation first: a member joining late (a loaded machine)
        # would rebalance the group onto the 4 partitions itself, and no session would end
        # for the partition change this test is about.
        await wait_for(lambda: a.owned() == 1 == b.owned(), 60, "one partition each")
        await grow(bootstrap, topic, 4)
        # Produced at once: before the members' watchers saw the new partitions, so only
        # starting them from the oldest offset (not the newest) reads these.
        for p in (2, 3):
            await produce(bootstrap, topic, [b"new"] * 10, partition=p)
        await wait_for(lambda: a.owned() + b.owned() == 4, 30, "all 4 partitions claimed")
        await wait_for(lambda: len(a.seen) + len(b.seen) == 40, 30, "the 20 new records")
    both = Recorder()
    both.seen = a.seen + b.seen
    assert [offsets(both, topic, p) for p in (2, 3)] == [list(range(10))] * 2
    assert [offsets(both, topic, p) for p in (0, 1)] == [list(range(10))] * 2
    assert any("now has 4 partitions" in (r or "") for r in a.end_reasons + b.end_reasons), (
        a.end_reasons,
        b.end_reasons,
    )


async def test_members_of_a_brand_new_topic_wait_for_its_metadata_and_join(
    kafka_cluster: KafkaCluster,
) -> None:
    bootstrap = kafka_cluster.bootstrap
    topic = unique("fresh")
    early, late = Recorder("early"), Recorder("late")
    group = unique()
    config = group_config()
    # One member starts before the topic exists, one right after CreateTopics returned.
    async with running_member(bootstrap, group, [topic], early, config) as (_, early_run):
        async with ClusterAdmin([bootstrap]) as admin:
            await admin.create_topic(topic, 4)
        async with running_member(bootstrap, group, [topic], late, config) as (_, late_run):
            await produce(bootstrap, topic, [b"x"] * 40)
            await wait_for(
                lambda: (
                    running(early_run, late_run)
                    and early.owned() + late.owned() == 4
                    and early.owned() > 0 < late.owned()
                ),
                60,
                "both members to share the 4 partitions",
            )
            await wait_for(
                lambda: running(early_run, late_run) and len(early.seen) + len(late.seen) >= 40,
                30,
                "the 40 records",
            )
    assert sorted(o for _, _, o in early.seen + late.seen) == sorted([*range(10)] * 4)


async def test_a_member_of_a_topic_created_by_another_reads_it_from_the_start(
    kafka_cluster: KafkaCluster,
) -> None:
    """Right after CreateTopics returned, a member joins and reads what was produced."""
    bootstrap = kafka_cluster.bootstrap
    topic = unique("created")
    await kafka_cluster.create_topic(topic, 3)
    rec = Recorder()
    async with running_member(bootstrap, unique(), [topic], rec, group_config()) as (member, run):
        await produce(bootstrap, topic, [b"y"] * 30)
        await wait_for(lambda: len(rec.seen) == 30, 60, "the 30 records")
        assert not run.done() and member.state is cg.GroupState.STABLE
