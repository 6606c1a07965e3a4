"""Cooperative rebalancing (KIP-429) on the broker: kept claims run through rebalances."""

from __future__ import annotations

import asyncio
import struct
from collections import Counter
from collections.abc import Sequence

import pytest

import consumergroup as cg
from consumergroup.testing import EmbeddedBroker, free_port
from tests.conftest import TopicFactory, unique
from tests.helpers import KafkaFrameProxy, ProxyLink, RoutingProxy, produce
from tests.integration.group_support import (
    Recorder,
    group_config,
    offsets_by_partition,
    running_member,
    wait_for,
)

pytestmark = pytest.mark.slow

TP = tuple[str, int]


def cooperative_config(**overrides: object) -> cg.Config:
    """group_config() with cooperative-sticky as the only strategy."""
    config = group_config(**overrides)
    config.consumer.group.rebalance.strategies = [cg.CooperativeStickyAssignor()]
    return config


class Tracker(Recorder):
    """A Recorder that also counts consume_claim calls per partition and records the hooks."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.started: Counter[TP] = Counter()
        self.ended: Counter[TP] = Counter()
        self.assigned: list[list[TP]] = []
        self.revoked: list[list[TP]] = []
        self.lost: list[list[TP]] = []
        self.session: cg.ConsumerGroupSession | None = None

    async def setup(self, session: cg.ConsumerGroupSession) -> None:
        await super().setup(session)
        self.session = session

    def owned_now(self) -> set[TP]:
        """The claims of the running session (cooperative sessions change them in place)."""
        session = self.session
        if session is None or session.done.is_set():
            return set()
        return {(t, p) for t, parts in session.claims.items() for p in parts}

    async def consume_claim(
        self, session: cg.ConsumerGroupSession, claim: cg.ConsumerGroupClaim
    ) -> None:
        tp = (claim.topic, claim.partition)
        self.started[tp] += 1
        try:
            await super().consume_claim(session, claim)
        finally:
            self.ended[tp] += 1

    async def on_assigned(self, session: cg.ConsumerGroupSession, partitions: Sequence[TP]) -> None:
        self.assigned.append(list(partitions))

    async def on_revoked(self, session: cg.ConsumerGroupSession, partitions: Sequence[TP]) -> None:
        self.revoked.append(list(partitions))

    async def on_lost(self, partitions: Sequence[TP]) -> None:
        self.lost.append(list(partitions))


def flat(lists: list[list[TP]]) -> set[TP]:
    return {tp for chunk in lists for tp in chunk}


async def test_a_fourth_member_joins_and_leaves_without_stopping_unmoved_partitions(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    topic = await new_topic(partitions=12)
    group = unique()
    await produce(bootstrap, topic, [str(i).encode() for i in range(600)])
    members = [Tracker(n) for n in "abc"]
    config = cooperative_config()
    async with (
        running_member(bootstrap, group, [topic], members[0], config) as (ga, _),
        running_member(bootstrap, group, [topic], members[1], cooperative_config()) as (gb, _),
        running_member(bootstrap, group, [topic], members[2], cooperative_config()) as (gc, _),
    ):
        await wait_for(
            lambda: [len(m.owned_now()) for m in members] == [4, 4, 4], 60, "a 4/4/4 split"
        )
        before = {m.name: m.owned_now() for m in members}
        sessions = [m.session for m in members]
        generations = [ga.stats().generation_id, gb.stats().generation_id, gc.stats().generation_id]
        d = Tracker("d")
        async with running_member(bootstrap, group, [topic], d, cooperative_config()):
            await wait_for(
                lambda: [len(m.owned_now()) for m in [*members, d]] == [3, 3, 3, 3],
                60,
                "a 3/3/3/3 split",
            )
            await produce(bootstrap, topic, [str(i).encode() for i in range(600, 900)])
            during = {m.name: m.owned_now() for m in members}
            moved_to_d = d.owned_now()
        await wait_for(
            lambda: sum(len(m.owned_now()) for m in members) == 12, 60, "d's partitions back"
        )
        await produce(bootstrap, topic, [str(i).encode() for i in range(900, 1200)])
        await wait_for(
            lambda: len({s for m in [*members, d] for s in m.seen}) >= 1200, 60, "every message"
        )
        # Still the same session objects, in later generations.
        assert [m.session for m in members] == sessions
        assert [len(m.sessions) for m in members] == [1, 1, 1]
        later = [ga.stats().generation_id, gb.stats().generation_id, gc.stats().generation_id]
        assert all(new > old for new, old in zip(later, generations, strict=True))
        for m in members:
            kept = before[m.name] & during[m.name]
            assert len(kept) == 3, (m.name, before[m.name], during[m.name])
            # Partitions that did not move were never revoked and their handler never ended.
            assert not kept & flat(m.revoked), (m.name, m.revoked)
            assert all(m.started[tp] == 1 and m.ended[tp] == 0 for tp in kept), m.name
            # What it gave d it revoked, exactly once; nothing was lost.
            assert flat(m.revoked) == before[m.name] - during[m.name]
            assert not m.lost
            # The hooks saw the incremental sets: the first assignment, then only additions.
            # (A member that joined while the others still held what it was to get was
            # first assigned nothing, then its share: the empty call is an increment too.)
            first = next(i for i, got in enumerate(m.assigned) if got)
            assert set(m.assigned[first]) == before[m.name]
            assert flat(m.assigned[first + 1 :]) == m.owned_now() - during[m.name]
        assert moved_to_d == set().union(*before.values()) - set().union(*during.values())
        assert set(d.assigned[0]) | flat(d.assigned[1:]) == moved_to_d
    handled = offsets_by_partition([s for m in [*members, d] for s in m.seen])
    assert sum(len(c) for c in handled.values()) == 1200, "a message was lost"
    # Repeats only where a partition changed owner (its uncommitted window).
    repeated = {(t, p) for (t, p), c in handled.items() if max(c.values()) > 1}
    assert repeated <= moved_to_d, repeated


class RdkafkaMember:
    """A confluent-kafka (librdkafka) cooperative-sticky member polling in a thread."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        ck = pytest.importorskip("confluent_kafka")
        self._consumer = ck.Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "partition.assignment.strategy": "cooperative-sticky",
                "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 500,
                "auto.offset.reset": "earliest",
                "auto.commit.interval.ms": 200,
            }
        )
        self._topic = topic
        self.owned: set[TP] = set()
        self.revoked: list[list[TP]] = []
        self.seen: list[tuple[str, int, int]] = []
        self._stop = False
        self._thread: asyncio.Future[None] | None = None

    def _on_assign(self, _consumer: object, partitions: list[object]) -> None:
        self.owned |= {(p.topic, p.partition) for p in partitions}  # type: ignore[attr-defined]

    def _on_revoke(self, _consumer: object, partitions: list[object]) -> None:
        gone = [(p.topic, p.partition) for p in partitions]  # type: ignore[attr-defined]
        self.revoked.append(gone)
        self.owned -= set(gone)

    def _poll(self) -> None:
        self._consumer.subscribe(
            [self._topic], on_assign=self._on_assign, on_revoke=self._on_revoke
        )
        while not self._stop:
            msg = self._consumer.poll(0.1)
            if msg is not None and msg.error() is None:
                self.seen.append((msg.topic(), msg.partition(), msg.offset()))
        self._consumer.close()  # commits and leaves the group

    async def __aenter__(self) -> RdkafkaMember:
        self._thread = asyncio.get_running_loop().run_in_executor(None, self._poll)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._stop = True
        assert self._thread is not None
        await asyncio.wait_for(self._thread, 30)


