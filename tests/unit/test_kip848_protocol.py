"""Flexible codecs of our own: ConsumerGroupHeartbeat/Describe (KIP-848), Metadata v11-v12
(topic ids), OffsetCommit v8-v9 and OffsetFetch v9 (member epoch).

Expected bytes are built by hand from Apache Kafka's message definitions (the JSON schemas
in kafka-clients), independently of the code under test: every version is encoded against
them, and a response built by hand decodes to the fields it holds.
"""

from __future__ import annotations

import base64
import struct
from io import BytesIO
from typing import Any

import pytest

from consumergroup.errors import UnsupportedVersionError
from consumergroup.net.flexible import NULL_TOPIC_ID, Uuid, new_uuid
from consumergroup.net.protocol import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
    MetadataRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    codec_versions,
    offset_fetch_topics,
    prepare,
)
from tests.unit.test_group_protocol import i16, i32, i64

TAGS = b"\x00"  # an empty tagged-field section
TOPIC_ID = base64.urlsafe_b64encode(bytes(range(1, 17))).decode().rstrip("=")


def i8(value: int) -> bytes:
    return struct.pack(">b", value)


def uvarint(value: int) -> bytes:
    out = b""
    while value >= 0x80:
        out += bytes([(value & 0x7F) | 0x80])
        value >>= 7
    return out + bytes([value])


def cstr(value: str | None) -> bytes:
    if value is None:
        return uvarint(0)
    raw = value.encode()
    return uvarint(len(raw) + 1) + raw


def carray(items: list[bytes] | None) -> bytes:
    if items is None:
        return uvarint(0)
    return uvarint(len(items) + 1) + b"".join(items)


def uuid_bytes(value: str) -> bytes:
    return base64.urlsafe_b64decode(value + "==")


def at(request: Any, version: int) -> Any:
    return prepare(request, {request.API_KEY: (version, version)}, "b:9092")


def decode(request_struct: Any, body: bytes) -> Any:
    return request_struct.RESPONSE_TYPE.decode(BytesIO(body))


def test_versions_offered() -> None:
    versions = codec_versions()
    assert versions[68] == (0, 1)
    assert versions[69] == (0, 1)
    assert versions[3] == (0, 12)
    assert versions[8] == (2, 9)
    assert versions[9] == (1, 9)


def test_flexible_versions_use_the_v2_request_header() -> None:
    for request, version in (
        (ConsumerGroupHeartbeatRequest("g", "m", 0), 0),
        (ConsumerGroupDescribeRequest(["g"]), 1),
        (MetadataRequest(["t"]), 12),
        (OffsetCommitRequest("g", 1, "m", -1, []), 9),
    ):
        struct_ = at(request, version)
        header = struct_.build_request_header(7, "cid").encode()
        assert header == i16(request.API_KEY) + i16(version) + i32(7) + i16(3) + b"cid" + TAGS


def test_uuid_text_form_round_trips() -> None:
    assert Uuid.decode(BytesIO(bytes(range(1, 17)))) == TOPIC_ID
    assert Uuid.encode(TOPIC_ID) == bytes(range(1, 17))
    assert Uuid.encode(NULL_TOPIC_ID) == bytes(16)
    member = new_uuid()
    assert len(member) == 22 and Uuid.decode(BytesIO(Uuid.encode(member))) == member
    with pytest.raises(ValueError, match="not a Kafka uuid"):
        Uuid.encode("abc")


# --- ConsumerGroupHeartbeat ------------------------------------------------------------------


def _heartbeat_bytes(version: int, *, regex: str | None) -> bytes:
    owned = carray([uuid_bytes(TOPIC_ID) + carray([i32(0), i32(2)]) + TAGS])
    return (
        cstr("g")
        + cstr("member")
        + i32(5)
        + cstr("inst")
        + cstr(None)
        + i32(30000)
        + carray([cstr("a"), cstr("b")])
        + (cstr(regex) if version >= 1 else b"")
        + cstr("uniform")
        + owned
        + TAGS
    )


