"""Record decoding: consumergroup.message and consumergroup.consumer.records.

Record sets are built with aiokafka's batch builders, then patched the way a broker
patches them (base offset, log-append time, control flag) where the builders cannot.
"""

from __future__ import annotations

import gc
import struct
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest
from aiokafka.consumer.fetcher import READ_UNCOMMITTED, PartitionRecords
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from aiokafka.record.legacy_records import LegacyRecordBatchBuilder
from aiokafka.record.memory_records import MemoryRecords
from aiokafka.record.util import calc_crc32c
from aiokafka.structs import TopicPartition
from hypothesis import given, settings
from hypothesis import strategies as st

from consumergroup.consumer import records as records_module
from consumergroup.consumer.records import AbortedTransactions, DecodedChunk, decode_records
from consumergroup.errors import CorruptMessageError
from consumergroup.message import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    NO_TIMESTAMP_TYPE,
    ConsumerMessage,
    RecordHeader,
)
from tests.fuzz import examples

TOPIC = "orders"
PARTITION = 3
NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
TS = 1_700_000_000_123


@dataclass
class Rec:
    """A record to write: its absolute offset and contents."""

    offset: int
    key: bytes | None = b"k"
    value: bytes | None = b"v"
    headers: list[RecordHeader] = field(default_factory=list)
    timestamp: int = TS


def recs(first: int, count: int) -> list[Rec]:
    """``count`` records with distinct contents from offset ``first``."""
    return [
        Rec(o, f"key-{o}".encode(), f"value-{o}".encode(), [("n", str(o).encode())], TS + o)
        for o in range(first, first + count)
    ]


def v2_batch(
    records: Sequence[Rec],
    codec: int = NONE,
    *,
    producer_id: int = -1,
    transactional: bool = False,
    control: bool = False,
    log_append_time: int | None = None,
) -> bytes:
    """A v2 record batch at ``records[0].offset``, as a broker stores it."""
    base = records[0].offset
    builder = DefaultRecordBatchBuilder(
        2, codec, int(transactional), producer_id, 0 if producer_id >= 0 else -1, 0, 1 << 20
    )
    for r in records:
        assert builder.append(r.offset - base, r.timestamp, r.key, r.value, r.headers)
    batch = bytearray(builder.build())
    struct.pack_into(">q", batch, 0, base)
    attributes = struct.unpack_from(">h", batch, 21)[0]
    if control:
        attributes |= 0x20
    if log_append_time is not None:
        attributes |= 0x08
        struct.pack_into(">q", batch, 35, log_append_time)  # max timestamp
    struct.pack_into(">h", batch, 21, attributes)
    struct.pack_into(">I", batch, 17, calc_crc32c(bytes(batch[21:])))
    return bytes(batch)


def control_batch(offset: int, producer_id: int, *, abort: bool) -> bytes:
    """A transaction marker: key = int16 version + int16 type, value = version + epoch."""
    key = struct.pack(">hh", 0, 0 if abort else 1)
    value = struct.pack(">hi", 0, 7)
    marker = Rec(offset, key, value)
    return v2_batch([marker], producer_id=producer_id, transactional=True, control=True)


def legacy_set(
    magic: int, records: Sequence[Rec], codec: int = NONE, *, log_append_time: int | None = None
) -> bytes:
    """A v0/v1 message set; compressed, one wrapper message as a broker stores it."""
    base = records[0].offset
    builder = LegacyRecordBatchBuilder(magic, codec, 1 << 20)
    for i, r in enumerate(records):
        # Compressed v1 inner offsets are relative, v0 ones absolute.
        inner = i if codec and magic == 1 else r.offset
        assert builder.append(inner, r.timestamp, r.key, r.value)
    data = bytearray(builder.build())
    if codec:
        struct.pack_into(">q", data, 0, base + len(records) - 1)  # wrapper = last offset
        if log_append_time is not None:
            data[17] |= 0x08
            struct.pack_into(">q", data, 18, log_append_time)
            struct.pack_into(">I", data, 12, zlib.crc32(bytes(data[16:])))
    return bytes(data)


