"""Share groups (KIP-932) on Apache Kafka: records handed to members, acknowledged one by one.

Share groups are an Apache Kafka 4.2+ feature that Tansu does not have: every test here but
the one checking the error a broker without them gives is ``kafka_only``. Each test's group
starts at the earliest offsets (``share.auto.offset.reset``, a group config) and sets its
own lock duration and delivery limit where it tests them (the suite's cluster lowers their
lower bounds: ``KafkaCluster(quick_share_groups=True)``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter

import pytest

import consumergroup as cg
from consumergroup.errors import UnsupportedVersionError
from tests.conftest import TopicFactory, unique
from tests.helpers import produce
from tests.integration.share_support import (
    Collector,
    share_config,
    share_group,
    share_member,
    wait_until,
)

KAFKA = "share groups need Apache Kafka 4.2+ (Tansu has none)"


@pytest.mark.kafka_only(KAFKA)
async def test_every_record_is_accepted_exactly_once(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    """Two members, 16 handler tasks each on 4 partitions: every record handled once."""
    topic = await new_topic(partitions=4)
    group = unique("share")
    await share_group(bootstrap, group)
    await produce(bootstrap, topic, [b"v%d" % i for i in range(400)])
    a, b = Collector("a", delay=0.005), Collector("b", delay=0.005)
    async with (
        share_member(bootstrap, group, [topic], a, concurrency=16) as (ma, _),
        share_member(bootstrap, group, [topic], b, concurrency=16) as (mb, _),
    ):
        await wait_until(lambda: len(a.seen) + len(b.seen) >= 400, 60, "400 records")
        # stats() counts an acknowledgement once the broker took it (it rides on a fetch).
        await wait_until(
            lambda: sum(m.stats().acknowledged["accept"] for m in (ma, mb)) >= 400,
            60,
            "the 400 acceptances to reach the broker",
        )
        await asyncio.sleep(0.5)  # nothing more comes
        stats = [ma.stats(), mb.stats()]
    seen = a.offsets() + b.offsets()
    assert len(seen) == 400
    assert set(seen.values()) == {1}
    assert all(s.delivery_count == 1 for s in a.seen + b.seen)
    assert a.most_running > 4 or b.most_running > 4  # concurrency beyond the partitions
    assert sum(s.acknowledged["accept"] for s in stats) == 400
    assert all(s.state is cg.GroupState.STABLE for s in stats)


@pytest.mark.kafka_only(KAFKA)
async def test_acknowledgements_ride_on_fetches_while_records_flow(
    bootstrap: str, new_topic: TopicFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Handlers that await finish one by one: each decision used to send a
    ShareAcknowledge of its own at once (a round trip that held the share session, so the
    fetch that fell due meanwhile waited behind it): 3 for 2,000 records here. Decisions now
    wait briefly for the next ShareFetch to carry them, as Java's and franz-go's do.

    The wait (50 ms) is raised to 2 s here: at CI's load a ShareFetch may take longer than
    50 ms to fall due, and the decisions then go alone as they should; what this test
    checks is that they wait for a fetch at all (3 alone for 2,000 at load 10, 0 quiet)."""
    from consumergroup.net.share import CLOSE_SESSION
    from consumergroup.share import broker
    from consumergroup.share.broker import BrokerSession

    monkeypatch.setattr(broker, "ACK_LINGER", 2.0)
    sent: list[int] = []
    acknowledge = BrokerSession._acknowledge

    async def counting(self: BrokerSession, epoch: int) -> None:
        sent.append(epoch)
        await acknowledge(self, epoch)

    monkeypatch.setattr(BrokerSession, "_acknowledge", counting)
    topic = await new_topic(partitions=4)
    group = unique("share")
    await share_group(bootstrap, group)
    await produce(bootstrap, topic, [b"v%d" % i for i in range(2000)])

    class Staggered(Collector):
        """Records finish one by one (2-26 ms each), not all in one burst."""

        async def consume(self, session: cg.ShareSession, record: cg.ShareRecord) -> None:
            await asyncio.sleep((record.offset % 13) * 0.002)
            await super().consume(session, record)

    handler = Staggered(delay=0.002)
    async with share_member(bootstrap, group, [topic], handler, concurrency=100) as (member, _):
        await wait_until(
            lambda: member.stats().acknowledged["accept"] >= 2000, 120, "2,000 acceptances"
        )
    assert len(handler.offsets()) == 2000
    alone = [epoch for epoch in sent if epoch != CLOSE_SESSION]
    assert len(alone) <= 2, f"{len(alone)} ShareAcknowledge requests for 2,000 records"


