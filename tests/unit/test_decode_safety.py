"""Untrusted bytes and object lifetimes on the decode path.

Every path that parses record sets is ours and bounds-checked: fuzz runs (in processes
of their own, so a read past the buffer is a failure, not a lost test run) of the v2
path without the C extension, the v0/v1 parser and read_committed's control records.
The C v2 decoder and its pure-Python twin agree on everything (hypothesis); both read a
negative length as null and check offset deltas against ``lastOffsetDelta``. The C
extensions' object lifetimes: buffers, collector re-entry, half-built containers, and
the MessageStream driven in ways the interpreter never does. Run on an ASan/UBSan build
by ``make test`` (see the Makefile), where a use-after-free is a crash.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consumergroup.consumer import _pyrecords
from consumergroup.consumer import records as records_module
from consumergroup.errors import CorruptMessageError
from tests.fuzz import examples
from tests.unit.test_crecords import (
    ANY_DELTA,
    PARTITION,
    TOPIC,
    _guard,
    _record,
    _reframe,
    _sample_batch,
    _varint,
    fields,
)
from tests.unit.test_records import Rec, c_decoder, v2_batch

ROOT = Path(__file__).resolve().parents[2]


def _run(args: list[str], code: str | None = None) -> subprocess.CompletedProcess[str]:
    """A Python process in the repository (a crash is its exit status, not ours)."""
    argv = [sys.executable, "-W", "ignore", *(["-c", code] if code is not None else args)]
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)


# --- every parsing path is bounds-checked ------------------------------------------------


@pytest.mark.parametrize("path", ["v2-python", "legacy", "control"])
def test_fuzzed_record_sets_are_corrupt_never_a_crash(path: str) -> None:
    done = _run(["-m", "tests.unit.decode_fuzz", path, str(examples(200))])
    assert done.returncode == 0, f"exit {done.returncode}:\n{done.stdout}{done.stderr[-3000:]}"


# --- lengths and offset deltas, on both v2 paths --------------------------------------------

DECODERS = ["c", "python"]


def _decoder(which: str) -> records_module.DecodeV2:
    return c_decoder() if which == "c" else _pyrecords.decode_v2


def _decode(which: str, body: bytes, last_delta: int = ANY_DELTA, start: int = 0) -> Any:
    messages, pos, index = _decoder(which)(
        _guard.place(body), 0, 0, 1, 100, last_delta, 0, False, TOPIC, PARTITION, start, 0
    )
    return [fields(m) for m in messages], pos, index


@pytest.mark.parametrize("which", DECODERS)
def test_any_negative_length_is_null(which: str) -> None:
    """Java's client reads a key, value or header value of any negative length as null."""
    header = _varint(1) + b"h" + _varint(-7)
    body = _record(b"\x00\x00\x00" + _varint(-2) + _varint(-(2**40)) + _varint(1) + header)
    (got,), _, _ = _decode(which, body)
    assert got[3:6] == (None, None, (("h", None),))
    # A header key is a string: a negative length is corrupt.
    bad = _record(b"\x00\x00\x00\x01\x01" + _varint(1) + _varint(-1) + b"\x01")
    with pytest.raises(ValueError, match="header key length"):
        _decode(which, bad)


@pytest.mark.parametrize("which", DECODERS)
@pytest.mark.parametrize("delta", [-1, 3, 2**31, -(2**40)])
def test_an_offset_delta_outside_the_batch_is_corrupt(which: str, delta: int) -> None:
    """Checked against lastOffsetDelta (2 here); a negative one used to be dropped
    silently by the C path as "below the fetch offset"."""
    body = _record(b"\x00\x00" + _varint(delta) + b"\x01\x01\x00")
    with pytest.raises(ValueError, match="offset delta"):
        _decode(which, body, last_delta=2, start=100)
    assert _decode(which, _record(b"\x00\x00" + _varint(2) + b"\x01\x01\x00"), 2)[0]