def expected(
    records: Sequence[Rec], *, magic: int = 2, timestamp: int | None = None
) -> list[ConsumerMessage]:
    """The messages ``records`` decode to."""
    out = []
    for r in records:
        if magic == 0:
            ts, ts_type = -1, NO_TIMESTAMP_TYPE
        elif timestamp is not None:
            ts, ts_type = timestamp, LOG_APPEND_TIME
        else:
            ts, ts_type = r.timestamp, CREATE_TIME
        headers = r.headers if magic == 2 else []
        out.append(
            ConsumerMessage(TOPIC, PARTITION, r.offset, r.key, r.value, headers, ts, ts_type)
        )
    return out


def decode(
    data: bytes | bytearray | memoryview | None,
    fetch_offset: int,
    *,
    read_committed: bool = False,
    aborted_transactions: list[tuple[int, int]] | None = None,
    check_crcs: bool = False,
) -> DecodedChunk:
    """decode_records for TOPIC/PARTITION."""
    return decode_records(
        TOPIC,
        PARTITION,
        data,
        fetch_offset,
        read_committed=read_committed,
        aborted_transactions=aborted_transactions,
        check_crcs=check_crcs,
    )


def c_decoder() -> records_module.DecodeV2:
    """Our C v2 decoder, bound (also when CONSUMERGROUP_PURE_PYTHON kept records.py off it).

    Skips when the extension was not built: test_crecords.py's
    test_the_c_decoder_is_built_and_used is the one test that fails then.
    """
    _crecords: Any = pytest.importorskip("consumergroup.consumer._crecords")
    _crecords.bind(ConsumerMessage)
    return _crecords.decode_v2


def c_decoder_batch() -> records_module.DecodeV2Batch:
    """Our C decoder of a whole batch (:func:`c_decoder`'s, bound)."""
    c_decoder()
    _crecords: Any = pytest.importorskip("consumergroup.consumer._crecords")
    return _crecords.decode_v2_batch


