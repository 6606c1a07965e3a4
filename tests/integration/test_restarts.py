"""Members across broker restarts on Apache Kafka: coordinator moves, new leaders.

Needs Apache Kafka: a coordinator that moves to another broker while the old one keeps
running (what a rolling restart does when the controller gives leadership back to a
restarted broker) exists only in a replicated cluster, and a replica whose high
watermark lags behind the log (a new leader, a restarted follower) only where there is
replication. The embedded Tansu broker is one node (its high watermark is its log end)
and has no consumer group protocol.
"""

from __future__ import annotations

import contextlib
import struct
from typing import Literal

import pytest

import consumergroup as cg
from consumergroup.admin import ClusterAdmin
from consumergroup.client import Client
from consumergroup.errors import OffsetOutOfRangeError
from consumergroup.net.fetch import decode_fetch_response
from consumergroup.retry import COORDINATOR_LOST
from consumergroup.testing import KafkaCluster
from tests import fetch_v12_wire
from tests.conftest import unique
from tests.helpers import ProxyLink, RoutingProxy, produce
from tests.integration.cluster_ops import move_coordinator, restore_replicas, until
from tests.integration.group_support import (
    Recorder,
    consumer_protocol_config,
    group_config,
    heartbeats,
    running_member,
    wait_for,
)
from tests.integration.test_consumer_protocol import committed_equals_end
from tests.integration.test_cooperative import Tracker

pytestmark = [pytest.mark.slow, pytest.mark.kafka, pytest.mark.timeout(240)]
kafka3 = pytest.mark.xdist_group("kafka3")  # one 3-node cluster per worker, shared


class LaggingReplicaProxy(RoutingProxy):
    """The member's only path to a one-node Kafka. The first ``times`` answers to the
    start-offset probe (a Fetch of at most one byte) are those of a replica that lags
    behind the log, for every partition: ``"high_watermark"``, its high watermark
    ``lag`` records below the leader's (a new leader, or a follower serving a client
    whose metadata still names it leader), or ``"out_of_range"``, its log ends before
    the offset (a restarted follower catching up)."""

    def __init__(
        self, target_port: int, how: Literal["high_watermark", "out_of_range"], lag: int
    ) -> None:
        super().__init__(target_port)
        self.how = how
        self.lag = lag
        self.times = 1
        self.lied = 0
        self._probes: set[tuple[int, int]] = set()  # (link, correlation id)

    async def forward_request(self, link: ProxyLink, frame: bytes) -> None:
        key, _version, cid, id_len = struct.unpack_from(">hhih", frame, 0)
        if key == 1:  # Fetch (v12 against Kafka 4.x)
            request = fetch_v12_wire.decode_request(frame[10 + max(id_len, 0) :])
            if request["max_bytes"] == 1:
                self._probes.add((id(link), cid))
        await super().forward_request(link, frame)

    async def forward_response(self, link: ProxyLink, frame: bytes) -> None:
        (cid,) = struct.unpack_from(">i", frame, 0)
        if (id(link), cid) in self._probes:
            self._probes.discard((id(link), cid))
            if self.lied < self.times:
                self.lied += 1
                frame = self._lagging(cid, frame)
        await super().forward_response(link, frame)

    def _lagging(self, cid: int, frame: bytes) -> bytes:
        resp = decode_fetch_response(12, frame)
        topics = []
        for topic, parts in resp.topics:
            lagging = []
            for p in parts:
                part, error, hwm, lso, *rest, records = p
                if self.how == "out_of_range":
                    error, hwm, lso = OffsetOutOfRangeError.errno, -1, -1
                else:
                    hwm, lso = max(hwm - self.lag, 0), max(lso - self.lag, 0)
                lagging.append((part, error, hwm, lso, *rest, bytes(records or b"")))
            topics.append((topic, lagging))
        answer = fetch_v12_wire.encode_response(
            cid, resp.throttle_time_ms, resp.error_code, resp.session_id, topics
        )
        return answer


@kafka3
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


@pytest.mark.parametrize("how", ["high_watermark", "out_of_range"])
@pytest.mark.parametrize("protocol", ["classic", "consumer"])
async def test_a_claim_starts_at_its_commit_when_a_lagging_replica_answers_the_probe(
    kafka_cluster: KafkaCluster, protocol: str, how: Literal["high_watermark", "out_of_range"]
) -> None:
    """A member that claims a partition right after a leader change checks its committed
    offset against the log with a short Fetch, and the replica that answers may lag: a
    new leader whose high watermark has not caught up yet, or a restarted follower that
    the member's metadata still names leader. Neither makes the commit invalid: the
    claim starts at the committed offset, not at the log start (partitions re-read from
    offset 0 after a restart)."""
    bootstrap = kafka_cluster.bootstrap
    topic, group = unique("lagging"), unique()
    async with Client([bootstrap]) as client:
        await client.create_topic(topic, 1)
    await produce(bootstrap, topic, [b"old-%d" % i for i in range(40)], partition=0)
    async with ClusterAdmin([bootstrap]) as admin:

        async def committed() -> bool:
            # The coordinator of a fresh cluster may still be loading: wait for it.
            with contextlib.suppress(*COORDINATOR_LOST):
                await admin.commit_offsets(group, {(topic, 0): 40})
                return True
            return False

        await until(committed, 60, "a commit of offset 40")
    await produce(bootstrap, topic, [b"new-%d" % i for i in range(10)], partition=0)
    config = consumer_protocol_config() if protocol == "consumer" else group_config()
    port = int(bootstrap.rsplit(":", 1)[1])
    member = Recorder("a")
    async with (
        LaggingReplicaProxy(port, how, lag=20) as proxy,
        running_member(proxy.address, group, [topic], member, config),
    ):
        await wait_for(lambda: len(member.seen) >= 10, 60, "the records after the commit")
        assert proxy.lied == 1
        assert sorted(o for _, _, o in member.seen) == list(range(40, 50))
