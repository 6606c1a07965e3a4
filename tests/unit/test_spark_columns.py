"""The Spark source's column decoder (``decode_v2_columns`` in ``_crecords.c``, driven by
``_spark_arrow.BatchBuilder``) against its fallback, the message path (records decoded
into ConsumerMessages, then ``build_batch``).

Differential: random record sets (null keys and values, headers, every codec, log-append
time, start and stop offsets inside batches, legacy v1 batches in between) give equal
Arrow tables both ways, for every batch size. Corrupt input: the errors of the message
decoder, never a crash or a read past the buffer.
"""

from __future__ import annotations

import os
from contextlib import AbstractContextManager
from typing import Any
from unittest.mock import patch

import pytest

pa = pytest.importorskip("pyarrow", reason="needs the [spark] extra")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from consumergroup.consumer import records as records_module  # noqa: E402
from consumergroup.consumer.inflate import DEFAULT_BOUNDS, Bounds  # noqa: E402
from consumergroup.errors import ConsumerError, CorruptMessageError  # noqa: E402
from consumergroup.integrations._spark_arrow import BatchBuilder, arrow_schema  # noqa: E402
from consumergroup.message import RecordHeader  # noqa: E402
from tests import bombs  # noqa: E402
from tests.fuzz import examples, full, mode  # noqa: E402
from tests.unit.test_crecords import (  # noqa: E402
    ANY_DELTA,
    CODECS,
    CORRUPT_RECORDS,
    RANDOM_INPUT,
    RECORD_FIELDS,
    _guard,
    _record,
    _reframe,
    _sample_batch,
    _varint,
    resume_all,
)
from tests.unit.test_records import NONE, Rec, legacy_set, v2_batch  # noqa: E402

TOPIC = "orders"
PARTITION = 3
Columns = Any  # the C module's function (typed in _crecords.pyi)
# key, value, headers, timestamp delta, offset step
RecordFields = tuple[bytes | None, bytes | None, list[RecordHeader], int, int]


def c_columns() -> Columns:
    """The C column decoder; skips when the extension was not built."""
    module: Any = pytest.importorskip("consumergroup.consumer._crecords")
    return module.decode_v2_columns


def column_decoder(c: bool) -> AbstractContextManager[Any]:
    """``BatchBuilder`` on the C column decoder (``c``) or on the message path."""
    return patch.object(records_module, "decode_v2_columns", c_columns() if c else None)


def build(
    data: bytes | memoryview,
    start: int,
    stop: int,
    include_headers: bool,
    rows: int = 32768,
    max_bytes: int = 64 << 20,
    bounds: Bounds = DEFAULT_BOUNDS,
    refused: list[ConsumerError] | None = None,
) -> list[Any]:
    """The Arrow batches of a record set's records in [start, stop), as the reader builds
    them: every kept batch through one builder, then its last batch."""
    rs = records_module.scan_records(TOPIC, PARTITION, data, start)
    builder = BatchBuilder(
        TOPIC,
        PARTITION,
        include_headers,
        rows=rows,
        max_bytes=max_bytes,
        bounds=bounds,
        refused=None if refused is None else refused.append,
    )
    out = [
        full for batch, magic, _ in rs.batches for full in builder.add(batch, magic, start, stop)
    ]
    last = builder.flush()
    if last is not None:
        out.append(last)
    for batch in out:
        assert batch.schema.equals(arrow_schema(include_headers))
        batch.validate(full=True)
    return out


def table(batches: list[Any], include_headers: bool) -> Any:
    return pa.Table.from_batches(batches, schema=arrow_schema(include_headers))


def both(data: bytes, start: int, stop: int, include_headers: bool, **kwargs: Any) -> Any:
    """build() on both paths, whose tables must be equal; the table."""
    with column_decoder(True):
        ours = build(data, start, stop, include_headers, **kwargs)
    with column_decoder(False):
        theirs = build(data, start, stop, include_headers, **kwargs)
    ours_table, theirs_table = table(ours, include_headers), table(theirs, include_headers)
    assert ours_table.to_pylist() == theirs_table.to_pylist()
    assert ours_table.equals(theirs_table)
    return ours_table


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_a_compressed_batch_is_read_through_a_window_and_a_large_record_skipped(
    codec: int,
) -> None:
    """Both paths read a compressed batch from a small window, skip the record over the
    bound (reported once each) and build the same rows."""
    sizes = [10, 3000, 0, 70, 9000, 5]
    data = bombs.batch(codec, bombs.records_of(sizes, b"xyz"), len(sizes))
    tables = []
    for c in (True, False):
        refused: list[ConsumerError] = []
        with column_decoder(c):
            got = build(data, 0, 100, False, rows=2, bounds=Bounds(64, 5000), refused=refused)
        assert ["offset 4 " in str(e) for e in refused] == [True]
        tables.append(table(got, False))
    assert tables[0].equals(tables[1])
    assert tables[0].column("offset").to_pylist() == [0, 1, 2, 3, 5]
    assert [len(v) for v in tables[0].column("value").to_pylist()] == [10, 3000, 0, 70, 5]


