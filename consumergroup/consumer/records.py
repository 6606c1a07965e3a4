"""Decode one partition's record set from a Fetch response into :class:`ConsumerMessage`\\ s.

This is the consumer's hot path. Batch framing, transaction filtering and offset
bookkeeping are done once per batch in Python. Message-format v2 records are parsed by
our C extension (``_crecords.c``), which builds the :class:`ConsumerMessage` objects
itself; without it (no compiler at install time, or ``CONSUMERGROUP_PURE_PYTHON=1``) by
its pure-Python twin in ``_pyrecords``, which also parses control records and the v0/v1
formats. Every byte from the network is parsed here, bounds-checked: a truncated or
corrupt record set raises :class:`~consumergroup.errors.CorruptMessageError`, never
reads past its buffer. A compressed batch is decoded from a bounded window of its
decompressed records (``inflate``): a record larger than the bound is skipped and
reported, the rest of the batch and partition read on.
"""

from __future__ import annotations

import logging
import struct
import warnings
from collections.abc import Callable, Iterator, Sequence
from types import ModuleType
from typing import NamedTuple

from consumergroup.errors import ConsumerError, CorruptMessageError, MessageTooLargeError
from consumergroup.message import ConsumerMessage

from .._dataclass import dataclass
from . import _pyrecords
from ._native import load_extension
from .inflate import DEFAULT_BOUNDS, Bounds, RecordWindow, open_stream, read_bounded

__all__ = [
    "AbortedTransactions",
    "DecodedChunk",
    "RecordSet",
    "Refused",
    "V2Header",
    "decode_batch",
    "decode_records",
    "decode_v2_columns",
    "log_refused",
    "record_window",
    "refused_record",
    "scan_records",
    "undecodable",
    "v2_header",
]

log = logging.getLogger(__name__)

# Every message format starts with offset (int64) + length (int32); the magic byte sits
# at the same place (byte 16) in v0, v1 (after the CRC) and v2 (after the leader epoch).
_LOG_OVERHEAD = 12
_MAGIC_OFFSET = 16
_LENGTH = struct.Struct(">i")
_SIZE_OFFSET = struct.Struct(">q")
# Smallest valid `length` per magic: v0 record = crc 4 + magic 1 + attributes 1 +
# key length 4 + value length 4; v1 adds an int64 timestamp; v2 batch header = leader
# epoch 4 + magic 1 + crc 4 + attributes 2 + last offset delta 4 + 2 timestamps 16 +
# producer id 8 + producer epoch 2 + base sequence 4 + record count 4. The headers are
# read with struct at fixed places, so shorter input is rejected before that.
_MIN_LENGTH = (14, 22, 49)
_MIN_ANY_LENGTH = _MIN_LENGTH[0]
# The v2 batch header (61 bytes), read with struct: constructing aiokafka's batch object
# per batch only to read these costs more. For the scan: base offset, CRC, attributes,
# last offset delta, producer id; for decoding: base offset, attributes, last offset
# delta, first and max timestamp, record count. The CRC covers the bytes from the
# attributes to the end.
_V2_SCAN = struct.Struct(">q9xIhi16xq")
_V2_DECODE = struct.Struct(">q13xhiqq14xi")
_V2_HEADER_SIZE = 61
# A v2 batch's attributes and record count (is it compressed, and how many records).
_V2_KIND = struct.Struct(">21xh34xi")
_V2_CRC_START = 21
_CODEC_MASK = 0x07
_LOG_APPEND_TIME = 0x08
_TRANSACTIONAL = 0x10
_CONTROL = 0x20
# Control record key: int16 version, int16 type (0 = ABORT, 1 = COMMIT).
_CONTROL_KEY = struct.Struct(">hh")
_CONTROL_ABORT = 0

#: ``decode_v2(body, pos, index, count, base_offset, last_delta, timestamp,
#: log_append_time, topic, partition, start, limit[, max_record]) -> (messages, pos,
#: index)``; see ``_crecords.c`` (and its twin :func:`._pyrecords.decode_v2`).
DecodeV2 = Callable[..., tuple[list[ConsumerMessage], int, int]]