@pytest.mark.kafka_only(KAFKA)
async def test_decisions_of_a_partition_that_left_the_session_are_acknowledged(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    """Members joining move partitions away from a busy member: the decisions of records
    it still held of them cannot ride on its fetches (the partition left its share
    session) and must go with a ShareAcknowledge of their own, not wait behind its
    fetches until their locks expire and the records come again (500 records handled
    twice in two of three 3-member benchmark runs while they waited)."""
    topic = await new_topic(partitions=8)
    group = unique("share")
    await share_group(bootstrap, group, lock=5)
    await produce(bootstrap, topic, [b"v%d" % i for i in range(30000)])
    members = [Collector(name) for name in "abc"]
    async with share_member(bootstrap, group, [topic], members[0], concurrency=200) as (a, _):
        await wait_until(lambda: len(members[0].seen) >= 500, 60, "the first member's records")
        async with (
            share_member(bootstrap, group, [topic], members[1], concurrency=200) as (b, _),
            share_member(bootstrap, group, [topic], members[2], concurrency=200) as (c, _),
        ):
            await wait_until(
                lambda: sum(len(m.seen) for m in members) >= 30000, 120, "30,000 records"
            )
            # Every record accepted by the broker (a decision left behind would instead
            # wait out the lock and come again): none can be handed out again.
            await wait_until(
                lambda: sum(m.stats().acknowledged["accept"] for m in (a, b, c)) >= 30000,
                60,
                "30,000 acceptances",
            )
    seen = sum((m.offsets() for m in members), Counter[tuple[int, int]]())
    assert len(seen) == 30000
    twice = [key for key, calls in seen.items() if calls > 1]
    assert not twice, f"{len(twice)} records handled twice"


@pytest.mark.kafka_only(KAFKA)
async def test_one_partition_is_read_by_three_members_at_once(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    topic = await new_topic(partitions=1)
    group = unique("share")
    await share_group(bootstrap, group)
    await produce(bootstrap, topic, [b"v%d" % i for i in range(150)], partition=0)
    members = [Collector(name, delay=0.05) for name in "abc"]
    async with (
        share_member(bootstrap, group, [topic], members[0], concurrency=5),
        share_member(bootstrap, group, [topic], members[1], concurrency=5),
        share_member(bootstrap, group, [topic], members[2], concurrency=5),
    ):
        await wait_until(lambda: sum(len(m.seen) for m in members) >= 150, 90, "150 records")
    seen = sum((m.offsets() for m in members), Counter[tuple[int, int]]())
    assert len(seen) == 150 and set(seen.values()) == {1}
    assert all(m.seen for m in members), [len(m.seen) for m in members]
    # At some moment all three members were handling records of the one partition.
    events = sorted(
        [(s.start, 1, s.member) for m in members for s in m.seen]
        + [(s.end, -1, s.member) for m in members for s in m.seen]
    )
    running: Counter[str] = Counter()
    together = False
    for _, step, member in events:
        running[member] += step
        together |= all(running[m.name] > 0 for m in members)
    assert together


@pytest.mark.kafka_only(KAFKA)
async def test_a_failing_record_comes_again_until_the_limit_archives_it(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    """A handler raising for one record: it is redelivered with a higher delivery count,
    archived after the group's limit (3), and the rest of the partition keeps flowing."""
    topic = await new_topic(partitions=1)
    group = unique("share")
    await share_group(bootstrap, group, deliveries=3)
    values = [b"ok-%d" % i for i in range(30)]
    values[5] = b"poison"
    await produce(bootstrap, topic, values, partition=0)

    def behave(session: cg.ShareSession, record: cg.ShareRecord) -> None:
        if record.value == b"poison":
            raise ValueError("cannot handle this one")

    handler = Collector(behave=behave)
    async with share_member(bootstrap, group, [topic], handler, concurrency=4) as (member, _):
        await wait_until(
            lambda: len({s.offset for s in handler.seen if s.value != b"poison"}) == 29,
            60,
            "the 29 good records",
        )
        await wait_until(
            lambda: sum(s.value == b"poison" for s in handler.seen) >= 3, 60, "3 deliveries"
        )
        await produce(bootstrap, topic, [b"after"], partition=0)
        await wait_until(
            lambda: any(s.value == b"after" for s in handler.seen), 30, "the record after"
        )
        # stats() counts an acknowledgement once the broker took it: the last release
        # rides on the fetch after the one that may have brought "after".
        await wait_until(
            lambda: member.stats().acknowledged["release"] >= 3, 60, "the third release"
        )
        stats = member.stats()
    poison = [s.delivery_count for s in handler.seen if s.value == b"poison"]
    assert poison == [1, 2, 3]  # archived after the third: never again
    good = Counter(s.offset for s in handler.seen if s.value != b"poison")
    assert set(good.values()) == {1}
    assert stats.handler_errors == 3
    assert stats.acknowledged["release"] == 3 and stats.redelivered == 2


@pytest.mark.kafka_only(KAFKA)
async def test_explicit_acknowledgements_first_decision_wins(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    """REJECT archives at once; RELEASE hands the record out again; a later decision, or
    the handler's return, changes nothing."""
    topic = await new_topic(partitions=1)
    group = unique("share")
    await share_group(bootstrap, group)
    await produce(bootstrap, topic, [b"reject", b"release", b"accept"], partition=0)
    decided: list[tuple[bytes | None, bool, bool]] = []

    def behave(session: cg.ShareSession, record: cg.ShareRecord) -> None:
        first = second = False
        if record.value == b"reject":
            first = session.acknowledge(record, cg.AckType.REJECT)
            second = session.acknowledge(record, cg.AckType.ACCEPT)
        elif record.value == b"release" and record.delivery_count == 1:
            first = session.acknowledge(record, cg.AckType.RELEASE)
            raise RuntimeError("ignored: decided already")
        decided.append((record.value, first, second))

    handler = Collector(behave=behave)
    async with share_member(bootstrap, group, [topic], handler, concurrency=2) as (member, _):
        await wait_until(
            lambda: any(s.value == b"release" and s.delivery_count == 2 for s in handler.seen),
            30,
            "the released record again",
        )
        # The last decisions reach the broker with a later request.
        await wait_until(
            lambda: sum(member.stats().acknowledged.values()) >= 4, 60, "the 4 decisions"
        )
        stats = member.stats()
    counts = Counter(s.value for s in handler.seen)
    assert counts == {b"reject": 1, b"release": 2, b"accept": 1}
    assert (b"reject", True, False) in decided
    assert stats.acknowledged == {"accept": 2, "release": 1, "reject": 1}
    assert stats.handler_errors == 1  # counted; its record was decided already: kept RELEASE


@pytest.mark.kafka_only(KAFKA)
async def test_a_handler_slower_than_the_lock_is_renewed_not_handed_out_twice(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    """Records handled for 2.5 lock durations: renewed, so the other member never gets
    them while they are being handled; each record handled once."""
    topic = await new_topic(partitions=1)
    group = unique("share")
    await share_group(bootstrap, group, lock=2.0)
    await produce(bootstrap, topic, [b"slow-%d" % i for i in range(4)], partition=0)
    slow, other = Collector("slow", delay=5.0), Collector("other")
    async with share_member(bootstrap, group, [topic], slow, concurrency=4) as (member, _):
        await wait_until(lambda: len(slow.seen) == 4, 30, "the slow member to take all 4")
        async with share_member(bootstrap, group, [topic], other, concurrency=4):
            await wait_until(lambda: all(s.end for s in slow.seen), 30, "the slow handlers")
            # Accepted by the broker: from then on the other member cannot get them.
            await wait_until(
                lambda: member.stats().acknowledged["accept"] >= 4, 60, "the 4 acceptances"
            )
        stats = member.stats()
    assert other.seen == []
    assert Counter(s.offset for s in slow.seen) == {0: 1, 1: 1, 2: 1, 3: 1}
    assert stats.renewed >= 4 and stats.renewing
    assert stats.acknowledged["accept"] == 4


@pytest.mark.kafka_only(KAFKA)
async def test_a_group_that_refuses_renewal_gets_one_warning_and_no_renewal(
    bootstrap: str, new_topic: TopicFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """The group config ``share.renew.acknowledge.enable=false``: the broker refuses RENEW;
    the member warns once (naming the setting), renews no more and keeps handling records
    (a record handled past its lock then comes again: the price of no renewal)."""
    topic = await new_topic(partitions=1)
    group = unique("share")
    await share_group(bootstrap, group, lock=1.0, share_renew_acknowledge_enable="false")
    await produce(bootstrap, topic, [b"slow-%d" % i for i in range(3)], partition=0)
    slow = Collector("slow", delay=2.5)
    with caplog.at_level(logging.WARNING, logger="consumergroup"):
        async with share_member(bootstrap, group, [topic], slow, concurrency=3) as (member, _):
            await wait_until(lambda: not member.stats().renewing, 30, "renewal to be refused")
            await wait_until(lambda: len(slow.seen) > 3, 30, "a record to come again")
            stats = member.stats()
    refused = [r for r in caplog.records if "lock renewal refused" in r.getMessage()]
    assert len(refused) == 1, [r.getMessage() for r in refused]
    assert "share.renew.acknowledge.enable" in refused[0].getMessage()
    assert stats.renewed == 0 and not stats.renewing
    assert max(s.delivery_count for s in slow.seen) >= 2


@pytest.mark.kafka_only(KAFKA)
async def test_close_releases_what_did_not_finish(bootstrap: str, new_topic: TopicFactory) -> None:
    """close() with handlers still running: they are cancelled at its deadline and their
    records released (the next member gets them at once, delivery count 2), what finished
    is accepted (never seen again)."""
    topic = await new_topic(partitions=1)
    group = unique("share")
    await share_group(bootstrap, group)
    await produce(bootstrap, topic, [b"quick", b"stuck-1", b"stuck-2"], partition=0)

    class Stuck(Collector):
        async def consume(self, session: cg.ShareSession, record: cg.ShareRecord) -> None:
            if record.value != b"quick":
                self.delay = 3600.0
            else:
                self.delay = 0.0
            await super().consume(session, record)

    stuck = Stuck("stuck")
    member = cg.ShareGroup([bootstrap], group, share_config())
    task = asyncio.create_task(member.run([topic], stuck, concurrency=3))
    await wait_until(lambda: len(stuck.seen) == 3, 30, "3 records taken")
    await asyncio.wait_for(member.close(timeout=3.0), 10)
    await asyncio.wait_for(task, 5)
    assert member.state is cg.GroupState.CLOSED
    after = Collector("after")
    async with share_member(bootstrap, group, [topic], after, concurrency=3):
        await wait_until(lambda: len(after.seen) == 2, 20, "the 2 released records")
        await asyncio.sleep(0.5)
    assert sorted((s.value, s.delivery_count) for s in after.seen) == [
        (b"stuck-1", 2),
        (b"stuck-2", 2),
    ]


@pytest.mark.tansu_only("Tansu has no share groups: the error a broker without them gives")
async def test_a_broker_without_share_groups_fails_at_once(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    topic = await new_topic(partitions=1)
    member = cg.ShareGroup([bootstrap], unique("share"), share_config())
    async with member:
        with pytest.raises(UnsupportedVersionError, match=r"ShareGroupHeartbeat.*Kafka 4\.2"):
            await asyncio.wait_for(member.run([topic], Collector()), 20)
        assert member.state is cg.GroupState.FAILED


@pytest.mark.kafka_only(KAFKA)
async def test_a_handler_that_ignores_its_cancellation_is_abandoned_at_close(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    """A handler that catches CancelledError and runs on: close() returns on time all the
    same, counts it as a runaway handler, and its record is released (the next member
    gets it at once, delivery count 2)."""
    topic = await new_topic(partitions=1)
    group = unique("share")
    await share_group(bootstrap, group)
    await produce(bootstrap, topic, [b"stubborn"], partition=0)
    started = asyncio.Event()
    finish = asyncio.Event()

    class Stubborn(cg.ShareGroupHandler):
        async def consume(self, session: cg.ShareSession, record: cg.ShareRecord) -> None:
            started.set()
            while not finish.is_set():
                # The bug under test: a cancellation swallowed.
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.sleep(3600)

    member = cg.ShareGroup([bootstrap], group, share_config())
    task = asyncio.create_task(member.run([topic], Stubborn(), concurrency=2))
    await asyncio.wait_for(started.wait(), 30)
    begun = asyncio.get_running_loop().time()
    await asyncio.wait_for(member.close(timeout=3.0), 10)
    took = asyncio.get_running_loop().time() - begun
    await asyncio.wait_for(task, 5)
    assert took < 5.0, took
    assert member.stats().runaway_handlers == 1
    after = Collector("after")
    try:
        async with share_member(bootstrap, group, [topic], after, concurrency=2):
            await wait_until(lambda: len(after.seen) == 1, 20, "the released record")
        assert after.seen[0].delivery_count == 2
    finally:
        finish.set()


def _held_at_each_delivery(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The records a member holds after each delivery of fetched records."""
    from consumergroup.share.inflight import InFlight

    held: list[int] = []
    deliver = InFlight.deliver

    def counting(self: InFlight, *args: object, **kwargs: object) -> None:
        deliver(self, *args, **kwargs)  # type: ignore[arg-type]
        held.append(self.count)

    monkeypatch.setattr(InFlight, "deliver", counting)
    return held


@pytest.mark.kafka_only(KAFKA)
async def test_records_acquired_ahead_never_exceed_max_poll_records(
    bootstrap: str, new_topic: TopicFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fast handlers: the member acquires records ahead of them (so the next fetch runs
    while they work), but never holds more than ``concurrency + max_poll_records``
    (strict acquisition); every record is accepted once."""
    held = _held_at_each_delivery(monkeypatch)
    topic = await new_topic(partitions=4)
    group = unique("share")
    await share_group(bootstrap, group)
    await produce(bootstrap, topic, [b"v%d" % i for i in range(4000)])
    handler = Collector()
    config = share_config(share__max_poll_records=30)
    async with share_member(bootstrap, group, [topic], handler, concurrency=10, config=config):
        await wait_until(lambda: len(handler.seen) >= 4000, 60, "4,000 records")
    assert len(handler.offsets()) == 4000 and set(handler.offsets().values()) == {1}
    assert max(held) <= 10 + 30, max(held)
    assert max(held) > 10  # acquired ahead of the handlers


@pytest.mark.kafka_only(KAFKA)
async def test_records_acquired_ahead_are_released_at_close_and_none_is_lost(
    bootstrap: str, new_topic: TopicFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A member whose handlers stall holds records acquired ahead of them; close()
    releases those with the stalled ones: the next member gets each of them at once
    (delivery count 2), and every record is accepted exactly once between the two."""
    held = _held_at_each_delivery(monkeypatch)
    topic = await new_topic(partitions=2)
    group = unique("share")
    await share_group(bootstrap, group)
    await produce(bootstrap, topic, [b"v%d" % i for i in range(3000)])
    accepted: list[tuple[int, int]] = []
    stall = asyncio.Event()

    class Stalling(cg.ShareGroupHandler):
        async def consume(self, session: cg.ShareSession, record: cg.ShareRecord) -> None:
            if len(accepted) >= 1000:
                stall.set()
                await asyncio.sleep(3600)  # cancelled at close: released
            accepted.append((record.partition, record.offset))

    config = share_config(share__max_poll_records=100)
    first = cg.ShareGroup([bootstrap], group, config)
    task = asyncio.create_task(first.run([topic], Stalling(), concurrency=4))
    await asyncio.wait_for(stall.wait(), 60)
    # The fetches in flight land (none reserves room any more) and every handler stalls.
    await wait_until(
        lambda: first._run is not None and first._run._reserved == 0 and first._run._busy == 4,
        60,
        "fetches landed, four handlers stalled",
    )
    # Undecided now: the stalled four and those waiting. Not the count after the last
    # delivery: handlers accepted more after it until the 1,000th (failed at load ~8).
    waiting = first._run.inflight.count - 4
    await asyncio.wait_for(first.close(timeout=2.0), 10)
    await asyncio.wait_for(task, 5)
    assert waiting > 0, held[-5:]  # records were held ahead of the stalled handlers
    stats = first.stats()
    assert stats.acknowledged["accept"] == len(accepted)
    assert stats.acknowledged["release"] >= waiting + 4
    after = Collector("after")
    async with share_member(bootstrap, group, [topic], after, concurrency=50) as (member, _):
        await wait_until(lambda: len(after.seen) >= 3000 - len(accepted), 60, "the rest")
        # Every one of them accepted by the broker: none can come again.
        rest = 3000 - len(accepted)
        await wait_until(
            lambda: member.stats().acknowledged["accept"] >= rest, 60, "the rest accepted"
        )
    assert not set(accepted) & set(after.offsets())
    assert len(set(accepted) | set(after.offsets())) == 3000
    assert set(after.offsets().values()) == {1}
    again = [s for s in after.seen if s.delivery_count == 2]
    assert len(again) >= waiting + 4, (len(again), waiting)


@pytest.mark.kafka_only(KAFKA)
async def test_close_releases_the_records_waiting_for_a_handler_when_it_begins(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    """close() sends its decisions when it begins, not once its stalled handlers end (or
    are cancelled at the drain deadline): the records acquired ahead of them, released,
    go to another member (delivery count 2) while the stalled handlers still run, long
    before their 60 s lock would have handed them out; and the records handled before,
    whose acceptances waited for the rest of their acquisition, are accepted, never
    handed out again (they waited behind the stalled handlers: the broker refused them
    once their locks had expired, and another member handled them again)."""
    topic = await new_topic(partitions=1)
    group = unique("share")
    await share_group(bootstrap, group, lock=60.0)
    await produce(bootstrap, topic, [b"v%d" % i for i in range(3000)], partition=0)
    accepted: list[int] = []
    stalled: list[int] = []
    stall, unstall = asyncio.Event(), asyncio.Event()

    class Stalling(cg.ShareGroupHandler):
        async def consume(self, session: cg.ShareSession, record: cg.ShareRecord) -> None:
            if len(accepted) >= 1000:
                stall.set()
                stalled.append(record.offset)
                await unstall.wait()
            accepted.append(record.offset)

    first = cg.ShareGroup([bootstrap], group, share_config(share__max_poll_records=100))
    task = asyncio.create_task(first.run([topic], Stalling(), concurrency=4))
    closing: asyncio.Task[None] | None = None
    try:
        await asyncio.wait_for(stall.wait(), 60)
        await wait_until(
            lambda: first._run is not None and first._run._reserved == 0 and first._run._busy == 4,
            60,
            "fetches landed, four handlers stalled",
        )
        assert first._run is not None
        waiting = {record.offset for record in first._run._ready}
        assert waiting  # records were held ahead of the stalled handlers
        # The drain deadline is minutes away (240 s, less two reserves of 30 s).
        closing = asyncio.create_task(first.close(timeout=240.0))
        other = Collector("other")
        async with share_member(bootstrap, group, [topic], other, concurrency=50):
            # Within the lock (60 s): a release, not the lock's expiry, handed them out.
            await wait_until(
                lambda: waiting <= {s.offset for s in other.seen}, 45, "the waiting records"
            )
            assert not closing.done() and len(stalled) == 4  # the handlers still run
        assert all(s.delivery_count == 2 for s in other.seen if s.offset in waiting)
        assert not (set(stalled) | set(accepted)) & {s.offset for s in other.seen}
    finally:
        unstall.set()
        if closing is None:
            closing = asyncio.create_task(first.close())
        await asyncio.wait_for(closing, 60)
        await asyncio.wait_for(task, 10)
    assert first.stats().acknowledged["accept"] == len(accepted) == 1004


@pytest.mark.kafka_only(KAFKA)
async def test_without_renewal_records_waiting_past_half_their_lock_are_released(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    """Renewal off: fast handlers let the member acquire records ahead, then every
    handler slows down. The records still waiting when half their lock (2 s) is spent
    are released (they come again, delivery count 2) instead of being started after the
    broker handed them out again: no record is handled twice, none expires."""
    topic = await new_topic(partitions=1)
    group = unique("share")
    await share_group(bootstrap, group, lock=2.0)
    await produce(bootstrap, topic, [b"v%d" % i for i in range(240)], partition=0)
    handled: Counter[int] = Counter()

    class Slowing(Collector):
        async def consume(self, session: cg.ShareSession, record: cg.ShareRecord) -> None:
            self.delay = 0.4 if len(self.seen) >= 200 else 0.0
            await super().consume(session, record)
            handled[record.offset] += 1

    handler = Slowing()
    config = share_config(share__max_poll_records=40, share__renew=False)
    async with share_member(bootstrap, group, [topic], handler, concurrency=4, config=config) as (
        member,
        _,
    ):
        await wait_until(lambda: len(handled) == 240, 60, "240 records handled")
        await wait_until(
            lambda: member.stats().acknowledged["accept"] >= 240, 60, "the acceptances"
        )
        stats = member.stats()
    assert set(handled.values()) == {1}, [o for o, n in handled.items() if n > 1]
    assert stats.acknowledged["release"] > 0
    assert any(s.delivery_count == 2 for s in handler.seen)
    assert sum(p.expired for p in stats.partitions.values()) == 0 and stats.renewed == 0
