"""consumergroup.net.fetch: our Fetch response decoder against aiokafka's, v1-v11, and v12.

Valid frames (built with aiokafka's own response structs) decode to the same values;
corrupted ones (truncated, bytes overwritten) decode to what aiokafka decodes or
raise CorruptMessageError where aiokafka fails: never another exception, never a hang.
aiokafka has no v12 codec: v12 frames come from the independent encoder in
tests/fetch_v12_wire.py, and corrupt ones must decode or raise CorruptMessageError.
"""

from __future__ import annotations

import contextlib
import struct
from io import BytesIO
from typing import Any

import pytest
from aiokafka.protocol import fetch as aiokafka_fetch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from consumergroup.errors import CorruptMessageError
from consumergroup.net.fetch import decode_fetch_response
from consumergroup.net.protocol import FetchRequest, decode_response, prepare
from tests import fetch_v12_wire
from tests.fuzz import examples

VERSIONS = range(1, 12)
_i16 = st.integers(-(2**15), 2**15 - 1)
_i32 = st.integers(-(2**31), 2**31 - 1)
_i64 = st.integers(-(2**63), 2**63 - 1)
_records = st.one_of(st.none(), st.binary(max_size=64))
_aborted = st.one_of(st.none(), st.lists(st.tuples(_i64, _i64), max_size=3))


@st.composite
def responses(draw: st.DrawFn, version: int) -> tuple[Any, ...]:
    """The field values of a Fetch response of ``version``, in schema order."""

    def partition() -> tuple[Any, ...]:
        fields: tuple[Any, ...] = (draw(_i32), draw(_i16), draw(_i64))
        if version >= 4:
            fields += (draw(_i64),)
        if version >= 5:
            fields += (draw(_i64),)
        if version >= 4:
            fields += (draw(_aborted),)
        if version >= 11:
            fields += (draw(_i32),)
        return (*fields, draw(_records))

    topics = [
        (draw(st.text(max_size=12)), [partition() for _ in range(draw(st.integers(0, 3)))])
        for _ in range(draw(st.integers(0, 3)))
    ]
    head: tuple[Any, ...] = (draw(_i32),)
    if version >= 7:
        head += (draw(_i16), draw(_i32))
    return (*head, topics)


def frame(version: int, fields: tuple[Any, ...], correlation_id: int = 7) -> bytes:
    """A response frame (correlation id + body) built by aiokafka's encoder."""
    response = getattr(aiokafka_fetch, f"FetchResponse_v{version}")(*fields)
    body: bytes = response.encode()
    return struct.pack(">i", correlation_id) + body


def aiokafka_decode(version: int, payload: bytes) -> Any:
    buf = BytesIO(payload)
    buf.read(4)
    return getattr(aiokafka_fetch, f"FetchResponse_v{version}").decode(buf)


def plain(resp: Any) -> tuple[Any, ...]:
    """The decoded values with record sets as bytes, for comparison."""

    def part(p: tuple[Any, ...]) -> tuple[Any, ...]:
        records = p[-1]
        aborted_at = 5 if resp.API_VERSION >= 5 else 4
        fields = list(p[:-1])
        if resp.API_VERSION >= 4 and fields[aborted_at] is not None:
            fields[aborted_at] = [tuple(a) for a in fields[aborted_at]]
        return (*fields, None if records is None else bytes(records))

    topics = (
        None
        if resp.topics is None
        else [(t, None if ps is None else [part(tuple(p)) for p in ps]) for t, ps in resp.topics]
    )
    return (
        resp.API_VERSION,
        resp.throttle_time_ms,
        getattr(resp, "error_code", 0),
        getattr(resp, "session_id", 0),
        topics,
    )


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_same_values_as_aiokafka(version: int, data: st.DataObject) -> None:
    payload = frame(version, data.draw(responses(version)))
    assert plain(decode_fetch_response(version, payload)) == plain(
        aiokafka_decode(version, payload)
    )


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_corrupt_frames_raise_a_typed_error(version: int, data: st.DataObject) -> None:
    payload = bytearray(frame(version, data.draw(responses(version))))
    # Truncate, and overwrite a few bytes (often a length or a count) with anything.
    payload = payload[: data.draw(st.integers(4, len(payload)))]
    for _ in range(data.draw(st.integers(0, 3))):
        if len(payload) > 4:
            at = data.draw(st.integers(4, len(payload) - 1))
            payload[at] = data.draw(st.integers(0, 255))
    try:
        theirs = plain(aiokafka_decode(version, bytes(payload)))
    except Exception:
        theirs = None
    if theirs is None:
        with pytest.raises(CorruptMessageError):
            decode_fetch_response(version, bytes(payload))
    else:
        assert plain(decode_fetch_response(version, bytes(payload))) == theirs


def test_huge_counts_fail_fast() -> None:
    # 2**31-1 aborted transactions announced in a 100-byte frame: an error, no allocation.
    fields = (0, 0, 0, [("t", [(0, 0, 5, 5, 0, [], 0, b"")])])
    payload = bytearray(frame(11, fields))
    at = len(payload) - 4 - 4 - 4  # the aborted count: before replica id and records length
    payload[at : at + 4] = struct.pack(">i", 2**31 - 1)
    with pytest.raises(CorruptMessageError, match="aborted transactions"):
        decode_fetch_response(11, bytes(payload))


