"""read_committed against a real transactional producer (confluent-kafka's, librdkafka).

Needs a real cluster: the embedded Tansu broker has no transaction coordinator, so no
transaction markers, no aborted-transaction index and no last stable offset.
"""

from __future__ import annotations

import asyncio

import pytest

import consumergroup as cg
from consumergroup.admin import ClusterAdmin
from consumergroup.testing import KafkaCluster
from tests.conftest import unique
from tests.integration.group_support import group_config, running_member, wait_for

confluent_kafka = pytest.importorskip("confluent_kafka", reason="needs confluent-kafka ([bench])")

pytestmark = [pytest.mark.slow, pytest.mark.kafka, pytest.mark.timeout(120)]

PARTITIONS = 3


class Values(cg.ConsumerGroupHandler):
    """Records the value of every message handled, and marks it."""

    def __init__(self) -> None:
        self.values: list[bytes] = []

    async def consume_claim(
        self, session: cg.ConsumerGroupSession, claim: cg.ConsumerGroupClaim
    ) -> None:
        async for msg in claim.messages():
            assert msg.value is not None
            self.values.append(msg.value)
            session.mark_message(msg)


class Transactions:
    """A transactional producer (blocking calls, run in a thread)."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.producer = confluent_kafka.Producer(
            {
                "bootstrap.servers": bootstrap,
                "transactional.id": unique("txn"),
                "transaction.timeout.ms": 60000,
                "linger.ms": 1,
            }
        )
        self.producer.init_transactions(30)

    def run(self, name: str, *, commit: bool, per_partition: int = 5) -> list[bytes]:
        """One transaction of ``per_partition`` records to every partition; its values."""
        values = self.begin(name, per_partition)
        self.end(commit)
        return values

    def begin(self, name: str, per_partition: int = 5) -> list[bytes]:
        """Begin a transaction and produce into it (left open)."""
        self.producer.begin_transaction()
        values = [
            f"{name}-{p}-{n}".encode() for p in range(PARTITIONS) for n in range(per_partition)
        ]
        for value in values:
            self.producer.produce(self.topic, value, partition=int(value.split(b"-")[1]))
        self.producer.flush(30)
        return values

    def end(self, commit: bool) -> None:
        """Commit or abort the open transaction."""
        if commit:
            self.producer.commit_transaction(30)
        else:
            self.producer.abort_transaction(30)


def stats_of(member: cg.ConsumerGroup, topic: str) -> dict[int, cg.PartitionStats]:
    return {p: s for (t, p), s in member.stats().partitions.items() if t == topic}


async def test_read_committed_sees_only_committed_transactions_and_lag_uses_the_lso(
    kafka_cluster: KafkaCluster,
) -> None:
    bootstrap = kafka_cluster.bootstrap
    topic = unique("txn")
    await kafka_cluster.create_topic(topic, PARTITIONS)
    txn = await asyncio.to_thread(Transactions, bootstrap, topic)
    committed: list[bytes] = []
    for i in range(6):  # committed and aborted interleaved
        values = await asyncio.to_thread(txn.run, f"t{i}", commit=i % 2 == 0)
        if i % 2 == 0:
            committed += values
    # Still open while the group reads: the last stable offset stays at its first record.
    await asyncio.to_thread(txn.begin, "open")
    handler = Values()
    config = group_config(consumer__isolation_level="read_committed")
    group = unique()
    async with running_member(bootstrap, group, [topic], handler, config) as (member, _):
        await wait_for(lambda: len(handler.values) >= len(committed), 30, "the committed records")
        await wait_for(lambda: len(stats_of(member, topic)) == PARTITIONS, 60, "stats of all")
        # Each partition: 3 committed transactions of 5 records and 3 markers, 3 aborted
        # of 5 records and 3 markers, then the open transaction's 5 records.
        lso = 3 * 6 + 3 * 6
        await wait_for(
            lambda: all(s.position == lso for s in stats_of(member, topic).values()),
            10,
            "positions at the last stable offset",
        )
        for p, s in stats_of(member, topic).items():
            assert s.high_water_mark == lso + 5, p
            assert s.lag == 0, (p, s)  # read_committed: nothing more can be read
        await asyncio.to_thread(txn.end, False)  # abort: the LSO moves past its marker
        end = lso + 5 + 1
        await wait_for(
            lambda: all(s.position == end for s in stats_of(member, topic).values()),
            10,
            "positions past the abort marker",
        )
        assert all(s.lag == 0 for s in stats_of(member, topic).values())
    assert sorted(handler.values) == sorted(committed)
    async with ClusterAdmin([bootstrap]) as admin:
        offsets = await admin.list_consumer_group_offsets(group)
    # Mark semantics: the last committed record + 1 (its marker and what follows are past it).
    assert offsets == {(topic, p): 4 * 6 + 5 for p in range(PARTITIONS)}