@pytest.mark.parametrize("leader", ["ours", "librdkafka"])
async def test_mixed_group_with_a_librdkafka_cooperative_member(
    bootstrap: str, new_topic: TopicFactory, leader: str
) -> None:
    """Tansu makes the first member to join the leader: each side leads once."""
    topic = await new_topic(partitions=6)
    group = unique()
    await produce(bootstrap, topic, [str(i).encode() for i in range(300)])
    ours = Tracker("ours")
    theirs = RdkafkaMember(bootstrap, group, topic)
    if leader == "librdkafka":
        async with theirs:
            await wait_for(lambda: len(theirs.owned) == 6, 60, "librdkafka to own everything")
            async with running_member(bootstrap, group, [topic], ours, cooperative_config()):
                await wait_for(
                    lambda: len(ours.owned_now()) == 3 and len(theirs.owned) == 3, 60, "3/3"
                )
                assert not ours.owned_now() & theirs.owned
                # librdkafka revoked only what moved to us, and we started it only after.
                assert flat(theirs.revoked) == ours.owned_now()
                assert flat(ours.assigned) == ours.owned_now()
                await produce(bootstrap, topic, [str(i).encode() for i in range(300, 600)])
                await wait_for(
                    lambda: len({s for s in ours.seen + theirs.seen}) >= 600, 60, "all messages"
                )
                assert len(ours.sessions) == 1 and not ours.revoked
    else:
        async with running_member(bootstrap, group, [topic], ours, cooperative_config()):
            await wait_for(lambda: len(ours.owned_now()) == 6, 60, "ours to own everything")
            first = ours.owned_now()
            async with theirs:
                await wait_for(
                    lambda: len(ours.owned_now()) == 3 and len(theirs.owned) == 3, 60, "3/3"
                )
                assert not ours.owned_now() & theirs.owned
                kept = ours.owned_now()
                await produce(bootstrap, topic, [str(i).encode() for i in range(300, 600)])
                await wait_for(
                    lambda: len({s for s in ours.seen + theirs.seen}) >= 600, 60, "all messages"
                )
            # Our kept partitions ran throughout; we revoked exactly what librdkafka took.
            assert all(ours.started[tp] == 1 and ours.ended[tp] == 0 for tp in kept)
            assert flat(ours.revoked) == first - kept
            assert len(ours.sessions) == 1
    handled = offsets_by_partition(ours.seen + theirs.seen)
    assert sum(len(c) for c in handled.values()) == 600, "a message was lost"