def test_record_sets_are_views_of_the_frame() -> None:
    payload = frame(11, (0, 0, 0, [("t", [(0, 0, 5, 5, 0, None, -1, b"abc")])]))
    records = decode_fetch_response(11, payload).topics[0][1][0][-1]  # type: ignore[index]
    assert isinstance(records, memoryview)
    assert records.obj is payload
    assert bytes(records) == b"abc"


def test_decode_response_uses_it_for_fetch() -> None:
    request = FetchRequest(100, 1, 1 << 20, 0, [("t", [(0, 0, 1 << 20)])])
    struct_ = prepare(request, {1: (1, 11)}, "b:9092")
    payload = frame(struct_.API_VERSION, (0, 0, 0, [("t", [(0, 0, 5, 5, 0, None, -1, b"")])]))
    resp = decode_response(struct_, payload)
    assert type(resp).__name__ == "FetchResponse"
    assert resp.topics[0][0] == "t"


_u31 = st.integers(0, 2**31 - 1)
_tagged = st.one_of(st.none(), st.tuples(_i32, _i64))


@st.composite
def v12_responses(draw: st.DrawFn) -> tuple[Any, ...]:
    """The field values of a Fetch v12 response (see fetch_v12_wire.encode_response)."""

    def partition() -> tuple[Any, ...]:
        return (
            draw(_i32),
            draw(_i16),
            draw(_i64),
            draw(_i64),
            draw(_i64),
            draw(_aborted),
            draw(_i32),
            draw(_tagged),  # diverging_epoch (epoch, end_offset)
            draw(st.one_of(st.none(), st.tuples(_i32, _i32))),  # current_leader
            draw(st.one_of(st.none(), st.tuples(_i64, _i32))),  # snapshot_id
            draw(_records),
        )

    topics = draw(
        st.one_of(
            st.none(),
            st.lists(
                st.builds(
                    lambda n, k: (n, [partition() for _ in range(k)]),
                    st.text(max_size=12),
                    st.integers(0, 3),
                ),
                max_size=3,
            ),
        )
    )
    return (draw(_i32), draw(_i16), draw(_i32), topics)


def v12_plain(resp: Any) -> tuple[Any, ...]:
    """A decoded v12 response as encode_response's arguments (record sets as bytes)."""
    topics = None
    if resp.topics is not None:
        topics = [
            (t, [(*p[:-1], None if p[-1] is None else bytes(p[-1])) for p in ps])
            for t, ps in resp.topics
        ]
    return (resp.throttle_time_ms, resp.error_code, resp.session_id, topics)


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fields=v12_responses(), unknown_tag=st.booleans())
def test_v12_decodes_what_was_encoded(fields: tuple[Any, ...], unknown_tag: bool) -> None:
    payload = fetch_v12_wire.encode_response(7, *fields, unknown_tag=unknown_tag)
    resp = decode_fetch_response(12, payload)
    assert resp.API_VERSION == 12
    assert v12_plain(resp) == fields


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fields=v12_responses(), data=st.data())
def test_v12_corrupt_frames_decode_or_raise_a_typed_error(
    fields: tuple[Any, ...], data: st.DataObject
) -> None:
    payload = bytearray(fetch_v12_wire.encode_response(7, *fields))
    payload = payload[: data.draw(st.integers(4, len(payload)))]
    for _ in range(data.draw(st.integers(0, 3))):
        if len(payload) > 4:
            at = data.draw(st.integers(4, len(payload) - 1))
            payload[at] = data.draw(st.integers(0, 255))
    with contextlib.suppress(CorruptMessageError):  # any other exception fails the test
        decode_fetch_response(12, bytes(payload))


def test_v12_truncated_varint_and_huge_counts_fail_fast() -> None:
    fields = (0, 0, 0, [("t", [(0, 0, 5, 5, 0, [], -1, None, None, None, b"")])])
    payload = fetch_v12_wire.encode_response(7, *fields)
    with pytest.raises(CorruptMessageError):
        decode_fetch_response(12, payload[:-1] + b"\xff")  # a varint cut short
    # 2**31 aborted transactions announced in a small frame: an error, no allocation.
    at = payload.index(b"\x01\xff\xff\xff\xff")  # the aborted count, then the replica id
    huge = payload[:at] + fetch_v12_wire.uvarint(2**31) + payload[at + 1 :]
    with pytest.raises(CorruptMessageError, match="aborted transactions"):
        decode_fetch_response(12, huge)


@pytest.mark.parametrize("cut", [1, 2, 3, 4])
def test_a_v11_frame_cut_in_its_last_partitions_tail_is_corrupt(cut: int) -> None:
    # Found by the property test above: with fewer bytes left than a v11 partition's fixed
    # part, the decoder took the v5-v10 layout (no preferred replica) and read the replica
    # id as the record set's length: a truncated frame decoded as a valid one.
    fields = (0, 0, 0, [("t", [(0, 0, 0, 0, 0, None, 0, None), (0, 0, 0, 0, 0, [], 0, None)])])
    payload = frame(11, fields)
    with pytest.raises(CorruptMessageError):
        decode_fetch_response(11, payload[:-cut])