def test_a_bad_offset_delta_in_a_batch_is_corrupt_on_both_paths() -> None:
    batch = v2_batch([Rec(0, b"k", b"v"), Rec(1, b"k", b"w")])
    body = _record(b"\x00\x00" + _varint(-1) + b"\x01\x01\x00") * 2
    for c in (True, False):
        saved = records_module._decode_v2
        records_module._decode_v2 = c_decoder() if c else None
        try:
            with pytest.raises(CorruptMessageError, match="offset delta"):
                rs = records_module.scan_records(TOPIC, PARTITION, _reframe(batch, body), 0)
                list(rs.decode_batches())
        finally:
            records_module._decode_v2 = saved


def _outcome(decode: records_module.DecodeV2, args: tuple[Any, ...]) -> Any:
    """Every call from the start until the record index reaches the count, or the
    error: what a batch decodes to."""
    body, count, start, limit = args[0], args[3], args[10], args[11]
    out: list[Any] = []
    pos = index = 0
    try:
        while True:
            messages, pos, index = decode(body, pos, index, *args[3:10], start, limit)
            out.append(([fields(m) for m in messages], pos, index))
            if index >= count:
                return out
    except ValueError:
        return out, "ValueError"


@settings(max_examples=examples(250), deadline=None)
@given(
    records=st.lists(
        st.tuples(
            st.integers(-3, 6),  # offset delta
            st.integers(-(2**40), 2**40),  # timestamp delta
            st.one_of(st.none(), st.binary(max_size=4)),
            st.one_of(st.none(), st.binary(max_size=4)),
            st.lists(st.tuples(st.text(max_size=2), st.one_of(st.none(), st.binary(max_size=2)))),
        ),
        max_size=5,
    ),
    mangle=st.lists(st.tuples(st.integers(min_value=0), st.integers(0, 255)), max_size=2),
    extra=st.sampled_from([b"", b"\x00", b"\x01\xff"]),
    count_delta=st.integers(-1, 1),
    last_delta=st.integers(0, 5),
    start=st.integers(98, 104),
    limit=st.integers(0, 3),
    log_append_time=st.booleans(),
)
def test_the_c_and_python_decoders_agree(
    records: list[Any],
    mangle: list[tuple[int, int]],
    extra: bytes,
    count_delta: int,
    last_delta: int,
    start: int,
    limit: int,
    log_append_time: bool,
) -> None:
    """Well-formed, mangled, short or long bodies: the same messages, resume points and
    failures through the C decoder and the pure-Python one."""
    parts = []
    for delta, ts, key, value, headers in records:
        head = b"\x00" + _varint(ts) + _varint(delta)
        kv = b"".join(_varint(-1) if v is None else _varint(len(v)) + v for v in (key, value))
        hs = _varint(len(headers)) + b"".join(
            _varint(len(k.encode()))
            + k.encode()
            + (_varint(-1) if v is None else _varint(len(v)) + v)
            for k, v in headers
        )
        parts.append(_record(head + kv + hs))
    body = bytearray(b"".join(parts) + extra)
    for at, byte in mangle:
        if body:
            body[at % len(body)] = byte
    args = (
        _guard.place(bytes(body)),
        0,
        0,
        max(len(records) + count_delta, 0),
        100,
        last_delta,
        1_700_000_000_000,
        log_append_time,
        TOPIC,
        PARTITION,
        start,
        limit,
    )
    assert _outcome(c_decoder(), args) == _outcome(_pyrecords.decode_v2, args)


# --- the C extensions: lifetimes ---------------------------------------------------------


def _columns(include_headers: bool = True) -> tuple[tuple[bytearray, ...], Any]:
    from tests.unit.test_spark_columns import fresh

    return fresh(include_headers)


