"""Fuzz runs of every record-parsing path, each in a process of its own.

``python -m tests.unit.decode_fuzz PATH`` feeds PATH truncated and overwritten record
sets, placed so that they end right before an inaccessible page: decoding must end in
messages or :class:`~consumergroup.errors.CorruptMessageError`. A read past the buffer
kills the process (SIGSEGV), which the calling test sees as a failure; any other
exception fails the run too. Paths: ``v2-python`` (v2 without the C extension),
``legacy`` (message formats v0 and v1, compressed ones included), ``control``
(read_committed reading control records and skipping aborted transactions).
"""

from __future__ import annotations

import gzip
import struct
import sys
import zlib
from collections.abc import Callable

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from consumergroup.consumer import records
from consumergroup.errors import CorruptMessageError
from tests.unit.test_crecords import _guard
from tests.unit.test_records import GZIP, NONE, SNAPPY, Rec, control_batch, legacy_set, v2_batch

_RECS = [Rec(0, b"key", b"value" * 10, [("h", b"1")]), Rec(1, None, None), Rec(2, b"", b"x" * 40)]


def _samples(path: str) -> tuple[list[bytes], dict[str, object]]:
    """Valid record sets for ``path``, and the scan_records options that reach it."""
    if path == "v2-python":
        return [v2_batch(_RECS), v2_batch(_RECS, GZIP)], {}
    if path == "legacy":
        sets = [legacy_set(magic, _RECS, codec) for magic in (0, 1) for codec in (NONE, GZIP)]
        return [*sets, legacy_set(1, _RECS, SNAPPY)], {}
    if path == "control":
        # The ABORT marker of producer 7, alone and after that producer's aborted data.
        txn = bytearray(v2_batch(_RECS))
        struct.pack_into(">h", txn, 21, 0x10)  # attributes: transactional
        struct.pack_into(">q", txn, 43, 7)  # producer id
        marker = control_batch(0, 7, abort=True)
        data = bytes(txn) + control_batch(3, 7, abort=True)
        return [marker, data], {"read_committed": True, "aborted_transactions": [(7, 0)]}
    raise SystemExit(f"unknown path {path!r}: v2-python, legacy or control")


def _decode(data: bytes, options: dict[str, object]) -> None:
    try:
        rs = records.scan_records("t", 0, _guard.place(data), 0, **options)  # type: ignore[arg-type]
        for _ in rs.decode_batches(2):
            pass
    except CorruptMessageError:
        pass


def _wrap(magic: int, inner: bytes) -> bytes:
    """A gzip wrapper message (``magic`` 0 or 1) holding the message set ``inner``."""
    value = gzip.compress(inner)
    body = struct.pack(">bb", magic, 1) + (struct.pack(">q", 0) if magic else b"")
    body += struct.pack(">ii", -1, len(value)) + value
    return struct.pack(">qiI", 2, 4 + len(body), zlib.crc32(body)) + body


def run(path: str, examples: int) -> None:
    """Fuzz ``path`` with ``examples`` cases (raises on anything but the two outcomes)."""
    samples, options = _samples(path)
    records._decode_v2 = None  # the Python v2 path (the C one has its own fuzz tests)

    @settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck))
    @given(
        which=st.integers(min_value=0, max_value=len(samples) - 1),
        cut=st.integers(min_value=0, max_value=400),
        edits=st.lists(st.tuples(st.integers(min_value=0), st.integers(0, 255)), max_size=4),
        count=st.sampled_from([None, 0, 1, 2, 4, 1000, 2**31 - 1, -1]),
        length=st.tuples(st.integers(min_value=0), st.sampled_from([-2, 1, 300, 2**31 - 1])),
        wrap=st.booleans(),
    )
    def case(
        which: int,
        cut: int,
        edits: list[tuple[int, int]],
        count: int | None,
        length: tuple[int, int],
        wrap: bool,
    ) -> None:
        data = bytearray(samples[which])
        at, value = length  # an int32 overwritten: legacy key/value lengths are int32s
        struct.pack_into(">i", data, at % (len(data) - 3), value)
        if cut < len(data) - 17:  # cut the first batch short, its length saying so
            data = data[: 17 + cut]
            struct.pack_into(">i", data, 8, len(data) - 12)
        if count is not None and data[16] == 2 and len(data) >= 61:
            struct.pack_into(">i", data, 57, count)  # a v2 batch's record count
        for at, byte in edits:
            data[at % len(data)] = byte
        if wrap and path == "legacy" and data[16] < 2:  # the corrupt set inside a wrapper
            data = bytearray(_wrap(data[16], bytes(data)))
        _decode(bytes(data), options)

    case()


def _main(argv: list[str], out: Callable[[str], object] = print) -> None:
    path = argv[1]
    examples = int(argv[2]) if len(argv) > 2 else 300
    run(path, examples)
    out(f"{path}: {examples} cases, no crash")


if __name__ == "__main__":
    _main(sys.argv)
