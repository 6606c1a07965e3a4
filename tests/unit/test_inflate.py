"""Compressed batches decoded as a stream (consumer/inflate.py and its use in records.py).

The streaming path must yield exactly what decoding the whole decompressed batch yields
(differential tests against the uncompressed batch of the same records, on both v2
decoders), keep to its bounds (a list per window, a record over ``max_record`` skipped
and reported, memory measured in a subprocess), and turn every corrupt or truncated
stream into CorruptMessageError.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import zlib
from collections.abc import Sequence
from typing import Any

import cramjam
import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from consumergroup.consumer import _pyrecords, records
from consumergroup.consumer.inflate import DEFAULT_BOUNDS, Bounds
from consumergroup.errors import ConsumerError, CorruptMessageError, MessageTooLargeError
from consumergroup.message import ConsumerMessage
from tests import bombs
from tests.fuzz import examples
from tests.unit.test_records import LZ4, NONE, SNAPPY, ZSTD, Rec, c_decoder, legacy_set, readers

__all__ = ["readers"]  # a fixture, used by name

TOPIC = "orders"
CODECS = [bombs.GZIP, bombs.SNAPPY, bombs.LZ4, bombs.ZSTD]


def v2(recs: Sequence[Rec], codec: int) -> memoryview:
    """A v2 batch of ``recs`` (offsets from 0) with aiokafka's builder and compressors."""
    builder = DefaultRecordBatchBuilder(2, codec, 0, -1, -1, -1, 1 << 30)
    for r in recs:
        assert builder.append(r.offset, r.timestamp, r.key, r.value, r.headers)
    return memoryview(bytes(builder.build()))


def with_body(batch: memoryview, codec: int, body: bytes) -> memoryview:
    """``batch`` with its compressed records replaced by ``body`` compressed as ``codec``."""
    head = bytearray(batch[:61])
    struct.pack_into(">h", head, 21, codec)
    struct.pack_into(">i", head, 8, 49 + len(body))
    return memoryview(bytes(head) + body)


def decoded(
    batch: memoryview,
    *,
    start: int = 0,
    limit: int = 0,
    bounds: Bounds = DEFAULT_BOUNDS,
    refused: list[ConsumerError] | None = None,
) -> list[list[ConsumerMessage]]:
    """The lists decode_batch yields for ``batch``."""
    sink = refused.append if refused is not None else None
    return list(records.decode_batch(TOPIC, 0, batch, 2, start, limit, bounds, sink))


def flat(lists: list[list[ConsumerMessage]]) -> list[tuple[Any, ...]]:
    return [(m.offset, m.key, m.value, m.headers, m.timestamp_ms) for chunk in lists for m in chunk]


_blobs = st.one_of(
    st.none(),
    st.binary(max_size=300),
    st.builds(lambda n, b: b * n, st.integers(0, 5000), st.binary(min_size=1, max_size=3)),
)
_recs = st.lists(
    st.tuples(_blobs, _blobs, st.lists(st.tuples(st.text(max_size=5), _blobs), max_size=2)),
    min_size=0,
    max_size=40,
).map(lambda rs: [Rec(i, k, v, list(h), 1000 + i) for i, (k, v, h) in enumerate(rs)])


@settings(
    max_examples=examples(150),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    recs=_recs,
    codec=st.sampled_from(CODECS),
    window=st.integers(1, 3000),
    limit=st.sampled_from([0, 1, 3, 256]),
    start=st.integers(0, 45),
)
def test_streaming_yields_what_the_whole_batch_yields(
    readers: str, recs: list[Rec], codec: int, window: int, limit: int, start: int
) -> None:
    """Every codec, any window and list size: the messages of the uncompressed batch of the
    same records, lists of at most ``limit``, none from more than one window or record."""
    if not recs:
        return  # aiokafka's builder writes no batch of 0 records (see the test below)
    whole = flat(decoded(v2(recs, NONE), start=start))
    lists = decoded(v2(recs, codec), start=start, limit=limit, bounds=Bounds(window=window))
    assert flat(lists) == whole
    for chunk in lists:
        assert chunk and (not limit or len(chunk) <= limit)
        if len(chunk) > 1:  # a list holds what one window held
            assert sum(len(m.value or b"") + len(m.key or b"") for m in chunk) <= window