def test_one_bytearray_in_columns_and_headers_is_refused() -> None:
    decode = pytest.importorskip("consumergroup.consumer._crecords").decode_v2_columns
    body = _sample_batch()[61:]
    columns, headers = _columns()
    for shared, at in ((1, 2), (4, 4)):  # key or value data, as header key or value data
        aliased = tuple(columns[shared] if i == at else b for i, b in enumerate(headers))
        with pytest.raises(ValueError, match="the same bytearray twice"):
            decode(body, 0, 0, 3, 0, 2, 0, False, 0, 99, 10, 99, columns, aliased)
    assert all(len(b) == len(f) for b, f in zip(columns, _columns()[0], strict=True))


# A collection run inside the decoder grows a column buffer (a gc callback does what a
# finalizer could): its storage moves. Thresholds 1..8 make the collection land on the
# decoder's own allocation in some runs; the buffer must then hold what the decoder wrote
# and the appended bytes (or the decoder says the buffer changed under it), never have
# the decoder write through its old storage and size it back.
_COLLECTOR_REENTRY = """
import gc
from tests.unit.test_crecords import _sample_batch
from consumergroup.consumer._crecords import decode_v2_columns

def fresh(include_headers):  # as tests/unit/test_spark_columns.py (pyarrow not imported)
    columns = tuple(bytearray(bytes(4) if i in (0, 3) else b"") for i in range(9))
    return columns, tuple(bytearray(bytes(4) if i in (0, 1, 3) else b"") for i in range(6))

body = _sample_batch()[61:]
args = (0, 0, 3, 0, 2, 0, False, 0, 99, 10, 1 << 20)
columns, headers = fresh(True)
decode_v2_columns(body, *args, columns, headers)
written = len(columns[4])  # the value data
armed, fired = [], []

def grow_it(phase, info):
    if phase == "start" and armed and armed[0].__alloc__() > 64:
        armed.pop().extend(bytes(4096))
        fired.append(1)

gc.callbacks.append(grow_it)
for threshold in range(1, 9):
    columns, headers = fresh(True)
    armed[:], fired[:] = [columns[4]], []
    gc.set_threshold(threshold)
    try:
        gc.collect()
        decode_v2_columns(body, *args, columns, headers)
    except RuntimeError as exc:
        assert "changed while decoding" in str(exc), exc
    else:
        assert not fired or len(columns[4]) == written + 4096, (threshold, len(columns[4]))
    finally:
        gc.set_threshold(700)
print("ok")
"""

# Collections inside the decoder, each listing the young objects and reading every item of
# every list and tuple: a half-built one (NULL items) must not be among them.
_HALF_BUILT = """
import gc
from tests.unit.test_records import Rec, c_decoder
from tests.unit.test_crecords import ANY_DELTA
from tests.unit.test_records import v2_batch

decode_v2 = c_decoder()
records = [Rec(o, b"k%d" % o, b"v" * o, [("h%d" % i, b"x") for i in range(3)]) for o in range(12)]
body = v2_batch(records)[61:]

def walk(phase, info):
    if phase == "start":
        for o in gc.get_objects():
            if type(o) in (list, tuple):
                for item in o:
                    type(item)

gc.callbacks.append(walk)
gc.set_threshold(1)
messages, _, _ = decode_v2(body, 0, 0, 12, 0, ANY_DELTA, 0, False, "t", 0, 0, 0)
gc.set_threshold(700)
gc.callbacks.remove(walk)
assert [len(m.headers) for m in messages] == [3] * 12
print("ok")
"""


@pytest.mark.parametrize("code", [_COLLECTOR_REENTRY, _HALF_BUILT], ids=["reentry", "half-built"])
def test_collections_inside_the_c_decoder(code: str) -> None:
    pytest.importorskip("consumergroup.consumer._crecords")
    done = _run([], textwrap.dedent(code))
    assert done.returncode == 0 and done.stdout.strip() == "ok", (
        f"exit {done.returncode}:\n{done.stdout}{done.stderr[-3000:]}"
    )


