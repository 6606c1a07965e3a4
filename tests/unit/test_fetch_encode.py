"""consumergroup.net.fetch: our Fetch request encoder.

v1-v11: byte for byte what aiokafka's FetchRequest builder encodes (plus the KIP-227
session fields from v7, checked by aiokafka's decoder). v12 (flexible; aiokafka has
no codec for it) is read back by the independent reader in tests/fetch_v12_wire.py.
"""

from __future__ import annotations

import struct
from io import BytesIO
from typing import Any

import pytest
from aiokafka.protocol import fetch as aiokafka_fetch
from aiokafka.protocol.api import RequestHeader_v1
from hypothesis import given, settings
from hypothesis import strategies as st

from consumergroup.errors import UnsupportedVersionError
from consumergroup.net.fetch import FetchFrame, FetchRequest
from consumergroup.net.protocol import encode_request, prepare
from tests import fetch_v12_wire
from tests.fuzz import examples

_i32 = st.integers(-(2**31), 2**31 - 1)
_i64 = st.integers(-(2**63), 2**63 - 1)
_topic = st.text(max_size=10)
_partitions = st.lists(st.tuples(_i32, _i64, _i32), max_size=4)
_topics = st.lists(st.tuples(_topic, _partitions), max_size=3)
_forgotten = st.lists(st.tuples(_topic, st.lists(_i32, max_size=3)), max_size=2)


def aiokafka_body(version: int, request: FetchRequest) -> bytes:
    """aiokafka's encoding of the same request (its builder, session fields set from v7)."""
    cls = getattr(aiokafka_fetch, f"FetchRequest_v{version}")
    built = aiokafka_fetch.FetchRequest(
        request.max_wait_time,
        request.min_bytes,
        request.max_bytes,
        request.isolation_level,
        [(t, list(ps)) for t, ps in request.topics],
        rack_id=request.rack_id,
    ).build(cls)
    if version >= 7:
        built.__dict__.update(
            session_id=request.session_id,
            session_epoch=request.epoch,
            forgotten_topics_data=[(t, list(ps)) for t, ps in request.forgotten],
        )
    body: bytes = built.encode()
    return body


@pytest.mark.parametrize("version", range(1, 12))
@settings(max_examples=examples(60), deadline=None)
@given(
    wait=_i32,
    min_bytes=_i32,
    max_bytes=_i32,
    read_committed=st.booleans(),
    topics=_topics,
    session=st.tuples(_i32, _i32),
    forgotten=_forgotten,
    rack=_topic,
)
def test_same_bytes_as_aiokafka(
    version: int,
    wait: int,
    min_bytes: int,
    max_bytes: int,
    read_committed: bool,
    topics: list[tuple[str, list[tuple[int, int, int]]]],
    session: tuple[int, int],
    forgotten: list[tuple[str, list[int]]],
    rack: str,
) -> None:
    isolation = int(read_committed and version >= 4)
    request = FetchRequest(
        wait,
        min_bytes,
        max_bytes,
        isolation,
        topics,
        session_id=session[0],
        epoch=session[1],
        forgotten=forgotten,
        rack_id=rack,
    )
    assert request.build(version).body == aiokafka_body(version, request)