def _full_heartbeat(regex: str | None) -> ConsumerGroupHeartbeatRequest:
    return ConsumerGroupHeartbeatRequest(
        "g",
        "member",
        5,
        instance_id="inst",
        rebalance_timeout_ms=30000,
        subscribed_topic_names=["a", "b"],
        subscribed_topic_regex=regex,
        server_assignor="uniform",
        topic_partitions=[(TOPIC_ID, [0, 2])],
    )


@pytest.mark.parametrize("version", [0, 1])
def test_heartbeat_request_every_version(version: int) -> None:
    request = _full_heartbeat(None)
    assert at(request, version).encode() == _heartbeat_bytes(version, regex=None)


def test_heartbeat_request_regex_needs_v1() -> None:
    request = _full_heartbeat("orders-.*")
    assert at(request, 1).encode() == _heartbeat_bytes(1, regex="orders-.*")
    with pytest.raises(UnsupportedVersionError, match="regex subscription needs v1"):
        at(request, 0)


def test_heartbeat_request_unchanged_fields_are_null() -> None:
    # A heartbeat that changes nothing: every nullable field null, rebalance timeout -1.
    body = at(ConsumerGroupHeartbeatRequest("g", "m", 3), 1).encode()
    assert body == (
        cstr("g") + cstr("m") + i32(3) + cstr(None) + cstr(None) + i32(-1)
        + carray(None) + cstr(None) + cstr(None) + carray(None) + TAGS
    )  # fmt: skip


@pytest.mark.parametrize("version", [0, 1])
def test_heartbeat_response_every_version(version: int) -> None:
    request = at(ConsumerGroupHeartbeatRequest("g", "m", 0), version)
    assignment = carray([uuid_bytes(TOPIC_ID) + carray([i32(1), i32(3)]) + TAGS]) + TAGS
    body = i32(0) + i16(0) + cstr(None) + cstr("m") + i32(7) + i32(500) + i8(1) + assignment + TAGS
    resp = decode(request, body)
    assert (resp.error_code, resp.member_id, resp.member_epoch) == (0, "m", 7)
    assert resp.heartbeat_interval_ms == 500
    [(topic_id, partitions, _)] = resp.assignment[0]
    assert (topic_id, partitions) == (TOPIC_ID, [1, 3])
    # No new assignment, and an error with its message.
    body = i32(0) + i16(110) + cstr("fenced") + cstr(None) + i32(-1) + i32(0) + i8(-1) + TAGS
    resp = decode(request, body)
    assert (resp.error_code, resp.error_message, resp.assignment) == (110, "fenced", None)


# --- ConsumerGroupDescribe -------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1])
def test_describe_request_every_version(version: int) -> None:
    body = at(ConsumerGroupDescribeRequest(["g1", "g2"]), version).encode()
    assert body == carray([cstr("g1"), cstr("g2")]) + b"\x00" + TAGS


@pytest.mark.parametrize("version", [0, 1])
def test_describe_response_every_version(version: int) -> None:
    request = at(ConsumerGroupDescribeRequest(["g"]), version)

    def assignment(parts: list[int]) -> bytes:
        return carray([uuid_bytes(TOPIC_ID) + cstr("t") + carray([i32(p) for p in parts]) + TAGS])

    member = (
        cstr("m1") + cstr("inst") + cstr(None) + i32(4) + cstr("cid") + cstr("/127.0.0.1")
        + carray([cstr("t")]) + cstr(None)
        + assignment([0]) + TAGS + assignment([0, 1]) + TAGS
        + (i8(1) if version >= 1 else b"") + TAGS
    )  # fmt: skip
    group = (
        i16(0) + cstr(None) + cstr("g") + cstr("Reconciling") + i32(5) + i32(5)
        + cstr("uniform") + carray([member]) + i32(-(2**31)) + TAGS
    )  # fmt: skip
    resp = decode(request, i32(0) + carray([group]) + TAGS).to_object()
    [g] = resp["groups"]
    assert (g["group_id"], g["group_state"], g["group_epoch"], g["assignor_name"]) == (
        "g",
        "Reconciling",
        5,
        "uniform",
    )
    [m] = g["members"]
    assert (m["member_id"], m["instance_id"], m["member_epoch"], m["client_id"]) == (
        "m1",
        "inst",
        4,
        "cid",
    )
    assert m["assignment"]["topic_partitions"][0]["partitions"] == [0]
    assert m["target_assignment"]["topic_partitions"][0]["topic_name"] == "t"
    assert m["target_assignment"]["topic_partitions"][0]["partitions"] == [0, 1]
    assert m.get("member_type") == (1 if version >= 1 else None)


