"""The C v2 record decoder (consumergroup/consumer/_crecords.c) against the fallback.

Differential: every record set decodes to the same messages, field by field, through
the C decoder and through aiokafka's reader (the path an install without a compiler, or
with ``CONSUMERGROUP_PURE_PYTHON=1``, takes). Corrupt input: a typed error, never a
crash, a hang or another exception. Memory: decoding the same batch again and again
leaves reference counts and RSS where they were.
"""

from __future__ import annotations

import ctypes
import gc
import mmap
import os
import resource
import struct
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from consumergroup.consumer import records as records_module
from consumergroup.errors import CorruptMessageError
from consumergroup.message import ConsumerMessage, RecordHeader
from tests.fuzz import examples
from tests.unit.test_records import (
    GZIP,
    LZ4,
    NONE,
    SNAPPY,
    ZSTD,
    Rec,
    c_decoder,
    c_decoder_batch,
    legacy_set,
    v2_batch,
)

TOPIC = "orders"
PARTITION = 3
#: A batch's lastOffsetDelta that lets every non-negative int32 offset delta through.
ANY_DELTA = 2**31 - 1
CODECS = [NONE, GZIP, SNAPPY, LZ4, ZSTD]

Fields = tuple[Any, ...]


def fields(m: ConsumerMessage) -> Fields:
    """All 8 fields, headers as they are (a tuple on both paths)."""
    return (
        m.topic,
        m.partition,
        m.offset,
        m.key,
        m.value,
        m.headers,
        m.timestamp_ms,
        m.timestamp_type,
    )


@contextmanager
def decoder(c: bool) -> Iterator[None]:
    """records.py on the C decoder (``c``) or on aiokafka's reader."""
    saved = records_module._decode_v2, records_module._decode_v2_batch
    records_module._decode_v2 = c_decoder() if c else None
    records_module._decode_v2_batch = c_decoder_batch() if c else None
    try:
        yield
    finally:
        records_module._decode_v2, records_module._decode_v2_batch = saved


def chunks(data: bytes, fetch_offset: int, limit: int = 0, **kwargs: Any) -> list[list[Fields]]:
    """The lists decode_batches yields, as field tuples."""
    rs = records_module.scan_records(TOPIC, PARTITION, data, fetch_offset, **kwargs)
    return [[fields(m) for m in chunk] for chunk in rs.decode_batches(limit)]


def whole(data: bytes, fetch_offset: int, limit: int = 0) -> list[Fields] | None:
    """What decode_whole returns (C: the batch in one call), as field tuples."""
    rs = records_module.scan_records(TOPIC, PARTITION, data, fetch_offset)
    got = rs.decode_whole(limit)
    return None if got is None else [fields(m) for m in got]


def both(data: bytes, fetch_offset: int, limit: int = 0, **kwargs: Any) -> list[list[Fields]]:
    """chunks() on both paths, which must agree; the C path's result."""
    with decoder(True):
        ours = chunks(data, fetch_offset, limit, **kwargs)
    with decoder(False):
        theirs = chunks(data, fetch_offset, limit, **kwargs)
    assert ours == theirs
    return ours


def test_the_c_decoder_is_built_and_used() -> None:
    """CI and `make .venv/.installed` have a compiler: the extension must be there."""
    if os.environ.get("CONSUMERGROUP_PURE_PYTHON", "") not in ("", "0"):
        assert records_module._decode_v2 is None
    else:
        assert records_module._decode_v2 is not None, (
            "the C record decoder is not built: run `make .venv/.installed` (a venv from "
            "before it, or an edited _crecords.c, needs a reinstall); without a C compiler, "
            "CONSUMERGROUP_PURE_PYTHON=1 tests the fallback alone"
        )
    (m,) = chunks(v2_batch([Rec(5, b"k", b"v", [("h", None)])]), 0)[0]
    assert m == (TOPIC, PARTITION, 5, b"k", b"v", (("h", None),), Rec(0).timestamp, 0)


def test_pure_python_switch_is_read_at_import() -> None:
    c_decoder()  # skips when the extension is not built
    code = "from consumergroup.consumer import records; print(records._decode_v2 is None)"
    for value, off in (("1", "True"), ("0", "False"), ("", "False")):
        env = {**os.environ, "CONSUMERGROUP_PURE_PYTHON": value}
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        assert out.stdout.strip() == off, value