#: ``decode_v2_columns(body, pos, index, count, base_offset, last_delta, timestamp,
#: log_append_time, start, stop, limit, max_bytes, columns, headers[, max_record]) -> (pos,
#: index, ended)``: the same records into Arrow-layout buffers (the Spark source's
#: path); see ``_crecords.c``.
DecodeV2Columns = Callable[..., tuple[int, int, bool]]

#: Told of each record skipped for being larger than ``Bounds.max_record`` (the error
#: names it); without one, :func:`log_refused`.
Refused = Callable[[ConsumerError], None]


def log_refused(error: ConsumerError) -> None:
    """Log a record skipped for its size (where nobody else is told)."""
    log.error("%s", error)


def _load_c_decoder(_crecords: ModuleType | None) -> DecodeV2 | None:
    """The C v2 decoder of the extension ``_crecords`` bound to :class:`ConsumerMessage`,
    or None: no extension (see :func:`~._native.load_extension`), or the class's slots
    are not what it fills (a warning then: the install works, more slowly)."""
    if _crecords is None:
        return None
    try:
        _crecords.bind(ConsumerMessage)
    except TypeError as exc:
        warnings.warn(
            f"consumergroup's C record decoder is disabled ({exc}); using the slower Python path",
            RuntimeWarning,
            stacklevel=2,
        )
        return None
    decode: DecodeV2 = _crecords.decode_v2
    return decode


_crecords_module = load_extension("_crecords")
_decode_v2 = _load_c_decoder(_crecords_module)
#: ``decode_v2_batch(batch, topic, partition, start, limit) -> list | None``: a whole
#: plain v2 batch in one C call (see :meth:`RecordSet.decode_whole`), or None with
#: :data:`_decode_v2` (the C decoder, bound).
DecodeV2Batch = Callable[[memoryview, str, int, int, int], "list[ConsumerMessage] | None"]
_decode_v2_batch: DecodeV2Batch | None = (
    _crecords_module.decode_v2_batch
    if _crecords_module is not None and _decode_v2 is not None
    else None
)
#: ``scan_v2(records, fetch_offset) -> (kept, count, next_offset, end) | None``: the
#: C scan of a record set of v2 batches (read uncommitted, no CRC checks), or None
#: without the extension; see :func:`scan_records`.
_scan_v2: (
    Callable[[object, int], tuple[list[tuple[memoryview, int, int]], int, int, int] | None] | None
) = _crecords_module.scan_v2 if _crecords_module is not None else None
#: The C column decoder, or None without the extension (callers then decode messages).
decode_v2_columns: DecodeV2Columns | None = (
    _crecords_module.decode_v2_columns if _crecords_module is not None else None
)


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


