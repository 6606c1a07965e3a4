"""The rebalance loop on the broker: close() at every phase, hooks, states, restarts, stats."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence

import pytest

import consumergroup as cg
from tests.conftest import TopicFactory, unique
from tests.helpers import produce
from tests.integration.group_support import (
    Recorder,
    group_config,
    heartbeats,
    running_member,
    silent_leader,
    wait_for,
)
from tests.integration.test_group import committed_offsets

pytestmark = pytest.mark.slow

TopicPartition = tuple[str, int]


class Hooked(Recorder):
    """A Recorder that logs every callback, in order, with the partitions it was given."""

    def __init__(self, name: str = "member") -> None:
        super().__init__(name)
        self.events: list[tuple[str, list[TopicPartition]]] = []
        self.session_objects: list[cg.ConsumerGroupSession] = []

    async def on_assigned(
        self, session: cg.ConsumerGroupSession, partitions: Sequence[TopicPartition]
    ) -> None:
        self.session_objects.append(session)
        self.events.append(("on_assigned", list(partitions)))

    async def setup(self, session: cg.ConsumerGroupSession) -> None:
        await super().setup(session)
        self.events.append(("setup", []))

    async def on_revoked(
        self, session: cg.ConsumerGroupSession, partitions: Sequence[TopicPartition]
    ) -> None:
        self.events.append(("on_revoked", list(partitions)))

    async def on_lost(self, partitions: Sequence[TopicPartition]) -> None:
        self.events.append(("on_lost", list(partitions)))

    async def cleanup(self, session: cg.ConsumerGroupSession) -> None:
        await super().cleanup(session)
        self.events.append(("cleanup", []))


class States(cg.GroupObserver):
    """Records the events a metrics exporter would see."""

    def __init__(self) -> None:
        self.states: list[cg.GroupState] = []
        self.rebalances: list[float] = []
        self.commits: list[BaseException | None] = []
        self.heartbeats: list[BaseException | None] = []

    def on_state(self, group_id: str, old: cg.GroupState, new: cg.GroupState) -> None:
        if not self.states:
            self.states.append(old)
        self.states.append(new)

    def on_rebalance(self, group_id: str, duration: float) -> None:
        self.rebalances.append(duration)

    def on_commit(self, group_id: str, latency: float, error: BaseException | None) -> None:
        self.commits.append(error)

    def on_heartbeat(self, group_id: str, error: BaseException | None) -> None:
        self.heartbeats.append(error)


async def two_partitions_with(
    bootstrap: str, new_topic: TopicFactory, count: int
) -> tuple[str, str]:
    """A fresh 2-partition topic holding ``count`` messages, and a fresh group id."""
    topic = await new_topic(partitions=2)
    await produce(bootstrap, topic, [str(i).encode() for i in range(count)])
    return topic, unique()


async def test_close_during_the_join_wins_and_no_handler_runs(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    """Defects 1 and 16: close() during a join waited its whole bound, then shut the
    client under the session that join produced."""
    topic, group = await new_topic(partitions=2), unique()
    # The coordinator holds our JoinGroup 20 s or more, so the close surely comes inside
    # it at CI's load: Kafka until the silent member's 40 s session ends, Tansu half our
    # member's session (40 s; it held the silent member's own join 20 s too, below its
    # 30 s read timeout).
    held = group_config(consumer__group__session_timeout=40.0)
    await silent_leader(bootstrap, group, topic, held)
    handler = Hooked()
    member = cg.ConsumerGroup([bootstrap], group, held)
    task = asyncio.create_task(member.run([topic], handler))
    await wait_for(lambda: member.state is cg.GroupState.JOINING, 60, "the join")
    await asyncio.sleep(1.0)  # JoinGroup in flight, held by the coordinator
    started = time.monotonic()
    await asyncio.wait_for(member.close(), 30)
    took = time.monotonic() - started
    await asyncio.wait_for(task, 10)
    # The join is cancelled at once and the LeaveGroup goes out on a fresh connection
    # (see test_close_while_the_broker_holds_the_join_leaves_at_once), not after the
    # close's whole bound (30 s) nor the rest of the held join (20 s or more).
    assert took < 10.0, took
    assert handler.events == [], "a handler ran after close()"
    assert member.state is cg.GroupState.CLOSED


@pytest.mark.parametrize("timeout", [None, 1.0], ids=["default-bound", "1s-bound"])
async def test_close_while_the_broker_holds_the_join_leaves_at_once(
    bootstrap: str, new_topic: TopicFactory, timeout: float | None
) -> None:
    """close() while the coordinator holds this member's JoinGroup (waiting for the other
    member) returns within about a second AND the member really leaves, so the other
    member's next generation does not wait out the session timeout. Before the fix the
    LeaveGroup queued behind the held JoinGroup on the same connection: close() took
    several seconds without a timeout, and with close(timeout=1) it gave up before the
    LeaveGroup went out, so the other member waited for the session timeout."""
    topic = await new_topic(partitions=2)
    group = unique()
    session_timeout = 20.0
    config = group_config(consumer__group__session_timeout=session_timeout)
    # b rejoins only after a slow cleanup: until then the coordinator holds a's JoinGroup
    # (Apache Kafka waits for the known members; Tansu holds every JoinGroup anyway).
    b = SlowFirstCleanup("b", hold=4.0)
    async with running_member(bootstrap, group, [topic], b, config) as (member_b, _):
        await wait_for(lambda: b.owned() == 2, 30, "b's claims")
        generation = member_b.stats().generation_id
        member_a = cg.ConsumerGroup([bootstrap], group, config)
        run_a = asyncio.create_task(member_a.run([topic], Hooked("a")))
        try:
            await wait_for(lambda: member_a.state is cg.GroupState.JOINING, 60, "a's join")
            await wait_for(lambda: bool(member_a.member_id), 60, "a's member id")
            await asyncio.sleep(0.5)  # a's JoinGroup (with its id) is held by the coordinator
            assert member_a.state is cg.GroupState.JOINING
            started = time.monotonic()
            await asyncio.wait_for(member_a.close(timeout), 15)
            took = time.monotonic() - started
            await asyncio.wait_for(run_a, 2)
        finally:
            await member_a.close()
        assert took < 3.0, f"close() took {took:.1f}s"
        # a left: b's next generation has b alone, long before a session timeout.
        formed = await wait_for(
            lambda: (
                member_b.stats().generation_id != generation
                and member_b.state is cg.GroupState.STABLE
                and b.owned() == 2
            ),
            session_timeout,
            "b's next generation with every partition",
        )
        assert took + formed < session_timeout - 5, (took, formed)


class SlowFirstCleanup(Recorder):
    """A member whose first cleanup (the first rebalance) takes ``hold`` seconds."""

    def __init__(self, name: str, hold: float) -> None:
        super().__init__(name)
        self.hold = hold

    async def cleanup(self, session: cg.ConsumerGroupSession) -> None:
        if not self.cleanups:
            await asyncio.sleep(self.hold)
        await super().cleanup(session)


class CloseInside(Recorder):
    """Closes its group from inside consume_claim after ``after`` messages."""

    def __init__(self, after: int) -> None:
        super().__init__()
        self.after = after
        self.group: cg.ConsumerGroup | None = None
        self.close_returned = False

    async def consume_claim(
        self, session: cg.ConsumerGroupSession, claim: cg.ConsumerGroupClaim
    ) -> None:
        async for msg in claim.messages():
            self.seen.append((msg.topic, msg.partition, msg.offset))
            session.mark_message(msg)
            if len(self.seen) == self.after:
                assert self.group is not None
                await self.group.close()
                self.close_returned = True


async def test_close_from_inside_consume_claim(bootstrap: str, new_topic: TopicFactory) -> None:
    """Defect 6: awaiting close() in a handler deadlocked until the rebalance timeout."""
    topic = await new_topic(partitions=1)
    group = unique()
    await produce(bootstrap, topic, [str(i).encode() for i in range(50)])
    handler = CloseInside(after=5)
    member = cg.ConsumerGroup([bootstrap], group, group_config())
    handler.group = member
    run = asyncio.create_task(member.run([topic], handler))
    await wait_for(lambda: len(handler.seen) >= 5, 30, "5 messages")
    started = time.monotonic()
    await asyncio.wait_for(run, 8)
    assert time.monotonic() - started < 5
    assert handler.close_returned and handler.cleanups == 1
    assert member.state is cg.GroupState.CLOSED
    assert len(handler.seen) == 5, "the stream goes on after close()"
    assert (await committed_offsets(bootstrap, group, topic, 1))[0] == 5


class ReturnsEvery(Recorder):
    """consume_claim returns after ``every`` messages (raising instead when ``raising``)."""

    def __init__(self, every: int, raising: bool = False) -> None:
        super().__init__()
        self.every = every
        self.raising = raising
        self.calls = 0

    async def consume_claim(
        self, session: cg.ConsumerGroupSession, claim: cg.ConsumerGroupClaim
    ) -> None:
        self.calls += 1
        handled = 0
        async for msg in claim.messages():
            self.seen.append((msg.topic, msg.partition, msg.offset))
            session.mark_message(msg)
            handled += 1
            if handled == self.every:
                if self.raising:
                    raise RuntimeError(f"giving up at {msg.partition}@{msg.offset}")
                return


@pytest.mark.parametrize("raising", [False, True])
async def test_a_claim_that_ends_early_is_restarted(
    bootstrap: str, new_topic: TopicFactory, raising: bool
) -> None:
    """Defect 7: a handler that returned (or raised with return_errors) left its partition
    owned but never consumed until an unrelated rebalance."""
    topic = await new_topic(partitions=2)
    await produce(bootstrap, topic, [str(i).encode() for i in range(40)])
    handler = ReturnsEvery(every=7, raising=raising)
    config = group_config(consumer__return_errors=True)
    async with running_member(bootstrap, unique(), [topic], handler, config) as (member, _):
        await wait_for(lambda: len(set(handler.seen)) == 40, 30, "every message")
        assert len(handler.sessions) == 1, "restarting a claim needs no rebalance"
        assert len(handler.seen) == 40, "a restart re-read marked messages"
        if raising:
            err = await asyncio.wait_for(member.errors().__anext__(), 5)
            assert isinstance(err.cause, RuntimeError)


async def test_a_late_mark_from_an_old_session_is_ignored(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    """Defect 11: one OffsetManager shared across sessions let a late mark from the old
    session move the commit of a partition re-assigned in the new one."""
    topic, group = await two_partitions_with(bootstrap, new_topic, 20)
    a, b = Hooked("a"), Hooked("b")
    async with running_member(bootstrap, group, [topic], a):
        await wait_for(lambda: len(a.seen) == 20, 30, "a to read everything")
        async with running_member(bootstrap, group, [topic], b):
            await wait_for(lambda: a.owned() == 1 and b.owned() == 1, 40, "the split")
            old, new = a.session_objects[0], a.session_objects[-1]
            assert old is not new
            partition = a.claims[topic][0]
            old.mark_offset(topic, partition, 999)  # e.g. a task the old handler left behind
            await new.commit()
            committed = await committed_offsets(bootstrap, group, topic, 2)
    assert committed[partition] == 10, committed


async def test_hooks_states_and_observer_across_a_rebalance(
    bootstrap: str, new_topic: TopicFactory, caplog: pytest.LogCaptureFixture
) -> None:
    topic, group = await two_partitions_with(bootstrap, new_topic, 20)
    caplog.set_level(logging.INFO, logger="consumergroup.group")
    a, b = Hooked("a"), Hooked("b")
    extra: list[tuple[str, list[TopicPartition]]] = []

    async def on_revoked(
        session: cg.ConsumerGroupSession, partitions: Sequence[TopicPartition]
    ) -> None:
        extra.append(("on_revoked", list(partitions)))

    observer = States()
    member = cg.ConsumerGroup(
        [bootstrap],
        group,
        group_config(),
        on_assigned=lambda session, partitions: extra.append(("on_assigned", list(partitions))),
        on_revoked=on_revoked,
    )
    member.add_observer(observer)
    run = asyncio.create_task(member.run([topic], a))
    try:
        await wait_for(lambda: len(a.seen) == 20, 30, "a to read everything")
        stats = member.stats()
        assert stats.state is cg.GroupState.STABLE and stats.member_id == member.member_id
        assert stats.last_heartbeat_age is not None and stats.last_heartbeat_age < 3
        assert stats.last_rebalance_duration is not None and stats.loop_lag >= 0
        assert sorted(stats.partitions) == [(topic, 0), (topic, 1)]
        async with running_member(bootstrap, group, [topic], b):
            await wait_for(lambda: a.owned() == 1 and b.owned() == 1, 40, "the split")
            assert member.stats().rebalances == 1
            # Kafka forms both generations within a heartbeat interval: wait for one.
            await wait_for(lambda: None in observer.heartbeats, 60, "a heartbeat answered")
    finally:
        await asyncio.wait_for(member.close(), 30)
        await asyncio.wait_for(run, 5)

    both = sorted((topic, p) for p in range(2))
    first_session = a.events[:4]
    assert first_session == [
        ("on_assigned", both),
        ("setup", []),
        ("on_revoked", both),
        ("cleanup", []),
    ], a.events
    second = a.events[4:]
    assert [e for e, _ in second] == ["on_assigned", "setup", "on_revoked", "cleanup"]
    assert second[0][1] == second[2][1] and len(second[0][1]) == 1
    assert not any(e == "on_lost" for e, _ in a.events)
    # The keyword hooks run after the handler's, with the same partitions.
    assert extra == [(e, p) for e, p in a.events if e in ("on_assigned", "on_revoked")]

    S = cg.GroupState
    assert observer.states == [
        S.STARTING,
        S.JOINING,
        S.STABLE,
        S.REBALANCING,
        S.JOINING,
        S.STABLE,
        S.CLOSING,
        S.CLOSED,
    ]
    assert len(observer.rebalances) == 2 and all(d >= 0 for d in observer.rebalances)
    assert observer.commits and all(e is None for e in observer.commits)
    assert None in observer.heartbeats
    # Every record of the group names the group and the member.
    records = [r for r in caplog.records if r.name.startswith("consumergroup.group")]
    assert all(hasattr(r, "group_id") and hasattr(r, "member_id") for r in records)
    ours = [r for r in records if r.group_id == group]  # type: ignore[attr-defined]
    assert ours and any(r.member_id == stats.member_id for r in ours)  # type: ignore[attr-defined]


async def test_messages_per_second_while_consuming(bootstrap: str, new_topic: TopicFactory) -> None:
    topic = await new_topic(partitions=1)
    handler = Recorder()
    config = group_config(consumer__group__heartbeat_interval=0.3)
    async with running_member(bootstrap, unique(), [topic], handler, config) as (member, _):
        await wait_for(lambda: handler.owned() == 1, 30, "the claim")
        rates: list[float] = []
        for i in range(20):
            await produce(bootstrap, topic, [b"x"] * 50)
            await asyncio.sleep(0.1)
            rates.append(member.stats().partitions[(topic, 0)].messages_per_second)
            if i > 5 and rates[-1] > 0:
                break
        assert max(rates) > 0, rates


class SlowSetup(Hooked):
    async def setup(self, session: cg.ConsumerGroupSession) -> None:
        await asyncio.sleep(8.0)  # longer than the session timeout (6 s)
        await super().setup(session)


async def test_heartbeats_run_during_a_slow_setup(bootstrap: str, new_topic: TopicFactory) -> None:
    """Defect 10: heartbeats started only after setup(), so a setup longer than the session
    timeout got the member evicted (seen when another member's heartbeat makes the
    coordinator check its members) and the group rebalanced again."""
    topic, group = await two_partitions_with(bootstrap, new_topic, 10)
    first, slow = Recorder("first"), SlowSetup("slow")
    async with running_member(bootstrap, group, [topic], first) as (first_member, _):
        await wait_for(lambda: len(first.seen) == 10, 30, "the first member's messages")
        async with running_member(bootstrap, group, [topic], slow) as (slow_member, _):
            await wait_for(lambda: slow.owned() == 1, 40, "the slow member's setup")
            await produce(bootstrap, topic, [str(i).encode() for i in range(10, 20)])
            await wait_for(lambda: bool(slow.seen), 20, "the slow member's first message")
            # An evicted member is told at its next heartbeat (and the other one to rejoin).
            for member in (slow_member, first_member):
                await heartbeats(member, 2, 20)
            assert [e for e, _ in slow.events] == ["on_assigned", "setup"], slow.events
            assert len(first.sessions) == 2, first.sessions


class SetupOnce(Recorder):
    """The first session's setup() takes ``delay`` s (a cache warmed, a model loaded)."""

    def __init__(self, name: str, delay: float) -> None:
        super().__init__(name)
        self.delay_first = delay
        self.setup_started = False
        self.setup_returned: float | None = None

    async def setup(self, session: cg.ConsumerGroupSession) -> None:
        if not self.setup_started:
            self.setup_started = True
            await asyncio.sleep(self.delay_first)
        await super().setup(session)
        self.setup_returned = self.setup_returned or time.monotonic()


