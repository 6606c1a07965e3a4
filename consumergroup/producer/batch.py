"""ProducerBatch: the records bound for one partition that travel in one record batch.

``send()`` encodes each record straight into its partition's open batch (a message-format
v2 record at the end of a bytearray, by the C extension ``_cproduce`` or its Python twin
:func:`_py_append`), so nothing per record is kept but its future and timestamp. The
batch is finished once, when the sender first takes it: the 61-byte header (left free at
the front of the buffer) is written in place and its CRC computed; a compressed batch gets
a new buffer of header and compressed records (aiokafka's codecs), or stays uncompressed
when that is no smaller, as Java's does. A retry resends the same bytes; when the
producer id, epoch or base sequence change (an epoch bump, KIP-360) only the header's
fields and its CRC are rewritten, as Java's ``ProducerBatch.resetProducerState`` does.

Who touches what: the producer's ``send()`` appends (until the batch is closed); the
sender encodes, sends, splits and completes it. All on the event loop.
"""

from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from aiokafka.codec import gzip_encode, lz4_encode, snappy_encode, zstd_encode
from aiokafka.record._crecords import crc32c_cython as _crc32c

from ..consumer._native import load_extension
from ..consumer._pyrecords import varint
from ..message import RecordHeader
from ..net.fetch import _uvarint_bytes as _uvarint
from .metadata import RecordMetadata

__all__ = ["CODECS", "FastSend", "ProducerBatch", "append_record", "record_size"]

#: The record batch attribute's codec id for each ``producer.compression``.
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
_COMPRESS: dict[int, Callable[[bytes], bytes]] = {
    1: gzip_encode,
    2: snappy_encode,
    3: lz4_encode,
    4: zstd_encode,
}
_TRANSACTIONAL = 0x10  # the attributes' isTransactional bit

# The v2 batch header: baseOffset int64 (0), batchLength int32 (8), partitionLeaderEpoch
# int32 (12), magic int8 (16), crc uint32 (17), attributes int16 (21), lastOffsetDelta
# int32 (23), baseTimestamp int64 (27), maxTimestamp int64 (35), producerId int64 (43),
# producerEpoch int16 (51), baseSequence int32 (53), records count int32 (57).
_HEADER = struct.Struct(">qiibIhiqqqhii")
_CRC_AT, _CRC_FROM, _PRODUCER_AT = 17, 21, 43
_PRODUCER = struct.Struct(">qhi")
_CRC = struct.Struct(">I")
#: The batch header's size: what a batch costs beyond its records.
BATCH_OVERHEAD = _HEADER.size


def _zigzag(value: int) -> bytes:
    return _uvarint((value << 1) ^ (value >> 63))


def _field(data: bytes | None) -> bytes:
    return b"\x01" if data is None else _zigzag(len(data)) + data  # -1 (null) is 0x01


def _py_append(
    buf: bytearray,
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[RecordHeader],
) -> int:
    """The Python twin of ``_cproduce.append``: one v2 record at the end of ``buf``."""
    parts = [b"\x00", _zigzag(timestamp_delta), _zigzag(offset_delta), _field(key)]
    parts += [_field(value), _zigzag(len(headers))]
    for hkey, hvalue in headers:
        parts += [_field(hkey.encode()), _field(hvalue)]
    body = b"".join(parts)
    record = _zigzag(len(body)) + body
    buf += record
    return len(record)


def _py_complete(
    futures: list[asyncio.Future[RecordMetadata]],
    timestamps: list[int],
    topic: str,
    partition: int,
    base_offset: int,
    append_time: int,
) -> None:
    """The Python twin of ``_cproduce.complete``."""
    step = 1 if base_offset >= 0 else 0  # unknown offsets stay -1
    offset = base_offset
    for fut, ts in zip(futures, timestamps, strict=True):
        try:  # noqa: SIM105 (a with-block per record costs more)
            fut.set_result(
                RecordMetadata(topic, partition, offset, ts if append_time < 0 else append_time)
            )
        except asyncio.InvalidStateError:  # its owner cancelled it
            pass
        offset += step


def _py_track(futures: list[asyncio.Future[RecordMetadata]]) -> None:
    """The Python twin of ``_cproduce.track``: without the extension every future is
    tracked by the garbage collector all along."""


_T = TypeVar("_T")


def _py_untrack(container: _T) -> _T:
    """The Python twin of ``_cproduce.untrack``: the collector keeps walking it."""
    return container


def _py_trim(buf: bytearray) -> None:
    """The Python twin of ``_cproduce.trim``: bytearray's own growth leaves little room."""


def _load() -> tuple[
    Callable[..., int],
    Callable[..., None],
    Callable[..., None],
    Callable[[_T], _T],
    Callable[[bytearray], None],
    Any,
]:
    module: Any = load_extension("_cproduce", "consumergroup.producer")
    pure = _py_append, _py_complete, _py_track, _py_untrack, _py_trim, None
    if module is None:
        return pure
    try:
        module.bind(RecordMetadata, asyncio.InvalidStateError)
    except TypeError:  # RecordMetadata changed shape: the Python twin still knows it
        return pure
    return (
        module.append,
        module.complete,
        module.track,
        module.untrack,
        module.trim,
        module.FastSend,
    )


