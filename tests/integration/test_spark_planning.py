"""The Spark source's driver side (planning, group mirror, read limits) on the test broker.

The readers' methods are called as Spark calls them, without a JVM: these tests
import pyspark (run with ``-m spark``) but start no SparkSession.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import re
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest
from aiokafka import AIOKafkaProducer

from consumergroup.client import Client
from consumergroup.errors import ConfigurationError
from consumergroup.group.offsets import OffsetManager
from consumergroup.integrations._spark_plan import OffsetRange
from tests import helpers
from tests.conftest import TopicFactory, unique
from tests.integration.test_spark import fill

if TYPE_CHECKING:
    from consumergroup.integrations.spark import (
        ConsumerGroupBatchReader,
        ConsumerGroupStreamReader,
    )

pytestmark = [
    pytest.mark.spark,
    pytest.mark.skipif(not importlib.util.find_spec("pyspark"), reason="needs the [spark] extra"),
]


def _source(bootstrap: str, options: dict[str, str]) -> tuple[Any, Any]:
    """The data source Spark creates for ``options``, and the schema its schema() gives."""
    from pyspark.sql.pandas.types import from_arrow_schema

    from consumergroup.integrations._spark_arrow import arrow_schema
    from consumergroup.integrations.spark import ConsumerGroupDataSource

    source = ConsumerGroupDataSource({"kafka.bootstrap.servers": bootstrap, **options})
    headers = "headers" in source.schema()  # checks the options, as .load() does
    return source, from_arrow_schema(arrow_schema(headers))


def stream_reader(bootstrap: str, **options: str) -> ConsumerGroupStreamReader:
    """The stream reader Spark creates for ``spark.readStream`` with ``options``."""
    source, schema = _source(bootstrap, options)
    reader: ConsumerGroupStreamReader = source.streamReader(schema)
    return reader


def batch_reader(bootstrap: str, **options: str) -> ConsumerGroupBatchReader:
    """The batch reader Spark creates for ``spark.read`` with ``options``."""
    source, schema = _source(bootstrap, options)
    reader: ConsumerGroupBatchReader = source.reader(schema)
    return reader


@pytest.fixture
def readers() -> Iterator[list[Any]]:
    """Stream readers to stop after the test (each holds a client and a loop)."""
    made: list[Any] = []
    yield made
    for reader in made:
        reader.stop()


async def committed(bootstrap: str, group: str, tps: list[tuple[str, int]]) -> dict[Any, int]:
    async with Client([bootstrap]) as client:
        got = await OffsetManager(client, group, client.config).fetch_committed(tps)
    return {tp: off for tp, (off, *_) in got.items()}


async def delete_topic(bootstrap: str, topic: str) -> None:
    await helpers.delete_topic(bootstrap, topic)
    async with Client([bootstrap]) as client:  # wait until the metadata no longer lists it
        for _ in range(100):
            await client.refresh_metadata(topic)
            if client.cached_partitions(topic) is None:
                return
            await asyncio.sleep(0.1)
    raise AssertionError(f"{topic} still listed 10 s after its deletion")


async def test_a_deleted_topic_is_skipped_with_a_warning_under_fail_on_data_loss_false(
    bootstrap: str, new_topic: TopicFactory, readers: list[Any], caplog: pytest.LogCaptureFixture
) -> None:
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    kept, gone = await new_topic(partitions=1), await new_topic(partitions=1)
    for topic in (kept, gone):
        await fill(bootstrap, topic, 0, 10)
    options = {"subscribe": f"{kept},{gone}", "startingOffsets": "earliest"}
    reader = stream_reader(bootstrap, failOnDataLoss="false", **options)
    readers.append(reader)
    start = await asyncio.to_thread(reader.initialOffset)
    end = await asyncio.to_thread(reader.latestOffset, start, ReadAllAvailable())
    assert end == {kept: {"0": 10}, gone: {"0": 10}}
    await delete_topic(bootstrap, gone)
    await fill(bootstrap, kept, 0, 5)
    with caplog.at_level(logging.WARNING, "consumergroup.integrations.spark"):
        after = await asyncio.to_thread(reader.latestOffset, end, ReadAllAvailable())
        assert after == {kept: {"0": 15}}
        tasks = await asyncio.to_thread(reader.partitions, end, after)
        assert [p.value for p in tasks] == [OffsetRange(kept, 0, 10, 15)]
        # An availableNow restart: the checkpoint's offsets are not known when Spark
        # prepares the run.
        again = stream_reader(bootstrap, failOnDataLoss="false", **options)
        readers.append(again)
        await asyncio.to_thread(again.prepareForTriggerAvailableNow)
        assert await asyncio.to_thread(again.latestOffset, end, ReadAllAvailable()) == after
    assert f"topics ['{gone}'] were deleted; skipping it" in caplog.text


@pytest.mark.parametrize(
    ("option", "spec", "named"),
    [
        ("startingOffsets", '{"T": {"0": 1}}', "leaves out partitions T/1"),
        ("startingOffsets", '{"T": {"0": 1, "1": 1}, "Tx": {"0": 1}}', "names topics ['Tx']"),
        ("startingOffsets", '{"T": {"0": 1, "1": 1, "7": 1}}', "T/7 (T has 2 partitions)"),
        ("endingOffsets", '{"T": {"1": 2}}', "leaves out partitions T/0"),
        ("endingOffsets", '{"T": {"0": 2, "1": 2}, "Tx": {"0": 1}}', "names topics ['Tx']"),
        ("endingOffsets", '{"T": {"0": 2, "1": 2, "2": 2}}', "T/2 (T has 2 partitions)"),
    ],
)
async def test_offsets_json_must_name_exactly_the_partitions_read(
    bootstrap: str,
    new_topic: TopicFactory,
    readers: list[Any],
    option: str,
    spec: str,
    named: str,
) -> None:
    topic = await new_topic(partitions=2)
    reader = batch_reader(bootstrap, subscribe=topic, **{option: spec.replace("T", topic)})
    with pytest.raises(ConfigurationError) as info:
        await asyncio.to_thread(reader.partitions)
    assert f"option {option}=" in str(info.value)
    assert named.replace("T", topic) in str(info.value)
    # The streaming start is checked the same way, when the query plans its first batch.
    if option == "startingOffsets":
        stream = stream_reader(bootstrap, subscribe=topic, startingOffsets=spec.replace("T", topic))
        readers.append(stream)
        with pytest.raises(ConfigurationError, match=re.escape(named.replace("T", topic))):
            await asyncio.to_thread(stream.initialOffset)


async def test_a_batch_read_rejects_a_start_after_its_end_and_an_end_past_the_log_end(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    topic = await new_topic(partitions=1)
    await fill(bootstrap, topic, 0, 10)
    backwards = batch_reader(
        bootstrap,
        subscribe=topic,
        startingOffsets=f'{{"{topic}": {{"0": 8}}}}',
        endingOffsets=f'{{"{topic}": {{"0": 3}}}}',
    )
    with pytest.raises(ConfigurationError) as info:
        await asyncio.to_thread(backwards.partitions)
    assert str(info.value) == (
        f"startingOffsets is after endingOffsets ({topic}/0 starts at 8, but ends at "
        f"{{'{topic}': {{'0': 3}}}}): the start of a batch read must not be after its end"
    )
    beyond = batch_reader(bootstrap, subscribe=topic, endingOffsets=f'{{"{topic}": {{"0": 50}}}}')
    with pytest.raises(ConfigurationError) as info:
        await asyncio.to_thread(beyond.partitions)
    assert "option endingOffsets=" in str(info.value)
    assert f"past the log end ({topic}/0 ends at 10)" in str(info.value)
    # Past the end of what is there, a start is as plain.
    late = batch_reader(bootstrap, subscribe=topic, startingOffsets=f'{{"{topic}": {{"0": 12}}}}')
    with pytest.raises(ConfigurationError, match="startingOffsets is after endingOffsets"):
        await asyncio.to_thread(late.partitions)


async def test_min_offsets_per_trigger_fires_the_first_trigger_at_once(
    bootstrap: str, new_topic: TopicFactory, readers: list[Any]
) -> None:
    from pyspark.sql.streaming.datasource import ReadMinRows

    topic = await new_topic(partitions=1)
    await fill(bootstrap, topic, 0, 5)
    reader = stream_reader(
        bootstrap, subscribe=topic, startingOffsets="earliest", minOffsetsPerTrigger="100"
    )
    readers.append(reader)
    start = await asyncio.to_thread(reader.initialOffset)
    limit = reader.getDefaultReadLimit()
    assert isinstance(limit, ReadMinRows)
    # Fewer than 100 offsets: the first trigger fires anyway, the next one waits.
    first = await asyncio.to_thread(reader.latestOffset, start, limit)
    assert first == {topic: {"0": 5}}
    await fill(bootstrap, topic, 0, 5)
    assert await asyncio.to_thread(reader.latestOffset, first, limit) == first


@pytest.mark.parametrize("strategy", ["error", "latest", None])
async def test_starting_timestamp_with_no_record_after_it_follows_the_strategy(
    bootstrap: str, readers: list[Any], strategy: str | None
) -> None:
    # On both brokers: Tansu answers a time past the last record with offset 0, which the
    # client's check against the log reads as "none" (before, the query rewound to 0).
    topic = unique("ts")
    async with Client([bootstrap]) as client:
        await client.create_topic(topic, 2)
    # aiokafka's producer retries while the new partitions' leadership settles.
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        for i in range(20):
            await producer.send_and_wait(topic, b"v", partition=i % 2)
    finally:
        await producer.stop()
    future = str(int(time.time() * 1000) + 3_600_000)
    options = {"subscribe": topic, "startingTimestamp": future}
    if strategy is not None:
        options["startingOffsetsByTimestampStrategy"] = strategy
    reader = stream_reader(bootstrap, **options)
    readers.append(reader)
    if strategy == "latest":
        assert await asyncio.to_thread(reader.initialOffset) == {topic: {"0": 10, "1": 10}}
        return
    # Spark's default is "error": the query fails, naming the partitions and the way out.
    with pytest.raises(ConfigurationError) as info:
        await asyncio.to_thread(reader.initialOffset)
    assert f"no record at or after the starting timestamp in {topic}/0 (timestamp {future})" in (
        str(info.value)
    )
    assert "startingOffsetsByTimestampStrategy to latest" in str(info.value)


def test_a_bad_streaming_option_fails_when_the_schema_is_asked_for() -> None:
    from consumergroup.integrations.spark import ConsumerGroupDataSource

    base = {"kafka.bootstrap.servers": "h:1", "subscribe": "t"}
    for bad in ({"maxOffsetsPerTrigger": "many"}, {"startingOffsetsByTimestampStrategy": "skip"}):
        source = ConsumerGroupDataSource({**base, **bad})
        with pytest.raises(ConfigurationError, match=f"option {next(iter(bad))}="):
            source.schema()
    # What only one mode refuses waits for the reader of that mode.
    fine = {"kafka.bootstrap.servers": "h:1", "subscribe": "t", "endingOffsets": "latest"}
    assert "timestampType" in ConsumerGroupDataSource(fine).schema()


def test_a_misspelled_option_is_warned_with_the_closest_known_option(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from consumergroup.integrations.spark import ConsumerGroupDataSource

    options = {
        "kafka.bootstrap.servers": "h:1",
        "subscribe": "t",
        "maxOffsetPerTrigger": "10",
        "failondataloss": "false",
        "colour": "blue",
    }
    with caplog.at_level(logging.WARNING, "consumergroup.integrations.spark"):
        ConsumerGroupDataSource(options).schema()
    warnings = [r.getMessage() for r in caplog.records]
    assert warnings == [
        "option 'maxoffsetpertrigger' is not an option of format('consumergroup'): "
        "did you mean maxOffsetsPerTrigger?",
        "option 'colour' is not an option of format('consumergroup')",
    ]


async def test_latest_offset_mirrors_the_finished_start_to_the_group_and_reports_log_ends(
    bootstrap: str, new_topic: TopicFactory, readers: list[Any]
) -> None:
    from pyspark.sql.streaming.datasource import ReadMaxRows

    topic = await new_topic(partitions=2)
    await fill(bootstrap, topic, 0, 30)
    await fill(bootstrap, topic, 1, 10)
    group = unique("mirror")
    reader = stream_reader(
        bootstrap,
        subscribe=topic,
        startingOffsets="earliest",
        maxOffsetsPerTrigger="20",
        **{"kafka.group.id": group},
    )
    readers.append(reader)
    assert reader.reportLatestOffset() is None  # nothing looked up yet
    start = await asyncio.to_thread(reader.initialOffset)
    first = await asyncio.to_thread(reader.latestOffset, start, ReadMaxRows(20))
    assert first == {topic: {"0": 15, "1": 5}}
    assert reader.reportLatestOffset() == {topic: {"0": 30, "1": 10}}
    # Asked for the batch after `first`: Spark has finished `first`, the group says so.
    await asyncio.to_thread(reader.latestOffset, first, ReadMaxRows(20))
    tps = [(topic, 0), (topic, 1)]
    assert await committed(bootstrap, group, tps) == {(topic, 0): 15, (topic, 1): 5}