def test_the_column_decoder_is_used() -> None:
    c_columns()
    pure = os.environ.get("CONSUMERGROUP_PURE_PYTHON", "") not in ("", "0")
    assert (records_module.decode_v2_columns is None) == pure
    (batch,) = build(v2_batch([Rec(5, b"k", None, [("h", None)])]), 0, 10, True)
    assert batch.to_pylist() == [
        {
            "key": b"k",
            "value": None,
            "topic": TOPIC,
            "partition": PARTITION,
            "offset": 5,
            "timestamp": batch.column("timestamp")[0].as_py(),
            "timestampType": 0,
            "headers": [{"key": "h", "value": None}],
        }
    ]
    assert batch.column("timestamp").cast(pa.int64())[0].as_py() == Rec(0).timestamp * 1000


_batch = st.tuples(
    st.lists(RECORD_FIELDS, min_size=1, max_size=10),
    st.sampled_from(CODECS),
    st.none() | st.integers(min_value=0, max_value=2**40),  # log-append time
    st.booleans(),  # a v1 message set instead (no headers, no nulls kept apart)
)


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    batches=st.lists(_batch, min_size=1, max_size=4),
    base=st.integers(min_value=0, max_value=2**40),
    skip=st.integers(min_value=0, max_value=30),
    take=st.integers(min_value=0, max_value=60),
    include_headers=st.booleans(),
)
def test_columns_equal_the_message_path(
    batches: list[
        tuple[
            list[tuple[bytes | None, bytes | None, list[RecordHeader], int, int]],
            int,
            int | None,
            bool,
        ]
    ],
    base: int,
    skip: int,
    take: int,
    include_headers: bool,
) -> None:
    offset = base
    parts, offsets = [], []
    for contents, codec, log_append_time, legacy in batches:
        rs = []
        for key, value, headers, ts_delta, step in contents:
            rs.append(
                Rec(offset, key, value, [] if legacy else headers, 1_700_000_000_000 + ts_delta)
            )
            offsets.append(offset)
            offset += 1 if legacy else step  # a v1 set's inner offsets are consecutive
        if legacy:
            parts.append(legacy_set(1, rs, codec if codec in (0, 1, 2, 3) else 0))
        else:
            parts.append(v2_batch(rs, codec, log_append_time=log_append_time))
    data = b"".join(parts)
    start, stop = base + skip, base + skip + take  # inside a batch, or past the end
    whole = both(data, start, stop, include_headers)
    assert whole.column("offset").to_pylist() == [o for o in offsets if start <= o < stop]
    n = len(whole)
    # Every Arrow batch size, and a byte cap hit after every record.
    for rows in {1, 2, 3, max(n - 1, 1), n + 1}:
        with column_decoder(True):
            split = build(data, start, stop, include_headers, rows=rows)
        assert table(split, include_headers).equals(whole)
        assert all(0 < len(b) <= rows for b in split)
    with column_decoder(True):
        split = build(data, start, stop, include_headers, max_bytes=1)
    assert table(split, include_headers).equals(whole)


def test_non_ascii_null_and_empty_fields() -> None:
    headers: list[RecordHeader] = [("\u00e9t\u00e9", b"x"), ("\U0001f600", None), ("", b"")]
    data = v2_batch([Rec(0, None, None, headers), Rec(1, b"", b"", []), Rec(2, None, b"v")])
    rows = both(data, 0, 3, True).to_pylist()
    assert [(r["key"], r["value"]) for r in rows] == [(None, None), (b"", b""), (None, b"v")]
    assert rows[0]["headers"] == [{"key": k, "value": v} for k, v in headers]
    assert rows[1]["headers"] == []