#: ``append_record(buf, offset_delta, timestamp_delta, key, value, headers) -> bytes
#: taken``: the C encoder, or its Python twin without the extension. ``FastSend``:
#: ``send()``'s per-record path in C (the producer builds one at start), None without
#: the extension. ``_track``: gives a batch's futures back to the garbage collector,
#: which FastSend keeps them from while they are queued; ``_untrack(list)``: the
#: collector stops walking that list (and returns it); ``_trim(buffer)``: gives back the
#: room the encoder grew a batch's buffer by (it grows it by half when full), once the
#: batch is closed, so only open batches hold room beyond their records.
append_record, _complete, _track, _untrack, _trim, FastSend = _load()


def record_size(key: bytes | None, value: bytes | None, headers: Sequence[RecordHeader]) -> int:
    """A record's encoded size, at most (varint fields counted at their 5-byte worst,
    the header keys as UTF-8 at 3 bytes a character at worst)."""
    size = 21 + (len(key) if key is not None else 0) + (len(value) if value is not None else 0)
    for hkey, hvalue in headers:
        size += 10 + 3 * len(hkey) + (len(hvalue) if hvalue is not None else 0)
    return size


class ProducerBatch:
    """One partition's records for one record batch, their futures and delivery state.

    Out of the garbage collector's lists (_untrack): a batch refers to nothing that leads
    back to it (its ``done`` future's callbacks are flush()'s waiters and, after a
    split, the parent batch), and thousands are queued at a time, each promoted to the
    oldest generation, which would otherwise set off full collections every few
    thousand batches.
    """

    __slots__ = (
        "_done",
        "_finished",
        "_loop",
        "attempts",
        "base_timestamp",
        "buffer",
        "created",
        "encoded_for",
        "futures",
        "partition",
        "payload",
        "sequence",
        "size",
        "timestamps",
        "topic",
        "txn",
    )

    def __init__(
        self,
        topic: str,
        partition: int,
        loop: asyncio.AbstractEventLoop,
        base_timestamp: int,
        txn: int = 0,
    ) -> None:
        self.topic = topic
        self.partition = partition
        # The transaction it belongs to (the accumulator's ordinal; 0 without them).
        self.txn = txn
        # The records, encoded by append_record after a header's room (written at
        # encode()); their timestamp deltas count from base_timestamp, their offset
        # deltas from 0 (the record's index).
        self.buffer = bytearray(BATCH_OVERHEAD)
        self.base_timestamp = base_timestamp
        # Per record, in send order: its timestamp (ms) and its future. Lists of ints and
        # of futures close no reference cycle: the garbage collector need not walk them
        # (thousands of records per batch, every batch queued; _untrack).
        self.timestamps: list[int] = _untrack([])
        self.futures: list[asyncio.Future[RecordMetadata]] = _untrack([])
        # Estimated encoded bytes (record_size per record): what buffer_memory counts.
        self.size = 0
        self.created = time.monotonic()
        self.attempts = 0
        # The base sequence once the sender took the batch (idempotence), else -1.
        self.sequence = -1
        # The encoded batch and the (producer id, epoch, sequence) it carries; None until
        # first sent.
        self.payload: bytearray | None = None
        self.encoded_for: tuple[int, int, int] | None = None
        # Resolved once every future has its outcome (flush() waits for it): made when
        # first asked for (done_future()); _finished says the outcome is in.
        self._loop = loop
        self._done: asyncio.Future[None] | None = None
        self._finished = False
        _untrack(self)

    def __len__(self) -> int:
        return len(self.futures)

    def done_future(self) -> asyncio.Future[None]:
        """A future resolved once every record of the batch has its outcome."""
        if self._done is None:
            self._done = self._loop.create_future()
            if self._finished:
                self._done.set_result(None)
        return self._done

    def append(
        self,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[RecordHeader],
        future: asyncio.Future[RecordMetadata],
    ) -> None:
        """One record (what ``send()`` inlines; splits and tests call this)."""
        append_record(
            self.buffer, len(self.futures), timestamp - self.base_timestamp, key, value, headers
        )
        self.timestamps.append(timestamp)
        self.futures.append(future)

    def encode(
        self, compression: int, producer_id: int, epoch: int, sequence: int, transactional: bool
    ) -> bytearray:
        """The record batch with these producer fields (built once; retries rewrite the
        header's producer fields and CRC in place)."""
        payload = self.payload
        wanted = (producer_id, epoch, sequence)
        if payload is None:
            payload = self.buffer
            _trim(payload)
            attributes = _TRANSACTIONAL if transactional else 0
            if compression:
                records = bytes(memoryview(payload)[BATCH_OVERHEAD:])
                compressed = _COMPRESS[compression](records)
                if len(compressed) < len(records):  # else sent as it is, as Java does
                    payload = bytearray(BATCH_OVERHEAD) + compressed
                    attributes |= compression
            count = len(self.futures)
            _HEADER.pack_into(
                payload,
                0,
                0,  # base offset: the broker assigns it
                len(payload) - 12,  # batch length: what follows it
                -1,  # partition leader epoch: the broker's to set
                2,  # magic
                0,  # CRC: below
                attributes,
                count - 1,
                self.base_timestamp,
                max(self.timestamps),
                producer_id,
                epoch,
                sequence,
                count,
            )
            self.payload = payload
        elif self.encoded_for == wanted:
            return payload
        else:
            _PRODUCER.pack_into(payload, _PRODUCER_AT, *wanted)
        _CRC.pack_into(payload, _CRC_AT, _crc32c(memoryview(payload)[_CRC_FROM:]))
        self.encoded_for = wanted
        return payload

    def split(self, loop: asyncio.AbstractEventLoop) -> tuple[ProducerBatch, ProducerBatch]:
        """Two batches of this one's records, halves in order (for a batch the broker
        refused as too large: Java's ``ProducerBatch.split``). They keep its creation
        time (the delivery timeout counts from send()), its attempts, its sequence range
        (the first half at its base sequence, the second after it) and its memory; this
        batch's ``done`` is set once both are. This batch is left empty."""
        records = _decode(memoryview(self.buffer)[BATCH_OVERHEAD:])
        half = len(records) // 2
        halves = []
        for part in (slice(0, half), slice(half, None)):
            timestamps = self.timestamps[part]
            batch = ProducerBatch(self.topic, self.partition, loop, timestamps[0])
            for (key, value, headers), ts, fut in zip(
                records[part], timestamps, self.futures[part], strict=True
            ):
                batch.append(ts, key, value, headers, fut)
            batch.created, batch.attempts = self.created, self.attempts
            halves.append(batch)
        first, second = halves
        first.size = self.size * half // len(records)
        second.size = self.size - first.size
        if self.sequence >= 0:
            first.sequence, second.sequence = self.sequence, self.sequence + half
        remaining = [2]

        def one_done(_: asyncio.Future[None]) -> None:
            remaining[0] -= 1
            if not remaining[0]:
                self._finish()

        first.done_future().add_done_callback(one_done)
        second.done_future().add_done_callback(one_done)
        self.payload, self.buffer = None, bytearray()
        self.futures, self.timestamps = _untrack([]), _untrack([])
        return first, second

    def complete(self, base_offset: int, append_time_ms: int) -> None:
        """Acknowledged at ``base_offset`` (-1: unknown); ``append_time_ms`` is the
        broker's timestamp for every record on a LogAppendTime topic, else -1."""
        _complete(
            self.futures, self.timestamps, self.topic, self.partition, base_offset, append_time_ms
        )
        self._finish()

    def fail(self, error: BaseException) -> None:
        """Not delivered: every record's future gets ``error`` (a fresh copy each, so
        one exception object does not collect many tracebacks)."""
        _track(self.futures)
        for fut in self.futures:
            if not fut.done():
                fut.set_exception(_copy(error))
        self._finish()

    def _finish(self) -> None:
        self.payload = None  # its memory goes back at once
        self.buffer = bytearray()
        self._finished = True
        if self._done is not None and not self._done.done():
            self._done.set_result(None)


