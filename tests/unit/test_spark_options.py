"""The Spark source's option parsing, offset planning rules and Arrow layout (no Spark session)."""

from __future__ import annotations

import json
from itertools import pairwise

import pytest

pytest.importorskip("pyarrow", reason="needs the [spark] extra")

from consumergroup.errors import ConfigurationError
from consumergroup.integrations._spark_arrow import arrow_schema, build_batch
from consumergroup.integrations._spark_options import parse_options
from consumergroup.integrations._spark_plan import (
    OffsetRange,
    from_json,
    rate_limit,
    split_ranges,
    to_json,
)
from consumergroup.message import ConsumerMessage

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "events"}


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"subscribe": "events"}, "kafka.bootstrap.servers"),
        ({**BASE, "assign": '{"events": [0]}'}, "subscribe, assign"),
        ({"kafka.bootstrap.servers": "h:1"}, "subscribe, subscribePattern, assign"),
        ({**BASE, "maxOffsetsPerTrigger": "lots"}, "maxOffsetsPerTrigger"),
        ({**BASE, "maxOffsetsPerTrigger": "0"}, "maxOffsetsPerTrigger"),
        ({**BASE, "startingOffsets": "{not json"}, "startingOffsets"),
        ({**BASE, "startingOffsets": '{"events": {"0": -3}}'}, "startingOffsets"),
        ({**BASE, "endingOffsets": "latest"}, "endingOffsets"),
        ({**BASE, "failOnDataLoss": "yes"}, "failOnDataLoss"),
        ({**BASE, "minPartitions": "-1"}, "minPartitions"),
        ({**BASE, "maxTriggerDelay": "soon"}, "maxTriggerDelay"),
        ({**BASE, "kafka.isolation.level": "dirty"}, "kafka.isolation.level"),
        ({**BASE, "kafka.security.protocol": "SASL_SSL"}, "kafka.sasl.jaas.config"),
        ({**BASE, "kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "GSSAPI"},
         "kafka.sasl.mechanism"),
        ({**BASE, "kafka.ssl.truststore.location": "/x.jks", "kafka.ssl.truststore.type": "JKS"},
         "kafka.ssl.truststore.type"),
        ({**BASE, "subscribePattern": "(", "subscribe": ""}, "subscribePattern"),
        ({**BASE, "assign": '{"events": ["zero"]}', "subscribe": ""}, "assign"),
        ({**BASE, "endingTimestamp": "5"}, "endingTimestamp"),
        ({**BASE, "minOffsetsPerTrigger": "10", "maxOffsetsPerTrigger": "5"},
         "minOffsetsPerTrigger"),
    ],
)  # fmt: skip
def test_a_bad_option_is_named_in_the_error(options: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        parse_options(options, streaming=True)
    assert named in str(info.value)


def test_batch_reads_refuse_latest_start_and_earliest_end() -> None:
    with pytest.raises(ConfigurationError, match="startingOffsets"):
        parse_options({**BASE, "startingOffsets": "latest"}, streaming=False)
    with pytest.raises(ConfigurationError, match="endingOffsets"):
        parse_options({**BASE, "endingOffsets": '{"events": {"0": -2}}'}, streaming=False)


def test_options_are_case_insensitive_and_map_to_the_config() -> None:
    jaas = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="alice" password="s\\"cret";'
    )
    opts = parse_options(
        {
            "KAFKA.BOOTSTRAP.SERVERS": "a:1, b:2",
            "SubscribePattern": "ev-.*",
            "STARTINGOFFSETS": '{"ev-1": {"0": 5, "1": -2}}',
            "maxOffsetsPerTrigger": "1000",
            "maxTriggerDelay": "2m",
            "kafka.security.protocol": "SASL_PLAINTEXT",
            "kafka.sasl.mechanism": "SCRAM-SHA-512",
            "kafka.sasl.jaas.config": jaas,
            "kafka.isolation.level": "read_committed",
            "kafka.group.id": "pipeline",
        },
        streaming=True,
    )
    assert opts.bootstrap == ("a:1", "b:2")
    assert opts.matches("ev-12") and not opts.matches("xev-1")
    assert opts.starting == {("ev-1", 0): 5, ("ev-1", 1): -2}
    assert opts.max_offsets_per_trigger == 1000 and opts.max_trigger_delay == 120.0
    assert opts.group_id == "pipeline"
    config = opts.config()
    assert config.net.sasl.enable and config.net.sasl.mechanism == "SCRAM-SHA-512"
    assert (config.net.sasl.user, config.net.sasl.password) == ("alice", 's"cret')
    assert config.consumer.isolation_level == "read_committed"
    assert not config.net.tls.enable


