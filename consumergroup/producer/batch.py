"""ProducerBatch: the records bound for one partition that travel in one record batch.

``send()`` appends a record's fields and its future to the partition's open batch
(plain list appends: nothing is encoded per call). The batch is encoded once, when the
sender first takes it, into a message-format v2 record batch with aiokafka's builder
(``aiokafka.record.default_records``: records, compression, CRC). A retry resends
the same bytes; when the producer id, epoch or base sequence change (an epoch bump,
KIP-360) only the header's fields and its CRC are rewritten, as Java's
``ProducerBatch.resetProducerState`` does.

Who touches what: the producer's ``send()`` appends (until the batch is closed); the
sender encodes, sends and completes it. All on the event loop.
"""

from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import Sequence

from aiokafka.record._crecords import crc32c_cython as _crc32c
from aiokafka.record.default_records import DefaultRecordBatchBuilder

from ..message import RecordHeader
from .metadata import RecordMetadata

__all__ = ["CODECS", "ProducerBatch", "record_size"]

#: The record batch attribute's codec id for each ``producer.compression``.
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}

# The v2 batch header: baseOffset int64 (0), batchLength int32 (8), partitionLeaderEpoch
# int32 (12), magic int8 (16), crc uint32 (17), attributes int16 (21), lastOffsetDelta
# int32 (23), baseTimestamp int64 (27), maxTimestamp int64 (35), producerId int64 (43),
# producerEpoch int16 (51), baseSequence int32 (53), records count int32 (57).
_CRC_AT, _CRC_FROM, _PRODUCER_AT = 17, 21, 43
_PRODUCER = struct.Struct(">qhi")
_CRC = struct.Struct(">I")
#: The batch header's size: what a batch costs beyond its records.
BATCH_OVERHEAD = 61
# Large enough that the builder never refuses a record (batch_size is ours to keep).
_NO_LIMIT = 1 << 30


def record_size(key: bytes | None, value: bytes | None, headers: Sequence[RecordHeader]) -> int:
    """A record's encoded size, at most (varint fields counted at their 5-byte worst,
    the header keys as UTF-8 at 3 bytes a character at worst)."""
    size = 21 + (len(key) if key is not None else 0) + (len(value) if value is not None else 0)
    for hkey, hvalue in headers:
        size += 10 + 3 * len(hkey) + (len(hvalue) if hvalue is not None else 0)
    return size


class ProducerBatch:
    """One partition's records for one record batch, their futures and delivery state."""

    __slots__ = (
        "attempts",
        "created",
        "done",
        "encoded_for",
        "futures",
        "partition",
        "payload",
        "records",
        "sequence",
        "size",
        "topic",
    )

    def __init__(self, topic: str, partition: int, loop: asyncio.AbstractEventLoop) -> None:
        self.topic = topic
        self.partition = partition
        # (timestamp ms, key, value, headers) per record, in send order.
        self.records: list[tuple[int, bytes | None, bytes | None, Sequence[RecordHeader]]] = []
        self.futures: list[asyncio.Future[RecordMetadata]] = []
        # Estimated encoded bytes (record_size per record): what buffer_memory counts.
        self.size = 0
        self.created = time.monotonic()
        self.attempts = 0
        # The base sequence once the sender took the batch (idempotence), else -1.
        self.sequence = -1
        # The encoded batch and the (producer id, epoch, sequence, transactional) it
        # carries; None until first sent.
        self.payload: bytearray | None = None
        self.encoded_for: tuple[int, int, int] | None = None
        # Set when every future has its outcome (flush() waits for it).
        self.done: asyncio.Future[None] = loop.create_future()

    def __len__(self) -> int:
        return len(self.futures)

    def encode(
        self, compression: int, producer_id: int, epoch: int, sequence: int, transactional: bool
    ) -> bytearray:
        """The record batch with these producer fields (built once; retries rewrite the
        header's producer fields and CRC in place)."""
        payload = self.payload
        wanted = (producer_id, epoch, sequence)
        if payload is None:
            builder = DefaultRecordBatchBuilder(
                magic=2,
                compression_type=compression,
                is_transactional=int(transactional),
                producer_id=producer_id,
                producer_epoch=epoch,
                base_sequence=sequence,
                batch_size=_NO_LIMIT,
            )
            append = builder.append
            for delta, (ts, key, value, headers) in enumerate(self.records):
                if type(headers) is not list:  # the builder takes lists only
                    headers = list(headers)
                append(delta, timestamp=ts, key=key, value=value, headers=headers)
            payload = self.payload = builder.build()
        elif self.encoded_for != wanted:
            _PRODUCER.pack_into(payload, _PRODUCER_AT, *wanted)
            _CRC.pack_into(payload, _CRC_AT, _crc32c(memoryview(payload)[_CRC_FROM:]))
        self.encoded_for = wanted
        return payload

    def complete(self, base_offset: int, append_time_ms: int) -> None:
        """Acknowledged at ``base_offset`` (-1: unknown); ``append_time_ms`` is the
        broker's timestamp for every record on a LogAppendTime topic, else -1."""
        topic, partition = self.topic, self.partition
        step = 1 if base_offset >= 0 else 0  # unknown offsets stay -1
        offset = base_offset
        for fut, record in zip(self.futures, self.records, strict=True):
            ts = record[0] if append_time_ms < 0 else append_time_ms
            try:  # noqa: SIM105 (a with-block per record costs more)
                fut.set_result(RecordMetadata(topic, partition, offset, ts))
            except asyncio.InvalidStateError:  # its owner cancelled it
                pass
            offset += step
        self._finish()

    def fail(self, error: BaseException) -> None:
        """Not delivered: every record's future gets ``error`` (a fresh copy each, so
        one exception object does not collect many tracebacks)."""
        for fut in self.futures:
            if not fut.done():
                fut.set_exception(_copy(error))
        self._finish()

    def _finish(self) -> None:
        self.payload = None  # its memory goes back at once
        self.records = []
        if not self.done.done():
            self.done.set_result(None)


def _copy(error: BaseException) -> BaseException:
    try:
        fresh = type(error)(*error.args)
    except Exception:  # a constructor with other arguments: share the one object
        return error
    fresh.__cause__ = error.__cause__
    return fresh