# init=True: the standard library's compiled __init__ (~0.35 us a call here, against ~1.6
# for _dataclass's shared one): a RecordSet is made per partition per answer, which on a
# caught-up partition is per record or two.
@dataclass(slots=True, init=True)
class RecordSet:
    """One partition's fetched record set, framed and filtered but not yet decoded.

    The fetch task builds it with :func:`scan_records` (batch headers only: offsets,
    control and aborted-transaction batches); the reader decodes it one batch at a
    time with :meth:`decode_batches`, so decoded messages are created just before
    they are handed out and die young. ``count`` is the number of records the kept
    batches hold at or after ``start`` (an upper bound on a compacted log).
    """

    topic: str
    partition: int
    start: int
    # (batch, magic, byte position): a view of the batch (v0/v1: of the one message)
    batches: list[tuple[memoryview, int, int]]
    count: int
    next_offset: int
    partial: bool
    bytes_consumed: int

    def decode_whole(self, limit: int = 0) -> list[ConsumerMessage] | None:
        """The messages of a record set that is one uncompressed v2 batch of at most
        ``limit`` records (0: any number), decoded in one call; None for any other record
        set (read it with :meth:`decode_batches`). A caught-up partition's record sets
        are nearly all such a batch, often of one record: this spares them the three
        generators a batch goes through. The same messages and errors as
        :meth:`decode_batches` (an empty list when every record is below ``start``)."""
        if len(self.batches) != 1:
            return None
        batch, magic, _ = self.batches[0]
        if magic != 2:
            return None
        try:
            if _decode_v2_batch is not None:  # header and records in one C call
                return _decode_v2_batch(batch, self.topic, self.partition, self.start, limit)
            attributes, count = _V2_KIND.unpack_from(batch)
            if attributes & _CODEC_MASK or (limit and count > limit):
                return None
            step = _PlainBatch(_v2_decoder(), self.topic, self.partition, batch, self.start, limit)
            return step()
        except CorruptMessageError:
            raise
        except Exception as exc:  # the decoder's ValueError: the payload is bad
            raise undecodable(self.topic, self.partition, exc) from exc

    def decode_batches(
        self, limit: int = 0, bounds: Bounds = DEFAULT_BOUNDS, refused: Refused | None = None
    ) -> Iterator[list[ConsumerMessage]]:
        """Yield the kept batches' messages, at most ``limit`` per list (0: a list per
        batch, or per window of a compressed one); raises CorruptMessageError for a
        payload that cannot be decoded. See :func:`decode_batch`."""
        for batch, magic, _ in self.batches:
            yield from decode_batch(
                self.topic, self.partition, batch, magic, self.start, limit, bounds, refused
            )


def scan_records(
    topic: str,
    partition: int,
    records: bytes | bytearray | memoryview | None,
    fetch_offset: int,
    *,
    read_committed: bool = False,
    aborted_transactions: Sequence[tuple[int, int]] | None = None,
    check_crcs: bool = False,
) -> RecordSet:
    """Frame a partition's record set (message format v0, v1 or v2) without decoding records.

    Control batches and (with ``read_committed``) batches of aborted transactions are
    dropped here; so are batches wholly below ``fetch_offset``. Raises
    :class:`~consumergroup.errors.CorruptMessageError` when the first complete batch
    is malformed; a malformed batch after good ones ends the set instead, so the good
    ones are delivered and the next fetch, which starts at the bad batch, raises.
    """
    if not records:
        return RecordSet(topic, partition, fetch_offset, [], 0, fetch_offset, False, 0)
    if _scan_v2 is not None and not read_committed and not check_crcs:
        # A caught-up partition's every answer: its v2 batches in one C call. None for
        # anything it does not read (another format, a batch to refuse): read on below.
        scanned = _scan_v2(records, fetch_offset)
        if scanned is not None:
            kept, count, next_offset, pos = scanned
            end = len(records)
            return RecordSet(
                topic, partition, fetch_offset, kept, count, next_offset, pos < end, pos
            )
    kept = []
    count = 0
    next_offset = fetch_offset
    pos = 0
    view = memoryview(records)
    end = len(view)
    txns = AbortedTransactions(aborted_transactions) if read_committed else None
    if check_crcs:
        # Only here (off by default): the package aiokafka.record imports its record
        # builders and, through aiokafka.util, packaging and async_timeout: ~30 % of a
        # consumer's start-up imports.
        from aiokafka.record.util import calc_crc32c
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
            batch = view[pos:batch_end]
            if magic == 2:
                first, crc, attributes, last_delta, producer_id = _V2_SCAN.unpack_from(view, pos)
                if check_crcs and calc_crc32c(batch[_V2_CRC_START:]) != crc:
                    raise CorruptMessageError("record batch CRC mismatch")
                batch_next = first + last_delta + 1
                keep = (
                    not (
                        txns is not None
                        and producer_id >= 0
                        and _skip_transactional(
                            batch, attributes, producer_id, txns, batch_next - 1
                        )
                    )
                    and not attributes & _CONTROL
                )
            else:  # one message (a compressed one holds more, up to its own offset)
                if check_crcs and not _pyrecords.legacy_crc_ok(batch):
                    raise CorruptMessageError("message CRC mismatch")
                first = _SIZE_OFFSET.unpack_from(view, pos)[0]
                batch_next = first + 1
                keep = True
        except Exception as exc:
            if next_offset != fetch_offset:
                break  # deliver what precedes the bad batch; refetching at it raises then
            raise _corrupt(topic, partition, pos, fetch_offset, exc) from exc
        if keep and batch_next > fetch_offset:
            kept.append((batch, magic, pos))
            count += batch_next - max(first, fetch_offset)
        if batch_next > next_offset:
            next_offset = batch_next
        pos = batch_end
    return RecordSet(topic, partition, fetch_offset, kept, count, next_offset, pos < end, pos)


