"""The consumer group protocol (KIP-848) on Apache Kafka 4.x, and its refusal on Tansu.

Apache Kafka comes from the suite's fixture (``consumergroup.testing.KafkaCluster``, its
consumer-group heartbeat interval lowered to 0.5 s and session timeout to 6 s).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import re
import signal
import struct
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

import consumergroup as cg
from consumergroup.admin import ClusterAdmin
from consumergroup.client import Client
from consumergroup.errors import StaleMemberEpochError, UnknownMemberIdError
from consumergroup.group.consumer_membership import ConsumerMembership
from consumergroup.group.offsets import OffsetManager
from consumergroup.net.kip848 import ConsumerGroupHeartbeatRequest
from consumergroup.net.protocol import OffsetCommitRequest, OffsetFetchRequest
from consumergroup.retry import COORDINATOR_LOST
from consumergroup.testing import EmbeddedBroker, KafkaCluster
from tests import fetch_v12_wire
from tests.conftest import unique
from tests.helpers import ProxyLink, RoutingProxy, produce
from tests.integration.cli_support import run_cli
from tests.integration.group_support import (
    consumer_protocol_config,
    group_config,
    offsets_by_partition,
    running_member,
    wait_for,
)
from tests.integration.metadata_codec import rewrite_metadata
from tests.integration.test_cooperative import Tracker, flat
from tests.integration.test_peers import (
    PARTITIONS,
    Ours,
    assert_never_owned_twice,
    feeding,
    peer_intervals,
)
from tests.integration.test_static_membership import Child
from tests.integration.test_topic_changes import grow
from tests.peers import PeerProcess, PeerUnavailable, build

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]
kafka_only = pytest.mark.kafka


@pytest.fixture
def kafka(kafka_cluster: KafkaCluster) -> str:
    """Bootstrap of the suite's Apache Kafka (lowered group.consumer.* timeouts)."""
    return kafka_cluster.bootstrap


async def new_kafka_topic(bootstrap: str, partitions: int) -> str:
    name = f"t-{uuid.uuid4().hex[:10]}"
    async with Client([bootstrap]) as client:
        await client.create_topic(name, partitions)
    return name


async def committed_equals_end(bootstrap: str, group: str, topic: str) -> None:
    """Every partition's committed offset is its log end: nothing more to read, none missed."""
    async with ClusterAdmin([bootstrap]) as admin:
        partitions = [(topic, p) for p in await admin.partitions(topic)]
        committed = await admin.list_consumer_group_offsets(group, partitions)
        ends = await admin.end_offsets(partitions)
    assert committed == ends, (committed, ends)


# ----------------------------------------------------------------------------- Tansu


async def test_consumer_protocol_on_a_broker_without_kip848_fails_at_start_saying_classic() -> None:
    async with EmbeddedBroker() as broker:
        await broker.create_topic("t", 1)
        config = consumer_protocol_config()
        async with cg.ConsumerGroup([broker.bootstrap], unique(), config) as group:
            with pytest.raises(cg.ConsumerGroupError, match="protocol = 'classic'") as info:
                await asyncio.wait_for(group.run(["t"], Tracker("a")), 30)
            assert "does not offer ConsumerGroupHeartbeat" in str(info.value)
            assert group.state is cg.GroupState.FAILED
            assert group.stats().protocol == "consumer"


# ----------------------------------------------------------------------------- Kafka