def test_messages_are_ordinary_instances() -> None:
    with decoder(True):
        rs = records_module.scan_records(TOPIC, PARTITION, v2_batch([Rec(0), Rec(1)]), 0)
        messages = [m for chunk in rs.decode_batches() for m in chunk]
    m = messages[0]
    assert type(m) is ConsumerMessage
    assert not gc.is_tracked(m)  # acyclic: the collector never scans it (test_untracked_messages)
    assert m == ConsumerMessage(TOPIC, PARTITION, 0, b"k", b"v", (), Rec(0).timestamp, 0)
    assert m.headers is ()  # noqa: F632 - the shared empty tuple, not one per message
    m.value = b"changed"  # slots stay writable
    assert repr(m).startswith("ConsumerMessage(topic='orders', partition=3, offset=0")


# --- differential ----------------------------------------------------------------------

_header = st.tuples(
    st.text(alphabet=st.characters(codec="utf-8"), max_size=6),
    st.none() | st.binary(max_size=6),
)
#: key, value, headers, timestamp delta, offset step (shared with test_spark_columns).
RECORD_FIELDS = st.tuples(
    st.none() | st.binary(max_size=20),
    st.none() | st.binary(max_size=60),
    st.lists(_header, max_size=3),
    st.integers(min_value=-(2**40), max_value=2**40),  # timestamp delta from TS
    st.integers(min_value=1, max_value=3),  # offset step (>1: a compacted log)
)


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    contents=st.lists(RECORD_FIELDS, min_size=1, max_size=12),
    codec=st.sampled_from(CODECS),
    base=st.integers(min_value=0, max_value=2**40),
    skip=st.integers(min_value=0, max_value=40),
    log_append_time=st.none() | st.integers(min_value=0, max_value=2**42),
)
def test_c_and_fallback_agree(
    contents: list[tuple[bytes | None, bytes | None, list[RecordHeader], int, int]],
    codec: int,
    base: int,
    skip: int,
    log_append_time: int | None,
) -> None:
    offset = base
    rs = []
    for key, value, headers, ts_delta, step in contents:
        rs.append(Rec(offset, key, value, headers, 1_700_000_000_000 + ts_delta))
        offset += step
    data = v2_batch(rs, codec, log_append_time=log_append_time)
    fetch_offset = base + skip  # inside the batch, or past its end
    whole = both(data, fetch_offset)
    flat = [m for chunk in whole for m in chunk]
    assert [m[2] for m in flat] == [r.offset for r in rs if r.offset >= fetch_offset]
    # Every list size: the same lists on both paths, resuming where the last one stopped.
    for limit in range(1, len(flat) + 2):
        lists = both(data, fetch_offset, limit)
        assert [m for chunk in lists for m in chunk] == flat
        assert all(0 < len(chunk) <= limit for chunk in lists)


def test_non_ascii_and_null_headers() -> None:
    headers: list[RecordHeader] = [("\u00e9t\u00e9", b"x"), ("\U0001f600", None), ("", b"")]
    data = v2_batch([Rec(0, None, None, headers), Rec(1, b"", b"", [])])
    (chunk,) = both(data, 0)
    assert chunk[0][5] == tuple(headers)
    assert chunk[1][3:6] == (b"", b"", ())


@pytest.mark.parametrize("codec", CODECS)
def test_several_batches_and_codecs_in_one_record_set(codec: int) -> None:
    data = b"".join(
        v2_batch([Rec(o, str(o).encode(), b"v" * o, [("n", str(o).encode())]) for o in rng], c)
        for rng, c in ((range(0, 50), codec), (range(50, 51), NONE), (range(51, 300), codec))
    )
    for limit in (0, 1, 7, 49, 50, 256):
        assert [m[2] for chunk in both(data, 3, limit) for m in chunk] == list(range(3, 300))


def test_transactions_and_control_batches_through_scan_records() -> None:
    from tests.unit.test_records import transactional_log

    log, aborted = transactional_log()
    data = b"".join(log)
    for read_committed in (False, True):
        for limit in (0, 1, 2):
            both(
                data,
                0,
                limit,
                read_committed=read_committed,
                aborted_transactions=aborted,
            )


def test_check_crcs_on_both_paths() -> None:
    data = bytearray(v2_batch([Rec(0), Rec(1, headers=[("h", b"x")])], LZ4))
    assert both(bytes(data), 0, check_crcs=True)
    data[-1] ^= 0x01
    for c in (True, False):
        with decoder(c), pytest.raises(CorruptMessageError, match="CRC"):
            chunks(bytes(data), 0, check_crcs=True)