def decode_batch(
    topic: str,
    partition: int,
    batch: memoryview,
    magic: int,
    start: int,
    limit: int = 0,
    bounds: Bounds = DEFAULT_BOUNDS,
    refused: Refused | None = None,
) -> Iterator[list[ConsumerMessage]]:
    """The messages of one kept batch from :func:`scan_records`, none below ``start``,
    in lists of at most ``limit`` messages (0: one list for the whole batch).

    A compressed batch is decompressed as a stream: each list comes from at most
    ``bounds.window`` decompressed bytes (or one record), and a record larger than
    ``bounds.max_record`` is skipped, passed to ``refused`` (if at or after ``start``).
    A v0/v1 compressed message is one message of those formats: it is refused whole
    (CorruptMessageError) when it inflates past ``bounds.max_record``.
    """
    steps = (
        _v2_steps(_v2_decoder(), topic, partition, batch, start, limit, bounds, refused)
        if magic == 2
        else _legacy_steps(topic, partition, batch, magic, start, limit, bounds)
    )
    while True:
        # One list per step. The C decoder's messages are not tracked by the cyclic
        # collector (see _crecords.c, msg_setattro): a handler keeping them costs it nothing.
        try:
            step = next(steps, None)
            if step is None:
                return
            chunk = step()
        except CorruptMessageError:
            raise
        except Exception as exc:  # the decoder's ValueError or the codec's: the payload is bad
            raise undecodable(topic, partition, exc) from exc
        if chunk:
            yield chunk


# A batch is decoded by running the callables one of these yields, one per list of at
# most ``limit`` messages; each is run before the next is asked for.
Steps = Iterator[Callable[[], list[ConsumerMessage]]]


def _v2_decoder() -> DecodeV2:
    """The C v2 decoder, or its pure-Python twin without the extension."""
    return _decode_v2 if _decode_v2 is not None else _pyrecords.decode_v2


def _v2_steps(
    decode_v2: DecodeV2,
    topic: str,
    partition: int,
    batch: memoryview,
    start: int,
    limit: int,
    bounds: Bounds,
    refused: Refused | None,
) -> Steps:
    """A v2 batch through ``decode_v2``, resuming at its byte position and record index."""
    if _V2_KIND.unpack_from(batch)[0] & _CODEC_MASK:
        yield from _inflated_steps(
            decode_v2,
            topic,
            partition,
            batch,
            v2_header(batch),
            start,
            limit,
            bounds,
            refused or log_refused,
        )
        return
    step = _PlainBatch(decode_v2, topic, partition, batch, start, limit)
    # At least one step: a batch of 0 records must still hold no record bytes.
    yield step
    while step.index < step.count:
        yield step


