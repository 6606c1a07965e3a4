"""Transactions of our producer (KIP-98, KIP-447, KIP-890) on Apache Kafka, read back
with aiokafka's consumer at ``read_committed``.

Both transaction protocols run: the suite's one-node cluster finalizes
``transaction.version=2`` (Kafka 4.x's default: KIP-890, an epoch bump per transaction,
partitions added by the brokers) and ``kafka_cluster_tv1`` is formatted with
``transaction.version=1`` (the classic protocol); ``txn_bootstrap`` runs a test on each.

Apache Kafka only: Tansu answers the transaction requests but keeps no transaction
markers, so ``read_committed`` cannot tell a committed record from an aborted one there.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from aiokafka import AIOKafkaConsumer

import consumergroup as cg
from consumergroup.admin import ClusterAdmin
from consumergroup.client import Client
from consumergroup.errors import (
    ConfigurationError,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    ProducerFencedError,
)
from consumergroup.testing import KafkaCluster
from tests.conftest import TopicFactory, unique
from tests.helpers import produce
from tests.integration.group_support import Recorder, group_config, running_member, wait_for

pytestmark = [
    pytest.mark.kafka_only("Tansu keeps no transaction markers: read_committed sees all"),
    pytest.mark.timeout(120),
    pytest.mark.xdist_group("kafka-tv1"),  # one worker starts the protocol v1 cluster
]


@pytest.fixture(params=["v2", "v1"])
def txn_bootstrap(request: pytest.FixtureRequest, bootstrap: str) -> str:
    """A cluster of each transaction protocol: the suite's (v2) and one formatted with
    ``transaction.version=1``."""
    if request.param == "v2":
        return bootstrap
    cluster: KafkaCluster = request.getfixturevalue("kafka_cluster_tv1")
    return cluster.bootstrap


@pytest_asyncio.fixture
async def txn_topic(txn_bootstrap: str) -> AsyncIterator[TopicFactory]:
    """``await txn_topic(partitions=3)``: a fresh topic on ``txn_bootstrap``'s cluster."""
    async with Client([txn_bootstrap]) as client:

        async def make(partitions: int = 1) -> str:
            name = unique("t")
            await client.create_topic(name, partitions)
            return name

        yield make


def txn_config(transactional_id: str | None = None) -> cg.Config:
    config = cg.Config(client_id=unique("txn"))
    config.producer.transactional_id = transactional_id or unique("tid")
    return config


async def read_committed(bootstrap: str, topic: str, *, until: bytes) -> list[bytes]:
    """Every value of ``topic`` a read_committed reader sees, up to the marker ``until``."""
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
    )
    await consumer.start()
    values: list[bytes] = []
    try:
        async with asyncio.timeout(30):
            while until not in values:
                for msgs in (await consumer.getmany(timeout_ms=500)).values():
                    values += [m.value for m in msgs]
    finally:
        await consumer.stop()
    return values


async def test_committed_records_are_read_and_aborted_ones_never(
    txn_bootstrap: str, txn_topic: TopicFactory
) -> None:
    bootstrap = txn_bootstrap
    topic = await txn_topic(partitions=3)
    async with cg.Producer([bootstrap], txn_config()) as producer:
        async with producer.transaction():
            for i in range(30):
                await producer.send(topic, b"kept-%d" % i, partition=i % 3)
        with pytest.raises(RuntimeError, match="handler failed"):
            async with producer.transaction():
                for i in range(30):
                    await producer.send(topic, b"aborted-%d" % i, partition=i % 3)
                raise RuntimeError("handler failed")
        async with producer.transaction():
            await producer.send(topic, b"end", partition=0)
    values = await read_committed(bootstrap, topic, until=b"end")
    assert sorted(values) == sorted([b"kept-%d" % i for i in range(30)] + [b"end"])


async def test_offsets_commit_with_the_transaction_only(
    txn_bootstrap: str, txn_topic: TopicFactory
) -> None:
    bootstrap = txn_bootstrap
    topic = await txn_topic(partitions=1)
    group = unique("txn-group")
    metadata = cg.GroupMetadata(group)
    async with cg.Producer([bootstrap], txn_config()) as producer:
        async with producer.transaction():
            await producer.send(topic, b"out")
            await producer.send_offsets_to_transaction({(topic, 0): 5}, metadata)
        with pytest.raises(RuntimeError):
            async with producer.transaction():
                await producer.send_offsets_to_transaction({(topic, 0): 9}, metadata)
                raise RuntimeError("abort")
    async with ClusterAdmin([bootstrap]) as admin:
        committed = await admin.list_consumer_group_offsets(group)
    assert {(tp[0], tp[1]): off for tp, off in committed.items()} == {(topic, 0): 5}