# --- corrupt input ---------------------------------------------------------------------


class _Guarded:
    """A page followed by an inaccessible one: bytes placed at the end of the first page
    make any read past them a segfault (a test crash) instead of a silent wrong read."""

    def __init__(self) -> None:
        self.page = mmap.PAGESIZE
        self.mem = mmap.mmap(-1, 2 * self.page)
        address = ctypes.addressof(ctypes.c_char.from_buffer(self.mem))
        mprotect = ctypes.CDLL(None, use_errno=True).mprotect
        mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        if mprotect(address + self.page, self.page, 0) != 0:  # PROT_NONE
            raise OSError(ctypes.get_errno(), "mprotect")

    def place(self, data: bytes) -> memoryview:
        """``data`` ending right at the inaccessible page."""
        start = self.page - len(data)
        self.mem[start : self.page] = data
        return memoryview(self.mem)[start : self.page]


_guard = _Guarded()


def test_the_guard_page_is_inaccessible() -> None:
    code = (
        "from tests.unit.test_crecords import _guard\n"
        "view = _guard.place(b'x')\n"
        "print(bytes(memoryview(_guard.mem)[_guard.page : _guard.page + 1]))\n"
    )
    crashed = subprocess.run([sys.executable, "-c", code], capture_output=True, check=False)
    assert crashed.returncode < 0  # killed by SIGSEGV/SIGBUS: the guard works


def _reframe(batch: bytes, body: bytes, count: int | None = None) -> bytes:
    """``batch``'s header with ``body`` as its records (length fixed up; no CRC check)."""
    head = bytearray(batch[:61])
    struct.pack_into(">i", head, 8, 49 + len(body))
    if count is not None:
        struct.pack_into(">i", head, 57, count)
    return bytes(head) + body


def _corrupt_or_fine(data: bytes) -> None:
    """Decoding ``data`` through the C path ends in messages or CorruptMessageError."""
    with decoder(True):
        for limit in (0, 1, 3):
            for decode in (chunks, whole):
                try:
                    decode(_guard.place(data), 0, limit)
                except CorruptMessageError as exc:
                    assert "cannot decode" in str(exc) or "too small" in str(exc)


def _sample_batch() -> bytes:
    return v2_batch(
        [
            Rec(0, b"key", b"value" * 30, [("a", b"1"), ("\u00e9", None)]),
            Rec(1, None, None),
            Rec(2, b"", b"x" * 200, [("b", b"")]),
        ]
    )


def test_truncated_at_every_byte_is_corrupt() -> None:
    batch = _sample_batch()
    body = batch[61:]
    for cut in range(len(body)):
        data = _guard.place(_reframe(batch, body[:cut]))
        with decoder(True), pytest.raises(CorruptMessageError, match="cannot decode"):
            chunks(data, 0)
        with decoder(True), pytest.raises(CorruptMessageError, match="cannot decode"):
            whole(data, 0)
    # More bytes than the records need, or a record count that does not match.
    for data in (
        _reframe(batch, body + b"\x00"),
        _reframe(batch, body, count=2),
        _reframe(batch, body, count=4),
        _reframe(batch, body, count=-1),
        _reframe(batch, b"", count=1),
    ):
        with decoder(True), pytest.raises(CorruptMessageError, match="cannot decode"):
            chunks(_guard.place(data), 0)
    assert both(_reframe(batch, b"", count=0), 0) == []


def test_a_whole_batch_in_one_call_reads_its_header_in_bounds() -> None:
    """decode_v2_batch reads the header itself: any header byte overwritten gives None
    (not for it), messages or ValueError, and a buffer shorter than a header None."""
    c_decoder()
    decode = c_decoder_batch()
    batch = _sample_batch()
    for i in range(61):
        for byte in (0x00, 0x01, 0x7F, 0x80, 0xFE, 0xFF):
            data = _guard.place(batch[:i] + bytes([byte]) + batch[i + 1 :])
            for limit in (0, 2, 3):
                try:
                    got = decode(data, TOPIC, PARTITION, 0, limit)
                except ValueError:
                    continue
                assert got is None or all(isinstance(m, ConsumerMessage) for m in got)
    for cut in range(61):
        assert decode(_guard.place(batch[:cut]), TOPIC, PARTITION, 0, 0) is None
    want = [fields(m) for m in decode(_guard.place(batch), TOPIC, PARTITION, 0, 3)]
    assert want == both(batch, 0)[0]
    assert decode(_guard.place(batch), TOPIC, PARTITION, 0, 2) is None  # over the limit