@kafka_only
async def test_a_fourth_member_joins_and_leaves_without_stopping_unmoved_partitions(
    kafka: str,
) -> None:
    topic = await new_kafka_topic(kafka, 12)
    group = unique()
    # What moves here is the fourth member's doing only if nobody is fenced: the fixture's
    # 6 s session is shorter than the heartbeat gaps a broker and a test process share at
    # a load of 16 on 2 cores (CI), and a fenced member loses every partition.
    async with ClusterAdmin([kafka]) as admin:
        await admin.alter_group_configs(group, {"consumer.session.timeout.ms": "30000"})
    await produce(kafka, topic, [str(i).encode() for i in range(600)])
    members = [Tracker(n) for n in "abc"]
    groups: list[cg.ConsumerGroup] = []
    async with (
        running_member(kafka, group, [topic], members[0], consumer_protocol_config()) as (ga, _),
        running_member(kafka, group, [topic], members[1], consumer_protocol_config()) as (gb, _),
        running_member(kafka, group, [topic], members[2], consumer_protocol_config()) as (gc, _),
    ):
        groups = [ga, gb, gc]
        await wait_for(
            lambda: sorted(len(m.owned_now()) for m in members) == [4, 4, 4], 60, "a 4/4/4 split"
        )
        before = {m.name: m.owned_now() for m in members}
        # Members joined one at a time, each taking its share from the others: only the
        # revocations from here on are the fourth member's doing.
        formed = {m.name: len(m.revoked) for m in members}
        starts = {m.name: dict(m.started) for m in members}
        sessions = [m.session for m in members]
        epochs = [g.stats().member_epoch for g in groups]
        assert all(g.stats().protocol == "consumer" for g in groups)
        assert all(m.session is not None and m.session.generation_id > 0 for m in members)
        d = Tracker("d")
        async with running_member(kafka, group, [topic], d, consumer_protocol_config()):
            await wait_for(
                lambda: [len(m.owned_now()) for m in [*members, d]] == [3, 3, 3, 3],
                60,
                "a 3/3/3/3 split",
            )
            await produce(kafka, topic, [str(i).encode() for i in range(600, 900)])
            during = {m.name: m.owned_now() for m in members}
            moved_to_d = d.owned_now()
        await wait_for(
            lambda: sum(len(m.owned_now()) for m in members) == 12, 60, "d's partitions back"
        )
        await produce(kafka, topic, [str(i).encode() for i in range(900, 1200)])
        await wait_for(
            lambda: len({s for m in [*members, d] for s in m.seen}) >= 1200, 60, "every message"
        )
        # One session each, spanning the epochs; session.generation_id is the member epoch.
        assert not any(m.lost for m in members), [(m.name, m.lost) for m in members]
        assert [m.session for m in members] == sessions
        assert [len(m.sessions) for m in members] == [1, 1, 1]
        later = [g.stats().member_epoch for g in groups]
        assert all(new > old for new, old in zip(later, epochs, strict=True)), (epochs, later)
        for m, g in zip(members, groups, strict=True):
            assert m.session is not None and m.session.generation_id == g.stats().member_epoch
            kept = before[m.name] & during[m.name]
            assert len(kept) == 3, (m.name, before[m.name], during[m.name])
            # Partitions that did not move were never revoked and their handler never ended.
            revoked = flat(m.revoked[formed[m.name] :])
            assert not kept & revoked, (m.name, m.revoked)
            assert all(m.started[tp] == starts[m.name][tp] == 1 for tp in kept), m.name
            assert all(m.ended[tp] == 0 for tp in kept), m.name
            assert revoked == before[m.name] - during[m.name]
            assert not m.lost
        assert moved_to_d == set().union(*before.values()) - set().union(*during.values())
    handled = offsets_by_partition([s for m in [*members, d] for s in m.seen])
    assert sum(len(c) for c in handled.values()) == 1200, "a message was lost"
    # The revoking member committed before the coordinator released a partition: its
    # next owner starts where it stopped, so no message is handled twice.
    assert all(max(c.values()) == 1 for c in handled.values()), "a message was handled twice"
    await committed_equals_end(kafka, group, topic)


