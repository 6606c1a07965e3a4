"""The assignment reconciler on the broker: the order of hooks and claims on every path,
one revocation per partition, and a cooperative session that survives what only delays
its rejoin."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
from collections.abc import AsyncIterator, Sequence

import pytest

import consumergroup as cg
from consumergroup.errors import RebalanceInProgressError
from consumergroup.group.ending import EndCause
from consumergroup.testing import EmbeddedBroker, KafkaCluster, free_port
from tests.conftest import TopicFactory, unique
from tests.helpers import KafkaFrameProxy, ProxyLink, RoutingProxy, produce
from tests.integration.group_support import running_member, wait_for
from tests.integration.test_cooperative import TP, Tracker, cooperative_config, flat
from tests.integration.test_examples import committed
from tests.integration.test_topic_changes import grow

pytestmark = pytest.mark.slow


class Journal(Tracker):
    """A Tracker that journals hooks and handler starts/ends in order, and can hold
    ``setup`` or the handlers' return."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.events: list[tuple[str, object]] = []
        self.setup_gate: asyncio.Event | None = None  # setup waits for it
        self.linger: asyncio.Event | None = None  # handlers wait for it once their stream ends
        self.ignore_stream_end = False  # handlers never return by themselves

    async def setup(self, session: cg.ConsumerGroupSession) -> None:
        self.events.append(("setup-start", None))
        if self.setup_gate is not None:
            await self.setup_gate.wait()
        await super().setup(session)
        self.events.append(("setup-end", None))

    async def consume_claim(
        self, session: cg.ConsumerGroupSession, claim: cg.ConsumerGroupClaim
    ) -> None:
        tp = (claim.topic, claim.partition)
        self.events.append(("claim-start", tp))
        try:
            await super().consume_claim(session, claim)
            self.events.append(("stream-end", tp))
            if self.linger is not None:
                await self.linger.wait()
            if self.ignore_stream_end:
                await asyncio.Event().wait()
        except asyncio.CancelledError:
            await asyncio.shield(asyncio.sleep(0.3))  # a handler that takes its time to stop
            raise
        finally:
            self.events.append(("claim-end", tp))

    async def on_assigned(self, session: cg.ConsumerGroupSession, partitions: Sequence[TP]) -> None:
        self.events.append(("assigned", tuple(partitions)))
        await super().on_assigned(session, partitions)

    async def on_revoked(self, session: cg.ConsumerGroupSession, partitions: Sequence[TP]) -> None:
        self.events.append(("revoked-start", tuple(partitions)))
        await asyncio.sleep(0.2)  # long enough for a concurrent call to overlap
        await super().on_revoked(session, partitions)
        self.events.append(("revoked-end", tuple(partitions)))


def running_handlers(events: list[tuple[str, object]], upto: int) -> set[object]:
    """Partitions whose handler had started and not ended before ``events[upto]``."""
    running: set[object] = set()
    for kind, tp in events[:upto]:
        if kind == "claim-start":
            running.add(tp)
        elif kind == "claim-end":
            running.discard(tp)
    return running


def check_revocations(member: Journal) -> None:
    """Each revoked partition was revoked once, never concurrently, and only after its
    handler had ended."""
    revoked = [tp for chunk in member.revoked for tp in chunk]
    assert len(revoked) == len(set(revoked)), f"a partition revoked twice: {member.revoked}"
    depth = 0
    for i, (kind, what) in enumerate(member.events):
        if kind == "revoked-start":
            depth += 1
            assert depth == 1, "on_revoked ran twice at once"
            still = running_handlers(member.events, i) & set(what)  # type: ignore[arg-type]
            assert not still, f"on_revoked({what}) while their handlers ran: {still}"
        elif kind == "revoked-end":
            depth -= 1