def _scanned(data: bytes, fetch_offset: int, c: bool) -> Any:
    """scan_records' result (kept batches as bytes) or its error, on the C scan or not."""
    saved = records_module._scan_v2
    records_module._scan_v2 = saved if c else None
    try:
        rs = records_module.scan_records(TOPIC, PARTITION, _guard.place(data), fetch_offset)
    except CorruptMessageError as exc:
        return str(exc)
    finally:
        records_module._scan_v2 = saved
    kept = [(bytes(b), magic, pos) for b, magic, pos in rs.batches]
    return (rs.start, kept, rs.count, rs.next_offset, rs.partial, rs.bytes_consumed)


def test_the_c_scan_frames_as_the_python_scan() -> None:
    """scan_v2 (a caught-up partition's every answer) gives scan_records' result, or
    leaves the set to the Python scan: same batches, counts, offsets and errors, on
    record sets cut at every byte, overwritten at every header byte, with control
    batches and v0/v1 messages among them, from fetch offsets before, inside and past."""
    assert records_module._scan_v2 is not None, "the C extension is not built"
    batch = _sample_batch()  # offsets 0-2
    second = bytearray(v2_batch([Rec(0, None, b"x"), Rec(1, b"k", None)]))
    second[0:8] = (3).to_bytes(8, "big")
    control = bytearray(v2_batch([Rec(0, b"\x00\x00\x00\x00", b"")]))
    control[0:8] = (5).to_bytes(8, "big")
    struct.pack_into(">h", control, 21, 0x20)  # a control batch (no CRC check here)
    whole = batch + bytes(second) + bytes(control)
    cases = [whole[:cut] for cut in range(len(whole) + 1)]
    cases += [
        whole[:i] + bytes([byte]) + whole[i + 1 :]
        for i in [*range(61), *range(len(batch), len(batch) + 61)]
        for byte in (0x00, 0x01, 0x02, 0x7F, 0x80, 0xFF)
    ]
    cases += [legacy_set(1, [Rec(0, None, b"v")]), batch + legacy_set(0, [Rec(3, None, b"v")])]
    for data in cases:
        for fetch_offset in (-1, 0, 2, 3, 5, 6, 99):
            assert _scanned(data, fetch_offset, True) == _scanned(data, fetch_offset, False)


def test_every_byte_overwritten_is_fine_or_corrupt() -> None:
    batch = _sample_batch()
    body = batch[61:]
    for i in range(len(body)):
        for byte in (0x00, 0x01, 0x7F, 0x80, 0xFE, 0xFF):
            _corrupt_or_fine(_reframe(batch, body[:i] + bytes([byte]) + body[i + 1 :]))


def _varint(value: int) -> bytes:
    raw = (value << 1) ^ (value >> 63)
    out = bytearray()
    while raw > 0x7F:
        out.append(0x80 | (raw & 0x7F))
        raw >>= 7
    out.append(raw)
    return bytes(out)


def _record(*parts: bytes) -> bytes:
    payload = b"".join(parts)
    return _varint(len(payload)) + payload


#: Record bodies each corrupt in one field, and the error that names it.
CORRUPT_RECORDS = [
    (_varint(2**62), "invalid or truncated length"),
    (_varint(-5), "invalid or truncated length"),
    (b"\xff" * 11, "invalid or truncated length"),  # a varint longer than 10 bytes
    (_record(), "empty record"),
    (_record(b"\x00"), "truncated record header"),
    (_record(b"\x00\x00\x00" + _varint(2**40)), "key length"),
    (_record(b"\x00\x00\x00" + _varint(-2)), "truncated value length"),  # a null key
    (_record(b"\x00\x00\x00" + _varint(1)), "key length 1 overruns the record by 1"),
    (_record(b"\x00\x00\x00\x01" + _varint(2**31)), "value length"),
    (_record(b"\x00\x00\x00\x01\x01" + _varint(2**40)), "invalid header count"),
    (_record(b"\x00\x00\x00\x01\x01" + _varint(-1)), "invalid header count"),
    (_record(b"\x00\x00\x00\x01\x01\x02" + _varint(-1) + b"\x01"), "header key length"),
    (_record(b"\x00\x00\x00\x01\x01\x02\x02\xff\xfe\x01"), "utf-8"),
    (_record(b"\x00\x00\x00\x01\x01\x02\x02h" + _varint(1)), "value length 1 overruns"),
    (_record(b"\x00\x00\x00\x01\x01\x00\x00"), "left over"),
    (_record(b"\x00" + _varint(2**63 - 1) + b"\x00\x01\x01\x00"), "out of range"),
]