@pytest.mark.parametrize("codec", CODECS)
def test_many_records_across_arrow_batches(codec: int) -> None:
    data = b"".join(
        v2_batch([Rec(o, str(o).encode(), b"v" * (o % 50), [("n", b"")]) for o in rng], codec)
        for rng in (range(0, 500), range(500, 501), range(501, 3000))
    )
    for include_headers in (False, True):
        whole = both(data, 7, 2990, include_headers, rows=256)
        assert whole.column("offset").to_pylist() == list(range(7, 2990))


def test_control_and_aborted_batches_are_left_out_by_scan_records() -> None:
    from tests.unit.test_records import transactional_log

    log, aborted = transactional_log()
    data = b"".join(log)
    kept = records_module.scan_records(
        TOPIC, PARTITION, data, 0, read_committed=True, aborted_transactions=aborted
    )
    builder = BatchBuilder(TOPIC, PARTITION, False)
    with column_decoder(True):
        out = [b for batch, magic, _ in kept.batches for b in builder.add(batch, magic, 0, 10**9)]
        last = builder.flush()
    got = table([*out, last] if last is not None else out, False).column("offset").to_pylist()
    expected = [m.offset for chunk in kept.decode_batches() for m in chunk]
    assert got == expected


# --- corrupt input ---------------------------------------------------------------------


def fresh(include_headers: bool) -> tuple[tuple[bytearray, ...], tuple[bytearray, ...] | None]:
    """Empty buffers in the layout decode_v2_columns appends to."""
    zero = bytes(4)
    columns = tuple(bytearray(zero if i in (0, 3) else b"") for i in range(9))
    headers = tuple(bytearray(zero if i in (0, 1, 3) else b"") for i in range(6))
    return columns, headers if include_headers else None


def decode_body(body: Any, count: int, include_headers: bool = True, **kw: Any) -> Any:
    columns, headers = fresh(include_headers)
    args = dict(pos=0, index=0, start=0, stop=2**62, limit=100, max_bytes=1 << 20) | kw
    return c_columns()(
        body,
        args["pos"],
        args["index"],
        count,
        0,
        ANY_DELTA,
        1,
        False,
        args["start"],
        args["stop"],
        args["limit"],
        args["max_bytes"],
        columns,
        headers,
    )


@pytest.mark.parametrize(
    ("body", "reason"),
    # Header keys are checked as UTF-8 when the Arrow batch is built (test below).
    [(body, reason) for body, reason in CORRUPT_RECORDS if reason != "utf-8"]
    + [(_record(b"\x00" + _varint(2**62) + b"\x00\x01\x01\x00"), "timestamp .* out of range")],
)
def test_corrupt_record_fields(body: bytes, reason: str) -> None:
    for include_headers in (False, True):
        with pytest.raises(ValueError, match=reason):
            decode_body(_guard.place(body), 1, include_headers)
    data = _reframe(_sample_batch(), body, count=1)
    with column_decoder(True), pytest.raises(CorruptMessageError, match="cannot decode"):
        build(data, 0, 10, True)


def test_a_header_key_that_is_not_utf8_is_corrupt() -> None:
    data = _reframe(_sample_batch(), _record(b"\x00\x00\x00\x01\x01\x02\x02\xff\xfe\x01"), 1)
    with column_decoder(True), pytest.raises(CorruptMessageError, match="cannot decode"):
        build(data, 0, 10, True)


def test_truncated_at_every_byte_is_corrupt() -> None:
    batch = _sample_batch()
    body = batch[61:]
    for cut in range(len(body)):
        data = _guard.place(_reframe(batch, body[:cut]))
        for include_headers in (False, True):
            with column_decoder(True), pytest.raises(CorruptMessageError, match="cannot decode"):
                build(data, 0, 10, include_headers)
    for data in (_reframe(batch, body + b"\x00"), _reframe(batch, body, count=2)):
        with column_decoder(True), pytest.raises(CorruptMessageError, match="cannot decode"):
            build(_guard.place(data), 0, 10, True)
    assert len(both(_reframe(batch, b"", count=0), 0, 10, True)) == 0


