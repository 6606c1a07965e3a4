"""Fetch sessions (KIP-227) end to end against a scripted broker that keeps them.

The consumer runs unchanged (Consumer, BrokerConsumer, its connection); the
broker is :class:`~tests.integration.session_broker.SessionBroker` over TCP. The
embedded Tansu broker keeps no sessions (see test_fetch.py for that fallback).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

import consumergroup as cg
from consumergroup.consumer.partition import PartitionConsumer
from tests.helpers import next_after_answers, record_fetch_order
from tests.integration.session_broker import Fetch, SessionBroker

pytestmark = pytest.mark.timeout(60)
TOPIC = "sessions"


def config() -> cg.Config:
    c = cg.Config(client_id="test-fetch-sessions")
    c.consumer.max_wait_time = 0.05
    c.net.read_timeout = 5.0
    c.validate()
    return c


@contextlib.asynccontextmanager
async def running(broker: SessionBroker) -> AsyncIterator[cg.Consumer]:
    """``broker`` serving, and a Consumer bootstrapped from it."""
    async with broker, cg.Consumer([broker.address], config()) as consumer:
        yield consumer


async def read_exactly(pc: PartitionConsumer, end: int) -> list[int]:
    """Offsets read from ``pc`` until ``end`` (checking each value names its own offset)."""
    offsets: list[int] = []
    async for msg in pc.messages():
        assert msg.value == f"{pc.partition}:{msg.offset}".encode()
        offsets.append(msg.offset)
        if msg.offset + 1 >= end:
            break
    return offsets


async def consume_all(consumer: cg.Consumer, ends: dict[int, int]) -> dict[int, PartitionConsumer]:
    """Start every partition at 0 and read each to ``ends[p]``: exactly once, in order."""
    pcs = await consumer.consume_partitions({(TOPIC, p): 0 for p in ends})
    by_partition = {p: pcs[(TOPIC, p)] for p in ends}
    async with asyncio.timeout(30):
        got = await asyncio.gather(*(read_exactly(by_partition[p], ends[p]) for p in ends))
    for p, offsets in zip(ends, got, strict=True):
        assert offsets == list(range(ends[p])), f"partition {p}"
    return by_partition


def session_fetches(broker: SessionBroker) -> list[Fetch]:
    """The fetch task's requests (the start-offset probe is a sessionless one, epoch -1)."""
    return [f for f in broker.fetches if f.epoch != -1]


async def test_incremental_requests_name_only_what_changed_and_consumption_is_exact() -> None:
    broker = SessionBroker(TOPIC, 20, 60)
    async with running(broker) as consumer:
        await consume_all(consumer, dict.fromkeys(range(20), 60))
    fetches = session_fetches(broker)
    first, rest = fetches[0], fetches[1:]
    assert first.full and first.epoch == 0 and len(first.named) == 20
    assert first.answer_session != 0
    incremental = [f for f in rest if not f.full]
    assert len(incremental) == len(rest) > 20
    assert [f.epoch for f in incremental] == list(range(1, len(incremental) + 1))
    assert all(f.session_id == first.answer_session for f in incremental)
    # Nothing named is unchanged, and what is named is what the last answer served
    # (positions moved) — never the whole set.
    assert [f.unchanged for f in incremental] == [[]] * len(incremental)
    for before, f in zip(fetches, rest, strict=False):
        assert set(f.named) <= set(before.served), (before, f)
    # Partitions absent from an answer kept their position (the exact reads above are
    # the check), and requests name a few partitions, never the whole session.
    assert sum(len(f.named) for f in incremental) < 20 * len(incremental) / 3


@pytest.mark.parametrize("code", [70, 71])
async def test_session_errors_refetch_in_full_and_lose_nothing(code: int) -> None:
    broker = SessionBroker(TOPIC, 6, 80)
    async with running(broker) as consumer:
        pcs = await consumer.consume_partitions({(TOPIC, p): 0 for p in range(6)})
        await broker.wait_fetches(6)
        broker.fail_next = code
        async with asyncio.timeout(30):
            got = await asyncio.gather(*(read_exactly(pcs[(TOPIC, p)], 80) for p in range(6)))
    assert got == [list(range(80))] * 6
    fetches = session_fetches(broker)
    failed = next(i for i, f in enumerate(fetches) if f.error)
    assert fetches[failed].error == code and not fetches[failed].full
    retry = fetches[failed + 1]
    # 70: the session is unknown, open a new one; 71: close ours and open a new one.
    expected_id = 0 if code == 70 else fetches[failed].session_id
    assert (retry.session_id, retry.epoch) == (expected_id, 0)
    assert len(retry.named) == 6  # every partition, at its position (buffers never fill here)
    assert retry.answer_session not in (0, fetches[failed].session_id)
    assert fetches[failed + 2].epoch == 1 and not fetches[failed + 2].full