def _decode(body: memoryview) -> list[tuple[bytes | None, bytes | None, list[RecordHeader]]]:
    """(key, value, headers) of each record that append_record wrote (split() re-encodes
    them into smaller batches; rare, so Python)."""
    out = []
    pos, end = 0, len(body)
    while pos < end:
        length, pos = varint(body, pos, end)
        stop = pos + length
        pos += 1  # attributes
        _ts_delta, pos = varint(body, pos, stop)
        _offset_delta, pos = varint(body, pos, stop)
        key, pos = _bytes(body, pos, stop)
        value, pos = _bytes(body, pos, stop)
        count, pos = varint(body, pos, stop)
        headers: list[RecordHeader] = []
        for _ in range(count):
            hkey, pos = _bytes(body, pos, stop)
            hvalue, pos = _bytes(body, pos, stop)
            headers.append((bytes(hkey or b"").decode(), hvalue))
        out.append((key, value, headers))
        pos = stop
    return out


def _bytes(body: memoryview, pos: int, end: int) -> tuple[bytes | None, int]:
    length, pos = varint(body, pos, end)
    if length < 0:
        return None, pos
    return bytes(body[pos : pos + length]), pos + length


def _copy(error: BaseException) -> BaseException:
    try:
        fresh = type(error)(*error.args)
    except Exception:  # a constructor with other arguments: share the one object
        return error
    fresh.__cause__ = error.__cause__
    return fresh