class _PlainBatch:
    """An uncompressed v2 batch through ``decode_v2``: each call returns its next list of
    at most ``limit`` messages, resuming at the byte position and record index the last
    one reached (``index`` of ``count``: how far it got)."""

    __slots__ = (
        "body",
        "count",
        "decode_v2",
        "first",
        "index",
        "last_delta",
        "limit",
        "log_append_time",
        "partition",
        "pos",
        "start",
        "timestamp",
        "topic",
    )

    def __init__(
        self,
        decode_v2: DecodeV2,
        topic: str,
        partition: int,
        batch: memoryview,
        start: int,
        limit: int,
    ) -> None:
        first, attributes, last_delta, first_ts, max_ts, count = _V2_DECODE.unpack_from(batch)
        self.decode_v2 = decode_v2
        self.topic, self.partition, self.start, self.limit = topic, partition, start, limit
        self.first, self.last_delta, self.count = first, last_delta, count
        self.log_append_time = bool(attributes & _LOG_APPEND_TIME)
        self.timestamp = max_ts if self.log_append_time else first_ts
        self.body = batch[_V2_HEADER_SIZE:]
        self.pos = self.index = 0

    def __call__(self) -> list[ConsumerMessage]:
        messages, self.pos, self.index = self.decode_v2(
            self.body,
            self.pos,
            self.index,
            self.count,
            self.first,
            self.last_delta,
            self.timestamp,
            self.log_append_time,
            self.topic,
            self.partition,
            self.start,
            self.limit,
        )
        return messages


def _inflated_steps(
    decode_v2: DecodeV2,
    topic: str,
    partition: int,
    batch: memoryview,
    header: V2Header,
    start: int,
    limit: int,
    bounds: Bounds,
    refused: Refused,
) -> Steps:
    """A compressed v2 batch through ``decode_v2`` in window mode, from a window of its
    decompressed records (see :class:`~.inflate.RecordWindow`). A step returns the
    messages of the records whole in the window (at most ``limit``); one that has none
    reads on first, or skips a record over the bound."""
    first, last_delta, _, count, timestamp, log_append_time = header
    window = record_window(batch, header, bounds)
    # decode_v2's arguments after the window's position, the same at every call.
    fixed = (count, first, last_delta, timestamp, log_append_time, topic, partition, start)

    def step() -> list[ConsumerMessage]:
        while True:
            messages, window.pos, window.index = decode_v2(
                window.buf, window.pos, window.index, *fixed, limit, bounds.max_record
            )
            if window.index >= count:
                window.finish()
                return messages
            if messages:
                return messages
            skipped = window.more(first, last_delta)
            if skipped is not None and skipped[0] >= start:
                refused(refused_record(topic, partition, *skipped, bounds.max_record))

    yield step
    while window.index < count:
        yield step


class V2Header(NamedTuple):
    """What decoding a v2 batch's records needs, read from its header."""

    base_offset: int
    #: The batch header's lastOffsetDelta: every record's offset delta is at most this.
    last_delta: int
    #: The compression codec (0: none).
    codec: int
    record_count: int
    #: The base the records' timestamp deltas apply to (for log-append time, every
    #: record's timestamp).
    timestamp: int
    log_append_time: bool


def v2_header(batch: memoryview) -> V2Header:
    """The header fields of one v2 batch from :func:`scan_records`."""
    first, attributes, last_delta, first_ts, max_ts, count = _V2_DECODE.unpack_from(batch)
    log_append_time = bool(attributes & _LOG_APPEND_TIME)
    return V2Header(
        first,
        last_delta,
        attributes & _CODEC_MASK,
        count,
        max_ts if log_append_time else first_ts,
        log_append_time,
    )


def record_window(batch: memoryview, header: V2Header, bounds: Bounds) -> RecordWindow:
    """The records of the v2 ``batch`` (with ``header``) to decode from: a window on
    their decompressed stream, or all of them when the batch is not compressed.
    ValueError (or the codec's error) for an unknown codec or a corrupt stream start."""
    body = batch[_V2_HEADER_SIZE:]
    if not header.codec:
        return RecordWindow.whole(body)
    return RecordWindow(open_stream(header.codec, body, bounds), bounds)


def refused_record(topic: str, partition: int, offset: int, size: int, bound: int) -> ConsumerError:
    """The error for a record skipped for being larger than ``bound``."""
    return ConsumerError(
        f"the record at offset {offset} inflates to {size} bytes, more than "
        f"consumer.fetch.max_record_bytes={bound}: it was skipped (the records after it are "
        "read on). To read it, raise consumer.fetch.max_record_bytes to at least its size "
        f"and consume the partition from offset {offset} again",
        topic=topic,
        partition=partition,
        cause=MessageTooLargeError(f"record of {size} bytes at offset {offset}"),
    )