async def test_partitions_added_during_setup_start_after_it(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    """A owns all 4 partitions; B joins and its setup is still running when A closes and
    the next generation gives B everything: B's new claims start after setup, with no
    on_assigned during setup, and B's run() goes on."""
    topic = await new_topic(partitions=4)
    group = unique()
    await produce(bootstrap, topic, [str(i).encode() for i in range(200)])
    a, b = Journal("a"), Journal("b")
    b.setup_gate = asyncio.Event()
    async with running_member(bootstrap, group, [topic], a, cooperative_config()) as (ga, _):
        await wait_for(lambda: len(a.owned_now()) == 4, 60, "a owns everything")
        async with running_member(bootstrap, group, [topic], b, cooperative_config()) as (gb, tb):
            await wait_for(lambda: ("setup-start", None) in b.events, 60, "b in setup")
            await asyncio.wait_for(ga.close(), 30)
            await wait_for(
                lambda: sum(map(len, gb._membership.assignment.values())) == 4, 60, "b gets all"
            )
            await asyncio.sleep(1.0)  # the new partitions reach the reconciler during setup
            assert not tb.done(), tb
            b.setup_gate.set()
            await wait_for(lambda: len(b.owned_now()) == 4, 60, "b's claims")
            await wait_for(lambda: all(b.started[tp] for tp in b.owned_now()), 30, "b's handlers")
            assert not tb.done() and not b.lost
    kinds = [kind for kind, _ in b.events]
    setup_at, setup_end = kinds.index("setup-start"), kinds.index("setup-end")
    assert kinds[0] == "assigned" and setup_at == 1, b.events
    assert "assigned" not in kinds[setup_at:setup_end], b.events  # nothing during setup
    assert kinds.index("claim-start") > setup_end, b.events
    started = {tp for kind, tp in b.events if kind == "claim-start"}
    announced = {tp for kind, parts in b.events if kind == "assigned" for tp in parts}  # type: ignore[attr-defined]
    assert started <= announced


async def test_the_session_ending_during_a_cooperative_revoke_revokes_each_partition_once(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    """A's handlers linger once their stream ends; B joins (A revokes 2) and A closes
    while those 2 drain: on_revoked runs once per partition, never twice at once, and
    only after the handlers ended."""
    topic = await new_topic(partitions=4)
    group = unique()
    await produce(bootstrap, topic, [str(i).encode() for i in range(200)])
    a, b = Journal("a"), Journal("b")
    a.linger = asyncio.Event()
    config = cooperative_config()
    config.consumer.group.rebalance.timeout = 20.0
    async with running_member(bootstrap, group, [topic], a, config) as (ga, _):
        await wait_for(lambda: len(a.owned_now()) == 4 and len(a.seen) > 0, 60, "a owns all")
        async with running_member(bootstrap, group, [topic], b, cooperative_config()):
            await wait_for(
                lambda: any(kind == "stream-end" for kind, _ in a.events), 60, "a revoking"
            )
            close = asyncio.create_task(ga.close())
            await asyncio.sleep(0.5)  # the end meets the revocation in progress
            a.linger.set()
            await asyncio.wait_for(close, 30)
    check_revocations(a)
    assert flat(a.revoked) == {(topic, p) for p in range(4)}
    assert not a.lost


async def test_on_revoked_waits_for_a_cancelled_handler_to_end(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    """A handler that ignores the end of its stream is cancelled past its budget, and
    on_revoked runs only once it has ended (it takes a while to stop)."""
    topic = await new_topic(partitions=2)
    group = unique()
    await produce(bootstrap, topic, [str(i).encode() for i in range(20)])
    a, b = Journal("a"), Journal("b")
    a.ignore_stream_end = True
    config = cooperative_config()
    config.consumer.group.rebalance.timeout = 3.0  # handlers drain for ~1.5 s
    async with running_member(bootstrap, group, [topic], a, config):
        await wait_for(lambda: len(a.owned_now()) == 2, 60, "a owns both")
        async with running_member(bootstrap, group, [topic], b, cooperative_config()):
            await wait_for(lambda: len(b.owned_now()) == 1, 60, "b takes one")
            check_revocations(a)
            assert len(flat(a.revoked)) == 1
        a.ignore_stream_end = False
    check_revocations(a)


async def test_a_revoked_claim_in_restart_backoff_is_revoked_at_once(
    bootstrap: str, new_topic: TopicFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """A's handlers return at once (restarted after a long backoff): a partition revoked
    meanwhile does not wait for the backoff, nor for its drain budget."""
    topic = await new_topic(partitions=2)
    group = unique()

    class Returns(Journal):
        async def consume_claim(
            self, session: cg.ConsumerGroupSession, claim: cg.ConsumerGroupClaim
        ) -> None:
            self.started[(claim.topic, claim.partition)] += 1

    a, b = Returns("a"), Journal("b")
    config = cooperative_config(consumer__retry__backoff=60.0)
    config.consumer.group.rebalance.timeout = 30.0
    caplog.set_level(logging.WARNING, "consumergroup")
    async with running_member(bootstrap, group, [topic], a, config):
        await wait_for(lambda: sum(a.started.values()) == 2, 60, "a's handlers returned")
        async with running_member(bootstrap, group, [topic], b, cooperative_config()):
            await wait_for(lambda: len(b.owned_now()) == 1, 60, "b takes one")
            assert len(flat(a.revoked)) == 1
    assert not [r for r in caplog.records if "did not return" in r.getMessage()]
    assert not a.lost


class JoinProxy(KafkaFrameProxy):
    """Once armed, answers ``client_id``'s next ``refusals`` JoinGroups REBALANCE_IN_PROGRESS
    (what a scale-out can answer several times in a row), and holds the answers of its next
    ``holds`` JoinGroups ``hold`` seconds, as a coordinator waiting for a slow member does
    (answers on that connection come in order: later ones wait behind it)."""

    def __init__(self, target_port: int, listen_port: int, client_id: str) -> None:
        super().__init__(target_port, listen_port)
        self.client_id = client_id
        self.refusals = self.refused = 0
        self.holds = self.held = 0
        self.hold = 0.0
        self._hold_next = False

    def rewrite_response(self, key: int, version: int, client_id: str, frame: bytes) -> bytes:
        ours = key == 11 and client_id == self.client_id
        self._hold_next = ours and self.held < self.holds
        if not ours or self.refused >= self.refusals:
            return frame
        self.refused += 1
        at = 8 if version < 6 else 9  # correlation id, (tagged fields,) throttle time
        return frame[:at] + struct.pack(">h", RebalanceInProgressError.errno) + frame[at + 2 :]

    async def forward_response(self, link: ProxyLink, frame: bytes) -> None:
        if self._hold_next:
            self._hold_next = False
            self.held += 1
            await asyncio.sleep(self.hold)
        await super().forward_response(link, frame)


@contextlib.asynccontextmanager
async def behind_a_join_proxy(records: int) -> AsyncIterator[tuple[str, str, JoinProxy]]:
    """An embedded broker with a 4-partition topic of ``records`` records, reached through
    a JoinProxy for client "a": (bootstrap, topic, proxy)."""
    proxy_port = free_port()
    topic = unique("joins")
    async with (
        EmbeddedBroker(advertised_port=proxy_port) as broker,
        JoinProxy(broker.port, proxy_port, client_id="a") as proxy,
    ):
        await broker.create_topic(topic, 4)
        bootstrap = f"127.0.0.1:{proxy_port}"
        await produce(bootstrap, topic, [str(i).encode() for i in range(records)])
        yield bootstrap, topic, proxy


async def test_transient_rejoin_failures_keep_the_cooperative_session() -> None:
    """Every join attempt of a rejoin answered REBALANCE_IN_PROGRESS: the member keeps its
    partitions and rejoins (as Java does), it does not lose them."""
    group = unique()
    async with behind_a_join_proxy(100) as (bootstrap, topic, proxy):
        a, b = Journal("a"), Journal("b")
        config_a = cooperative_config(client_id="a")
        config_a.consumer.group.rebalance.retry.max = 1
        async with running_member(bootstrap, group, [topic], a, config_a) as (_, ta):
            await wait_for(lambda: len(a.owned_now()) == 4, 60, "a owns everything")
            session = a.session
            proxy.refusals = 6  # three whole rejoins (two attempts each) fail
            async with running_member(bootstrap, group, [topic], b, cooperative_config()):
                await wait_for(lambda: len(b.owned_now()) == 2, 90, "a 2/2 split")
                assert proxy.refused == 6
                kept = a.owned_now()
                assert a.session is session and not ta.done()
                assert all(a.started[tp] == 1 and a.ended[tp] == 0 for tp in kept)
        assert not a.lost


async def test_auto_commits_during_a_held_rejoin_do_not_break_it() -> None:
    """The coordinator holds A's JoinGroup answers longer than a commit may take: commits
    during the rejoin must neither wait (and time out) behind them nor fail them."""
    group = unique()
    async with behind_a_join_proxy(400) as (bootstrap, topic, proxy):
        a, b = Journal("a"), Journal("b")
        a.delay = 0.02  # marks keep coming during the rejoin
        config_a = cooperative_config(client_id="a", net__read_timeout=1.0)
        config_a.consumer.group.rebalance.retry.max = 1
        async with running_member(bootstrap, group, [topic], a, config_a) as (_, ta):
            await wait_for(lambda: len(a.owned_now()) == 4 and len(a.seen) > 9, 60, "a's claims")
            session = a.session
            proxy.hold, proxy.holds = 3.0, 2
            async with running_member(bootstrap, group, [topic], b, cooperative_config()):
                await wait_for(lambda: len(b.owned_now()) == 2, 60, "a 2/2 split")
                assert proxy.held >= 1
                assert a.session is session and not ta.done()
            assert not a.lost


async def test_close_during_a_held_rejoin_commits_at_once(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    """close() while the coordinator holds the member's JoinGroup: the final commit does
    not wait behind the held join, it goes out within close()'s short bound."""
    topic = await new_topic(partitions=2)
    group = unique()
    await produce(bootstrap, topic, [str(i).encode() for i in range(40)])
    a, b = Journal("a"), Journal("b")
    config = cooperative_config(consumer__offsets__auto_commit__enable=False)
    config.consumer.group.session_timeout = 10.0  # the embedded broker holds joins ~5 s
    member = cg.ConsumerGroup([bootstrap], group, config)
    task = asyncio.create_task(member.run([topic], a))
    try:
        await wait_for(lambda: len(a.seen) == 40, 60, "a read everything")
        async with running_member(bootstrap, group, [topic], b, cooperative_config()):
            await wait_for(lambda: a.session is not None and a.session._joining, 60, "a rejoins")
            await asyncio.sleep(0.5)
            await asyncio.wait_for(member.close(timeout=3.0), 10)
    finally:
        await member.close()
        await asyncio.wait_for(task, 10)
    assert sum((await committed(bootstrap, group, topic, 2)).values()) == 40


class HeldJoinProxy(RoutingProxy):
    """A member's only path to the broker. Once ``armed``, holds the answer of its next
    JoinGroup (the coordinator has formed the new generation from that join) until
    ``release`` is set, as a loaded network or member does; ``holding`` is set meanwhile."""

    def __init__(self, target_port: int) -> None:
        super().__init__(target_port)
        self.armed = False
        self.holding = asyncio.Event()
        self.release = asyncio.Event()
        self._hold_next = False

    def rewrite_response(self, key: int, version: int, client_id: str, frame: bytes) -> bytes:
        self._hold_next = self.armed and key == 11
        self.armed = self.armed and not self._hold_next
        return super().rewrite_response(key, version, client_id, frame)

    async def forward_response(self, link: ProxyLink, frame: bytes) -> None:
        if self._hold_next:
            self._hold_next = False
            self.holding.set()
            await self.release.wait()
        await super().forward_response(link, frame)


async def test_partitions_added_during_a_rejoin_keep_the_final_commit(
    kafka_cluster: KafkaCluster,
) -> None:
    """Partitions are added while a cooperative member's JoinGroup answer is on its way
    (the coordinator formed the new generation from that join): the member's partition
    watch ends its session, and its final commit is not lost to ILLEGAL_GENERATION, it
    goes out under the generation the join brings, so nothing is read twice.

    Apache Kafka only: the embedded Tansu broker has no CreatePartitions."""
    bootstrap = kafka_cluster.bootstrap
    topic = unique("grow")
    await kafka_cluster.create_topic(topic, 2)
    await produce(bootstrap, topic, [str(i).encode() for i in range(40)])
    group = unique()
    a, b = Journal("a"), Journal("b")
    config = cooperative_config(consumer__offsets__auto_commit__enable=False)
    port = int(bootstrap.rsplit(":", 1)[1])
    async with (
        HeldJoinProxy(port) as proxy,
        running_member(proxy.address, group, [topic], a, config),
    ):
        await wait_for(lambda: len(a.seen) == 40, 60, "a read everything")
        session = a.session
        assert session is not None
        proxy.armed = True
        config_b = cooperative_config(consumer__offsets__auto_commit__enable=False)
        async with running_member(bootstrap, group, [topic], b, config_b):
            await wait_for(proxy.holding.is_set, 60, "a's rejoin answered (and held)")
            await grow(bootstrap, topic, 3)
            await wait_for(session.done.is_set, 30, "a's partition watch to end its session")
            assert session.end_cause is EndCause.PARTITIONS_CHANGED, session.end_reason
            proxy.release.set()
            await wait_for(lambda: len(a.sessions) == 2, 60, "a's next session")
            assert sum((await committed(bootstrap, group, topic, 2)).values()) == 40
    assert len(a.seen) + len(b.seen) == 40, "records were read twice"


async def test_close_while_a_formed_rejoin_is_unanswered_commits_under_its_generation(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    """close() while the answer of a cooperative member's JoinGroup is on its way (the
    coordinator formed the new generation from it): the final commit, refused for the old
    generation, goes again under the one the join brings, within close()'s bound. (Tansu
    still takes a commit under the old generation then: there it guards the plain path.)"""
    topic = await new_topic(partitions=2)
    group = unique()
    await produce(bootstrap, topic, [str(i).encode() for i in range(40)])
    a, b = Journal("a"), Journal("b")
    config = cooperative_config(consumer__offsets__auto_commit__enable=False)
    port = int(bootstrap.rsplit(":", 1)[1])
    async with HeldJoinProxy(port) as proxy:
        member = cg.ConsumerGroup([proxy.address], group, config)
        task = asyncio.create_task(member.run([topic], a))
        try:
            await wait_for(lambda: len(a.seen) == 40, 60, "a read everything")
            proxy.armed = True
            config_b = cooperative_config(consumer__offsets__auto_commit__enable=False)
            async with running_member(bootstrap, group, [topic], b, config_b):
                await wait_for(proxy.holding.is_set, 60, "a's rejoin answered (and held)")
                closing = asyncio.create_task(member.close(timeout=8.0))
                await wait_for(lambda: a.cleanups == 1, 10, "a's session to end")
                proxy.release.set()
                await asyncio.wait_for(closing, 10)
                assert sum((await committed(bootstrap, group, topic, 2)).values()) == 40
        finally:
            proxy.release.set()
            await member.close()
            await asyncio.wait_for(task, 10)