def test_every_byte_overwritten_is_fine_or_corrupt() -> None:
    batch = _sample_batch()
    body = batch[61:]
    # Every position; three of the five values unless fuzzing (make fuzz): zero, a varint's
    # continuation bit, and both (negative lengths, runaway varints). On the sanitized
    # build (each build() ~20 times slower) one batch size, a flush in mid-batch.
    values = (0x00, 0x01, 0x7F, 0x80, 0xFF) if full() else (0x00, 0x80, 0xFF)
    sizes = (2,) if mode() == "sanitized" else (1, 2, 100)
    for i in range(len(body)):
        for byte in values:
            data = _guard.place(_reframe(batch, body[:i] + bytes([byte]) + body[i + 1 :]))
            for rows in sizes:
                with column_decoder(True):
                    try:
                        build(data, 0, 10, True, rows=rows)
                    except CorruptMessageError as exc:
                        assert "cannot decode" in str(exc)


@settings(max_examples=examples(300), deadline=None)
@given(**RANDOM_INPUT, limit=st.integers(min_value=1, max_value=4), include_headers=st.booleans())
def test_random_bytes_never_crash_or_hang(
    body: bytes, count: int, limit: int, start: int, include_headers: bool
) -> None:
    """Resuming until the record index reaches ``count`` always ends (each call advances
    or raises), the buffers staying consistent for the next call."""
    decode = c_columns()
    view = _guard.place(body)
    columns, headers = fresh(include_headers)

    def step(pos: int, index: int) -> tuple[int, int]:
        pos, index, ended = decode(
            view,
            pos,
            index,
            count,
            0,
            ANY_DELTA,
            0,
            False,
            start,
            2**62,
            limit,
            1 << 20,
            columns,
            headers,
        )
        assert not ended
        return pos, index

    resume_all(step, len(body), count)


def test_stop_ends_before_the_first_record_at_or_after_it() -> None:
    body = _sample_batch()[61:]
    columns, headers = fresh(True)
    decode = c_columns()
    pos, index, ended = decode(
        body, 0, 0, 3, 10, 2, 0, False, 0, 12, 100, 1 << 20, columns, headers
    )
    assert (index, ended) == (2, True)
    assert bytes(columns[6]) == (10).to_bytes(8, "little") + (11).to_bytes(8, "little")
    # Resuming there with a later stop reads the third record and the batch's end.
    assert decode(body, pos, index, 3, 10, 2, 0, False, 0, 99, 100, 1 << 20, columns, headers) == (
        len(body),
        3,
        False,
    )


def test_bad_buffers_are_refused() -> None:
    decode = c_columns()
    body = _sample_batch()[61:]
    columns, headers = fresh(True)
    with pytest.raises(TypeError, match="tuple of 9 bytearrays"):
        decode(body, 0, 0, 3, 0, 2, 0, False, 0, 99, 10, 99, columns[:8], headers)
    with pytest.raises(TypeError, match="tuple of 6 bytearrays"):
        decode(body, 0, 0, 3, 0, 2, 0, False, 0, 99, 10, 99, columns, (*headers[:5], b""))
    with pytest.raises(ValueError, match="the same bytearray twice"):
        decode(body, 0, 0, 3, 0, 2, 0, False, 0, 99, 10, 99, (*columns[:8], columns[0]), None)
    for bad in (1, 2, 6, 7):
        broken = list(fresh(False)[0])
        broken[bad] += b"\x01"
        with pytest.raises(ValueError, match="inconsistent column buffers"):
            decode(body, 0, 0, 3, 0, 2, 0, False, 0, 99, 10, 99, tuple(broken), None)
    for pos, limit, max_bytes in ((-1, 10, 99), (len(body) + 1, 10, 99), (0, 0, 99), (0, 10, 0)):
        with pytest.raises(ValueError, match="invalid decode position"):
            decode(body, pos, 0, 3, 0, 2, 0, False, 0, 99, limit, max_bytes, columns, headers)
    # A buffer Arrow still uses (exported) cannot be resized under it.
    view = memoryview(columns[1])
    with pytest.raises(BufferError):
        decode(body, 0, 0, 3, 0, 2, 0, False, 0, 99, 10, 99, columns, headers)
    view.release()


def test_legacy_batches_between_v2_ones_keep_their_order() -> None:
    data = (
        v2_batch([Rec(0), Rec(1)])
        + legacy_set(1, [Rec(2), Rec(3)])
        + v2_batch([Rec(4), Rec(5)], NONE)
    )
    with column_decoder(True):
        out = build(data, 1, 5, False)
    assert [b.column("offset").to_pylist() for b in out] == [[1], [2, 3], [4]]
