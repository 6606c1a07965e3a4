"""Decode one partition's record set from a Fetch response into :class:`ConsumerMessage`\\ s.

This is the consumer's hot path. Batch framing, transaction filtering and offset
bookkeeping are done once per batch in Python; record parsing and decompression are
done by aiokafka's C-accelerated record readers (pure-Python fallback when aiokafka runs
without extensions). Per record we only read the C record's fields and build one
:class:`ConsumerMessage`, inside a list comprehension.
"""

from __future__ import annotations

import gc
import struct
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import dropwhile
from typing import Any

from aiokafka.record.default_records import DefaultRecordBatch
from aiokafka.record.legacy_records import LegacyRecordBatch

from consumergroup.errors import CorruptMessageError
from consumergroup.message import NO_TIMESTAMP_TYPE, ConsumerMessage, FetchedMessage

__all__ = ["AbortedTransactions", "DecodedChunk", "decode_records"]

# Every message format starts with offset (int64) + length (int32); the magic byte sits
# at the same place (byte 16) in v0, v1 (after the CRC) and v2 (after the leader epoch).
_LOG_OVERHEAD = 12
_MAGIC_OFFSET = 16
_LENGTH = struct.Struct(">i")
# Smallest valid `length` per magic: v0 record = crc 4 + magic 1 + attributes 1 +
# key length 4 + value length 4; v1 adds an int64 timestamp; v2 batch header = leader
# epoch 4 + magic 1 + crc 4 + attributes 2 + last offset delta 4 + 2 timestamps 16 +
# producer id 8 + producer epoch 2 + base sequence 4 + record count 4. The C readers do
# not bounds-check the header, so shorter input must be rejected before reaching them.
_MIN_LENGTH = (14, 22, 49)
_MIN_ANY_LENGTH = _MIN_LENGTH[0]
# Control record key: int16 version, int16 type (0 = ABORT, 1 = COMMIT).
_CONTROL_KEY = struct.Struct(">hh")
_CONTROL_ABORT = 0
# Shared by records without headers: an empty list per message would be one more
# GC-tracked object kept alive per record.
_NO_HEADERS: tuple[()] = ()


@dataclass(slots=True)
class DecodedChunk:
    """The result of decoding one partition's record set.

    ``messages``: user-visible records in offset order; none below the fetch offset,
    no control records, no records of aborted transactions (read_committed).
    ``next_offset``: the offset to fetch next: the last offset + 1 of the last complete
    batch (even when that batch was a control batch or filtered out), or the fetch
    offset when the record set holds no complete batch.
    ``partial``: the record set ended with an incomplete batch (the broker cut it at the
    fetch size). ``partial`` with ``next_offset == fetch_offset`` means the first batch
    is larger than the fetch size allowed.
    ``bytes_consumed``: bytes of the record set covered by the complete batches.
    """

    messages: list[ConsumerMessage]
    next_offset: int
    partial: bool
    bytes_consumed: int


class AbortedTransactions:
    """The aborted-producer state of Kafka's read_committed filter for one record set.

    Fed with the Fetch response's ``(producer_id, first_offset)`` list; the record set's
    batches must then be presented in offset order. A producer id becomes aborted once
    a batch reaching its transaction's first offset is seen, and stops being aborted at
    its ABORT control marker (the rule of Kafka's Java Fetcher and sarama).
    """

    __slots__ = ("_pending", "producers")

    def __init__(self, aborted: Sequence[tuple[int, int]] | None) -> None:
        # Descending by first offset so pop() yields the next transaction in O(1).
        self._pending = sorted(aborted or (), key=lambda txn: txn[1], reverse=True)
        #: Producer ids whose transactional batches are currently being skipped.
        self.producers: set[int] = set()

    def advance(self, last_offset: int) -> None:
        """Mark aborted every producer whose aborted transaction starts at or before
        ``last_offset`` (the last offset of the batch about to be handled)."""
        pending = self._pending
        while pending and pending[-1][1] <= last_offset:
            self.producers.add(pending.pop()[0])

    def is_aborted(self, producer_id: int) -> bool:
        """Whether a transactional batch from ``producer_id`` is to be skipped."""
        return producer_id in self.producers

    def end(self, producer_id: int) -> None:
        """Record ``producer_id``'s ABORT marker: its later batches are a new transaction."""
        self.producers.discard(producer_id)


def decode_records(
    topic: str,
    partition: int,
    records: bytes | bytearray | memoryview | None,
    fetch_offset: int,
    *,
    read_committed: bool = False,
    aborted_transactions: Sequence[tuple[int, int]] | None = None,
    check_crcs: bool = False,
) -> DecodedChunk:
    """Decode a partition's record set (message format v0, v1 or v2, any codec).

    ``records`` is the Fetch response's record set for ``topic``/``partition``, fetched
    at ``fetch_offset``. With ``read_committed``, ``aborted_transactions`` is the
    response's ``(producer_id, first_offset)`` list and records of aborted transactions
    are dropped; control records are always dropped. ``check_crcs`` verifies each
    batch's CRC (off by default: costly, and brokers validate on produce).

    Raises :class:`~consumergroup.errors.CorruptMessageError` when the first complete
    batch is malformed. A malformed batch after good ones ends the chunk instead, so the
    good records are delivered and the next fetch, which starts at the bad batch, raises.
    """
    if not records:
        return DecodedChunk([], fetch_offset, False, 0)
    # Every record yields a GC-tracked ConsumerMessage that outlives the decode, so the
    # cyclic collector would run a young-generation pass every 700 of them and promote
    # them, over and over, while nothing created here can form a reference cycle. Holding
    # it off for the (synchronous) decode cut the cost per record by a third in
    # bench/decode_micro.py; the deferred pass then visits each new message once.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _decode(
            topic,
            partition,
            records,
            fetch_offset,
            read_committed,
            aborted_transactions,
            check_crcs,
        )
    finally:
        if gc_was_enabled:
            gc.enable()