# --- Metadata v11-v12 ------------------------------------------------------------------------


@pytest.mark.parametrize("version", [11, 12])
def test_metadata_request_flexible_versions(version: int) -> None:
    body = at(MetadataRequest(["t"], False), version).encode()
    assert body == carray([bytes(16) + cstr("t") + TAGS]) + b"\x00" + b"\x00" + TAGS
    every = at(MetadataRequest(None, True), version).encode()
    assert every == carray(None) + b"\x01" + b"\x00" + TAGS


@pytest.mark.parametrize("version", [11, 12])
def test_metadata_response_carries_topic_ids(version: int) -> None:
    request = at(MetadataRequest(["t"]), version)
    broker = i32(1) + cstr("127.0.0.1") + i32(9092) + cstr(None) + TAGS
    partition = (
        i16(0) + i32(0) + i32(1) + i32(3) + carray([i32(1)]) + carray([i32(1)]) + carray([]) + TAGS
    )
    topic = (
        i16(0) + cstr("t") + uuid_bytes(TOPIC_ID) + b"\x00" + carray([partition])
        + i32(-(2**31)) + TAGS
    )  # fmt: skip
    body = i32(0) + carray([broker]) + cstr("cluster") + i32(1) + carray([topic]) + TAGS
    meta = decode(request, body).to_object()
    assert meta["brokers"][0]["host"] == "127.0.0.1" and meta["controller_id"] == 1
    [t] = meta["topics"]
    assert (t["topic"], t["topic_id"]) == ("t", TOPIC_ID)
    [p] = t["partitions"]
    assert (p["partition"], p["leader"], p["leader_epoch"], p["replicas"], p["isr"]) == (
        0,
        1,
        3,
        [1],
        [1],
    )


def test_metadata_legacy_versions_are_aiokafkas() -> None:
    assert at(MetadataRequest(["t"]), 5).encode() == i32(1) + i16(1) + b"t" + b"\x01"


# --- OffsetCommit v8-v9 ----------------------------------------------------------------------


@pytest.mark.parametrize("version", [8, 9])
def test_offset_commit_flexible_versions(version: int) -> None:
    request = OffsetCommitRequest("g", 12, "m", -1, [("t", [(0, 42, "meta")])], "inst")
    body = at(request, version).encode()
    partition = i32(0) + i64(42) + i32(-1) + cstr("meta") + TAGS
    assert body == (
        cstr("g") + i32(12) + cstr("m") + cstr("inst")
        + carray([cstr("t") + carray([partition]) + TAGS]) + TAGS
    )  # fmt: skip
    resp = decode(
        at(request, version),
        i32(0) + carray([cstr("t") + carray([i32(0) + i16(113) + TAGS]) + TAGS]) + TAGS,
    )
    [(topic, [(partition_id, code, _)], _)] = resp.topics
    assert (topic, partition_id, code) == ("t", 0, 113)


@pytest.mark.parametrize("version", [6, 7, 8])
def test_offset_commit_carries_each_partitions_leader_epoch(version: int) -> None:
    """KIP-320: the epoch given for a partition, -1 for one without."""
    topics = [("t", [(0, 42, ""), (1, 7, "")])]
    request = OffsetCommitRequest("g", 1, "m", -1, topics, leader_epochs={("t", 0): 5})
    encoded = at(request, version).encode()
    if version < 8:
        parts = i32(0) + i64(42) + i32(5) + i16(0) + i32(1) + i64(7) + i32(-1) + i16(0)
        assert encoded.endswith(i32(2) + parts)
    else:
        parts = [
            i32(0) + i64(42) + i32(5) + cstr("") + TAGS,
            i32(1) + i64(7) + i32(-1) + cstr("") + TAGS,
        ]
        assert encoded.endswith(carray([cstr("t") + carray(parts) + TAGS]) + TAGS)