def with_count(batch: memoryview, count: int) -> memoryview:
    """``batch`` with its header's record count set to ``count``."""
    data = bytearray(batch)
    struct.pack_into(">i", data, 57, count)
    return memoryview(bytes(data))


@pytest.mark.parametrize("codec", CODECS)
def test_a_batch_of_no_records_holds_no_bytes(readers: str, codec: int) -> None:
    batch = v2([Rec(0)], codec)
    with pytest.raises(CorruptMessageError, match="unconsumed bytes after all 0 records"):
        decoded(with_count(batch, 0))
    assert decoded(with_count(with_body(batch, codec, bombs.compress(codec, [b""])), 0)) == []


@pytest.mark.parametrize("codec", CODECS)
def test_every_truncation_is_corrupt(readers: str, codec: int) -> None:
    """A stream cut anywhere (between frames, blocks or records too) is CorruptMessageError,
    after the records before the cut, never a short batch passed off as whole."""
    recs = [Rec(i, b"k", bytes([i]) * (i * 700)) for i in range(12)]
    batch = v2(recs, codec)
    body = bytes(batch[61:])
    for cut in sorted({*range(0, len(body), max(1, len(body) // 60)), len(body) - 1}):
        lists: list[list[ConsumerMessage]] = []
        with pytest.raises(CorruptMessageError):
            for chunk in records.decode_batch(
                TOPIC, 0, with_body(batch, codec, body[:cut]), 2, 0, 1, Bounds(window=500)
            ):
                lists.append(chunk)
        assert flat(lists) == flat(decoded(v2(recs, NONE)))[: len(flat(lists))]


@pytest.mark.parametrize("codec", CODECS)
def test_a_corrupt_stream_is_corrupt(readers: str, codec: int) -> None:
    batch = v2([Rec(i, b"k", b"v" * 900) for i in range(5)], codec)
    body = bytearray(batch[61:])
    body[:4] = b"\xde\xad\xbe\xef"  # the frame's magic (snappy: a raw block's preamble)
    with pytest.raises(CorruptMessageError, match=f"{TOPIC}\\[0\\]: cannot decode"):
        decoded(with_body(batch, codec, bytes(body)))


def test_gzip_checks_its_crc_and_reads_concatenated_members(readers: str) -> None:
    recs = [Rec(i, b"k", b"v" * 300) for i in range(6)]
    raw = bytes(v2(recs, NONE)[61:])
    batch = v2(recs, bombs.GZIP)
    members = zlib.compress(raw[:700], wbits=31) + zlib.compress(raw[700:], wbits=31)
    assert flat(decoded(with_body(batch, 1, members + b"\0" * 9))) == flat(decoded(v2(recs, 0)))
    flipped = bytearray(zlib.compress(raw, wbits=31))
    flipped[-6] ^= 1  # inside the CRC32 trailer
    with pytest.raises(CorruptMessageError):
        decoded(with_body(batch, 1, bytes(flipped)))


def test_raw_snappy_as_sarama_and_librdkafka_write_it(readers: str) -> None:
    recs = [Rec(i, b"k", b"v" * 3000) for i in range(9)]
    raw = bytes(v2(recs, NONE)[61:])
    block = bytes(cramjam.snappy.compress_raw(raw))
    batch = with_body(v2(recs, SNAPPY), SNAPPY, block)
    assert flat(decoded(batch, bounds=Bounds(window=100))) == flat(decoded(v2(recs, NONE)))
    # A block that declares more than snappy can inflate it to is refused before inflating.
    bomb = b"\xff\xff\xff\xff\x0f" + block[len(_pyvarint(len(raw))) :]
    with pytest.raises(CorruptMessageError, match="declares"):
        decoded(with_body(batch, SNAPPY, bomb))


def _pyvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes([*out, n])


def test_linked_lz4_blocks_are_read(readers: str) -> None:
    import lz4.frame

    recs = [Rec(i, b"k", b"abc" * 40_000) for i in range(4)]
    raw = bytes(v2(recs, NONE)[61:])
    linked = lz4.frame.compress(raw, block_linked=True, block_size=lz4.frame.BLOCKSIZE_MAX64KB)
    got = decoded(with_body(v2(recs, LZ4), LZ4, linked), bounds=Bounds(window=1000))
    assert flat(got) == flat(decoded(v2(recs, NONE)))


def test_a_zstd_window_over_the_bound_is_refused_with_what_to_do(readers: str) -> None:
    from backports import zstd

    recs = [Rec(i, b"k", b"v" * 100) for i in range(3)]
    raw = bytes(v2(recs, NONE)[61:])
    wide = zstd.ZstdCompressor(options={zstd.CompressionParameter.window_log: 27})
    body = wide.compress(raw) + wide.flush()  # streamed: the frame names its 128 MiB window
    batch = with_body(v2(recs, ZSTD), ZSTD, body)
    with pytest.raises(CorruptMessageError, match="max_record_bytes"):
        decoded(batch, bounds=Bounds(max_record=64 << 20))
    assert flat(decoded(batch, bounds=Bounds(max_record=128 << 20))) == flat(
        decoded(v2(recs, NONE))
    )


@pytest.mark.parametrize("codec", CODECS)
def test_a_record_over_the_bound_is_skipped_and_reported_alone(readers: str, codec: int) -> None:
    """Exactly the large record is left out, named in the error; its neighbours (in the
    same batch and window) are delivered."""
    sizes = [10, 5000, 0, 20_000, 3]
    batch = memoryview(bombs.batch(codec, bombs.records_of(sizes, b"xy"), len(sizes), 0))
    refused: list[ConsumerError] = []
    lists = decoded(batch, bounds=Bounds(window=64, max_record=4999), refused=refused)
    assert [m.offset for chunk in lists for m in chunk] == [0, 2, 4]
    assert [len(m.value or b"") for chunk in lists for m in chunk] == [10, 0, 3]
    assert [(e.topic, e.partition) for e in refused] == [(TOPIC, 0)] * 2
    assert all(isinstance(e.cause, MessageTooLargeError) for e in refused)
    assert "offset 1 " in str(refused[0]) and "offset 3 " in str(refused[1])
    assert "consumer.fetch.max_record_bytes=4999" in str(refused[0])
    # Below the start offset (already consumed): skipped silently.
    refused.clear()
    lists = decoded(batch, start=2, bounds=Bounds(window=64, max_record=4999), refused=refused)
    assert [m.offset for chunk in lists for m in chunk] == [2, 4]
    assert ["offset 3 " in str(e) for e in refused] == [True]


def test_without_a_sink_a_refused_record_is_logged(
    readers: str, caplog: pytest.LogCaptureFixture
) -> None:
    batch = memoryview(bombs.batch(bombs.GZIP, bombs.records_of([100, 1]), 2))
    assert [m.offset for c in decoded(batch, bounds=Bounds(max_record=50)) for m in c] == [1]
    assert "the record at offset 0 inflates to" in caplog.text


@pytest.mark.parametrize(("magic", "codec"), [(0, 1), (1, 2), (1, 3)])
def test_a_legacy_wrapper_over_the_bound_is_corrupt(readers: str, magic: int, codec: int) -> None:
    """In formats v0/v1 a compressed wrapper is one message: over the bound, the partition
    stops at it (nothing skipped)."""
    data = memoryview(legacy_set(magic, [Rec(i, b"k", b"v" * 1000) for i in range(5)], codec))
    assert len(list(records.decode_batch(TOPIC, 0, data, magic, 0, 0, Bounds()))) == 1
    with pytest.raises(CorruptMessageError, match="max_record_bytes=4000"):
        list(records.decode_batch(TOPIC, 0, data, magic, 0, 0, Bounds(max_record=4000)))


@pytest.mark.parametrize("python", [False, True])
def test_window_mode_stops_at_a_record_cut_short_or_too_long(python: bool) -> None:
    """decode_v2 in window mode on every prefix of a body: the records whole in it, up to
    the first one cut short, or longer than ``max_record``; both decoders alike."""
    decode = _pyrecords.decode_v2 if python else c_decoder()
    recs = [Rec(i, b"k" * i, b"v" * (i * 40), [("h", b"x")], 1000 + i) for i in range(8)]
    body = bytes(v2(recs, NONE)[61:])
    full, ends = [], [0]  # the messages, and where each record ends
    while len(full) < 8:
        got, pos, _ = decode(body, ends[-1], len(full), 8, 0, 7, 1000, False, TOPIC, 0, 0, 1)
        full += got
        ends.append(pos)
    for cut in range(len(body) + 1):
        whole = sum(end <= cut for end in ends[1:])
        got, pos, index = decode(body[:cut], 0, 0, 8, 0, 7, 1000, False, TOPIC, 0, 0, 0, 1000)
        assert (got, pos, index) == (full[:whole], ends[whole], whole)
    length = _pyrecords.varint(memoryview(body), ends[3], len(body))[0]  # record 3's
    got, pos, index = decode(body, 0, 0, 8, 0, 7, 1000, False, TOPIC, 0, 0, 0, length - 1)
    assert (got, pos, index) == (full[:3], ends[3], 3)
    with pytest.raises(ValueError, match="length"):  # an overlong varint is still corrupt
        decode(b"\x80" * 12, 0, 0, 1, 0, 0, 0, False, TOPIC, 0, 0, 0, 1000)


# ---- memory, measured in a subprocess ------------------------------------------------

_RSS_CHILD = r"""
import json, sys
from consumergroup.consumer import records
from consumergroup.consumer.inflate import Bounds
from tests import bombs

codec, mib, window = (int(a) for a in sys.argv[1:4])
batch = bombs.batch(codec, bombs.records_of([1 << 20] * mib), mib)
rs = records.scan_records("t", 0, batch, 0)

def status(field):
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) * 1024 for l in f if l.startswith(field))

base = status("VmRSS:")
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # peak RSS := now
values = 0
for chunk in rs.decode_batches(256, Bounds(window=window)):
    values += sum(len(m.value) for m in chunk)
print(json.dumps({"values": values, "compressed": len(batch), "growth": status("VmHWM:") - base}))
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"), reason="Linux /proc needed")
@pytest.mark.parametrize(("codec", "mib"), [(1, 64), (2, 16), (3, 200), (4, 286)])
def test_a_decompression_bomb_is_read_within_the_stated_bound(codec: int, mib: int) -> None:
    """README's bound ("Memory bounds"): a partition being read holds at most
    max(fetch.buffer_bytes, its largest record) of decompressed bytes, plus the messages of
    one list (here one 1 MiB record per list) and the codec's state (at most 8 MiB).
    Allowed: that, plus 8 MiB for the interpreter's own (arenas, the list objects)."""
    window = 64 << 10
    out = subprocess.run(
        [sys.executable, "-c", _RSS_CHILD, str(codec), str(mib), str(window)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))),
    )
    got = json.loads(out.stdout)
    assert got["values"] == mib << 20
    record = (1 << 20) + 16
    bound = max(window, record) + record + (8 << 20) + (8 << 20)
    assert got["growth"] < bound, (got, bound)
    assert got["compressed"] < 1 << 20  # fits Kafka's default max.message.bytes
