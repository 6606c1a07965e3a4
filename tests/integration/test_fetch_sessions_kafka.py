"""Fetch sessions (KIP-227) against Apache Kafka's own session cache.

Needs a real cluster: the embedded Tansu broker keeps no fetch sessions (it answers
session id 0), and test_fetch_sessions.py drives the incremental path against a scripted
broker; here the broker is Kafka and only the wire is watched, through
:class:`~tests.integration.fetch_proxy.FetchProxy`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

import consumergroup as cg
from consumergroup.admin import ClusterAdmin
from consumergroup.consumer.partition import PartitionConsumer
from consumergroup.errors import ConsumerGroupError
from consumergroup.testing import KafkaCluster
from tests.conftest import unique
from tests.helpers import produce
from tests.integration.fetch_proxy import FetchProxy, SeenFetch

pytestmark = [pytest.mark.slow, pytest.mark.kafka, pytest.mark.timeout(300)]


def config() -> cg.Config:
    c = cg.Config(client_id="test-kafka-sessions")
    c.consumer.max_wait_time = 0.1
    c.validate()
    return c


@contextlib.asynccontextmanager
async def watched(kc: KafkaCluster) -> AsyncIterator[tuple[FetchProxy, cg.Consumer]]:
    """A Consumer whose every connection to the (one-node) cluster goes through a FetchProxy."""
    port = int(kc.bootstrap.split(",")[0].rsplit(":", 1)[1])
    async with FetchProxy(port) as proxy, cg.Consumer([proxy.address], config()) as consumer:
        yield proxy, consumer


async def served(kc: KafkaCluster, topic: str, partitions: int) -> None:
    """Until the broker answers for every partition: its metadata names the leaders of a
    new topic's partitions before it serves them (seconds apart at 1,000 partitions)."""
    async with ClusterAdmin(kc.bootstrap.split(",")) as admin, asyncio.timeout(120):
        while True:
            try:
                await admin.end_offsets([(topic, p) for p in range(partitions)])
                return
            except ConsumerGroupError:
                await asyncio.sleep(0.2)


async def read_to(pc: PartitionConsumer, end: int) -> list[int]:
    """Offsets read from ``pc`` until ``end``."""
    offsets: list[int] = []
    async for msg in pc.messages():
        offsets.append(msg.offset)
        if msg.offset + 1 >= end:
            break
    return offsets


async def read_all(pcs: dict[tuple[str, int], PartitionConsumer], end: int, start: int = 0) -> None:
    """Every partition read from ``start`` to ``end``: exactly once, in order."""
    async with asyncio.timeout(60):
        got = await asyncio.gather(*(read_to(pc, end) for pc in pcs.values()))
    for (tp, _), offsets in zip(pcs.items(), got, strict=True):
        assert offsets == list(range(start, end)), tp


async def fetches_after(proxy: FetchProxy, mark: int, count: int) -> list[SeenFetch]:
    """The ``count`` answered fetches after the first ``mark`` (waits for them, bounded)."""
    async with asyncio.timeout(30):
        while len([f for f in proxy.fetches[mark:] if f.error >= 0]) < count:  # noqa: ASYNC110
            await asyncio.sleep(0.02)  # the proxy has no event per answer: poll its record
    return [f for f in proxy.fetches[mark:] if f.error >= 0][:count]


@pytest.mark.parametrize("partitions", [100, 1000])
async def test_steady_state_requests_are_incremental_and_name_only_changed_partitions(
    kafka_cluster: KafkaCluster, partitions: int
) -> None:
    kc = kafka_cluster
    topic = unique("sessions")
    await kc.create_topic(topic, partitions)
    await served(kc, topic, partitions)
    per = 1
    await produce(kc.bootstrap, topic, [b"v"] * (per * partitions), linger_ms=50)
    async with watched(kc) as (proxy, consumer):
        pcs = await consumer.consume_partitions({(topic, p): 0 for p in range(partitions)})
        await read_all(pcs, per)
        # Caught up: long polls that name nothing. The request after the last answer
        # names the positions it moved; a caught-up answer reaches the readers before
        # that request is written, so it may come after the reads ended: skip it.
        idle = await fetches_after(proxy, len(proxy.fetches), 4)
        idle = idle[1:] if idle[0].named else idle[:3]
        # New records in two partitions: only they are named again.
        mark = len(proxy.fetches)
        for p in (7, 42):
            await produce(kc.bootstrap, topic, [b"w"] * 2, partition=p)
        await read_all({tp: pcs[tp] for tp in ((topic, 7), (topic, 42))}, per + 2, per)
        after = await fetches_after(proxy, mark, 3)
    fetches = [f for f in proxy.fetches if f.epoch != -1 and f.error >= 0]
    first, rest = fetches[0], fetches[1:]
    assert first.full and first.epoch == 0 and len(first.named) == partitions
    assert first.answer_session != 0, "Kafka gives a session id"
    assert rest and all(not f.full for f in rest)
    assert all(f.session_id == first.answer_session and f.error == 0 for f in rest)
    assert [f.epoch for f in rest] == list(range(1, len(rest) + 1))
    for before, f in zip(fetches, rest, strict=False):
        assert set(f.named) <= set(before.served), (before, f)  # positions that moved only
    assert all(not f.named for f in idle)
    assert {tp for f in after for tp in f.named} <= {(topic, 7), (topic, 42)}
    full_bytes, idle_bytes = first.size, idle[0].size
    one_bytes = min(f.size for f in after if len(f.named) == 1)
    print(
        f"\nfetch request bytes at {partitions} partitions: full {full_bytes}, "
        f"incremental naming none {idle_bytes}, naming one {one_bytes}"
    )
    assert idle_bytes * 10 < full_bytes


@pytest.mark.parametrize(("fault", "code"), [("session", 70), ("epoch", 71)])
async def test_a_session_the_broker_rejects_is_reopened_and_nothing_is_lost(
    kafka_cluster: KafkaCluster, fault: str, code: int
) -> None:
    kc = kafka_cluster
    topic = unique("evict")
    await kc.create_topic(topic, 6)
    await produce(kc.bootstrap, topic, [b"a"] * 60)
    async with watched(kc) as (proxy, consumer):
        pcs = await consumer.consume_partitions({(topic, p): 0 for p in range(6)})
        await read_all(pcs, 10)
        await fetches_after(proxy, len(proxy.fetches), 2)  # incremental by now
        proxy.corrupt_next = fault  # type: ignore[assignment]
        await produce(kc.bootstrap, topic, [b"b"] * 60)
        await read_all(pcs, 20, 10)
        # The altered request, its retry and the one after: a caught-up answer reaches
        # the readers before the next request is written, so the altered one may be
        # written after the reads ended.
        mark = len(proxy.fetches)
        await fetches_after(proxy, mark, 3)
    fetches = [f for f in proxy.fetches if f.epoch != -1 and f.error >= 0]
    failed = next(i for i, f in enumerate(fetches) if f.error)
    assert fetches[failed].error == code, "the broker's own answer to the altered request"
    retry, after = fetches[failed + 1], fetches[failed + 2]
    # 70: the session is unknown, so a new one; 71: ours is closed with a full request.
    expected_id = 0 if code == 70 else fetches[failed - 1].answer_session
    assert (retry.session_id, retry.epoch, len(retry.named)) == (expected_id, 0, 6)
    assert retry.error == 0 and retry.answer_session not in (0, fetches[failed - 1].answer_session)
    assert (after.session_id, after.epoch) == (retry.answer_session, 1)
    assert all(not f.full for f in fetches[failed + 2 :])