def undecodable(topic: str, partition: int, exc: Exception) -> CorruptMessageError:
    """The error for a kept batch whose payload cannot be decoded (``exc``: the
    decoder's or the codec's)."""
    return CorruptMessageError(f"{topic}[{partition}]: cannot decode record batch: {exc!r}")


def _legacy_steps(
    topic: str,
    partition: int,
    message: memoryview,
    magic: int,
    start: int,
    limit: int,
    bounds: Bounds,
) -> Steps:
    """A v0/v1 message (a compressed one holds a few hundred at most): parsed whole by
    the first step, handed out ``limit`` at a time."""
    parsed: list[ConsumerMessage] = []

    def inflate(codec: int, compressed: memoryview) -> bytes:
        inner = read_bounded(open_stream(codec, compressed, bounds), bounds.max_record)
        if inner is None:
            raise ValueError(
                f"a compressed message-format v{magic} message inflates past "
                f"consumer.fetch.max_record_bytes={bounds.max_record}: raise it to read on"
            )
        return inner

    def first() -> list[ConsumerMessage]:
        parsed.extend(_pyrecords.decode_legacy(topic, partition, message, magic, start, inflate))
        return parsed[:limit] if limit else parsed

    def chunk(at: int) -> Callable[[], list[ConsumerMessage]]:
        return lambda: parsed[at : at + limit]

    yield first
    if limit:  # the steps run in turn: ``parsed`` is filled by now
        for at in range(limit, len(parsed), limit):
            yield chunk(at)


def _corrupt(
    topic: str, partition: int, pos: int, fetch_offset: int, exc: Exception
) -> CorruptMessageError:
    where = f"{topic}[{partition}] at byte {pos} of the record set fetched at {fetch_offset}"
    if isinstance(exc, CorruptMessageError):
        return CorruptMessageError(f"{where}: {exc.context}")
    # struct.error for a header cut short, ...
    return CorruptMessageError(f"{where}: cannot decode record batch: {exc!r}")


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
    """:func:`scan_records` and decode every kept batch at once (same rules and errors).

    A batch whose payload cannot be decoded ends the chunk when messages precede
    it (``next_offset`` is then that batch's first offset) and raises otherwise.
    """
    rs = scan_records(
        topic,
        partition,
        records,
        fetch_offset,
        read_committed=read_committed,
        aborted_transactions=aborted_transactions,
        check_crcs=check_crcs,
    )
    messages: list[ConsumerMessage] = []
    for batch, magic, pos in rs.batches:
        try:
            for chunk in decode_batch(topic, partition, batch, magic, fetch_offset):
                messages += chunk
        except CorruptMessageError:
            if not messages:
                raise
            return DecodedChunk(messages, messages[-1].offset + 1, False, pos)
    return DecodedChunk(messages, rs.next_offset, rs.partial, rs.bytes_consumed)


def _skip_transactional(
    batch: memoryview, attributes: int, producer_id: int, txns: AbortedTransactions, last: int
) -> bool:
    """Apply the read_committed rule to a v2 batch that has a producer id.

    Returns True for a transactional batch of an aborted transaction (to be skipped).
    """
    txns.advance(last)
    if attributes & _CONTROL:
        # A marker batch is rare (one per transaction): its first record's key says which.
        step = next(_v2_steps(_v2_decoder(), "", 0, batch, -1, 1, DEFAULT_BOUNDS, None))
        markers = step()
        if markers:
            key = markers[0].key
            if key is None or len(key) < _CONTROL_KEY.size:
                raise CorruptMessageError(f"control record key {key!r} is too short")
            if _CONTROL_KEY.unpack_from(key)[1] == _CONTROL_ABORT:
                txns.end(producer_id)
        return False
    return bool(attributes & _TRANSACTIONAL) and txns.is_aborted(producer_id)
