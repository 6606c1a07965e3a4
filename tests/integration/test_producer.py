"""The producer (consumergroup/producer/) against real brokers, on and off the happy path.

Every acknowledged record is read back with another client (aiokafka's consumer, and
librdkafka's for the codecs) and checked: in the log once, per partition in send order,
at the offset its RecordMetadata names.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections import defaultdict

import pytest
from aiokafka import AIOKafkaConsumer

import consumergroup as cg
from consumergroup.errors import (
    BufferExhaustedError,
    ConfigurationError,
    DeliveryTimeoutError,
    MessageTooLargeError,
    UnknownTopicOrPartitionError,
)
from consumergroup.producer.partitioner import murmur2_partition
from consumergroup.testing import KafkaCluster
from tests.conftest import TopicFactory, unique
from tests.integration.group_support import wait_for
from tests.integration.produce_proxy import ProduceProxy

pytestmark = pytest.mark.timeout(120)

Read = dict[int, list[tuple[int, bytes | None, bytes | None]]]  # partition -> (offset, key, value)


def producer_config(**settings: object) -> cg.Config:
    """A config with ``producer.<name> = value`` for each setting."""
    config = cg.Config(client_id=unique("producer"))
    config.net.dial_timeout = 5.0
    for name, value in settings.items():
        setattr(config.producer, name, value)
    return config


async def read_back(bootstrap: str, topic: str, count: int, timeout: float = 30.0) -> Read:
    """The first ``count`` records of ``topic`` by partition, read by aiokafka's consumer."""
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    await consumer.start()
    out: Read = defaultdict(list)
    try:
        async with asyncio.timeout(timeout):
            while sum(len(v) for v in out.values()) < count:
                for tp, msgs in (await consumer.getmany(timeout_ms=500)).items():
                    out[tp.partition] += [(m.offset, m.key, m.value) for m in msgs]
    finally:
        await consumer.stop()
    return out


def read_with_librdkafka(bootstrap: str, topic: str, partitions: int, count: int) -> list[bytes]:
    """``count`` values of ``topic`` read by confluent-kafka's consumer (blocking).

    Its partitions are assigned, not subscribed: a group would add only a join, which the
    embedded broker holds for about 20 s (the test is about the batches, not the group)."""
    ck = pytest.importorskip("confluent_kafka", reason="needs confluent-kafka ([bench])")
    consumer = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique("librdkafka"),
            "enable.auto.commit": False,
        }
    )
    consumer.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(partitions)])
    values: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while len(values) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            values.append(msg.value())
    finally:
        consumer.close()
    return values


def assert_once_in_order(read: Read, acked: dict[int, list[tuple[int, bytes]]]) -> None:
    """Each partition's log holds exactly the acknowledged values, once each, in send
    order (nothing else: no duplicate), at the offsets their metadata named (where it
    names one: a retry the broker recognised as written may come back without)."""
    for partition, sent in acked.items():
        logged = read.get(partition, [])
        assert [value for _o, _k, value in logged] == [value for _o, value in sent], (
            f"partition {partition}"
        )
        for (offset, _k, _v), (named, _value) in zip(logged, sent, strict=True):
            assert named in (offset, -1), f"partition {partition}"


