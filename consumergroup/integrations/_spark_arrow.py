"""Arrow record batches in the row layout of Spark's Kafka source.

:class:`BatchBuilder` turns a partition's fetched record batches into Arrow
batches. Message-format v2 batches go through the C extension's
``decode_v2_columns``, which appends every record straight into Arrow-layout
buffers (offsets, data, validity bitmaps, native integers in bytearrays) that
become arrays without a copy (``pa.Array.from_buffers``): no Python object per
record. Without the extension (or for v0/v1 batches) records are decoded into
messages and :func:`build_batch` builds the columns from them: one pass per
column (``map`` with an attribute getter, run in C), offsets and timestamps
through NumPy. Either way topic and partition are repeated scalars and headers,
when asked for, one list array.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator, Sequence
from itertools import chain
from operator import attrgetter
from typing import Any

import numpy as np
import pyarrow as pa

from ..consumer import records
from ..consumer.inflate import DEFAULT_BOUNDS, Bounds
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

#: Rows per Arrow batch handed to Spark.
ARROW_BATCH_ROWS = 32768
#: Key and value bytes after which an Arrow batch is handed over with fewer rows (bounds
#: its memory, and keeps the int32 offsets of Arrow's binary type far from overflowing).
ARROW_BATCH_BYTES = 64 << 20

_TIMESTAMP = pa.timestamp("us", tz="UTC")
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
    return _record_batch(
        topic,
        partition,
        [
            pa.array(list(map(_key, messages)), pa.binary()),
            pa.array(list(map(_value, messages)), pa.binary()),
            pa.array(np.fromiter(map(_offset, messages), dtype=np.int64, count=count)),
            pa.array(millis * 1000, _TIMESTAMP),
            pa.array(np.fromiter(map(_timestamp_type, messages), dtype=np.int32, count=count)),
        ],
        _headers_array(list(map(_headers, messages))) if include_headers else None,
    )


def _record_batch(
    topic: str, partition: int, columns: list[pa.Array], headers: pa.Array | None
) -> pa.RecordBatch:
    """The batch of ``columns`` (key, value, offset, timestamp, timestampType), with the
    topic and partition columns added, and ``headers`` when given."""
    count = len(columns[0])
    key, value, offset, timestamp, timestamp_type = columns
    arrays = [
        key,
        value,
        pa.repeat(pa.scalar(topic, pa.string()), count),
        pa.repeat(pa.scalar(partition, pa.int32()), count),
        offset,
        timestamp,
        timestamp_type,
    ]
    if headers is not None:
        arrays.append(headers)
    return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema(headers is not None))


def _headers_array(per_message: list[Sequence[tuple[str, bytes | None]]]) -> pa.Array:
    ends = np.cumsum(np.fromiter(map(len, per_message), dtype=np.int32, count=len(per_message)))
    flat = list(chain.from_iterable(per_message))
    entries = pa.StructArray.from_arrays(
        [pa.array([k for k, _ in flat], pa.string()), pa.array([v for _, v in flat], pa.binary())],
        fields=list(HEADER_TYPE),
    )
    offsets = pa.array(np.concatenate(([0], ends)).astype(np.int32))
    return pa.ListArray.from_arrays(offsets, entries)


class _Columns:
    """The buffers ``decode_v2_columns`` appends to (layout in ``_crecords.c``), for one
    Arrow batch: Arrow's arrays then use them without a copy, so a new set is made for
    the next batch."""

    __slots__ = ("columns", "headers")

    def __init__(self, include_headers: bool) -> None:
        zero = (0).to_bytes(4, "little")  # the first entry of an offsets buffer
        #: key offsets, key data, key validity, value offsets, value data, value validity,
        #: offsets, timestamps, timestamp types.
        self.columns = tuple(bytearray(zero if i in (0, 3) else b"") for i in range(9))
        #: list offsets, key offsets, key data, value offsets, value data, value validity.
        self.headers = (
            tuple(bytearray(zero if i in (0, 1, 3) else b"") for i in range(6))
            if include_headers
            else None
        )

    @property
    def rows(self) -> int:
        """Rows appended so far."""
        return len(self.columns[6]) // 8

    @property
    def data_bytes(self) -> int:
        """Key and value bytes appended so far."""
        return len(self.columns[1]) + len(self.columns[4])

    def arrays(self) -> tuple[list[pa.Array], pa.Array | None]:
        """The key, value, offset, timestamp and timestampType arrays, and the headers."""
        n = self.rows
        buf = [pa.py_buffer(b) for b in self.columns]
        key_offsets, key_data, key_valid, value_offsets, value_data, value_valid = buf[:6]
        columns = [
            pa.Array.from_buffers(pa.binary(), n, [key_valid, key_offsets, key_data]),
            pa.Array.from_buffers(pa.binary(), n, [value_valid, value_offsets, value_data]),
            pa.Array.from_buffers(pa.int64(), n, [None, buf[6]]),
            pa.Array.from_buffers(_TIMESTAMP, n, [None, buf[7]]),
            pa.Array.from_buffers(pa.int32(), n, [None, buf[8]]),
        ]
        if self.headers is None:
            return columns, None
        lists, k_offsets, k_data, v_offsets, v_data, v_valid = map(pa.py_buffer, self.headers)
        entries = len(self.headers[1]) // 4 - 1
        keys = pa.Array.from_buffers(pa.string(), entries, [None, k_offsets, k_data])
        keys.validate(full=True)  # header keys are UTF-8 strings: ArrowInvalid if not
        values = pa.Array.from_buffers(pa.binary(), entries, [v_valid, v_offsets, v_data])
        struct = pa.StructArray.from_arrays([keys, values], fields=list(HEADER_TYPE))
        headers = pa.Array.from_buffers(pa.list_(HEADER_TYPE), n, [None, lists], children=[struct])
        return columns, headers


class BatchBuilder:
    """One partition's records, fed batch by batch in offset order, into Arrow batches
    of at most :data:`ARROW_BATCH_ROWS` rows (or about :data:`ARROW_BATCH_BYTES`)."""

    def __init__(
        self,
        topic: str,
        partition: int,
        include_headers: bool,
        *,
        rows: int = ARROW_BATCH_ROWS,
        max_bytes: int = ARROW_BATCH_BYTES,
        bounds: Bounds = DEFAULT_BOUNDS,
        refused: records.Refused | None = None,
    ) -> None:
        self.topic = topic
        self.partition = partition
        # How much a compressed batch may inflate to; records over it go to _refused.
        self._bounds = bounds
        self._refused = refused
        self._include_headers = include_headers
        self._rows = rows
        self._max_bytes = max_bytes
        self._columns = _Columns(include_headers)
        self._messages: list[ConsumerMessage] = []

    def add(self, batch: Any, magic: int, start: int, stop: int) -> Iterator[pa.RecordBatch]:
        """Append the records of ``batch`` (a kept batch of a :class:`RecordSet`) with
        offsets in [``start``, ``stop``); yield the Arrow batches that fill up meanwhile.

        Raises :class:`~consumergroup.errors.CorruptMessageError` for a payload that
        cannot be decoded.
        """
        decode = records.decode_v2_columns
        if magic == 2 and decode is not None:
            if self._messages:
                yield self._flush_messages()
            yield from self._add_columns(decode, batch, start, stop)
            return
        if self._columns.rows:
            yield self._flush_columns()
        for chunk in records.decode_batch(
            self.topic, self.partition, batch, magic, start, self._rows, self._bounds, self._refused
        ):
            if chunk[-1].offset >= stop:
                chunk = chunk[: bisect_left(chunk, stop, key=_offset)]
            self._messages += chunk
            while len(self._messages) >= self._rows:
                yield self._flush_messages()

    def flush(self) -> pa.RecordBatch | None:
        """The Arrow batch of the records added since the last one, if any."""
        if self._columns.rows:
            return self._flush_columns()
        if self._messages:
            return self._flush_messages()
        return None

    def _add_columns(
        self, decode: records.DecodeV2Columns, batch: memoryview, start: int, stop: int
    ) -> Iterator[pa.RecordBatch]:
        try:
            head = records.v2_header(batch)
            window = records.record_window(batch, head, self._bounds)
        except Exception as exc:  # an unknown codec, or the codec's error
            raise records.undecodable(self.topic, self.partition, exc) from exc
        while True:  # at least one call: a batch of 0 records must hold no record bytes
            columns = self._columns
            at = window.pos, window.index
            try:
                window.pos, window.index, ended = decode(
                    window.buf,
                    window.pos,
                    window.index,
                    head.record_count,
                    head.base_offset,
                    head.last_delta,
                    head.timestamp,
                    head.log_append_time,
                    start,
                    stop,
                    self._rows - columns.rows,
                    self._max_bytes,
                    columns.columns,
                    columns.headers,
                    window.max_record,
                )
                if window.index >= head.record_count:
                    window.finish()
                elif not ended and (window.pos, window.index) == at:
                    # Stopped at a record the window holds only part of (a batch's
                    # rows are flushed before the next call, so nothing else stops
                    # a call before its first record).
                    skipped = window.more(head.base_offset, head.last_delta)
                    if skipped is not None and skipped[0] >= start:
                        (self._refused or records.log_refused)(
                            records.refused_record(
                                self.topic, self.partition, *skipped, self._bounds.max_record
                            )
                        )
            except Exception as exc:  # the decoder's ValueError or the codec's error
                raise records.undecodable(self.topic, self.partition, exc) from exc
            if columns.rows >= self._rows or columns.data_bytes >= self._max_bytes:
                yield self._flush_columns()
            if ended or window.index >= head.record_count:
                return

    def _flush_columns(self) -> pa.RecordBatch:
        columns, self._columns = self._columns, _Columns(self._include_headers)
        try:
            arrays, headers = columns.arrays()
        except pa.ArrowInvalid as exc:
            raise records.undecodable(self.topic, self.partition, exc) from exc
        return _record_batch(self.topic, self.partition, arrays, headers)

    def _flush_messages(self) -> pa.RecordBatch:
        """The first (at most) ``rows`` messages added, as an Arrow batch."""
        messages, self._messages = self._messages[: self._rows], self._messages[self._rows :]
        return build_batch(self.topic, self.partition, [messages], self._include_headers)