async def test_a_second_producer_with_the_id_fences_the_first(
    txn_bootstrap: str, txn_topic: TopicFactory
) -> None:
    """The zombie: a producer whose transactional id was taken over cannot commit, and
    what it wrote in its open transaction is never visible."""
    bootstrap = txn_bootstrap
    topic = await txn_topic(partitions=1)
    tid = unique("tid")
    zombie = cg.Producer([bootstrap], txn_config(tid))
    await zombie.start()
    try:
        await zombie.begin_transaction()
        await zombie.send_and_wait(topic, b"zombie")
        async with cg.Producer([bootstrap], txn_config(tid)) as successor:
            async with successor.transaction():
                await successor.send(topic, b"successor")
            with pytest.raises(
                (ProducerFencedError, InvalidProducerEpochError, InvalidTxnStateError)
            ):
                await zombie.commit_transaction()
    finally:
        await zombie.close(timeout=10)
    assert await read_committed(bootstrap, topic, until=b"successor") == [b"successor"]


async def test_transaction_misuse_is_a_clear_error(bootstrap: str, new_topic: TopicFactory) -> None:
    topic = await new_topic(partitions=1)
    async with cg.Producer([bootstrap], txn_config()) as producer:
        with pytest.raises(InvalidTxnStateError, match="needs an open transaction"):
            await producer.send(topic, b"outside")
        async with producer.transaction():
            with pytest.raises(InvalidTxnStateError, match="already open"):
                await producer.begin_transaction()
    async with cg.Producer([bootstrap], cg.Config()) as plain:
        with pytest.raises(ConfigurationError, match="transactional_id"):
            async with plain.transaction():
                pass


class _Copier(cg.ConsumerGroupHandler):
    """Copies each record in a transaction with its offset (the KIP-447 path by hand)."""

    def __init__(self, producer: cg.Producer, out: str) -> None:
        self.producer, self.out = producer, out
        self.copied = 0
        self.metadata: list[cg.GroupMetadata] = []

    async def consume_claim(
        self, session: cg.ConsumerGroupSession, claim: cg.ConsumerGroupClaim
    ) -> None:
        async for msg in claim.messages():
            self.metadata.append(session.group_metadata())
            async with self.producer.transaction():
                await self.producer.send(self.out, msg.value)
                await self.producer.send_offsets_to_transaction(
                    {(msg.topic, msg.partition): msg.offset + 1}, session.group_metadata()
                )
            self.copied += 1


