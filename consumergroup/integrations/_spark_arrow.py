"""Arrow record batches in the row layout of Spark's Kafka source.

Built column by column from our decoded chunks: one pass per column over the
messages (``map`` with an attribute getter, run in C), fixed columns (topic,
partition) as repeated scalars, offsets and timestamps through NumPy. No per-row
Python tuple or dict is created; headers, when asked for, are flattened into one
list array.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain
from operator import attrgetter

import numpy as np
import pyarrow as pa

from ..message import ConsumerMessage

#: Spark's Kafka source schema (``headers`` only with includeHeaders=true).
SCHEMA_DDL = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int"
)
HEADERS_DDL = "headers array<struct<key: string, value: binary>>"

HEADER_TYPE = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
ARROW_SCHEMA = pa.schema(
    [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
    ]
)
ARROW_SCHEMA_HEADERS = ARROW_SCHEMA.append(pa.field("headers", pa.list_(HEADER_TYPE)))

_key = attrgetter("key")
_value = attrgetter("value")
_offset = attrgetter("offset")
_timestamp = attrgetter("timestamp_ms")
_timestamp_type = attrgetter("timestamp_type")
_headers = attrgetter("headers")


def arrow_schema(include_headers: bool) -> pa.Schema:
    """The Arrow schema Spark expects for this source's rows."""
    return ARROW_SCHEMA_HEADERS if include_headers else ARROW_SCHEMA


def build_batch(
    topic: str,
    partition: int,
    chunks: Sequence[Sequence[ConsumerMessage]],
    include_headers: bool,
) -> pa.RecordBatch:
    """One record batch holding every message of ``chunks`` (one partition's, in order)."""
    count = sum(len(chunk) for chunk in chunks)
    messages = chunks[0] if len(chunks) == 1 else list(chain.from_iterable(chunks))
    millis = np.fromiter(map(_timestamp, messages), dtype=np.int64, count=count)
    columns: list[pa.Array] = [
        pa.array(list(map(_key, messages)), pa.binary()),
        pa.array(list(map(_value, messages)), pa.binary()),
        pa.repeat(pa.scalar(topic, pa.string()), count),
        pa.repeat(pa.scalar(partition, pa.int32()), count),
        pa.array(np.fromiter(map(_offset, messages), dtype=np.int64, count=count)),
        pa.array(millis * 1000, pa.timestamp("us", tz="UTC")),
        pa.array(np.fromiter(map(_timestamp_type, messages), dtype=np.int32, count=count)),
    ]
    if include_headers:
        columns.append(_headers_array(list(map(_headers, messages))))
    return pa.RecordBatch.from_arrays(columns, schema=arrow_schema(include_headers))


def _headers_array(per_message: list[Sequence[tuple[str, bytes | None]]]) -> pa.Array:
    ends = np.cumsum(np.fromiter(map(len, per_message), dtype=np.int32, count=len(per_message)))
    flat = list(chain.from_iterable(per_message))
    entries = pa.StructArray.from_arrays(
        [pa.array([k for k, _ in flat], pa.string()), pa.array([v for _, v in flat], pa.binary())],
        fields=list(HEADER_TYPE),
    )
    offsets = pa.array(np.concatenate(([0], ends)).astype(np.int32))
    return pa.ListArray.from_arrays(offsets, entries)