@pytest.mark.parametrize(("body", "reason"), CORRUPT_RECORDS)
def test_corrupt_record_fields(body: bytes, reason: str) -> None:
    decode_v2 = c_decoder()
    with pytest.raises(ValueError, match=reason):
        decode_v2(_guard.place(body), 0, 0, 1, 0, ANY_DELTA, 1, False, TOPIC, PARTITION, 0, 0)
    data = _reframe(_sample_batch(), body, count=1)
    with decoder(True), pytest.raises(CorruptMessageError, match="cannot decode"):
        chunks(data, 0)


def test_invalid_positions_are_rejected() -> None:
    decode_v2 = c_decoder()
    body = _sample_batch()[61:]
    for pos, index, limit in ((-1, 0, 0), (len(body) + 1, 0, 0), (0, -1, 0), (0, 0, -1)):
        with pytest.raises(ValueError, match="invalid decode position"):
            decode_v2(body, pos, index, 3, 0, 2, 0, False, TOPIC, PARTITION, 0, limit)


#: Random bodies, record counts and start offsets (shared with test_spark_columns).
RANDOM_INPUT = {
    "body": st.binary(max_size=120),
    "count": st.integers(min_value=-3, max_value=2**31 - 1),
    "start": st.integers(min_value=-5, max_value=5),
}


@settings(max_examples=examples(300), deadline=None)
@given(**RANDOM_INPUT, limit=st.integers(min_value=0, max_value=4))
def test_random_bytes_never_crash_or_hang(body: bytes, count: int, limit: int, start: int) -> None:
    """Resuming until the record index reaches ``count`` always ends (each call advances
    or raises) in messages or ValueError."""
    decode_v2 = c_decoder()
    view = _guard.place(body)

    def step(pos: int, index: int) -> tuple[int, int]:
        messages, pos, index = decode_v2(
            view, pos, index, count, 0, ANY_DELTA, 0, False, TOPIC, PARTITION, start, limit
        )
        assert limit == 0 or len(messages) <= limit
        return pos, index

    resume_all(step, len(body), count)


def resume_all(step: Callable[[int, int], tuple[int, int]], size: int, count: int) -> None:
    """Call ``step(pos, index)`` from where the last call stopped until the record index
    reaches ``count``: every call must advance (or raise ValueError, which ends it)."""
    pos = index = 0
    with suppress(ValueError):
        while True:
            new_pos, new_index = step(pos, index)
            assert pos <= new_pos <= size
            assert new_index > index or new_index >= count
            pos, index = new_pos, new_index
            if index >= count:
                return


# --- bind ------------------------------------------------------------------------------


_SLOTS = ConsumerMessage.__slots__
_TooFew = type("_TooFew", (), {"__slots__": _SLOTS[:-1]})
_Renamed = type("_Renamed", (), {"__slots__": (*_SLOTS[:-1], _SLOTS[-1] + "s")})
# 8 slots, but one field is a property.
_Property = type(
    "_Property",
    (),
    {"__slots__": (*_SLOTS[:-1], "other"), _SLOTS[-1]: property(lambda self: None)},
)


class _Subclass(ConsumerMessage):
    __slots__ = ()


@pytest.mark.parametrize("cls", [_TooFew, _Renamed, _Subclass, _Property, int, 5])
def test_bind_refuses_another_layout(cls: Any) -> None:
    decode_v2 = c_decoder()
    with pytest.raises(TypeError):
        sys.modules[decode_v2.__module__].bind(cls)
    # A refused class leaves the binding as it was.
    ((m,), _, _) = decode_v2(b"\x0c\x00\x00\x00\x01\x01\x00", 0, 0, 1, 7, 0, 0, False, "t", 0, 0, 0)
    assert type(m) is ConsumerMessage and m.offset == 7


def test_layout_mismatch_warns_and_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    c_decoder()  # skips when the extension is not built
    monkeypatch.delenv("CONSUMERGROUP_PURE_PYTHON", raising=False)
    monkeypatch.setattr(records_module, "ConsumerMessage", _Renamed)
    with pytest.warns(RuntimeWarning, match="C record decoder is disabled"):
        assert records_module._load_c_decoder(records_module._crecords_module) is None
    monkeypatch.undo()
    c_decoder()  # bound to ConsumerMessage again for the other tests