@settings(max_examples=examples(100), deadline=None)
@given(
    wait=_i32,
    topics=st.lists(
        st.tuples(
            _topic,
            st.one_of(  # a topic's entries all carry a last fetched epoch, or none does
                st.lists(st.tuples(_i32, _i64, _i32), max_size=4),
                st.lists(st.tuples(_i32, _i64, _i32, _i32), max_size=4),
            ),
        ),
        max_size=3,
    ),
    session=st.tuples(_i32, _i32),
    forgotten=_forgotten,
    rack=_topic,
)
def test_v12_reads_back(
    wait: int,
    topics: list[tuple[str, list[tuple[int, ...]]]],
    session: tuple[int, int],
    forgotten: list[tuple[str, list[int]]],
    rack: str,
) -> None:
    request = FetchRequest(
        wait, 1, 1 << 20, 1, topics, session_id=session[0], epoch=session[1],
        forgotten=forgotten, rack_id=rack,
    )  # fmt: skip
    frame = request.build(12).frame(9, "cid")
    api_key, version, cid, id_len = struct.unpack_from(">hhih", frame)
    assert (api_key, version, cid, frame[10 : 10 + id_len]) == (1, 12, 9, b"cid")
    got = fetch_v12_wire.decode_request(frame[10 + id_len :])
    assert (got["replica_id"], got["max_wait_time"], got["isolation_level"]) == (-1, wait, 1)
    assert (got["session_id"], got["session_epoch"]) == session
    assert got["rack_id"] == rack
    assert got["forgotten_topics_data"] == [{"topic": t, "partitions": ps} for t, ps in forgotten]
    expected = [
        {
            "topic": t,
            "partitions": [
                {
                    "partition": p[0],
                    "current_leader_epoch": -1,
                    "fetch_offset": p[1],
                    "last_fetched_epoch": p[3] if len(p) > 3 else -1,
                    "log_start_offset": -1,
                    "max_bytes": p[2],
                }
                for p in ps
            ],
        }
        for t, ps in topics
    ]
    assert got["topics"] == expected


def test_header_v1_below_v12_and_v2_from_v12() -> None:
    request = FetchRequest(100, 1, 1 << 20, 0, [("t", [(0, 5, 1024)])])
    v11 = request.build(11)
    aiokafka_v11 = aiokafka_fetch.FetchRequest(100, 1, 1 << 20, 0, [("t", [(0, 5, 1024)])])
    struct_ = aiokafka_v11.build(aiokafka_fetch.FetchRequest_v11)
    assert (
        encode_request(v11, 3, "me")
        == RequestHeader_v1(struct_, correlation_id=3, client_id="me").encode() + struct_.encode()
    )
    v12 = request.build(12)
    # Header v2 = header v1 + an empty tagged-field section.
    assert encode_request(v12, 3, "me") == struct.pack(">hhih", 1, 12, 3, 2) + b"me\x00" + v12.body


@pytest.mark.parametrize(
    ("offered", "expected"), [((0, 17), 12), ((4, 11), 11), ((0, 12), 12), ((1, 1), 1)]
)
def test_negotiates_the_highest_common_version(offered: tuple[int, int], expected: int) -> None:
    built = prepare(FetchRequest(100, 1, 1, 0, []), {1: offered}, "b:9092")
    assert isinstance(built, FetchFrame)
    negotiated = built.API_VERSION
    assert negotiated == expected


@pytest.mark.parametrize("offered", [{1: (13, 17)}, {}])
def test_no_common_version_is_a_clear_error(offered: dict[int, tuple[int, int]]) -> None:
    with pytest.raises(UnsupportedVersionError, match="Fetch"):
        prepare(FetchRequest(100, 1, 1, 0, []), offered, "b:9092")


def test_read_committed_needs_v4() -> None:
    with pytest.raises(UnsupportedVersionError, match="read_committed needs Fetch v4"):
        FetchRequest(100, 1, 1, 1, []).build(3)


def test_the_plan_tuples_of_a_session_encode_at_every_version() -> None:
    # A plan names partitions with their last fetched epoch (4 fields): below v12 it is
    # not sent, and the bytes are those of the 3-field entry.
    with_epoch: list[tuple[str, Any]] = [("t", [(0, 5, 1024, 7)])]
    without: list[tuple[str, Any]] = [("t", [(0, 5, 1024)])]
    for version in range(1, 12):
        assert (
            FetchRequest(100, 1, 1, 0, with_epoch).build(version).body
            == FetchRequest(100, 1, 1, 0, without).build(version).body
        )
    decoded = aiokafka_fetch.FetchRequest_v11.decode(
        BytesIO(FetchRequest(100, 1, 1, 0, with_epoch).build(11).body)
    )
    assert decoded.to_object()["topics"][0]["partitions"][0]["fetch_offset"] == 5
