"""Group-coordination codecs with group_instance_id (consumergroup/net/group_protocol.py).

Expected bytes are built by hand from Apache Kafka's message definitions, independently of
the code under test; where aiokafka has a struct with the same layout, ours must encode the
same bytes and each side must decode the other's.
"""

from __future__ import annotations

import struct
from io import BytesIO
from typing import Any

import pytest
from aiokafka.protocol import commit as ak_commit
from aiokafka.protocol import group as ak_group

from consumergroup.errors import UnsupportedVersionError
from consumergroup.net.protocol import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    OffsetCommitRequest,
    SyncGroupRequest,
    codec_versions,
    prepare,
)


def i16(value: int) -> bytes:
    return struct.pack(">h", value)


def i32(value: int) -> bytes:
    return struct.pack(">i", value)


def i64(value: int) -> bytes:
    return struct.pack(">q", value)


def string(value: str | None) -> bytes:
    if value is None:
        return i16(-1)
    raw = value.encode()
    return i16(len(raw)) + raw


def blob(value: bytes) -> bytes:
    return i32(len(value)) + value


def at(request: Any, version: int) -> Any:
    return prepare(request, {request.API_KEY: (version, version)}, "b:9092")


def plain(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


# --- versions ------------------------------------------------------------------------------------


def test_every_static_membership_version_is_buildable() -> None:
    versions = codec_versions()
    assert versions[11] == (2, 5)  # JoinGroup: v2 is Kafka 4.0's floor, v5 adds the id
    assert versions[14] == (0, 3)  # SyncGroup
    assert versions[12] == (0, 3)  # Heartbeat
    assert versions[13] == (0, 3)  # LeaveGroup
    assert versions[8] == (2, 9)  # OffsetCommit (v8+ flexible, v9 carries a member epoch)


def test_highest_common_version_is_chosen_against_tansus_ranges() -> None:
    # The ranges Tansu advertises in ApiVersions (measured): all above ours.
    tansu = {8: (0, 9), 11: (0, 9), 12: (0, 4), 13: (0, 5), 14: (0, 5)}
    chosen = {
        8: prepare(OffsetCommitRequest("g", 1, "m", -1, [], "i"), tansu, "t").API_VERSION,
        11: prepare(JoinGroupRequest("g", 1, 1, "", "i", "consumer", []), tansu, "t").API_VERSION,
        12: prepare(HeartbeatRequest("g", 1, "m", "i"), tansu, "t").API_VERSION,
        13: prepare(LeaveGroupRequest("g", "m", "i"), tansu, "t").API_VERSION,
        14: prepare(SyncGroupRequest("g", 1, "m", "i", []), tansu, "t").API_VERSION,
    }
    assert chosen == {8: 9, 11: 5, 12: 3, 13: 3, 14: 3}


# --- Heartbeat -----------------------------------------------------------------------------------


def test_heartbeat_v3_layout() -> None:
    built = at(HeartbeatRequest("grp", 7, "member-1", "inst-a"), 3)
    assert built.encode() == string("grp") + i32(7) + string("member-1") + string("inst-a")
    dynamic = at(HeartbeatRequest("grp", 7, "member-1"), 3)
    assert dynamic.encode() == string("grp") + i32(7) + string("member-1") + string(None)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_heartbeat_before_v3_matches_aiokafka(version: int) -> None:
    ours = at(HeartbeatRequest("grp", 7, "member-1"), version)
    theirs = ak_group.HeartbeatRequest_v1("grp", 7, "member-1")
    assert ours.encode() == theirs.encode()


def test_heartbeat_responses_decode() -> None:
    for version in (2, 3):
        built = at(HeartbeatRequest("g", 1, "m", "i" if version == 3 else None), version)
        resp = built.RESPONSE_TYPE.decode(BytesIO(i32(0) + i16(82)))
        assert (resp.throttle_time_ms, resp.error_code) == (0, 82)


# --- LeaveGroup ----------------------------------------------------------------------------------


def test_leave_group_v3_sends_a_members_array() -> None:
    built = at(LeaveGroupRequest("grp", "member-1", "inst-a"), 3)
    assert built.encode() == string("grp") + i32(1) + string("member-1") + string("inst-a")
    dynamic = at(LeaveGroupRequest("grp", "member-1"), 3)
    assert dynamic.encode() == string("grp") + i32(1) + string("member-1") + string(None)


def test_leave_group_v3_response_has_per_member_errors() -> None:
    raw = i32(5) + i16(0) + i32(1) + string("member-1") + string("inst-a") + i16(82)
    resp = at(LeaveGroupRequest("g", "m", "i"), 3).RESPONSE_TYPE.decode(BytesIO(raw))
    assert resp.error_code == 0
    assert plain(resp.members) == [["member-1", "inst-a", 82]]


@pytest.mark.parametrize("version", [0, 1, 2])
def test_leave_group_before_v3_matches_aiokafka(version: int) -> None:
    ours = at(LeaveGroupRequest("grp", "member-1"), version)
    assert ours.encode() == ak_group.LeaveGroupRequest_v1("grp", "member-1").encode()


# --- OffsetCommit --------------------------------------------------------------------------------

TOPICS = [("orders", [(0, 100, ""), (3, 7, "meta")])]


def partitions_bytes(*, epoch: bool) -> bytes:
    out = i32(1) + string("orders") + i32(2)
    for partition, offset, meta in TOPICS[0][1]:
        out += i32(partition) + i64(offset) + (i32(-1) if epoch else b"") + string(meta)
    return out


@pytest.mark.parametrize("version", [2, 3, 4])
def test_offset_commit_up_to_v4_matches_aiokafka(version: int) -> None:
    ours = at(OffsetCommitRequest("grp", 4, "m", -1, TOPICS), version)
    theirs = ak_commit.OffsetCommitRequest_v3("grp", 4, "m", -1, TOPICS)
    assert ours.encode() == theirs.encode()
    assert ours.encode() == string("grp") + i32(4) + string("m") + i64(-1) + partitions_bytes(
        epoch=False
    )


def test_offset_commit_v5_drops_retention_and_v6_adds_the_leader_epoch() -> None:
    head = string("grp") + i32(4) + string("m")
    v5 = at(OffsetCommitRequest("grp", 4, "m", -1, TOPICS), 5)
    assert v5.encode() == head + partitions_bytes(epoch=False)
    v6 = at(OffsetCommitRequest("grp", 4, "m", -1, TOPICS), 6)
    assert v6.encode() == head + partitions_bytes(epoch=True)


def test_offset_commit_v7_carries_the_instance_id() -> None:
    v7 = at(OffsetCommitRequest("grp", 4, "m", -1, TOPICS, "inst-a"), 7)
    expected = string("grp") + i32(4) + string("m") + string("inst-a")
    assert v7.encode() == expected + partitions_bytes(epoch=True)
    decoded = type(v7).decode(BytesIO(v7.encode()))
    assert decoded.group_instance_id == "inst-a"
    assert plain(decoded.topics) == [["orders", [[0, 100, -1, ""], [3, 7, -1, "meta"]]]]


@pytest.mark.parametrize("version", [4, 5, 6, 7])
def test_offset_commit_responses_decode_like_aiokafkas_v3(version: int) -> None:
    raw = ak_commit.OffsetCommitResponse_v3(0, [("orders", [(0, 0), (3, 25)])]).encode()
    req = at(OffsetCommitRequest("g", 1, "m", -1, [], "i" if version == 7 else None), version)
    resp = req.RESPONSE_TYPE.decode(BytesIO(raw))
    assert plain(resp.topics) == [["orders", [[0, 0], [3, 25]]]]


# --- JoinGroup / SyncGroup -----------------------------------------------------------------------


def test_join_group_v5_matches_aiokafka_and_carries_the_id() -> None:
    args = ("grp", 10000, 30000, "m", "inst-a", "consumer", [("range", b"\x00\x01")])
    ours = at(JoinGroupRequest(*args), 5)
    assert ours.encode() == ak_group.JoinGroupRequest_v5(*args).encode()
    expected = string("grp") + i32(10000) + i32(30000) + string("m") + string("inst-a")
    expected += string("consumer") + i32(1) + string("range") + blob(b"\x00\x01")
    assert ours.encode() == expected


@pytest.mark.parametrize("version", [2, 3, 4])
def test_join_group_v2_to_v4_share_aiokafkas_v2_layout(version: int) -> None:
    args = ("grp", 10000, 30000, "m", None, "consumer", [("range", b"x")])
    ours = at(JoinGroupRequest(*args), version)
    theirs = ak_group.JoinGroupRequest_v2("grp", 10000, 30000, "m", "consumer", [("range", b"x")])
    assert ours.encode() == theirs.encode()
    raw = ak_group.JoinGroupResponse_v2(0, 0, 3, "range", "a", "a", [("a", b"md")]).encode()
    resp = ours.RESPONSE_TYPE.decode(BytesIO(raw))
    assert (resp.generation_id, resp.group_protocol, plain(resp.members)) == (
        3,
        "range",
        [["a", b"md"]],
    )


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_sync_group_versions_match_aiokafka(version: int) -> None:
    assignment = [("m", b"\x00\x01")]
    instance = "inst-a" if version == 3 else None
    ours = at(SyncGroupRequest("grp", 3, "m", instance, assignment), version)
    if version == 3:
        theirs = ak_group.SyncGroupRequest_v3("grp", 3, "m", "inst-a", assignment)
    else:
        theirs = ak_group.SyncGroupRequest_v1("grp", 3, "m", assignment)
    assert ours.encode() == theirs.encode()


# --- a static member never loses its id silently -------------------------------------------------


@pytest.mark.parametrize(
    ("request_", "key", "too_old"),
    [
        (HeartbeatRequest("g", 1, "m", "inst-a"), 12, 2),
        (LeaveGroupRequest("g", "m", "inst-a"), 13, 2),
        (OffsetCommitRequest("g", 1, "m", -1, [], "inst-a"), 8, 6),
        (JoinGroupRequest("g", 1, 1, "m", "inst-a", "consumer", []), 11, 4),
        (SyncGroupRequest("g", 1, "m", "inst-a", []), 14, 2),
    ],
    ids=["heartbeat", "leave", "commit", "join", "sync"],
)
def test_static_member_on_an_old_broker_gets_a_clear_error(
    request_: Any, key: int, too_old: int
) -> None:
    with pytest.raises(UnsupportedVersionError) as info:
        prepare(request_, {key: (0, too_old)}, "b:9092")
    message = str(info.value)
    assert "inst-a" in message
    assert "consumer.group.instance_id" in message
    assert f"at most v{too_old}" in message