async def test_records_land_where_the_metadata_says(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    """Keyed records go to Java's partition for the key, an explicit partition wins,
    headers and timestamps travel, and every metadata names the record's offset."""
    topic = await new_topic(partitions=4)
    async with cg.Producer([bootstrap], producer_config()) as producer:
        keyed = [await producer.send(topic, b"k%d" % i, key=b"key-%d" % i) for i in range(40)]
        fixed = await producer.send_and_wait(
            topic, b"fixed", partition=3, headers=[("h", b"v"), ("n", None)], timestamp_ms=12345
        )
        loose = [await producer.send(topic, b"loose-%d" % i) for i in range(40)]
        await producer.flush()
    for i, fut in enumerate(keyed):
        assert fut.result().partition == murmur2_partition(b"key-%d" % i, 4)
    assert (fixed.partition, fixed.timestamp_ms) == (3, 12345)
    assert fixed.timestamp.year == 1970
    read = await read_back(bootstrap, topic, 81)
    by_offset = {(p, o): (k, v) for p, rows in read.items() for o, k, v in rows}
    for i, fut in enumerate(keyed):
        md = fut.result()
        assert by_offset[(md.partition, md.offset)] == (b"key-%d" % i, b"k%d" % i)
    assert by_offset[(3, fixed.offset)] == (None, b"fixed")
    for i, fut in enumerate(loose):
        md = fut.result()
        assert by_offset[(md.partition, md.offset)] == (None, b"loose-%d" % i)


async def test_an_idle_producer_sends_a_lone_record_after_linger(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    """The sender sleeps while nothing is queued; a record to a fresh batch wakes it (it
    slept for good before: the demo produced nothing once its members started first)."""
    topic = await new_topic(partitions=2)
    async with cg.Producer([bootstrap], producer_config(linger=0.05)) as producer:
        for _ in range(5):
            await asyncio.sleep(0)  # the sender's first round: nothing queued, it sleeps
        for i in range(3):
            md = await asyncio.wait_for(producer.send_and_wait(topic, b"lone", partition=i % 2), 10)
            assert md.offset == i // 2


async def test_sticky_partitioner_stays_for_a_batch_then_moves_on(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    """Keyless records fill one partition's batch_size, then go to another one."""
    config = producer_config(batch_size=1000)
    topic = await new_topic(partitions=4)
    async with cg.Producer([bootstrap], config) as producer:
        futures = [await producer.send(topic, b"v" * 79) for _ in range(30)]  # 100 B each
        await producer.flush()
    partitions = [f.result().partition for f in futures]
    assert partitions[:10] == [partitions[0]] * 10
    assert partitions[10:20] == [partitions[10]] * 10
    assert partitions[10] != partitions[0]


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
async def test_compressed_batches_read_by_aiokafka_and_librdkafka(
    bootstrap: str, new_topic: TopicFactory, codec: str
) -> None:
    topic = await new_topic(partitions=2)
    values = [b"%s-%05d-" % (codec.encode(), i) + b"x" * (i % 300) for i in range(2000)]
    config = producer_config(compression=codec, linger=0.05)
    async with cg.Producer([bootstrap], config) as producer:
        for value in values:
            await producer.send(topic, value)
    read = await read_back(bootstrap, topic, len(values))
    assert sorted(v for rows in read.values() for _o, _k, v in rows) == sorted(values)
    theirs = await asyncio.to_thread(read_with_librdkafka, bootstrap, topic, 2, len(values))
    assert sorted(theirs) == sorted(values)


async def test_a_lost_answer_is_retried_and_written_once(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    """The broker writes a batch but its answer never comes (the connection drops): the
    producer sends it again, and idempotence keeps the log free of the duplicate."""
    # Tansu answers the retry of a batch it has (DUPLICATE_SEQUENCE_NUMBER) without
    # its offset: those records' metadata say -1.
    topic = await new_topic(partitions=2)
    port = int(bootstrap.rsplit(":", 1)[1])
    async with ProduceProxy(port) as proxy:
        async with cg.Producer([proxy.address], producer_config(linger=0.01)) as producer:
            await producer.send_and_wait(topic, b"warm-up", partition=0)
            proxy.lose_answers = 2
            futures = [await producer.send(topic, b"v%d" % i, partition=i % 2) for i in range(400)]
            await producer.flush()
        assert proxy.lost == 2
    acked: dict[int, list[tuple[int, bytes]]] = defaultdict(list)
    acked[0].append((0, b"warm-up"))
    for i, fut in enumerate(futures):
        md = fut.result()
        acked[md.partition].append((md.offset, b"v%d" % i))
    read = await read_back(bootstrap, topic, 401)
    assert_once_in_order(read, acked)


async def test_a_deep_queue_goes_out_max_in_flight_requests_at_a_time(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    """Batches queued faster than the broker answers (a burst, then flush()) go out in up
    to ``max_in_flight`` requests at once, not one request per answer; delivered once and
    in order all the same."""
    topic = await new_topic(partitions=1)
    port = int(bootstrap.rsplit(":", 1)[1])
    async with ProduceProxy(port) as proxy:
        config = producer_config(batch_size=400, linger=0.0, max_in_flight=3)
        async with cg.Producer([proxy.address], config) as producer:
            await producer.send_and_wait(topic, b"warm-up")  # sequence 0 goes alone
            before = proxy.produced
            proxy.hold_answers()
            futures = [await producer.send(topic, b"v%03d" % i + b"x" * 80) for i in range(60)]
            flushed = asyncio.create_task(producer.flush())
            try:
                await wait_for(lambda: proxy.produced == before + 3, 60, "3 requests out")
                assert not flushed.done()
            finally:
                proxy.release_answers()
            await flushed
        assert proxy.produced > before + 3
    acked = {
        0: [(0, b"warm-up")]
        + [(f.result().offset, b"v%03d" % i + b"x" * 80) for i, f in enumerate(futures)]
    }
    assert_once_in_order(await read_back(bootstrap, topic, 61), acked)


async def test_a_caller_that_never_suspends_still_has_records_sent_and_answered(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    """A loop of ``await send()`` that never suspends (room in ``buffer_memory``, so
    send() returns at once) still lets the sender run: records go out after ``linger``
    and their answers come back while the loop runs, not only once the buffer is full or
    the loop awaits something else."""
    topic = await new_topic(partitions=2)
    async with cg.Producer([bootstrap], producer_config()) as producer:
        await producer.send_and_wait(topic, b"warm-up", partition=0)
        futures = []
        for i in range(200_000):  # ~20 MB: under buffer_memory, never blocks
            futures.append(await producer.send(topic, b"v%06d" % i + b"x" * 90))
            if futures[0].done():
                break
        assert futures[0].done(), "nothing was answered while send() was called"
        assert len(futures) < 200_000
        await producer.flush()
    assert all(f.exception() is None for f in futures)


async def test_without_idempotence_a_lost_answer_can_duplicate(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    """The control for the test above: the same fault with ``idempotent=False`` writes a
    batch twice (so the proxy does lose answers the broker acted on)."""
    topic = await new_topic(partitions=1)
    port = int(bootstrap.rsplit(":", 1)[1])
    config = producer_config(idempotent=False, acks=1, max_in_flight=1)
    async with ProduceProxy(port) as proxy, cg.Producer([proxy.address], config) as producer:
        await producer.send_and_wait(topic, b"warm-up")
        proxy.lose_answers = 1
        await producer.send_and_wait(topic, b"twice")
    read = await read_back(bootstrap, topic, 3)
    assert [v for _o, _k, v in read[0]] == [b"warm-up", b"twice", b"twice"]


@pytest.mark.kafka
@pytest.mark.slow
@pytest.mark.timeout(240)
@pytest.mark.xdist_group("kafka3")  # the worker that has the 3-node cluster runs it
async def test_broker_killed_mid_stream_loses_and_duplicates_nothing(
    kafka_cluster3: KafkaCluster, caplog: pytest.LogCaptureFixture
) -> None:
    """A 3-node cluster (replication 3, min.insync.replicas 2); the leader of partition 0
    is SIGKILLed while records stream, and started again. Every acknowledged record is in
    the log once, per partition in send order (Apache Kafka only: a cluster is needed)."""
    kc = kafka_cluster3
    topic = unique("killed")
    await kc.create_topic(topic, partitions=3, replication_factor=3)
    config = producer_config(linger=0.005, delivery_timeout=120.0, request_timeout=10.0)
    acked: dict[int, list[tuple[int, bytes]]] = defaultdict(list)
    failed = 0
    async with cg.Client(kc.bootstrap.split(",")) as client:
        await client.refresh_metadata(topic)
        victim = client.leader_id(topic, 0)
    caplog.set_level(logging.DEBUG, logger="consumergroup.producer.sender")
    async with cg.Producer(kc.bootstrap.split(","), config) as producer:
        sent: list[tuple[bytes, asyncio.Future[cg.RecordMetadata]]] = []
        for i in range(6000):
            value = b"r%05d" % i
            sent.append((value, await producer.send(topic, value, key=b"k%d" % (i % 50))))
            if i == 1500:
                await kc.kill_node(victim)
            if i == 4000:
                await kc.start_node(victim)
            if i % 100 == 0:
                await asyncio.sleep(0.01)  # a stream, not one burst
        await producer.flush()
    for value, fut in sent:
        if fut.exception() is not None:
            failed += 1
            continue
        md = fut.result()
        acked[md.partition].append((md.offset, value))
    assert failed == 0
    assert "retried" in caplog.text, "the kill did not make the producer retry anything"
    read = await read_back(kc.bootstrap, topic, 6000, timeout=60)
    assert_once_in_order(read, acked)
    # Send order per partition: the values (numbered in send order) only grow.
    for partition, rows in read.items():
        numbers = [int(v[1:]) for _o, _k, v in rows if v is not None]
        assert numbers == sorted(numbers), f"partition {partition} out of order"


def _rss() -> int:
    with open(f"/proc/{os.getpid()}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


async def test_buffer_memory_bounds_what_a_stalled_broker_holds(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    """A broker that stops reading: send() waits once ``buffer_memory`` is full, fails
    after ``max_block``, and the process's resident memory stays near the bound."""
    topic = await new_topic(partitions=2)
    port = int(bootstrap.rsplit(":", 1)[1])
    bound = 8 << 20
    config = producer_config(buffer_memory=bound, max_block=1.0, delivery_timeout=60.0)
    value = b"m" * 10_000
    async with ProduceProxy(port) as proxy:
        producer = cg.Producer([proxy.address], config)
        await producer.start()
        await producer.send_and_wait(topic, b"warm-up")
        proxy.stall()
        before = _rss()
        queued = 0
        started = time.monotonic()
        with pytest.raises(BufferExhaustedError, match="buffer_memory"):
            for _ in range(10_000):  # 100 MB if nothing held it back
                await producer.send(topic, value)
                queued += 1
        blocked = time.monotonic() - started
        grown = _rss() - before
        assert queued * len(value) <= bound
        assert queued * len(value) > bound // 2
        assert grown < 3 * bound, (
            f"resident set grew {grown >> 20} MiB for an {bound >> 20} MiB bound"
        )
        assert blocked >= 1.0
        proxy.resume()
        await producer.close(timeout=30)


async def test_close_keeps_its_bound_with_a_dead_broker(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    """Records queued for a broker that no longer answers: close(timeout) returns within
    its bound, and each unanswered record's future fails (none is left pending)."""
    topic = await new_topic(partitions=1)
    port = int(bootstrap.rsplit(":", 1)[1])
    async with ProduceProxy(port) as proxy:
        producer = cg.Producer([proxy.address], producer_config(request_timeout=20.0))
        await producer.start()
        await producer.send_and_wait(topic, b"warm-up")
        proxy.stall()
        futures = [await producer.send(topic, b"x%d" % i) for i in range(100)]
        started = time.monotonic()
        await producer.close(timeout=1.0)
        took = time.monotonic() - started
    assert took < 3.0, f"close(timeout=1.0) took {took:.1f}s"
    for fut in futures:
        assert fut.done()
        assert isinstance(fut.exception(), DeliveryTimeoutError)


async def test_bad_input_is_refused_and_loses_nothing(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    """Each bad record raises a clear error from send() and is not queued; the good
    records around it are all delivered."""
    topic = await new_topic(partitions=1)
    config = producer_config(max_request_size=64 * 1024)
    async with cg.Producer([bootstrap], config) as producer:
        good = [await producer.send(topic, b"before-%d" % i) for i in range(5)]
        with pytest.raises(MessageTooLargeError, match="max_request_size"):
            await producer.send(topic, b"x" * (65 * 1024))
        with pytest.raises(UnknownTopicOrPartitionError, match="does not exist"):
            await producer.send(unique("missing"), b"v")
        with pytest.raises(ConfigurationError, match="must be bytes or None, not str"):
            await producer.send(topic, "text")  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError, match="must be bytes or None, not int"):
            await producer.send(topic, b"v", key=42)  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError, match="has no partition 7"):
            await producer.send(topic, b"v", partition=7)
        with pytest.raises(ConfigurationError, match="not a"):
            await producer.send(topic, b"v", headers=[("h", "text")])  # type: ignore[list-item]
        good += [await producer.send(topic, b"after-%d" % i) for i in range(5)]
    offsets = [fut.result().offset for fut in good]
    read = await read_back(bootstrap, topic, 10)
    assert [v for _o, _k, v in read[0]] == [b"before-%d" % i for i in range(5)] + [
        b"after-%d" % i for i in range(5)
    ]
    assert offsets == [o for o, _k, _v in read[0]]


@pytest.mark.kafka_only("Tansu never refuses a batch by size")
async def test_a_batch_too_large_for_the_topic_is_split_and_a_record_too_large_fails(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    """A topic whose max.message.bytes is below batch_size: the broker refuses full
    batches with MESSAGE_TOO_LARGE; they are split and sent again (as Java's producer
    does), so every record lands once and in order. A record over the limit alone fails
    with an error naming max.message.bytes; the records after it are still delivered
    (the epoch bump its sequence gap needs used to wait for close(); a batch pipelined
    behind a refused first batch of a new producer id used to be written before it).

    Apache Kafka only: Tansu takes the topic config but never refuses a batch by size
    (the same records are all written there), so the split cannot happen on it."""
    topic = await new_topic(partitions=2, configs={"max.message.bytes": "2048"})
    config = producer_config(linger=0.2)  # one batch of about 13 KB forms
    async with cg.Producer([bootstrap], config) as producer:
        first = [
            await producer.send(topic, b"%04d" % i + b"x" * 196, partition=0) for i in range(60)
        ]
        await producer.flush()
        # The producer's first write to partition 1: the broker knows no sequence of it
        # there, so it would take any batch pipelined behind a refused one.
        too_large = await producer.send(topic, b"y" * 4000, partition=1)
        after = [
            await producer.send(topic, b"%04d" % i + b"z" * 96, partition=1) for i in range(30)
        ]
        await producer.flush()
    with pytest.raises(MessageTooLargeError, match=r"max\.message\.bytes"):
        too_large.result()
    read = await read_back(bootstrap, topic, len(first) + len(after))
    for partition, futures, values in (
        (0, first, [b"%04d" % i + b"x" * 196 for i in range(60)]),
        (1, after, [b"%04d" % i + b"z" * 96 for i in range(30)]),
    ):
        assert [v for _o, _k, v in read[partition]] == values
        assert [fut.result().offset for fut in futures] == [o for o, _k, _v in read[partition]]


def test_acks_zero_with_idempotence_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="acks"):
        cg.Producer(["127.0.0.1:9"], producer_config(acks=0))


async def test_acks_zero_delivers_without_offsets(bootstrap: str, new_topic: TopicFactory) -> None:
    topic = await new_topic(partitions=1)
    config = producer_config(acks=0, idempotent=False)
    async with cg.Producer([bootstrap], config) as producer:
        md = await producer.send_and_wait(topic, b"fire")
        assert md.offset == -1
    read = await read_back(bootstrap, topic, 1)
    assert [v for _o, _k, v in read[0]] == [b"fire"]


async def test_send_after_close_is_refused(bootstrap: str, new_topic: TopicFactory) -> None:
    topic = await new_topic()
    producer = cg.Producer([bootstrap], producer_config())
    with pytest.raises(cg.ClosedError, match="start the producer"):
        await producer.send(topic, b"v")
    async with producer:
        pass
    with pytest.raises(cg.ClosedError, match="closed"):
        await producer.send(topic, b"v")
    with contextlib.suppress(cg.ClosedError):
        await producer.close()