async def test_a_member_commits_its_offsets_in_its_transactions(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    """session.group_metadata() names the member (id, generation): the coordinator takes
    the transactional offset commit of the current member."""
    source, out = await new_topic(partitions=1), await new_topic(partitions=1)
    group = unique("copier")
    await produce(bootstrap, source, [b"a", b"b", b"c"])
    async with cg.Producer([bootstrap], txn_config()) as producer:
        copier = _Copier(producer, out)
        config = group_config(consumer__offsets__auto_commit__enable=False)
        async with running_member(bootstrap, group, [source], copier, config):
            await wait_for(lambda: copier.copied == 3, 60, "three records copied")
            # Read while the member runs: its own commit at close (of what it marked,
            # here its start) is the group's, not the transaction's.
            async with ClusterAdmin([bootstrap]) as admin:
                committed = await admin.list_consumer_group_offsets(group)
    md = copier.metadata[-1]
    assert (md.group_id, md.member_id != "", md.generation_id >= 0) == (group, True, True)
    assert await read_committed(bootstrap, out, until=b"c") == [b"a", b"b", b"c"]
    assert {(tp[0], tp[1]): off for tp, off in committed.items()} == {(source, 0): 3}


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
async def test_a_member_starts_only_after_a_pending_offset_commit(
    bootstrap: str, new_topic: TopicFactory, isolation: str
) -> None:
    """KIP-447: offsets a transaction committed but has not decided are unstable; a
    member fetches them with require_stable (OffsetFetch v7+) and waits
    (UNSTABLE_OFFSET_COMMIT, retried) instead of starting from the offset before them.
    Whatever its isolation level, as Java's consumer: a read_uncommitted member asked
    for the coordinator's snapshot at its high watermark, which also lags behind a
    newly elected coordinator's acknowledged commits."""
    topic = await new_topic(partitions=1)
    group = unique("stable")
    await produce(bootstrap, topic, [b"%d" % i for i in range(10)], partition=0)
    recorder = Recorder()
    config = group_config(
        consumer__isolation_level=isolation, consumer__group__rebalance__timeout=30.0
    )
    async with cg.Producer([bootstrap], txn_config()) as producer:
        await producer.begin_transaction()
        await producer.send_offsets_to_transaction({(topic, 0): 5}, cg.GroupMetadata(group))
        async with running_member(bootstrap, group, [topic], recorder, config) as (member, _):
            # An absence is asserted over a window: the member joins and waits in its
            # OffsetFetch (UNSTABLE_OFFSET_COMMIT) meanwhile; it reads nothing.
            await asyncio.sleep(3.0)
            assert recorder.seen == []
            assert member.state != cg.GroupState.STABLE
            await producer.commit_transaction()
            await wait_for(lambda: len(recorder.seen) == 5, 30, "the records after 5")
    assert [offset for _t, _p, offset in recorder.seen] == [5, 6, 7, 8, 9]


async def test_the_transaction_protocol_follows_the_clusters_feature(
    txn_bootstrap: str, txn_topic: TopicFactory, request: pytest.FixtureRequest
) -> None:
    """The finalized ``transaction.version`` (ApiVersions v3) picks the protocol: under v2
    every EndTxn (v5) answers with a bumped epoch and no AddPartitionsToTxn is sent; under
    v1 the epoch stays and each new partition is added first."""
    v2 = request.node.callspec.params["txn_bootstrap"] == "v2"
    topic = await txn_topic(partitions=2)
    async with cg.Producer([txn_bootstrap], txn_config()) as producer:
        assert producer._client.feature_level("transaction.version") == (2 if v2 else 1)
        epochs = []
        for i in range(3):
            async with producer.transaction():
                await producer.send(topic, b"%d" % i, partition=i % 2)
                assert producer._txn is not None and producer._txn.v2 is v2
            epochs.append(producer._identity.epoch)
    assert epochs == ([epochs[0], epochs[0] + 1, epochs[0] + 2] if v2 else [epochs[0]] * 3)
    assert sorted(await read_committed(txn_bootstrap, topic, until=b"2")) == [b"0", b"1", b"2"]


async def test_a_transaction_the_coordinator_aborted_on_timeout_is_recovered(
    txn_bootstrap: str, txn_topic: TopicFactory
) -> None:
    """A transaction open past ``producer.transaction_timeout`` is aborted by its
    coordinator (the test clusters look every second): the producer's next record is
    refused, commit raises, and abort takes a new epoch (InitProducerId) so the next
    transaction commits; nothing of the timed-out one is ever visible."""
    topic = await txn_topic(partitions=1)
    config = txn_config()
    config.producer.transaction_timeout = 1.0
    async with cg.Producer([txn_bootstrap], config) as producer:
        await producer.begin_transaction()
        await producer.send_and_wait(topic, b"timed-out")
        epoch = producer._identity.epoch

        async def refused() -> bool:
            try:
                await producer.send_and_wait(topic, b"late")
            except InvalidProducerEpochError:
                return True
            return False

        async with asyncio.timeout(30):
            while not await refused():  # noqa: ASYNC110 - no event: the broker decides
                await asyncio.sleep(0.5)
        with pytest.raises(InvalidTxnStateError, match="only be aborted"):
            await producer.commit_transaction()
        await producer.abort_transaction()
        assert producer._identity.epoch > epoch
        async with producer.transaction():
            await producer.send(topic, b"after")
    assert await read_committed(txn_bootstrap, topic, until=b"after") == [b"after"]


async def test_a_fenced_producer_is_a_clear_error(bootstrap: str, new_topic: TopicFactory) -> None:
    """Under the protocol v2 the abort of a producer another one replaced asks to bump
    its epoch and is refused: ProducerFencedError, saying what to do (the protocol v1
    cannot tell that from a timeout: see the module of the transaction manager)."""
    topic = await new_topic(partitions=1)
    tid = unique("tid")
    zombie = cg.Producer([bootstrap], txn_config(tid))
    await zombie.start()
    try:
        await zombie.begin_transaction()
        await zombie.send_and_wait(topic, b"zombie")
        async with cg.Producer([bootstrap], txn_config(tid)):
            with pytest.raises(ProducerFencedError, match="transactional_id of its own"):
                await zombie.abort_transaction()
    finally:
        await zombie.close(timeout=10)