def test_frame_buffer_is_a_writable_bytearray_of_its_size() -> None:
    """The connection's buffer for a large frame (not zeroed: the socket fills it)."""
    module = sys.modules[c_decoder().__module__]
    for size in (0, 1, 65_537, 3 << 20):
        buffer = module.frame_buffer(size)
        assert type(buffer) is bytearray and len(buffer) == size
        buffer[:] = bytes(size)  # writable through the buffer protocol, as recv_into writes
        memoryview(buffer)[size // 2 :] = b"\x01" * (size - size // 2)
        assert buffer.count(1) == size - size // 2
    with pytest.raises(ValueError):
        module.frame_buffer(-1)
    with pytest.raises(TypeError):
        module.frame_buffer(1.5)


def test_a_bound_class_with_a_finalizer_keeps_it() -> None:
    """bind() gives the class its lean deallocation only when there is nothing more to
    run: a class with ``__del__`` keeps CPython's, and its finalizer runs."""
    decode_v2 = c_decoder()
    ended: list[int] = []
    with_del = type(
        "_WithDel", (), {"__slots__": _SLOTS, "__del__": lambda m: ended.append(m.offset)}
    )
    module = sys.modules[decode_v2.__module__]
    try:
        module.bind(with_del)
        ((m,), _, _) = decode_v2(
            b"\x0c\x00\x00\x00\x01\x01\x00", 0, 0, 1, 7, 0, 0, False, "t", 0, 0, 0
        )
        assert type(m) is with_del
        del m
        assert ended == [7]
    finally:
        module.bind(ConsumerMessage)


def _setattr(msg: object, name: str, value: object) -> None:
    object.__setattr__(msg, name, value)


def test_a_bound_class_with_its_own_setattr_gets_tracked_messages() -> None:
    """Messages leave the cyclic collector only where an assignment can track them again
    (the attribute assignment bind() gives the class): a class with a __setattr__ of its
    own gets them tracked, as CPython would."""
    decode_v2 = c_decoder()
    own = type("_OwnSetattr", (), {"__slots__": _SLOTS, "__setattr__": _setattr})
    module = sys.modules[decode_v2.__module__]
    body = b"\x0c\x00\x00\x00\x01\x01\x00"
    try:
        module.bind(own)
        ((m,), _, _) = decode_v2(body, 0, 0, 1, 7, 0, 0, False, "t", 0, 0, 0)
        assert type(m) is own and gc.is_tracked(m) and m.offset == 7
    finally:
        module.bind(ConsumerMessage)
    ((m,), _, _) = decode_v2(body, 0, 0, 1, 7, 0, 0, False, "t", 0, 0, 0)
    assert type(m) is ConsumerMessage and not gc.is_tracked(m)


# --- memory ----------------------------------------------------------------------------


def _rss_kb() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() // 1024


def test_no_leaks_over_100k_decodes() -> None:
    """References to everything a message shares (topic, partition, the class) come back
    after the messages die, on the success and the error paths; RSS stays flat."""
    decode_v2 = c_decoder()
    topic = "leak-check-topic"
    partition = 123_456  # not a cached small int
    body = v2_batch([Rec(o, b"k", b"v" * 10, [("h", b"x")] if o % 2 else []) for o in range(4)])[
        61:
    ]
    bad = body[:-3]
    args = (0, 0, 4, 1000, 3, 1_700_000_000_000, False, topic, partition, 1001, 0)
    refs = (sys.getrefcount(topic), sys.getrefcount(partition), sys.getrefcount(ConsumerMessage))

    def loop(n: int) -> None:
        for _ in range(n):
            messages, _, _ = decode_v2(body, *args)
            assert len(messages) == 3
            try:
                decode_v2(bad, *args)
            except ValueError:
                pass
            else:
                raise AssertionError("a truncated body decoded")

    loop(10_000)
    before = _rss_kb()
    loop(100_000)
    grown = _rss_kb() - before
    assert refs == (
        sys.getrefcount(topic),
        sys.getrefcount(partition),
        sys.getrefcount(ConsumerMessage),
    )
    assert grown < 4096, f"RSS grew by {grown} KiB over 100k decodes"


def test_unknown_compression_codec_is_corrupt_on_both_paths() -> None:
    data = bytearray(_sample_batch())
    data[22] |= 0x05  # attributes, low byte: codec 5
    for c in (True, False):
        with decoder(c), pytest.raises(CorruptMessageError, match=r"orders\[3\]: cannot decode"):
            chunks(bytes(data), 0)