class ConsumerChild(Child):
    """member_process on the consumer protocol: its claims, offsets and lost partitions."""

    def __init__(self, bootstrap: str, group: str, topic: str, instance_id: str | None) -> None:
        super().__init__(bootstrap, group, topic, instance_id or "")
        self.args = (bootstrap, group, topic, "--protocol", "consumer")
        if instance_id is not None:
            self.args += ("--instance-id", instance_id)
        self.lost: list[list[int]] = []
        self.events: list[dict[str, object]] = []

    async def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        async for line in self.proc.stdout:
            event = json.loads(line)
            self.events.append(event)
            if "claims" in event:
                self.claims.append(event["claims"])
            elif "lost" in event:
                self.lost.append(event["lost"])
            elif "p" in event:  # a handled batch (not a revoked event)
                self.seen.extend((self.topic, event["p"], o) for o in event["offsets"])

    def signal(self, signum: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(signum)


@kafka_only
async def test_a_frozen_member_is_fenced_loses_its_partitions_and_rejoins_from_committed(
    kafka: str,
) -> None:
    topic = await new_kafka_topic(kafka, 4)
    group = unique()
    await produce(kafka, topic, [str(i).encode() for i in range(400)])
    frozen = ConsumerChild(kafka, group, topic, None)
    survivor = Tracker("survivor")
    await frozen.start()
    try:
        await wait_for(lambda: frozen.owned() == 4, 60, "the child to own everything")
        async with running_member(kafka, group, [topic], survivor, consumer_protocol_config()) as (
            member,
            _,
        ):
            await wait_for(
                lambda: len(survivor.owned_now()) == 2 and frozen.owned() == 2, 60, "a 2/2 split"
            )
            await wait_for(lambda: len({*frozen.seen, *survivor.seen}) >= 400, 60, "the first 400")
            frozen_parts = {(topic, p) for p in frozen.claims[-1].get(topic, [])}
            frozen.signal(signal.SIGSTOP)
            # Past the broker's session timeout the coordinator fences it and hands its
            # partitions to the survivor, which reads them from the committed offsets.
            await wait_for(lambda: len(survivor.owned_now()) == 4, 60, "the survivor to own all")
            await produce(kafka, topic, [str(i).encode() for i in range(400, 600)])
            await wait_for(lambda: len({*frozen.seen, *survivor.seen}) >= 600, 60, "the next 200")
            seen_before_thaw = len(frozen.seen)
            frozen.signal(signal.SIGCONT)
            # Its next heartbeat is refused: on_lost (no commit), then it joins as epoch 0.
            await wait_for(lambda: bool(frozen.lost), 60, "the frozen member to lose its claims")
            assert {(topic, p) for p in frozen.lost[0]} == frozen_parts
            await wait_for(
                lambda: frozen.owned() == 2 and len(survivor.owned_now()) == 2,
                60,
                "a 2/2 split again",
            )
            await produce(kafka, topic, [str(i).encode() for i in range(600, 800)])
            await wait_for(lambda: len({*frozen.seen, *survivor.seen}) >= 800, 60, "the last 200")
            assert len(frozen.seen) > seen_before_thaw, "the rejoined member read nothing"
            assert member.stats().member_epoch > 0
    finally:
        if frozen.proc is not None and frozen.proc.returncode is None:
            frozen.signal(signal.SIGCONT)
        await frozen.kill()
    handled = offsets_by_partition([*frozen.seen, *survivor.seen])
    assert sum(len(c) for c in handled.values()) == 800, "a message was lost"


@kafka_only
async def test_a_static_member_restarted_within_the_session_timeout_moves_no_partition(
    kafka: str,
) -> None:
    topic = await new_kafka_topic(kafka, 4)
    group = unique()
    await produce(kafka, topic, [str(i).encode() for i in range(400)])
    survivor = Tracker("survivor")
    static = consumer_protocol_config()
    static.consumer.group.instance_id = "static-a"
    other = consumer_protocol_config()
    other.consumer.group.instance_id = "static-b"
    first = Tracker("first")
    async with running_member(kafka, group, [topic], survivor, other) as (member, _):
        await wait_for(lambda: len(survivor.owned_now()) == 4, 60, "the survivor to own all")
        async with running_member(kafka, group, [topic], first, static):
            await wait_for(
                lambda: len(survivor.owned_now()) == 2 and len(first.owned_now()) == 2,
                60,
                "a 2/2 split",
            )
            await wait_for(lambda: len({*first.seen, *survivor.seen}) >= 400, 60, "the first 400")
            owned, session = survivor.owned_now(), survivor.session
            theirs = first.owned_now()
            revoked_before = len(survivor.revoked)
        # close() of a static member sent epoch -2: the coordinator keeps its partitions
        # for it until the session timeout, and gives them to nobody else.
        second = Tracker("second")
        async with running_member(kafka, group, [topic], second, static):
            await wait_for(lambda: second.owned_now() == theirs, 30, "its partitions back")
            await produce(kafka, topic, [str(i).encode() for i in range(400, 600)])
            await wait_for(
                lambda: len({*first.seen, *second.seen, *survivor.seen}) >= 600, 60, "all 600"
            )
            assert survivor.owned_now() == owned and survivor.session is session
            assert len(survivor.revoked) == revoked_before
            assert not flat(survivor.assigned[1:]), "the survivor was handed the restarted's"
        assert member.stats().protocol == "consumer"


@kafka_only
@pytest.mark.parametrize("protocol", ["consumer", "classic"])
async def test_regex_subscription_takes_matching_topics_and_later_ones(
    kafka: str, protocol: str
) -> None:
    prefix = f"rx{uuid.uuid4().hex[:6]}"
    first, second = f"{prefix}-a", f"{prefix}-b"
    async with Client([kafka]) as client:
        await client.create_topic(first, 2)
        await client.create_topic(f"x{prefix}-a", 2)  # no match: the whole name must match
    config = consumer_protocol_config() if protocol == "consumer" else group_config()
    member = Tracker(protocol)
    pattern = re.compile(rf"{prefix}-.*")
    async with running_member(kafka, unique(), pattern, member, config) as (group, _):
        await wait_for(lambda: member.owned_now() == {(first, 0), (first, 1)}, 60, "topic a")
        async with Client([kafka]) as client:
            await client.create_topic(second, 1)
        # The consumer protocol's broker resolves the pattern again; the classic member's
        # partition watcher sees the new match and rejoins.
        await wait_for(lambda: (second, 0) in member.owned_now(), 60, "the new matching topic")
        assert {t for t, _ in member.owned_now()} == {first, second}
        assert group.stats().protocol == protocol


@kafka_only
@pytest.mark.parametrize("classic", ["eager", "cooperative"])
async def test_online_migration_classic_to_consumer_and_back_one_member_at_a_time(
    kafka: str, classic: str
) -> None:
    topic = await new_kafka_topic(kafka, 6)
    group = unique()

    def classic_config() -> cg.Config:
        config = group_config()
        if classic == "cooperative":
            config.consumer.group.rebalance.strategies = [cg.CooperativeStickyAssignor()]
        return config

    produced = 0

    async def produce_more(count: int = 150) -> None:
        nonlocal produced
        await produce(kafka, topic, [str(i).encode() for i in range(produced, produced + count)])
        produced += count

    trackers: list[Tracker] = []

    def handled() -> int:
        return len({s for t in trackers for s in t.seen})

    async with contextlib.AsyncExitStack() as stack:
        slots: list[contextlib.AsyncExitStack] = []

        async def start(name: str, config: cg.Config) -> Tracker:
            tracker = Tracker(name)
            trackers.append(tracker)
            slot = contextlib.AsyncExitStack()
            await slot.enter_async_context(running_member(kafka, group, [topic], tracker, config))
            slots.append(slot)
            return tracker

        stack.push_async_callback(lambda: asyncio.gather(*(s.aclose() for s in slots)))
        live = [await start(f"classic-{i}", classic_config()) for i in range(3)]
        await produce_more()
        await wait_for(lambda: handled() >= produced, 60, "the first records")
        # Classic -> consumer, then consumer -> classic: one member at a time, same group.
        for step, (kind, make) in enumerate(
            [("consumer", consumer_protocol_config)] * 3 + [("classic", classic_config)] * 3
        ):
            index = step % 3
            old_slot = slots[trackers.index(live[index])]
            await old_slot.aclose()
            live[index] = await start(f"{kind}-{step}", make())
            await wait_for(
                lambda: (
                    sum(len(t.owned_now()) for t in live) == 6 and all(t.owned_now() for t in live)
                ),
                90,
                f"step {step}: every partition owned by the 3 live members",
            )
            await produce_more()
            await wait_for(lambda: handled() >= produced, 60, f"step {step}: every record")
    seen = offsets_by_partition([s for t in trackers for s in t.seen])
    assert sum(len(c) for c in seen.values()) == produced, "a message was lost"
    await committed_equals_end(kafka, group, topic)


@kafka_only
async def test_admin_commands_on_a_consumer_protocol_group(kafka: str) -> None:
    topic = await new_kafka_topic(kafka, 4)
    group = unique()
    await produce(kafka, topic, [b"v%d" % i for i in range(40)])
    handlers = [Tracker("a"), Tracker("b")]
    async with (
        running_member(kafka, group, [topic], handlers[0], consumer_protocol_config()),
        running_member(kafka, group, [topic], handlers[1], consumer_protocol_config()),
    ):
        await wait_for(
            lambda: (
                [len(h.owned_now()) for h in handlers] == [2, 2]
                and len({s for h in handlers for s in h.seen}) == 40
            ),
            60,
            "a 2/2 split, everything consumed",
        )
        described = await run_cli("describe", group, "-b", kafka, "--json")
        table = await run_cli("describe", group, "-b", kafka)
        refused = await run_cli("delete", group, "-b", kafka)
    assert described.code == 0, described.err
    desc = json.loads(described.out)
    assert (desc["group"], desc["group_protocol"], desc["protocol"]) == (
        group,
        "consumer",
        "uniform",
    )
    assert desc["group_epoch"] >= desc["assignment_epoch"] > 0
    assert len(desc["members"]) == 2
    for m in desc["members"]:
        assert m["member_epoch"] > 0 and m["member_protocol"] == "consumer"
        assert m["assignment"] == m["target_assignment"]  # reconciled
    assert sorted(p for m in desc["members"] for a in m["assignment"] for p in a["partitions"]) == [
        0,
        1,
        2,
        3,
    ]
    assert table.code == 0, table.err
    assert "consumer protocol (KIP-848), assignor uniform" in table.out
    assert all(m["member_id"] in table.out for m in desc["members"])
    assert refused.code == 1 and "still has members" in refused.err
    # Without members: lag, reset-offsets and delete work on it as on a classic group.
    lag = await run_cli("lag", group, "-b", kafka, "--json")
    assert lag.code == 0, lag.err
    assert sorted((r["partition"], r["committed"], r["lag"]) for r in json.loads(lag.out)) == [
        (p, 10, 0) for p in range(4)
    ]
    reset = await run_cli("reset-offsets", group, "-b", kafka, "-t", topic, "--to-earliest",
                          "--execute")  # fmt: skip
    assert reset.code == 0, reset.err
    lag = await run_cli("lag", group, "-b", kafka, "--json")
    assert sorted(r["lag"] for r in json.loads(lag.out)) == [10, 10, 10, 10]
    gone = await run_cli("delete", group, "-b", kafka)
    assert gone.code == 0, gone.err


class RdkafkaConsumerProtocolMember:
    """A confluent-kafka (librdkafka) member with ``group.protocol=consumer``, polling in a
    thread; records what it handles and its ownership intervals (monotonic clock)."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        ck = pytest.importorskip("confluent_kafka")
        self._consumer = ck.Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "group.protocol": "consumer",
                "auto.offset.reset": "earliest",
                "auto.commit.interval.ms": 200,
            }
        )
        self._topic = topic
        self.records: list[tuple[int, int]] = []
        self.intervals: dict[int, list[list[float | None]]] = {}
        self._stop = False
        self._thread: asyncio.Future[None] | None = None

    def owned(self) -> set[int]:
        return {p for p, spans in self.intervals.items() if spans and spans[-1][1] is None}

    def _on_assign(self, _consumer: object, partitions: list[Any]) -> None:
        for tp in partitions:
            self.intervals.setdefault(tp.partition, []).append([time.monotonic(), None])

    def _on_revoke(self, _consumer: object, partitions: list[Any]) -> None:
        for tp in partitions:
            self.intervals[tp.partition][-1][1] = time.monotonic()

    def _poll(self) -> None:
        self._consumer.subscribe(
            [self._topic],
            on_assign=self._on_assign,
            on_revoke=self._on_revoke,
            on_lost=self._on_revoke,
        )
        while not self._stop:
            msg = self._consumer.poll(0.1)
            if msg is not None and msg.error() is None:
                self.records.append((msg.partition(), msg.offset()))
        self._consumer.close()  # commits and leaves the group

    async def start(self) -> RdkafkaConsumerProtocolMember:
        self._thread = asyncio.get_running_loop().run_in_executor(None, self._poll)
        return self

    async def stop(self) -> None:
        self._stop = True
        assert self._thread is not None
        await asyncio.wait_for(self._thread, 30)


@kafka_only
async def test_mixed_consumer_protocol_group_with_librdkafka_and_java_members(
    kafka_cluster: KafkaCluster,
) -> None:
    bootstrap = kafka_cluster.bootstrap
    topic, group = unique("mixed"), unique("g-mixed")
    await kafka_cluster.create_topic(topic, PARTITIONS)
    ours = Ours()
    rdkafka = RdkafkaConsumerProtocolMember(bootstrap, group, topic)
    try:
        build("java")
    except PeerUnavailable as exc:
        pytest.skip(str(exc))
    java = PeerProcess("java", [
        "--bootstrap", bootstrap, "--topic", topic, "--group", group, "--protocol", "consumer",
        "--rebalance-timeout", "10", "--records",
    ])  # fmt: skip
    everything = set(range(PARTITIONS))

    def seen() -> set[tuple[int, int]]:
        return set(ours.records) | set(rdkafka.records) | set(java.records)

    async with running_member(bootstrap, group, [topic], ours, consumer_protocol_config()) as (
        member,
        _,
    ):
        async with feeding(bootstrap, topic) as feeder:
            await wait_for(lambda: ours.owned() == everything, 60, "ours to own all")
            # librdkafka joins, then the Java consumer: the coordinator splits three ways.
            await rdkafka.start()
            await wait_for(lambda: len(ours.owned()) == 3 and len(rdkafka.owned()) == 3, 60, "3/3")
            await java.start()
            await wait_for(
                lambda: (
                    [len(ours.owned()), len(rdkafka.owned()), len(java.owned())] == [2, 2, 2]
                    and ours.owned() | rdkafka.owned() | java.owned() == everything
                ),
                60,
                "2/2/2 over ours, librdkafka and Java",
            )
            # They leave in turn; ours ends with everything.
            await rdkafka.stop()
            await wait_for(lambda: len(ours.owned()) == 3 and len(java.owned()) == 3, 60, "3/3")
            assert await java.stop() == 0, java.stderr.decode()[-3000:]
            await wait_for(lambda: ours.owned() == everything, 60, "ours to own all again")
        # The feeder has stopped: ours reads what it produced last, then closes.
        acked = feeder.acked
        await wait_for(lambda: len(seen()) >= acked, 60, "every acknowledged record")
        assert member.stats().protocol == "consumer"
    assert len(seen()) == acked, "a record was lost"
    # Every hand-over was graceful (commit, then release): nothing was handled twice.
    assert len(ours.records) + len(rdkafka.records) + len(java.records) == acked
    assert_never_owned_twice(
        {
            "ours": ours.intervals,
            "librdkafka": rdkafka.intervals,
            "java": peer_intervals(java, time.monotonic()),
        }
    )
    await committed_equals_end(bootstrap, group, topic)


class StaleEpochProxy(RoutingProxy):
    """The member's only path to the broker; answers the next ``stale`` OffsetCommits with
    STALE_MEMBER_EPOCH for every partition (as Kafka does when a heartbeat moved the member
    to a newer epoch while the commit was in flight) after forwarding them (the broker
    committed: what matters is the member's reaction)."""

    def __init__(self, target_port: int) -> None:
        super().__init__(target_port)
        self.stale = 0
        self.commits_after_stale = 0

    def rewrite_response(self, key: int, version: int, client_id: str, frame: bytes) -> bytes:
        frame = super().rewrite_response(key, version, client_id, frame)
        if key != OffsetCommitRequest.API_KEY or version < 8:
            return frame
        if not self.stale:
            self.commits_after_stale += 1
            return frame
        self.stale -= 1
        response = next(c for c in OffsetCommitRequest._CLASSES if version == c.API_VERSION)
        resp = response.RESPONSE_TYPE.decode(frame[5:])  # flexible header: one tag byte
        stale = StaleMemberEpochError.errno
        resp.topics = [
            (topic, [(p, stale, tags) for p, _code, tags in parts], ttags)
            for topic, parts, ttags in resp.topics
        ]
        encoded: bytes = resp.encode()
        return frame[:5] + encoded


@kafka_only
async def test_a_commit_refused_as_stale_member_epoch_goes_again_under_the_current_epoch(
    kafka_cluster: KafkaCluster,
) -> None:
    topic = await new_kafka_topic(kafka_cluster.bootstrap, 2)
    group = unique()
    port = int(kafka_cluster.bootstrap.split(",")[0].rsplit(":", 1)[1])
    async with StaleEpochProxy(port) as proxy:
        member = Tracker("a")
        member.commit_each = True  # session.commit() in the handler, after every message
        async with running_member(
            proxy.address, group, [topic], member, consumer_protocol_config()
        ) as (group_member, task):
            await wait_for(lambda: len(member.owned_now()) == 2, 60, "both partitions")
            await produce(kafka_cluster.bootstrap, topic, [b"a%d" % i for i in range(10)])
            await wait_for(lambda: len(member.seen) == 10, 60, "the first 10")
            proxy.stale = 3
            await produce(kafka_cluster.bootstrap, topic, [b"b%d" % i for i in range(10)])
            await wait_for(lambda: len(member.seen) == 20, 60, "the next 10")
            await wait_for(lambda: proxy.commits_after_stale > 0, 30, "a commit after those")
            # Neither the handler (its commit() went again) nor the session saw an error.
            assert not task.done()
            assert [len(member.sessions), member.lost] == [1, []]
            assert group_member.state is cg.GroupState.STABLE
    await committed_equals_end(kafka_cluster.bootstrap, group, topic)


@kafka_only
async def test_offset_fetch_carries_the_member_epoch_and_a_stale_one_goes_again(
    kafka: str,
) -> None:
    topic = await new_kafka_topic(kafka, 2)
    group = unique()
    config = consumer_protocol_config()
    async with ClusterAdmin([kafka]) as admin:
        await admin.commit_offsets(group, {(topic, 0): 5})
    async with Client([kafka], config) as client:
        membership = ConsumerMembership(client, group, config)
        await membership.join([topic], owned={})
        epoch = membership.member_epoch
        assert epoch > 0

        def manager(member_id: str, member_epoch: int) -> OffsetManager:
            return OffsetManager(
                client,
                group,
                config,
                member_id=member_id,
                generation_id=member_epoch,
                member_fetch=True,
            )

        # The coordinator checks both: an epoch that is not the member's is refused...
        refused = manager(membership.member_id, epoch + 1)
        with pytest.raises(StaleMemberEpochError):
            await refused.fetch_committed([(topic, 0)])
        # ...and so is a member it does not know (the member's lost path).
        with pytest.raises(UnknownMemberIdError):
            await manager("not-a-member", epoch).fetch_committed([(topic, 0)])

        # A stale fetch goes again under the epoch the next heartbeat brings.
        offsets = manager(membership.member_id, epoch + 1)
        heartbeats = 0

        async def next_epoch() -> bool:
            nonlocal heartbeats
            heartbeats += 1
            await membership.heartbeat(None, {})
            offsets.generation_id = membership.member_epoch
            return True

        offsets.next_epoch = next_epoch
        committed = await offsets.fetch_committed([(topic, 0), (topic, 1)])
        assert committed == {(topic, 0): (5, ""), (topic, 1): (-1, "")}
        assert heartbeats == 1
        await membership.leave()


class EpochAheadProxy(RoutingProxy):
    """The member's only path to the broker; sends the next ``ahead`` OffsetCommits (v9:
    a member's) with a member epoch the member does not have yet, which Kafka refuses as
    STALE_MEMBER_EPOCH and does not commit (a commit built under an epoch that a
    heartbeat's answer replaced meanwhile, at Kafka 4.0-4.1, which check the epoch
    exactly)."""

    def __init__(self, target_port: int) -> None:
        super().__init__(target_port)
        self.ahead = 0
        self.refused = 0

    async def forward_request(self, link: ProxyLink, frame: bytes) -> None:
        key, version, _cid, id_len = struct.unpack_from(">hhih", frame, 0)
        if key == OffsetCommitRequest.API_KEY and version >= 9 and self.ahead:
            self.ahead -= 1
            self.refused += 1
            # Header v2: the client id, its (empty) tagged fields; then the group id
            # (a compact string) and the member epoch.
            at = 10 + max(id_len, 0) + 1
            buf = io.BytesIO(frame[at:])
            group_id_length = fetch_v12_wire.read_uvarint(buf) - 1
            at += buf.tell() + group_id_length
            (epoch,) = struct.unpack_from(">i", frame, at)
            frame = frame[:at] + struct.pack(">i", epoch + 1000) + frame[at + 4 :]
        await super().forward_request(link, frame)


@kafka_only
async def test_a_final_commit_refused_as_stale_member_epoch_goes_again_during_close(
    kafka_cluster: KafkaCluster,
) -> None:
    """close() commits the marks; a refusal as STALE_MEMBER_EPOCH (the epoch moved while
    the commit was on its way) sends it again under the epoch the still running
    heartbeat brings, within close()'s bound, instead of dropping the marks (which the
    next owner would read again)."""
    topic = await new_kafka_topic(kafka_cluster.bootstrap, 2)
    group = unique()
    port = int(kafka_cluster.bootstrap.split(",")[0].rsplit(":", 1)[1])
    config = consumer_protocol_config()
    config.consumer.offsets.auto_commit.enable = False  # the final commit is the only one
    async with EpochAheadProxy(port) as proxy:
        member = Tracker("a")
        group_member = cg.ConsumerGroup([proxy.address], group, config)
        task = asyncio.create_task(group_member.run([topic], member))
        try:
            await wait_for(lambda: len(member.owned_now()) == 2, 60, "both partitions")
            await produce(kafka_cluster.bootstrap, topic, [b"a%d" % i for i in range(10)])
            await wait_for(lambda: len(member.seen) == 10, 60, "the 10 records")
            proxy.ahead = 1
            started = time.monotonic()
            await group_member.close(timeout=10)
            assert time.monotonic() - started < 11
        finally:
            await group_member.close()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait_for(task, 10)
        assert proxy.refused == 1
        assert member.lost == []
    await committed_equals_end(kafka_cluster.bootstrap, group, topic)


class HidingProxy(RoutingProxy):
    """The member's only path to the broker. While ``hiding``, Metadata answers leave
    ``topic`` out (a broker whose metadata has not caught up with a topic just created,
    or a refresh that left it out); ``owned`` keeps what each ConsumerGroupHeartbeat
    reported as owned (topic id -> partitions), and ``None`` for one that left it as
    it was."""

    def __init__(self, target_port: int, topic: str) -> None:
        super().__init__(target_port)
        self.topic = topic
        self.hiding = True
        self.owned: list[dict[str, list[int]] | None] = []

    def rewrite_response(self, key: int, version: int, client_id: str, frame: bytes) -> bytes:
        frame = super().rewrite_response(key, version, client_id, frame)
        if key == 3 and self.hiding:
            return rewrite_metadata(version, frame, keep_topic=lambda t: t != self.topic)
        return frame

    async def forward_request(self, link: ProxyLink, frame: bytes) -> None:
        key, version, _cid, id_len = struct.unpack_from(">hhih", frame, 0)
        if key == ConsumerGroupHeartbeatRequest.API_KEY:
            request_type = next(
                c for c in ConsumerGroupHeartbeatRequest._CLASSES if version == c.API_VERSION
            )
            request = request_type.decode(frame[10 + max(id_len, 0) + 1 :])
            owned = request.topic_partitions
            self.owned.append(None if owned is None else {t: p for t, p, _ in owned})
        await super().forward_request(link, frame)


@kafka_only
async def test_a_target_naming_a_topic_the_metadata_learns_later_is_applied_then(
    kafka: str,
) -> None:
    """The coordinator assigns a topic created after the member subscribed to its name,
    before the member's metadata knows the topic's id. Once the metadata names it (on
    the heartbeat's own refresh or on any other), the next heartbeat hands the whole
    target over, although that heartbeat's answer carries no new assignment; and owned
    partitions are reported under their id even while a refresh leaves the topic out."""
    topic = f"t-{uuid.uuid4().hex[:10]}"
    group = unique()
    config = consumer_protocol_config()
    port = int(kafka.rsplit(":", 1)[1])
    async with HidingProxy(port, topic) as proxy, Client([proxy.address], config) as client:
        membership = ConsumerMembership(client, group, config)

        async def joined() -> bool:
            # The topic does not exist yet; a fresh cluster's coordinator may be loading.
            with contextlib.suppress(*COORDINATOR_LOST):
                await membership.join([topic], owned={})
                return True
            await asyncio.sleep(0.2)
            return False

        await wait_for_async(joined, 60, "the join")
        async with Client([kafka]) as creator:
            await creator.create_topic(topic, 3)

        async def heartbeat() -> dict[str, list[int]] | None:
            target = await membership.heartbeat(None, {})
            await asyncio.sleep(membership.heartbeat_interval)
            return target

        # The target names the topic's id, which the member's metadata cannot name.
        await wait_for_async(lambda: _unresolved(membership, heartbeat), 60, "a target")
        assert membership.assignment == {}
        proxy.hiding = False
        await client.refresh_metadata()  # as the metadata refresher would
        assert client.topic_id(topic) is not None
        # The next heartbeat's answer carries no assignment (it did not change): the
        # target is complete now, and is handed over.
        assert await membership.heartbeat(None, {}) == {topic: [0, 1, 2]}
        topic_id = client.topic_id(topic)
        # The member owns the three; a refresh that leaves the topic out must not make
        # the next heartbeat report them as released.
        proxy.hiding = True
        await client.refresh_metadata()
        assert client.topic_id(topic) is None
        await membership.heartbeat(None, {topic: [0, 1, 2]})
        assert proxy.owned[-1] == {topic_id: [0, 1, 2]}
        await membership.leave()


async def _unresolved(
    membership: ConsumerMembership, heartbeat: Callable[[], Awaitable[object]]
) -> bool:
    await heartbeat()
    return membership.unresolved


async def wait_for_async(probe: Callable[[], Awaitable[bool]], timeout: float, what: str) -> None:
    """Await ``probe`` (which paces itself) until it is true; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not await probe():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")


class FencingFetchProxy(RoutingProxy):
    """The member's only path to the broker; answers OffsetFetch number ``fence_at``
    (v9: the member's, counted from 1) with UNKNOWN_MEMBER_ID for the group, as Kafka
    does for a member it no longer knows."""

    def __init__(self, target_port: int, fence_at: int) -> None:
        super().__init__(target_port)
        self.fence_at = fence_at
        self.fetches = 0

    def rewrite_response(self, key: int, version: int, client_id: str, frame: bytes) -> bytes:
        frame = super().rewrite_response(key, version, client_id, frame)
        if key != OffsetFetchRequest.API_KEY or version < 9:
            return frame
        self.fetches += 1
        if self.fetches != self.fence_at:
            return frame
        response = next(c for c in OffsetFetchRequest._CLASSES if version == c.API_VERSION)
        resp = response.RESPONSE_TYPE.decode(frame[5:])  # flexible header: one tag byte
        resp.groups = [(g, [], UnknownMemberIdError.errno, tags) for g, _t, _e, tags in resp.groups]
        encoded: bytes = resp.encode()
        return frame[:5] + encoded


@kafka_only
async def test_an_offset_fetch_refused_as_unknown_member_loses_the_partitions_and_rejoins(
    kafka_cluster: KafkaCluster,
) -> None:
    bootstrap = kafka_cluster.bootstrap
    topic = await new_kafka_topic(bootstrap, 2)
    group = unique()
    port = int(bootstrap.split(",")[0].rsplit(":", 1)[1])
    async with FencingFetchProxy(port, fence_at=2) as proxy:
        member = Tracker("a")
        async with running_member(
            proxy.address, group, [topic], member, consumer_protocol_config()
        ) as (group_member, task):
            await wait_for(lambda: len(member.owned_now()) == 2, 60, "both partitions")
            await grow(bootstrap, topic, 4)
            # The fetch for the added partitions is refused: the member is fenced (on_lost,
            # no on_revoked), joins again with epoch 0 and takes all four.
            await wait_for(lambda: len(member.owned_now()) == 4, 60, "all four partitions")
            assert proxy.fetches >= 3
            assert flat(member.lost) == {(topic, 0), (topic, 1)}
            assert member.revoked == []
            assert len(member.sessions) == 2
            assert not task.done()
            assert group_member.state is cg.GroupState.STABLE


@kafka_only
async def test_the_cli_consumes_on_the_consumer_protocol(kafka: str) -> None:
    topic = await new_kafka_topic(kafka, 2)
    await produce(kafka, topic, [b"m%d" % i for i in range(10)])
    result = await run_cli("consume", "-b", kafka, "-g", unique(), "-t", topic,
                           "--from-beginning", "--group-protocol", "consumer", "-n", "10",
                           "--format", "json")  # fmt: skip
    assert result.code == 0, result.err
    assert sorted(json.loads(line)["offset"] for line in result.out.splitlines()) == sorted(
        [*range(5), *range(5)]
    )


async def test_the_cli_refuses_a_session_timeout_on_the_consumer_protocol() -> None:
    result = await run_cli("consume", "-b", "127.0.0.1:1", "-g", "g", "-t", "t",
                           "--group-protocol", "consumer", "--session-timeout", "30")  # fmt: skip
    assert result.code == 2
    assert "the broker sets it (group.consumer.session.timeout.ms)" in result.err