_cstream = pytest.importorskip("consumergroup.consumer._cstream")
MessageStream: Any = _cstream.MessageStream


class _FakePC:
    """What the streams call on a PartitionConsumer: ``_next_messages()`` (MessageStream)
    and ``_next_batch()`` (BatchStream), each returning its next prepared step."""

    def __init__(self, *steps: Any) -> None:
        self.steps = list(steps)
        self.stream: Any = None

    def _next_messages(self) -> Any:
        if not self.steps:
            raise StopAsyncIteration
        return self.steps.pop(0)

    _next_batch = _next_messages


async def test_a_step_that_is_neither_an_item_nor_an_awaitable_is_a_type_error() -> None:
    pc = _FakePC([1, 2], iter([1, 2]))  # a list, not an iterator over it
    stream = MessageStream(pc)
    with pytest.raises(TypeError, match="not an item or an awaitable"):
        await stream.__anext__()
    assert [await stream.__anext__(), await stream.__anext__()] == [1, 2]
    batches = _cstream.BatchStream(_FakePC(iter([1]), [3]))
    with pytest.raises(TypeError, match="not an item or an awaitable"):
        await batches.__anext__()
    assert await batches.__anext__() == [3]


async def test_a_stream_made_without_init_is_refused() -> None:
    for cls in (MessageStream, _cstream.BatchStream):
        stream = cls.__new__(cls)
        with pytest.raises(RuntimeError, match="not initialised"):
            await stream.__anext__()
        stream.close()


_REENTERED = """
import asyncio
from consumergroup.consumer._cstream import BatchStream, MessageStream

class PC:
    waited = False

    def _next_messages(self):
        if {in_step}:
            {action}
        if not self.waited:
            self.waited = True
            return self.wait()
        return iter(["message"])

    def _next_batch(self):
        return [next(self._next_messages())]

    async def wait(self):
        await asyncio.sleep(0)
        {action}

async def main():
    pc = PC()
    pc.stream = {cls}(pc)
    try:
        await pc.stream.__anext__()
    except ValueError as exc:
        assert "MessageStream already executing" in str(exc), exc
        print("ok")

asyncio.run(main())
"""


@pytest.mark.parametrize("cls", ["MessageStream", "BatchStream"])
@pytest.mark.parametrize("in_step", [True, False])
@pytest.mark.parametrize(
    "action",
    ["self.stream.close()", "self.stream.throw(KeyError('x'))", "self.stream.__init__(self)"],
)
def test_the_stream_refuses_to_be_closed_from_inside_its_step_or_wait(
    action: str, in_step: bool, cls: str
) -> None:
    """close()/throw()/__init__ from inside the pc's step or the awaitable it returned
    would free what is running them."""
    code = _REENTERED.format(action=action, in_step=in_step, cls=cls)
    if cls == "BatchStream" and not in_step:
        code = code.replace("return [next(self._next_messages())]", "return self.wait()")
    done = _run([], code)
    assert done.returncode == 0 and done.stdout.strip() == "ok", (
        f"exit {done.returncode}:\n{done.stdout}{done.stderr[-3000:]}"
    )


def test_streams_still_iterate_normally() -> None:
    async def main() -> tuple[list[Any], list[Any]]:
        loop = asyncio.get_running_loop()
        ready = loop.create_future()
        loop.call_soon(ready.set_result, "ignored")
        messages = _FakePC(iter([1]), None, ready, iter([2, 3]), iter([4]))
        batches = _FakePC([1], None, loop.create_future(), [2, 3])
        batches.steps[2].set_result(None)  # a wait already over: asked again at once
        return (
            [m async for m in _limited(MessageStream(messages), 3)],
            [b async for b in _cstream.BatchStream(batches)],
        )

    assert asyncio.run(main()) == ([1, 2, 3], [[1], [2, 3]])


async def _limited(stream: Any, n: int) -> Any:
    async for item in stream:
        yield item
        n -= 1
        if not n:
            return