@pytest.fixture(params=["cdecoder", "python"])
def readers(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Run a test on our C v2 decoder and on its pure-Python twin (the path without the
    extension); v0/v1 messages and control records take the Python parsers on both."""
    c = request.param == "cdecoder"
    monkeypatch.setattr(records_module, "_decode_v2", c_decoder() if c else None)
    monkeypatch.setattr(records_module, "_decode_v2_batch", c_decoder_batch() if c else None)
    yield request.param


CODECS = [
    (0, NONE),
    (0, GZIP),
    (0, SNAPPY),
    (1, NONE),
    (1, GZIP),
    (1, SNAPPY),
    (1, LZ4),
    (2, NONE),
    (2, GZIP),
    (2, SNAPPY),
    (2, LZ4),
    (2, ZSTD),
]


def record_set(magic: int, codec: int, records: Sequence[Rec]) -> bytes:
    return v2_batch(records, codec) if magic == 2 else legacy_set(magic, records, codec)


# --- ConsumerMessage -------------------------------------------------------------------


def test_message_fields_eq_and_repr() -> None:
    m = ConsumerMessage("t", 1, 5, b"k", None, [("h", b"x")], TS, CREATE_TIME)
    assert (m.topic, m.partition, m.offset, m.key, m.value) == ("t", 1, 5, b"k", None)
    assert list(m.headers) == [("h", b"x")]
    assert m == ConsumerMessage("t", 1, 5, b"k", None, (("h", b"x"),), TS, CREATE_TIME)
    assert m != ConsumerMessage("t", 1, 6, b"k", None, [("h", b"x")], TS, CREATE_TIME)
    assert m != ConsumerMessage("t", 1, 5, b"k", None, [("h", b"x")], TS, LOG_APPEND_TIME)
    assert m != ("t", 1, 5)
    assert repr(m) == (
        "ConsumerMessage(topic='t', partition=1, offset=5, key=b'k', value=None, "
        f"headers=[('h', b'x')], timestamp_ms={TS}, timestamp_type=0)"
    )


def test_timestamp_is_utc_aware_and_exact() -> None:
    m = ConsumerMessage("t", 0, 0, None, None, (), TS, CREATE_TIME)
    assert m.timestamp == datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=UTC)
    assert m.timestamp.tzinfo is UTC
    unknown = ConsumerMessage("t", 0, 0, None, None, (), -1, NO_TIMESTAMP_TYPE)
    assert unknown.timestamp == datetime(1970, 1, 1, tzinfo=UTC)


# --- decode_records: contents ----------------------------------------------------------


def test_round_trip_keys_values_headers_timestamps(readers: str) -> None:
    records = [
        Rec(10, None, b"no key"),
        Rec(11, b"no value", None),
        Rec(12, b"", b""),
        Rec(13, b"\x00\xff" * 300, b"x" * 5000, [("a", b"1"), ("a", b"2"), ("null", None)]),
        Rec(14, b"k", b"v", [("\u00e9t\u00e9", b"")], timestamp=0),
    ]
    chunk = decode(v2_batch(records), 10)
    assert chunk.messages == expected(records)
    # A tuple: the collector untracks it, so a kept message is one tracked object.
    assert [m.headers for m in chunk.messages][3] == (("a", b"1"), ("a", b"2"), ("null", None))
    assert chunk.messages[4].timestamp == datetime(1970, 1, 1, tzinfo=UTC)
    assert (chunk.next_offset, chunk.partial, chunk.bytes_consumed) == (
        15,
        False,
        len(v2_batch(records)),
    )


@pytest.mark.parametrize(("magic", "codec"), CODECS)
def test_every_codec_and_magic(readers: str, magic: int, codec: int) -> None:
    first, second = recs(100, 5), recs(105, 3)
    data = record_set(magic, codec, first) + record_set(magic, codec, second)
    chunk = decode(data, 100)
    assert chunk.messages == expected(first + second, magic=magic)
    assert chunk.next_offset == 108
    assert not chunk.partial
    assert chunk.bytes_consumed == len(data)


@pytest.mark.parametrize(("magic", "codec"), [c for c in CODECS if c[1] != NONE])
def test_fetch_offset_inside_a_compressed_batch(readers: str, magic: int, codec: int) -> None:
    records = recs(50, 6)
    chunk = decode(record_set(magic, codec, records) + record_set(magic, codec, recs(56, 2)), 53)
    assert [m.offset for m in chunk.messages] == [53, 54, 55, 56, 57]
    assert chunk.messages[0] == expected(records, magic=magic)[3]
    assert chunk.next_offset == 58


def test_fetch_offset_inside_uncompressed_v2_batch(readers: str) -> None:
    chunk = decode(v2_batch(recs(0, 4)), 2)
    assert [m.offset for m in chunk.messages] == [2, 3]


def test_batch_wholly_before_fetch_offset_is_skipped(readers: str) -> None:
    chunk = decode(v2_batch(recs(0, 3)) + v2_batch(recs(3, 2)), 3)
    assert [m.offset for m in chunk.messages] == [3, 4]
    assert chunk.next_offset == 5
    assert decode(v2_batch(recs(0, 3)), 9).next_offset == 9


def test_offset_gaps_from_compaction(readers: str) -> None:
    records = [Rec(7), Rec(9), Rec(12)]
    chunk = decode(v2_batch(records, LZ4), 0)
    assert chunk.messages == expected(records)
    assert chunk.next_offset == 13


def test_log_append_time_v2(readers: str) -> None:
    chunk = decode(v2_batch(recs(0, 3), log_append_time=TS + 999), 0)
    assert chunk.messages == expected(recs(0, 3), timestamp=TS + 999)
    assert {m.timestamp_type for m in chunk.messages} == {LOG_APPEND_TIME}


@pytest.mark.parametrize("codec", [GZIP, LZ4])
def test_log_append_time_v1_wrapper(readers: str, codec: int) -> None:
    chunk = decode(legacy_set(1, recs(0, 3), codec, log_append_time=TS + 5), 0)
    assert chunk.messages == expected(recs(0, 3), magic=1, timestamp=TS + 5)


def test_v0_has_no_timestamp(readers: str) -> None:
    (m,) = decode(legacy_set(0, [Rec(4)]), 0).messages
    assert (m.timestamp_ms, m.timestamp_type) == (-1, NO_TIMESTAMP_TYPE)
    assert m.timestamp == datetime(1970, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize("data", [None, b""])
def test_empty_record_set(data: bytes | None) -> None:
    assert decode(data, 42) == DecodedChunk([], 42, False, 0)


def test_accepts_bytearray_and_memoryview(readers: str) -> None:
    data = v2_batch(recs(0, 2))
    want = decode(data, 0)
    assert decode(bytearray(data), 0) == want
    assert decode(memoryview(data), 0) == want


# --- partial batches -------------------------------------------------------------------


@pytest.mark.parametrize("cut", [1, 11, 12, 30, -1])
def test_trailing_partial_batch(readers: str, cut: int) -> None:
    first, second = v2_batch(recs(0, 3)), v2_batch(recs(3, 3), LZ4)
    data = first + second[:cut]
    chunk = decode(data, 0)
    assert [m.offset for m in chunk.messages] == [0, 1, 2]
    assert (chunk.next_offset, chunk.partial, chunk.bytes_consumed) == (3, True, len(first))


def test_first_batch_larger_than_the_fetch(readers: str) -> None:
    data = v2_batch(recs(20, 3))[:-1]
    assert decode(data, 20) == DecodedChunk([], 20, True, 0)


# --- control batches and transactions --------------------------------------------------

P1, P2, P3 = 1000, 2000, 3000


def transactional_log() -> tuple[list[bytes], list[tuple[int, int]]]:
    """Two transactional producers interleaved with non-transactional records.

    P1 commits 2-3 and aborts 13; P2 aborts 4-5 and 7-8, then commits 11-12; P3 is an
    idempotent (non-transactional) producer listed as aborted, which must not matter.
    """
    log = [
        v2_batch(recs(0, 2)),
        v2_batch(recs(2, 2), producer_id=P1, transactional=True),
        v2_batch(recs(4, 2), GZIP, producer_id=P2, transactional=True),
        control_batch(6, P1, abort=False),
        v2_batch(recs(7, 2), producer_id=P2, transactional=True),
        v2_batch(recs(9, 1), producer_id=P3),
        control_batch(10, P2, abort=True),
        v2_batch(recs(11, 2), LZ4, producer_id=P2, transactional=True),
        v2_batch(recs(13, 1), producer_id=P1, transactional=True),
        control_batch(14, P1, abort=True),
        control_batch(15, P2, abort=False),
    ]
    # Unsorted on purpose: the decoder orders them by first offset.
    aborted = [(P1, 13), (P3, 9), (P2, 4)]
    return log, aborted


def test_read_committed_drops_aborted_transactions(readers: str) -> None:
    log, aborted = transactional_log()
    chunk = decode(b"".join(log), 0, read_committed=True, aborted_transactions=aborted)
    assert [m.offset for m in chunk.messages] == [0, 1, 2, 3, 9, 11, 12]
    assert chunk.messages[-1] == expected(recs(12, 1))[0]
    assert (chunk.next_offset, chunk.partial) == (16, False)


def test_read_uncommitted_sees_aborted_data_but_no_markers(readers: str) -> None:
    log, aborted = transactional_log()
    chunk = decode(b"".join(log), 0, aborted_transactions=aborted)
    assert [m.offset for m in chunk.messages] == [0, 1, 2, 3, 4, 5, 7, 8, 9, 11, 12, 13]
    assert chunk.next_offset == 16


def test_read_committed_from_inside_an_aborted_transaction(readers: str) -> None:
    log, _ = transactional_log()
    # A fetch at offset 7 (5th batch): the broker still lists P2's transaction begun at 4.
    chunk = decode(
        b"".join(log[4:]), 7, read_committed=True, aborted_transactions=[(P2, 4), (P1, 13)]
    )
    assert [m.offset for m in chunk.messages] == [9, 11, 12]
    assert chunk.next_offset == 16


def test_control_batch_alone_advances_next_offset(readers: str) -> None:
    chunk = decode(control_batch(30, P1, abort=False), 30, read_committed=True)
    assert chunk == DecodedChunk([], 31, False, len(control_batch(30, P1, abort=False)))


def test_aborted_transactions_tracker() -> None:
    txns = AbortedTransactions([(P2, 20), (P1, 10)])
    txns.advance(9)
    assert not txns.is_aborted(P1)
    txns.advance(10)
    assert txns.is_aborted(P1) and not txns.is_aborted(P2)
    txns.advance(25)
    assert txns.is_aborted(P2)
    txns.end(P1)
    txns.end(P1)  # a marker for a producer not in the set is fine
    assert not txns.is_aborted(P1) and txns.is_aborted(P2)
    assert AbortedTransactions(None).producers == set()


# --- corrupt data ----------------------------------------------------------------------


def _with_length(body: bytes, magic: int) -> bytes:
    return struct.pack(">qiib", 0, len(body) + 5, 0, magic) + body


def _with_record_count(batch: bytes, count: int) -> bytes:
    data = bytearray(batch)
    struct.pack_into(">i", data, 57, count)
    return bytes(data)


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (struct.pack(">qi", 0, 2) + b"\x00\x00", "too small"),
        (_with_length(b"\x00" * 30, 3), "magic 3"),
        (_with_length(b"\x00" * 20, 2), "too small for magic 2"),
        (_with_record_count(v2_batch(recs(0, 2)), 3), "cannot decode"),
    ],
)
def test_corrupt_first_batch_raises(readers: str, data: bytes, reason: str) -> None:
    with pytest.raises(CorruptMessageError, match=reason) as info:
        decode(data, 0)
    assert f"{TOPIC}[{PARTITION}]" in str(info.value)


def test_corrupt_compressed_payload_raises(readers: str) -> None:
    batch = bytearray(v2_batch(recs(0, 20), LZ4))
    batch[70:90] = b"\xff" * 20
    with pytest.raises(CorruptMessageError, match="cannot decode") as info:
        decode(bytes(batch), 0)
    assert info.value.__cause__ is not None


def test_corrupt_batch_after_good_ones_ends_the_chunk(readers: str) -> None:
    good = v2_batch(recs(0, 2))
    bad = bytearray(v2_batch(recs(2, 20), LZ4))
    bad[70:90] = b"\xff" * 20
    chunk = decode(good + bytes(bad) + v2_batch(recs(22, 1)), 0)
    assert chunk == DecodedChunk(expected(recs(0, 2)), 2, False, len(good))
    with pytest.raises(CorruptMessageError):
        decode(bytes(bad), 2)


def test_check_crcs(readers: str) -> None:
    batch = bytearray(v2_batch(recs(0, 2)))
    batch[-1] ^= 0xFF  # a header byte: decodes, to the wrong header
    assert decode(bytes(batch), 0).messages != expected(recs(0, 2))
    with pytest.raises(CorruptMessageError, match="CRC"):
        decode(bytes(batch), 0, check_crcs=True)
    legacy = bytearray(legacy_set(1, [Rec(0)]))
    legacy[-1] ^= 0xFF
    with pytest.raises(CorruptMessageError, match="CRC"):
        decode(bytes(legacy), 0, check_crcs=True)
    assert decode(v2_batch(recs(0, 2), ZSTD), 0, check_crcs=True).next_offset == 2


def test_control_record_with_short_key_is_corrupt(readers: str) -> None:
    bad_marker = v2_batch([Rec(0, b"\x00", b"")], producer_id=P1, transactional=True, control=True)
    with pytest.raises(CorruptMessageError, match="control record key"):
        decode(bad_marker, 0, read_committed=True)


# --- the collector ---------------------------------------------------------------------


def test_gc_state_is_restored(readers: str) -> None:
    data = v2_batch(recs(0, 2))
    assert gc.isenabled()
    decode(data, 0)
    assert gc.isenabled()
    with pytest.raises(CorruptMessageError):
        decode(_with_length(b"\x00" * 30, 3), 0)
    assert gc.isenabled()
    gc.disable()
    try:
        decode(data, 0)
        assert not gc.isenabled()
    finally:
        gc.enable()


# --- against aiokafka's consumer -------------------------------------------------------

_record = st.builds(
    lambda key, value, headers, ts: (key, value, headers, ts),
    st.none() | st.binary(max_size=40),
    st.none() | st.binary(max_size=200),
    st.lists(st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=8)), max_size=3),
    st.integers(min_value=0, max_value=2**41),
)


@settings(max_examples=examples(60), deadline=None)
@given(
    batches=st.lists(
        st.tuples(st.lists(_record, min_size=1, max_size=8), st.sampled_from([NONE, GZIP, LZ4])),
        min_size=1,
        max_size=5,
    ),
    skip=st.integers(min_value=0, max_value=7),
    cut=st.integers(min_value=0, max_value=200),
)
def test_matches_aiokafka_consumer(
    batches: list[tuple[list[tuple[bytes | None, bytes | None, list[RecordHeader], int]], int]],
    skip: int,
    cut: int,
) -> None:
    offset = 1000
    parts = []
    for contents, codec in batches:
        rs = [Rec(offset + i, k, v, h, ts) for i, (k, v, h, ts) in enumerate(contents)]
        parts.append(v2_batch(rs, codec))
        offset += len(rs)
    data = b"".join(parts)
    data = data[: max(0, len(data) - cut)]
    # A broker's answer starts with the batch holding the fetch offset.
    fetch_offset = 1000 + skip % len(batches[0][0])
    chunk = decode(data, fetch_offset)
    theirs = PartitionRecords(
        TopicPartition(TOPIC, PARTITION),
        MemoryRecords(data),
        [],
        fetch_offset,
        None,
        None,
        False,
        READ_UNCOMMITTED,
    )
    want = [
        ConsumerMessage(
            r.topic, r.partition, r.offset, r.key, r.value, r.headers, r.timestamp, r.timestamp_type
        )
        for r in theirs
    ]
    assert chunk.messages == want
    assert chunk.next_offset == theirs.next_fetch_offset
    assert chunk.partial == (chunk.bytes_consumed < len(data))


def test_record_set_decodes_in_lists_of_at_most_limit(readers: str) -> None:
    """The reader asks for lists of at most channel_buffer_size messages: a batch is
    decoded in slices, resuming where the last slice stopped, from the fetch offset on."""
    data = v2_batch(recs(0, 600))
    rs = records_module.scan_records(TOPIC, PARTITION, data, 10)
    chunks = list(rs.decode_batches(256))
    assert [len(c) for c in chunks] == [256, 256, 78]
    assert [m.offset for c in chunks for m in c] == list(range(10, 600))
    whole = list(records_module.scan_records(TOPIC, PARTITION, data, 0).decode_batches())
    assert [len(c) for c in whole] == [600]
    exact = records_module.scan_records(TOPIC, PARTITION, v2_batch(recs(0, 512)), 0)
    assert [len(c) for c in exact.decode_batches(256)] == [256, 256]


@pytest.mark.parametrize(
    ("data", "start", "limit", "whole"),
    [
        (v2_batch(recs(0, 1)), 0, 256, True),
        (v2_batch(recs(0, 40)), 0, 0, True),
        (v2_batch(recs(0, 40)), 25, 256, True),  # from inside the batch
        (v2_batch(recs(0, 3), log_append_time=TS + 99), 0, 256, True),
        (v2_batch(recs(0, 256)), 0, 256, True),  # exactly the limit
        (v2_batch(recs(0, 257)), 0, 256, False),  # more: decoded in lists of the limit
        (v2_batch(recs(0, 3), GZIP), 0, 256, False),  # compressed: decoded in windows
        (v2_batch(recs(0, 2)) + v2_batch(recs(2, 2)), 0, 256, False),  # two batches
        (legacy_set(1, recs(0, 2)), 0, 256, False),
    ],
    # Named, not by their bytes: a gzip member carries its time, which differs between
    # the collections of two xdist workers.
    ids=[
        "one",
        "no-limit",
        "from-inside",
        "log-append-time",
        "at-limit",
        "over-limit",
        "gzip",
        "two-batches",
        "legacy",
    ],
)
def test_a_record_set_decoded_whole_equals_its_batches(
    readers: str, data: bytes, start: int, limit: int, whole: bool
) -> None:
    """The fetch path decodes a record set that is one plain v2 batch (a caught-up
    partition's usual answer) in one call: the same messages as decode_batches; any
    other record set is left to decode_batches."""
    rs = records_module.scan_records(TOPIC, PARTITION, data, start)
    want = [m for chunk in rs.decode_batches(limit) for m in chunk]
    got = rs.decode_whole(limit)
    assert (got is not None) == whole
    if whole:
        assert got == want


def test_a_corrupt_record_set_decoded_whole_raises_as_its_batches(readers: str) -> None:
    rs = records_module.scan_records(
        TOPIC, PARTITION, _with_record_count(v2_batch(recs(0, 2)), 3), 0
    )
    with pytest.raises(CorruptMessageError, match="cannot decode") as info:
        rs.decode_whole(256)
    assert f"{TOPIC}[{PARTITION}]" in str(info.value)
    with pytest.raises(CorruptMessageError, match="cannot decode"):
        list(rs.decode_batches(256))
