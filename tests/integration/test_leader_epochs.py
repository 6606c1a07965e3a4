"""Leader epochs in commits (KIP-320) on a 3-node Apache Kafka: a log truncated below a
committed offset by an unclean leader election is found from the epoch committed with it.

The topic's one partition lives on nodes 1 (leader) and 2, unclean election allowed and
one in-sync replica enough. Ten records reach both; node 2 is killed and falls out of
the ISR; ten more reach node 1 alone, and a member reads and commits all twenty (offset
20, epoch 0). Then node 1 is killed, node 2 comes back and is elected uncleanly: its log
ends at 10, and fifteen new records take offsets 10..24 in a new epoch. Committed offset
20 is inside that log, so a member that trusted it would silently skip the new records
10..19. With the epoch, the first fetch is told the log diverged at 10: under
``offsets.reset = "error"`` the partition fails with a clear error, otherwise the member
resumes at 10 and reads every new record.

Kafka only: Tansu is a single node (no replicas, no elections, no truncation).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

import consumergroup as cg
from consumergroup.admin import ClusterAdmin
from consumergroup.client import Client, PartitionMetadata
from consumergroup.errors import ConsumerError
from consumergroup.group.offsets import OffsetManager
from consumergroup.net.protocol import CreateTopicsRequest
from consumergroup.testing import KafkaCluster
from tests.conftest import unique
from tests.helpers import produce
from tests.integration.group_support import group_config, running_member, wait_for
from tests.peers import PeerUnavailable, tool_command

pytestmark = [
    pytest.mark.slow,
    pytest.mark.kafka,
    pytest.mark.timeout(600),
    pytest.mark.xdist_group("kafka3"),  # one 3-node cluster per worker, shared
]

LEADER, FOLLOWER = 1, 2


class Reader(cg.ConsumerGroupHandler):
    """Records (offset, value) of every record handled and marks it; keeps the errors a
    failed partition raises instead of ending the session with them (the claim is then
    restarted from its mark)."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, bytes | None]] = []
        self.errors: list[ConsumerError] = []

    async def consume_claim(
        self, session: cg.ConsumerGroupSession, claim: cg.ConsumerGroupClaim
    ) -> None:
        try:
            async for msg in claim.messages():
                self.seen.append((msg.offset, msg.value))
                session.mark_message(msg)
        except ConsumerError as exc:
            self.errors.append(exc)


async def create_topic(kc: KafkaCluster, topic: str) -> None:
    """One partition on LEADER and FOLLOWER, unclean election allowed, one ISR enough."""
    async with Client(kc.bootstrap.split(",")) as client:
        conn = await client.controller()
        configs = [("unclean.leader.election.enable", "true"), ("min.insync.replicas", "1")]
        request = CreateTopicsRequest(
            [(topic, -1, -1, [(0, [LEADER, FOLLOWER])], configs)], 30_000, False
        )
        resp = (await conn.send(request)).to_object()
        assert all(e["error_code"] == 0 for e in resp["topic_errors"]), resp
    await partition_state(kc, topic, lambda p: p.leader == LEADER, "the topic's leader")


async def partition_state(
    kc: KafkaCluster, topic: str, check: Callable[[PartitionMetadata], bool], what: str
) -> None:
    """Wait until ``check(partition 0's metadata)`` holds (asked of a live node)."""
    live = ",".join(address for i, address in enumerate(kc.bootstrap.split(",")) if kc.running(i))
    async with ClusterAdmin(live) as admin:
        deadline = asyncio.get_running_loop().time() + 120
        while True:
            try:
                [p] = await admin.describe_topic(topic)
                if check(p):
                    return
            except cg.KafkaError:
                pass
            assert asyncio.get_running_loop().time() < deadline, f"no {what} in 120 s"
            await asyncio.sleep(0.5)


async def elect_unclean(kc: KafkaCluster, topic: str) -> None:
    """Kafka's own ``kafka-leader-election.sh --election-type unclean`` on partition 0."""
    live = [a for i, a in enumerate(kc.bootstrap.split(",")) if kc.running(i)]
    try:
        command = await asyncio.to_thread(
            tool_command,
            "org.apache.kafka.tools.LeaderElectionCommand",
            "--bootstrap-server",
            ",".join(live),
            "--election-type",
            "unclean",
            "--topic",
            topic,
            "--partition",
            "0",
        )
    except PeerUnavailable as exc:
        pytest.skip(str(exc))
    proc = await asyncio.create_subprocess_exec(
        *command,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await asyncio.wait_for(proc.communicate(), 180)
    # "ELECTION_NOT_NEEDED" when the controller elected it already: fine either way.
    print(output.decode(errors="replace"))


async def read(bootstrap: str, group: str, topic: str, reset: str, until: int) -> Reader:
    """Run a member of ``group`` until it handled offset ``until - 1``, or its partition
    failed twice (the claim restarted from its mark fails again); closed (its marks
    committed) on return."""
    reader = Reader()
    config = group_config()
    config.consumer.offsets.reset = reset  # type: ignore[assignment]
    async with running_member(bootstrap, group, [topic], reader, config):
        await wait_for(
            lambda: len(reader.errors) >= 2 or any(o == until - 1 for o, _ in reader.seen),
            120,
            f"offset {until - 1} or a partition failed twice",
        )
    return reader


async def test_a_truncation_below_the_committed_offset_is_found_from_its_epoch(
    kafka_cluster3: KafkaCluster,
) -> None:
    kc = kafka_cluster3
    topic, group = unique("epochs"), unique()
    await create_topic(kc, topic)
    try:
        old = [b"old%d" % i for i in range(10)]
        await produce(kc.bootstrap, topic, old, partition=0, acks="all")
        first = await read(kc.bootstrap, group, topic, "oldest", 10)
        assert [o for o, _ in first.seen] == list(range(10))

        await kc.kill_node(FOLLOWER)
        await partition_state(kc, topic, lambda p: p.isr == (LEADER,), "ISR of the leader alone")
        await produce(kc.bootstrap, topic, [b"lost%d" % i for i in range(10, 20)], partition=0)
        second = await read(kc.bootstrap, group, topic, "oldest", 20)
        assert [o for o, _ in second.seen] == list(range(10, 20))
        async with Client(kc.bootstrap.split(",")) as client:
            committed = await OffsetManager(client, group, client.config).fetch_committed_epochs(
                [(topic, 0)]
            )
        offset, _, epoch = committed[(topic, 0)]
        assert offset == 20 and epoch >= 0, committed  # the commit carries the leader epoch

        # The leader goes; the follower, which never had 10..19, is elected uncleanly.
        await kc.kill_node(LEADER)
        await kc.start_node(FOLLOWER)
        # Fenced once its session times out: the partition is then leaderless.
        await partition_state(kc, topic, lambda p: p.leader != LEADER, "the old leader gone")
        await elect_unclean(kc, topic)
        await partition_state(kc, topic, lambda p: p.leader == FOLLOWER, "the new leader")
        new = [b"new%d" % i for i in range(10, 25)]
        await produce(kc.bootstrap, topic, new, partition=0)

        failed = await read(kc.bootstrap, group, topic, "error", 25)
        assert failed.seen == [], "no record may be read past the truncation"
        assert all("log truncated" in str(e) for e in failed.errors), failed.errors
        assert "offsets.reset" in str(failed.errors[0])

        resumed = await read(kc.bootstrap, group, topic, "oldest", 25)
        assert resumed.errors == []
        assert resumed.seen == list(zip(range(10, 25), new, strict=True))
    finally:
        for node in (LEADER, FOLLOWER):
            await kc.start_node(node)