def _decode(
    topic: str,
    partition: int,
    records: bytes | bytearray | memoryview,
    fetch_offset: int,
    read_committed: bool,
    aborted_transactions: Sequence[tuple[int, int]] | None,
    check_crcs: bool,
) -> DecodedChunk:
    """:func:`decode_records` for a non-empty record set, with the GC already held off."""
    view = memoryview(records)
    end = len(view)
    txns = AbortedTransactions(aborted_transactions) if read_committed else None
    messages: list[ConsumerMessage] = []
    next_offset = fetch_offset
    pos = 0
    while end - pos >= _LOG_OVERHEAD:
        length = _LENGTH.unpack_from(view, pos + 8)[0]
        batch_end = pos + _LOG_OVERHEAD + length
        if batch_end > end:
            break
        try:
            if length < _MIN_ANY_LENGTH:
                raise CorruptMessageError(f"record batch length {length} is too small")
            magic = view[pos + _MAGIC_OFFSET]
            if magic > 2:
                raise CorruptMessageError(f"unknown message format (magic {magic})")
            if length < _MIN_LENGTH[magic]:
                raise CorruptMessageError(
                    f"record batch length {length} is too small for magic {magic}"
                )
            if magic == 2:
                batch = DefaultRecordBatch(view[pos:batch_end])
                if check_crcs and not batch.validate_crc():
                    raise CorruptMessageError("record batch CRC mismatch")
                batch_next: int = batch.next_offset
                if (
                    txns is not None
                    and batch.producer_id >= 0
                    and _skip_transactional(batch, txns, batch_next - 1)
                ):
                    pass  # a batch of an aborted transaction
                elif batch.is_control_batch or batch_next <= fetch_offset:
                    pass  # control records never reach users; nothing new in this batch
                else:
                    ts_type: int = batch.timestamp_type
                    if batch.base_offset < fetch_offset:
                        source = _from_offset(batch, fetch_offset)
                    else:
                        source = batch
                    messages += [FetchedMessage(topic, partition, r, ts_type) for r in source]
            else:
                legacy = LegacyRecordBatch(view[pos:batch_end], magic)
                if check_crcs and not legacy.validate_crc():
                    raise CorruptMessageError("message CRC mismatch")
                batch_next = legacy.next_offset
                if batch_next > fetch_offset:
                    # v0 has no timestamps; v1 carries them per record (the reader
                    # already applies a compressed wrapper's log-append time).
                    messages += [
                        ConsumerMessage(
                            topic,
                            partition,
                            r.offset,
                            r.key,
                            r.value,
                            _NO_HEADERS,
                            r.timestamp if magic else -1,
                            r.timestamp_type if magic else NO_TIMESTAMP_TYPE,
                        )
                        for r in _from_offset(legacy, fetch_offset)
                    ]
        except Exception as exc:
            if messages or next_offset != fetch_offset:
                # Deliver what precedes the bad batch; refetching at it raises then.
                return DecodedChunk(messages, next_offset, False, pos)
            where = (
                f"{topic}[{partition}] at byte {pos} of the record set fetched at {fetch_offset}"
            )
            if isinstance(exc, CorruptMessageError):
                raise CorruptMessageError(f"{where}: {exc.context}") from None
            # aiokafka's readers raise their own CorruptRecordException, struct.error,
            # cramjam's DecompressionError, ...: all mean the bytes are bad.
            raise CorruptMessageError(f"{where}: cannot decode record batch: {exc!r}") from exc
        if batch_next > next_offset:
            next_offset = batch_next
        pos = batch_end
    return DecodedChunk(messages, next_offset, pos < end, pos)


def _from_offset(records: Iterable[Any], fetch_offset: int) -> Iterator[Any]:
    """``records`` from ``fetch_offset`` on: a compressed batch may start before it.

    Offsets increase within a batch, so only the leading records need the check.
    """
    return dropwhile(lambda record: record.offset < fetch_offset, records)


def _skip_transactional(batch: DefaultRecordBatch, txns: AbortedTransactions, last: int) -> bool:
    """Apply the read_committed rule to a v2 batch that has a producer id.

    Returns True for a transactional batch of an aborted transaction (to be skipped).
    """
    producer_id: int = batch.producer_id
    txns.advance(last)
    if batch.is_control_batch:
        marker = next(batch, None)
        if marker is not None:
            key = marker.key
            if key is None or len(key) < _CONTROL_KEY.size:
                raise CorruptMessageError(f"control record key {key!r} is too short")
            if _CONTROL_KEY.unpack_from(key)[1] == _CONTROL_ABORT:
                txns.end(producer_id)
        return False
    return bool(batch.is_transactional) and txns.is_aborted(producer_id)