async def test_rolling_upgrade_eager_and_cooperative_members_share_a_group(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    """Java's upgrade path: a member listing [cooperative-sticky, range] is eager (it revokes
    everything at each rebalance) while the group already uses cooperative-sticky; members
    listing only cooperative-sticky keep their claims meanwhile."""
    topic = await new_topic(partitions=6)
    group = unique()
    await produce(bootstrap, topic, [str(i).encode() for i in range(300)])
    mixed = group_config()
    mixed.consumer.group.rebalance.strategies = [cg.CooperativeStickyAssignor(), cg.RangeAssignor()]
    upgrading, upgraded, late = Tracker("upgrading"), Tracker("upgraded"), Tracker("late")
    async with (
        running_member(bootstrap, group, [topic], upgrading, mixed),
        running_member(bootstrap, group, [topic], upgraded, cooperative_config()),
    ):
        await wait_for(
            lambda: len(upgrading.owned_now()) == 3 and len(upgraded.owned_now()) == 3, 60, "3/3"
        )
        kept = upgraded.owned_now()
        eager_sessions = len(upgrading.sessions)
        async with running_member(bootstrap, group, [topic], late, cooperative_config()):
            await wait_for(
                lambda: [len(m.owned_now()) for m in (upgrading, upgraded, late)] == [2, 2, 2],
                60,
                "2/2/2",
            )
            owners = [m.owned_now() for m in (upgrading, upgraded, late)]
            assert set().union(*owners) == {(topic, p) for p in range(6)}
            assert sum(map(len, owners)) == 6, "a partition owned twice"
            await produce(bootstrap, topic, [str(i).encode() for i in range(300, 600)])
            await wait_for(
                lambda: len({s for m in (upgrading, upgraded, late) for s in m.seen}) >= 600,
                60,
                "all messages",
            )
            # The eager member started a new session for the rebalance; the cooperative one
            # kept its session and the claims it kept ran throughout.
            assert len(upgrading.sessions) > eager_sessions
            assert len(upgraded.sessions) == 1
            stayed = kept & upgraded.owned_now()
            assert stayed and all(upgraded.started[tp] == 1 for tp in stayed)
            assert not stayed & flat(upgraded.revoked)
    handled = offsets_by_partition([s for m in (upgrading, upgraded, late) for s in m.seen])
    assert sum(len(c) for c in handled.values()) == 600, "a message was lost"


class LateCommitProxy(KafkaFrameProxy):
    """Once ``armed``, holds ``client_id``'s OffsetCommit requests until its next SyncGroup
    answer has gone back to it: commits sent with the old generation reach the broker (and
    their refusal reaches the member) after its cooperative rejoin returned."""

    def __init__(self, target_port: int, listen_port: int, client_id: str) -> None:
        super().__init__(target_port, listen_port)
        self.client_id = client_id
        self.armed = False
        self.held: list[tuple[ProxyLink, bytes]] = []
        self.released = 0
        self._synced = False  # the response being forwarded is client_id's SyncGroup answer

    async def forward_request(self, link: ProxyLink, frame: bytes) -> None:
        key, _version, cid, _ = struct.unpack_from(">hhih", frame, 0)
        if self.armed and key == 8 and link.pending[cid][2] == self.client_id:
            self.held.append((link, frame))
            return
        await super().forward_request(link, frame)

    async def forward_response(self, link: ProxyLink, frame: bytes) -> None:
        await super().forward_response(link, frame)
        if self.armed and self._synced:
            self.armed = False
            for held_link, held in self.held:
                self.released += 1
                await super().forward_request(held_link, held)
            self.held.clear()

    def rewrite_response(self, key: int, version: int, client_id: str, frame: bytes) -> bytes:
        self._synced = key == 14 and client_id == self.client_id
        return frame


@pytest.mark.parametrize("manual", [False, True], ids=["auto-commit", "session.commit"])
async def test_a_commit_refused_for_the_old_generation_after_a_rejoin_does_not_fence(
    manual: bool,
) -> None:
    """A commit sent before/while a cooperative rejoin is answered ILLEGAL_GENERATION (or
    REBALANCE_IN_PROGRESS) after the join returned: the session goes on, its kept claims keep
    running and their marks are committed under the new generation (by the auto-commit, or
    by the handler's own ``session.commit()``, which does not raise)."""
    proxy_port = free_port()
    topic = unique("latecommit")
    group = unique()
    async with (
        EmbeddedBroker(advertised_port=proxy_port) as broker,
        LateCommitProxy(broker.port, proxy_port, client_id="a") as proxy,
    ):
        await broker.create_topic(topic, 4)
        bootstrap = f"127.0.0.1:{proxy_port}"
        await produce(bootstrap, topic, [str(i).encode() for i in range(400)])
        a, b = Tracker("a"), Tracker("b")
        a.delay = 0.02  # ~8 s of marks: commits go out before and during the rejoin
        a.commit_each = manual
        config_a = cooperative_config(
            client_id="a", consumer__offsets__auto_commit__enable=not manual
        )
        async with running_member(bootstrap, group, [topic], a, config_a):
            await wait_for(lambda: len(a.owned_now()) == 4 and len(a.seen) > 9, 60, "a's claims")
            session = a.session
            assert session is not None
            before = a.owned_now()
            proxy.armed = True
            config_b = cooperative_config(client_id="b")
            async with running_member(bootstrap, group, [topic], b, config_b):
                await wait_for(
                    lambda: [len(a.owned_now()), len(b.owned_now())] == [2, 2], 60, "a 2/2 split"
                )
                assert proxy.released > 0, "no commit was held across the rejoin"
                kept = a.owned_now()
                assert a.session is session and not session.done.is_set(), session.end_reason
                assert not a.lost
                assert all(a.started[tp] == 1 and a.ended[tp] == 0 for tp in kept), a.started
                assert flat(a.revoked) == before - kept
                # The refused marks go out again under the new generation.
                await wait_for(
                    lambda: all(
                        session.offsets.committed(*tp) == session.offsets.marked(*tp) > 0
                        for tp in kept
                    ),
                    30,
                    "the kept partitions' marks committed",
                )
        assert len(a.sessions) == 1 and not a.lost


#: The group coordinator's APIs: JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
#: OffsetCommit, OffsetFetch, FindCoordinator.
COORDINATOR_APIS = frozenset({11, 14, 12, 13, 8, 9, 10})


class CoordinatorGoneProxy(RoutingProxy):
    """A member's only path to the broker. ``swallow`` holds API keys whose requests are
    read and never answered (a coordinator gone silent for this member, while the
    partition leaders still serve its fetches); ``swallowed`` counts them per key."""

    def __init__(self, target_port: int) -> None:
        super().__init__(target_port)
        self.swallow: frozenset[int] = frozenset()
        self.swallowed: Counter[int] = Counter()

    async def forward_request(self, link: ProxyLink, frame: bytes) -> None:
        (key,) = struct.unpack_from(">h", frame, 0)
        if key in self.swallow:
            self.swallowed[key] += 1
            return
        await super().forward_request(link, frame)


async def test_a_member_whose_rejoins_keep_failing_is_lost_within_its_session(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    """The coordinator goes silent for a cooperative member while it rejoins: every join
    attempt fails, and the coordinator hands its partitions to the others. The member
    must let them go (on_lost) about a session timeout after its coordinator last
    answered, as it does when heartbeats fail: a join in flight is no sign of life."""
    topic = await new_topic(partitions=4)
    group = unique()
    # A 5 s rebalance timeout (not group_config's 10 s) for all three: the coordinator
    # drops a's join, and a's own deadline for a join in flight comes, 5 s sooner each.
    # Without the fix a never lets go however short the timeouts: a join in flight
    # counted as a sign of life.
    fast = {"consumer__group__rebalance__timeout": 5.0}
    config = cooperative_config(**fast)
    config.net.read_timeout = 3.0
    port = int(bootstrap.rsplit(":", 1)[1])
    a, b, c = Tracker("a"), Tracker("b"), Tracker("c")
    async with (
        CoordinatorGoneProxy(port) as proxy,
        running_member(proxy.address, group, [topic], a, config),
        running_member(bootstrap, group, [topic], b, cooperative_config(**fast)),
    ):
        await wait_for(lambda: [len(a.owned_now()), len(b.owned_now())] == [2, 2], 60, "2/2")
        kept = a.owned_now()
        # Its joins go unanswered from now on; a third member makes the group rebalance.
        proxy.swallow = frozenset({11})
        async with running_member(bootstrap, group, [topic], c, cooperative_config(**fast)):
            await wait_for(lambda: proxy.swallowed[11] > 0, 60, "a's rejoin")
            proxy.swallow = COORDINATOR_APIS  # and the rest of its coordinator traffic
            silent = asyncio.get_running_loop().time()
            await wait_for(
                lambda: len(b.owned_now()) + len(c.owned_now()) == 4, 60, "b and c own all"
            )
            session = config.consumer.group.session_timeout
            rebalance = config.consumer.group.rebalance.timeout
            bound = rebalance + config.net.read_timeout + session + 5.0
            await wait_for(lambda: bool(a.lost), bound, "a to let its partitions go")
            assert flat(a.lost) == kept
            assert asyncio.get_running_loop().time() - silent < bound
            assert a.owned_now() == set()