# --- OffsetFetch v9 (and the classic v1-v3) ---------------------------------------------------

KAFKA_4_OFFSET_FETCH = {9: (1, 10)}  # what Apache Kafka 4.x advertises


def test_offset_fetch_v9_carries_member_id_and_epoch() -> None:
    request = OffsetFetchRequest("g", [("t", [0, 3])], member_id="m", member_epoch=7)
    struct_ = prepare(request, KAFKA_4_OFFSET_FETCH, "b:9092")
    assert struct_.API_VERSION == 9
    assert struct_.FLEXIBLE_VERSION
    topic = cstr("t") + carray([i32(0), i32(3)]) + TAGS
    group = cstr("g") + cstr("m") + i32(7) + carray([topic]) + TAGS
    assert struct_.encode() == carray([group]) + i8(0) + TAGS  # require_stable false


def test_offset_fetch_without_a_member_goes_at_v7_for_the_leader_epochs() -> None:
    """v7 where offered (its answer carries each committed leader epoch), else v1-v3."""
    struct_ = prepare(OffsetFetchRequest("g", [("t", [0])]), KAFKA_4_OFFSET_FETCH, "b:9092")
    assert struct_.API_VERSION == 7
    assert struct_.encode() == cstr("g") + carray([cstr("t") + carray([i32(0)]) + TAGS]) + (
        i8(0) + TAGS  # require_stable false
    )
    old = prepare(OffsetFetchRequest("g", [("t", [0])]), {9: (1, 6)}, "b:9092")
    assert old.API_VERSION == 3
    assert old.encode() == i16(1) + b"g" + i32(1) + i16(1) + b"t" + i32(1) + i32(0)


def test_offset_fetch_v7_response_carries_the_leader_epochs() -> None:
    struct_ = at(OffsetFetchRequest("g", [("t", [0])]), 7)
    partition = i32(0) + i64(42) + i32(5) + cstr("meta") + i16(0) + TAGS
    topic = cstr("t") + carray([partition]) + TAGS
    resp = decode(struct_, i32(0) + carray([topic]) + i16(0) + TAGS)
    assert offset_fetch_topics(resp) == (0, [("t", [(0, 42, "meta", 0, 5)])])


def test_offset_fetch_with_a_member_needs_v9() -> None:
    request = OffsetFetchRequest("g", [("t", [0])], member_id="m", member_epoch=1)
    with pytest.raises(UnsupportedVersionError, match="OffsetFetch"):
        prepare(request, {9: (1, 8)}, "b:9092")


def test_offset_fetch_v9_response() -> None:
    struct_ = at(OffsetFetchRequest("g", [("t", [0, 1])], member_id="m", member_epoch=7), 9)
    partitions = [
        i32(0) + i64(42) + i32(5) + cstr("meta") + i16(0) + TAGS,
        i32(1) + i64(-1) + i32(-1) + cstr(None) + i16(0) + TAGS,
    ]
    group = cstr("g") + carray([cstr("t") + carray(partitions) + TAGS]) + i16(0) + TAGS
    resp = decode(struct_, i32(0) + carray([group]) + TAGS)
    assert offset_fetch_topics(resp) == (0, [("t", [(0, 42, "meta", 0, 5), (1, -1, None, 0, -1)])])
    # A stale epoch is the group's error (113), with no topics.
    stale = decode(struct_, i32(0) + carray([cstr("g") + carray([]) + i16(113) + TAGS]) + TAGS)
    assert offset_fetch_topics(stale) == (113, [])


def test_offset_fetch_v3_response() -> None:
    struct_ = at(OffsetFetchRequest("g", [("t", [0])]), 3)
    partition = i32(0) + i64(42) + i16(4) + b"meta" + i16(0)
    resp = decode(struct_, i32(0) + i32(1) + i16(1) + b"t" + i32(1) + partition + i16(0))
    assert offset_fetch_topics(resp) == (0, [("t", [(0, 42, "meta", 0, -1)])])