async def test_an_answer_that_leaves_named_partitions_behind_is_followed_by_the_next_fetch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A broker that fills an answer from a few of the partitions named (this one serves 4
    an answer, no sessions: every named partition comes back, the unserved ones with no
    records and their high watermark) leaves the others behind even when each partition
    it served is drained: the next Fetch goes first. Only the answer that leaves nothing
    behind reaches the readers before it."""
    events = record_fetch_order(monkeypatch)
    broker = SessionBroker(TOPIC, 24, 5, sessions=False, per_response=4, per_partition=7)

    async def reader(pc: PartitionConsumer) -> None:
        async for message in pc.messages():
            events.append(("record", message.offset))
            if message.offset == 4:
                return

    async with running(broker) as consumer:
        pcs = await consumer.consume_partitions({(TOPIC, p): 0 for p in range(24)})
        async with asyncio.timeout(30):
            await asyncio.gather(*(reader(pc) for pc in pcs.values()))
        await broker.wait_fetches(len(broker.fetches) + 1)
    order = next_after_answers(events)
    behind = [first for backlog, first in order if backlog]
    assert len(behind) >= 4, events  # 24 partitions served 4 an answer
    assert behind == ["fetch"] * len(behind), events
    assert all(first == "record" for backlog, first in order if not backlog), events


async def test_caught_up_partitions_left_out_of_answers_still_get_new_records() -> None:
    broker = SessionBroker(TOPIC, 8, 10)
    async with running(broker) as consumer:
        pcs = await consume_all(consumer, dict.fromkeys(range(8), 10))
        mark = len(broker.fetches)
        await broker.wait_fetches(mark + 4)  # caught up: long polls that name nothing
        idle = broker.fetches[mark : mark + 4]
        # The request after the last answer names the positions it moved: a caught-up
        # answer reaches the readers before that request is written, so it may come
        # after the reads ended.
        if idle[0].named:
            assert set(idle[0].named) <= set(broker.fetches[mark - 1].served)
            idle = idle[1:]
        assert [(f.named, f.forgotten, f.answered) for f in idle[:3]] == [({}, [], [])] * 3
        broker.produce(3, 5)
        broker.produce(6, 9)
        async with asyncio.timeout(30):
            assert await read_exactly(pcs[3], 15) == list(range(10, 15))
            assert await read_exactly(pcs[6], 19) == list(range(10, 19))
        assert pcs[3].high_water_mark_offset == 15
        assert pcs[0].next_offset == 10 and pcs[0].high_water_mark_offset == 10
    assert all(not f.full for f in session_fetches(broker)[1:])


async def test_paused_partitions_leave_the_session_and_rejoin_where_they_were() -> None:
    broker = SessionBroker(TOPIC, 4, 40, per_response=4)
    async with running(broker) as consumer:
        pcs = await consumer.consume_partitions({(TOPIC, p): 0 for p in range(4)})
        paused = pcs[(TOPIC, 1)]
        async with asyncio.timeout(30):
            first = await read_exactly(paused, 10)
        paused.pause()
        async with asyncio.timeout(30):
            await read_exactly(pcs[(TOPIC, 0)], 40)
        fetches = broker.fetches
        forgotten_at = next(i for i, f in enumerate(fetches) if (TOPIC, 1) in f.forgotten)
        position = paused.next_offset
        paused.resume()
        async with asyncio.timeout(30):
            got = await asyncio.gather(*(read_exactly(pcs[(TOPIC, p)], 40) for p in (1, 2, 3)))
    # Not named again until resumed, then named at the position it stopped at.
    later = broker.fetches[forgotten_at + 1 :]
    back = next(f for f in later if (TOPIC, 1) in f.named)
    assert back.named[(TOPIC, 1)] == position and not back.full
    assert first + got[0] == list(range(40))
    assert got[1:] == [list(range(40))] * 2


async def test_a_new_connection_closes_the_session_with_a_full_request() -> None:
    broker = SessionBroker(TOPIC, 3, 30)
    async with running(broker) as consumer:
        pcs = await consumer.consume_partitions({(TOPIC, p): 0 for p in range(3)})
        async with asyncio.timeout(30):
            await asyncio.gather(*(read_exactly(pcs[(TOPIC, p)], 10) for p in range(3)))
        for pc in pcs.values():
            pc.pause()
        await asyncio.sleep(0.3)  # the fetch task now waits for a fetchable partition
        old = broker.fetches[-1]
        broker.wire.close_connections()
        async with asyncio.timeout(10):
            # The client has no event for "a connection closed": poll its state.
            while not all(c.closed for c in consumer.client._conns.values()):  # noqa: ASYNC110
                await asyncio.sleep(0.01)
        mark = len(broker.fetches)
        for pc in pcs.values():
            pc.resume()
        async with asyncio.timeout(30):
            got = await asyncio.gather(*(read_exactly(pcs[(TOPIC, p)], 30) for p in range(3)))
    assert got == [list(range(10, 30))] * 3
    again = broker.fetches[mark]
    assert not old.full and old.answer_session != 0
    assert (again.session_id, again.epoch, len(again.named)) == (old.answer_session, 0, 3)


@pytest.mark.parametrize(
    ("sessions", "versions"), [(False, (5, 11)), (True, (5, 6))], ids=["no-sessions", "fetch-v6"]
)
async def test_a_broker_without_sessions_gets_full_requests(
    sessions: bool, versions: tuple[int, int]
) -> None:
    broker = SessionBroker(TOPIC, 5, 30, sessions=sessions, fetch_versions=versions)
    async with running(broker) as consumer:
        await consume_all(consumer, dict.fromkeys(range(5), 30))
    fetches = broker.fetches
    assert len(fetches) > 5
    assert all(f.full and f.answer_session == 0 for f in fetches)
    if versions[1] >= 7:
        assert all(f.epoch == 0 for f in session_fetches(broker))  # asks for one every time