async def test_a_member_in_a_long_setup_owns_everything_soon_after_the_other_one_left(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    """Reported on Tansu: a member whose setup() ran long while the other member left
    stayed REBALANCING, owning nothing, for more than 45 s. Its session ends at the next
    heartbeat (REBALANCE_IN_PROGRESS) and waits for setup() to return, as Java's
    onPartitionsAssigned holds poll(); then one join round (Tansu holds it half a session
    timeout, 3 s) gives it every partition. Heartbeats go on meanwhile, so it is not
    evicted however long the setup is (8 s here, the session timeout is 6 s)."""
    topic, group = await two_partitions_with(bootstrap, new_topic, 0)
    first, slow = Recorder("first"), SetupOnce("slow", 8.0)
    async with running_member(bootstrap, group, [topic], first) as (first_member, _):
        await wait_for(lambda: first.owned() == 2, 30, "the first member's claims")
        async with running_member(bootstrap, group, [topic], slow) as (slow_member, _):
            await wait_for(
                lambda: slow.setup_started and first.owned() == 1, 40, "the second generation"
            )
            await first_member.close()
            await wait_for(lambda: slow.setup_returned is not None, 20, "the slow setup")
            await wait_for(lambda: slow.owned() == 2, 15, "the slow member to own both")
            assert slow_member.state is cg.GroupState.STABLE
            await produce(bootstrap, topic, [str(i).encode() for i in range(10)])
            await wait_for(lambda: len(slow.seen) == 10, 20, "every record")
    # The generation shared with the first member, then one alone: no round lost between.
    owned = [sum(len(p) for p in claims.values()) for claims in slow.sessions]
    assert owned == [1, 2], slow.sessions


class SlowDrain(Recorder):
    """Takes 2 s to return after its stream ends (e.g. flushing a batch)."""

    async def consume_claim(
        self, session: cg.ConsumerGroupSession, claim: cg.ConsumerGroupClaim
    ) -> None:
        await super().consume_claim(session, claim)
        await asyncio.sleep(2.0)


async def test_close_during_a_rebalance(bootstrap: str, new_topic: TopicFactory) -> None:
    topic = await new_topic(partitions=2)
    group = unique()
    a = SlowDrain("a")
    member = cg.ConsumerGroup([bootstrap], group, group_config())
    run = asyncio.create_task(member.run([topic], a))
    try:
        await wait_for(lambda: a.owned() == 2, 30, "a's claims")
        async with running_member(bootstrap, group, [topic], Recorder("b")):
            await wait_for(lambda: member.state is cg.GroupState.REBALANCING, 30, "the rebalance")
            started = time.monotonic()
            await asyncio.wait_for(member.close(timeout=6), 10)
            took = time.monotonic() - started
            await asyncio.wait_for(run, 2)
    finally:
        await member.close()
    assert took < 6.5, took
    assert a.cleanups == 1 and member.state is cg.GroupState.CLOSED


async def test_an_unknown_topic_fails_run_with_missing_topic_fail(bootstrap: str) -> None:
    # The default waits for a missing topic (test_missing_topic); "fail" ends run() at once.
    member = cg.ConsumerGroup(
        [bootstrap], unique(), group_config(consumer__group__missing_topic="fail")
    )
    try:
        with pytest.raises(cg.KafkaError, match="does not exist"):
            await asyncio.wait_for(member.run(["no-such-topic-" + unique()], Recorder()), 20)
        assert member.state is cg.GroupState.FAILED
        assert "does not exist" in (member.stats().error or "")
    finally:
        await member.close()