def test_a_missing_truststore_is_named_when_the_config_is_built() -> None:
    opts = parse_options(
        {**BASE, "kafka.security.protocol": "SSL", "kafka.ssl.truststore.location": "/nope.pem"},
        streaming=True,
    )
    with pytest.raises(ConfigurationError, match=r"kafka\.ssl\.truststore\.location"):
        opts.config()


def test_offsets_json_has_one_text_per_offsets() -> None:
    offsets = {("b", 10): 1, ("a", 2): 7, ("b", 2): 3, ("a", 0): 9}
    text = json.dumps(to_json(offsets))
    assert text == '{"a": {"0": 9, "2": 7}, "b": {"2": 3, "10": 1}}'
    assert from_json(json.loads(text)) == offsets
    assert json.dumps(to_json(dict(reversed(offsets.items())))) == text


def test_rate_limit_spreads_the_limit_by_backlog_like_spark() -> None:
    start = {("t", 0): 0, ("t", 1): 100, ("t", 2): 50}
    latest = {("t", 0): 900, ("t", 1): 200, ("t", 2): 50, ("t", 3): 10}
    # backlogs 900, 100, 0 and a new partition (start missing: no backlog counted)
    end = rate_limit(start, latest, 100)
    assert end == {("t", 0): 90, ("t", 1): 110, ("t", 2): 50, ("t", 3): 10}
    assert rate_limit(start, latest, 10_000) == latest
    # A share below one offset rounds up so a small backlog still moves.
    assert rate_limit({("t", 0): 0, ("t", 1): 0}, {("t", 0): 1000, ("t", 1): 1}, 10) == {
        ("t", 0): 9,
        ("t", 1): 1,
    }


def test_split_ranges_covers_each_range_exactly_in_proportion() -> None:
    ranges = [OffsetRange("t", 0, 0, 900), OffsetRange("t", 1, 10, 110), OffsetRange("t", 2, 5, 5)]
    parts = split_ranges(ranges, 10)
    assert len([p for p in parts if p.partition == 0]) == 9
    assert len([p for p in parts if p.partition == 1]) == 1
    for partition, start, end in ((0, 0, 900), (1, 10, 110)):
        mine = [p for p in parts if p.partition == partition]
        assert mine[0].start == start and mine[-1].end == end
        assert all(a.end == b.start for a, b in pairwise(mine))
    assert split_ranges(ranges, None) == ranges[:2]  # empty ranges never become tasks
    assert split_ranges([OffsetRange("t", 0, 0, 3)], 8) == [
        OffsetRange("t", 0, 0, 1),
        OffsetRange("t", 0, 1, 2),
        OffsetRange("t", 0, 2, 3),
    ]


@pytest.mark.spark  # imports pyspark: runs with the Spark tests, in their own process
def test_arrow_batch_matches_sparks_schema_and_keeps_nulls_and_headers() -> None:
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
    spark_schema = StructType(
        [
            StructField("key", BinaryType()),
            StructField("value", BinaryType()),
            StructField("topic", StringType()),
            StructField("partition", IntegerType()),
            StructField("offset", LongType()),
            StructField("timestamp", TimestampType()),
            StructField("timestampType", IntegerType()),
            StructField("headers", ArrayType(header)),
        ]
    )
    assert to_arrow_schema(spark_schema, timezone="UTC").equals(arrow_schema(True))
    messages = [
        ConsumerMessage("t", 3, 10, None, b"a", [], 1_700_000_000_123, 0),
        ConsumerMessage("t", 3, 12, b"k", None, [("h", b"1"), ("n", None)], 5, 1),
    ]
    batch = build_batch("t", 3, [messages[:1], messages[1:]], True)
    assert batch.schema.equals(arrow_schema(True))
    rows = batch.to_pylist()
    assert [(r["key"], r["value"], r["offset"], r["partition"], r["topic"]) for r in rows] == [
        (None, b"a", 10, 3, "t"),
        (b"k", None, 12, 3, "t"),
    ]
    assert [r["headers"] for r in rows] == [
        [],
        [{"key": "h", "value": b"1"}, {"key": "n", "value": None}],
    ]
    assert [r["timestamp"].timestamp() for r in rows] == [1_700_000_000.123, 0.005]
    assert [r["timestampType"] for r in rows] == [0, 1]
    assert build_batch("t", 3, [messages], False).schema.equals(arrow_schema(False))
