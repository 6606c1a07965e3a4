"""The share-group wire codecs (net/share.py) and the group admin ones (net/group_admin.py)
against bytes made by Apache Kafka 4.4's own message classes.

``share_wire_vectors.json`` holds message bodies encoded by kafka-clients 4.4.0
(``tests/peers/java/.../WireVectors.java``; ``tests/integration/test_share_java_vectors.py``
checks that they still equal what the client produces). Each request built by our codec
encodes to the client's bytes, byte for byte; each response the client encoded decodes to
the values it was built with, and encodes back to the same bytes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from consumergroup.errors import UnsupportedVersionError
from consumergroup.net.group_admin import GROUP_RESOURCE
from consumergroup.net.protocol import (
    AlterShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequest,
    IncrementalAlterConfigsRequest,
    ListGroupsRequest,
    ShareAcknowledgeRequest,
    ShareFetchRequest,
    ShareGroupDescribeRequest,
    ShareGroupHeartbeatRequest,
    codec_versions,
    prepare,
)
from consumergroup.net.share import ACCEPT, ACQUIRE_RECORD_LIMIT, GAP, REJECT, RELEASE, RENEW

VECTORS: dict[str, str] = json.loads(
    (Path(__file__).with_name("share_wire_vectors.json")).read_text()
)
TOPIC = "AAECAwQFBgcICQoLDA0ODw"  # bytes 0..15, as Kafka's Uuid prints them
OTHER = "EBESExQVFhcYGRobHB0eHw"  # bytes 16..31
MEMBER = "ICEiIyQlJicoKSorLC0uLw"


def built(request: Any, version: int) -> Any:
    """``request`` at ``version`` (the broker offers exactly that one)."""
    struct = prepare(request, {request.API_KEY: (version, version)}, "b:9092")
    assert version == struct.API_VERSION
    return struct


def encodes_as(request: Any, version: int, name: str) -> Any:
    struct = built(request, version)
    assert struct.encode().hex() == VECTORS[f"{name}_v{version}"]
    return struct


def untagged(value: Any) -> Any:
    """``value`` (from ``to_object()``) without its empty tagged-field sections."""
    if isinstance(value, dict):
        assert value.get("_tagged_fields", {}) == {}
        return {k: untagged(v) for k, v in value.items() if k != "_tagged_fields"}
    if isinstance(value, list | tuple):
        return [untagged(v) for v in value]
    return value


def decoded(request: Any, version: int, name: str) -> Any:
    """The client's response bytes ``name`` decoded by our codec (and encoding back)."""
    struct = built(request, version)
    raw = bytes.fromhex(VECTORS[f"{name}_v{version}"])
    response = struct.RESPONSE_TYPE.decode(raw)
    assert response.encode() == raw
    return untagged(response.to_object())


def test_the_versions_we_speak() -> None:
    versions = codec_versions()
    assert versions[76] == (1, 1)
    assert versions[77] == (1, 1)
    assert versions[78] == (1, 2)
    assert versions[79] == (1, 2)
    assert versions[90] == (0, 1)
    assert versions[91] == (0, 0)
    assert versions[92] == (0, 0)
    assert versions[16] == (0, 5)
    assert versions[44] == (1, 1)


def test_share_group_heartbeat() -> None:
    join = ShareGroupHeartbeatRequest("workers", MEMBER, 0, subscribed_topic_names=["jobs", "more"])
    encodes_as(join, 1, "share_group_heartbeat_request_join")
    beat = ShareGroupHeartbeatRequest("workers", MEMBER, 5, rack_id="r1")
    encodes_as(beat, 1, "share_group_heartbeat_request_beat")

    answer = decoded(beat, 1, "share_group_heartbeat_response_assigned")
    assert (answer["error_code"], answer["member_id"], answer["member_epoch"]) == (0, MEMBER, 3)
    assert answer["heartbeat_interval_ms"] == 500
    assert answer["assignment"][0] == [[TOPIC, [0, 2], {}]]
    error = decoded(beat, 1, "share_group_heartbeat_response_error")
    assert (error["error_code"], error["error_message"]) == (25, "unknown member")
    assert error["member_id"] is None and error["assignment"] is None


def test_share_group_describe() -> None:
    request = ShareGroupDescribeRequest(["workers", "other"])
    encodes_as(request, 1, "share_group_describe_request")
    answer = decoded(request, 1, "share_group_describe_response")
    workers, other = answer["groups"]
    assert (workers["group_id"], workers["group_state"], workers["group_epoch"]) == (
        "workers",
        "Stable",
        4,
    )
    [member] = workers["members"]
    assert (member["member_id"], member["client_id"], member["client_host"]) == (
        MEMBER,
        "app",
        "/127.0.0.1",
    )
    assert member["subscribed_topic_names"] == ["jobs"]
    assert member["assignment"]["topic_partitions"] == [
        {"topic_id": TOPIC, "topic_name": "jobs", "partitions": [0, 1]}
    ]
    assert (other["error_code"], other["error_message"]) == (69, "Group other not found.")


@pytest.mark.parametrize("version", [1, 2])
def test_share_fetch(version: int) -> None:
    opening = ShareFetchRequest(
        "workers",
        MEMBER,
        0,
        max_wait_ms=500,
        min_bytes=1,
        max_bytes=52428800,
        max_records=100,
        batch_size=100,
        acquire_mode=ACQUIRE_RECORD_LIMIT,
        fetch=[(TOPIC, 0), (TOPIC, 1)],
    )
    encodes_as(opening, version, "share_fetch_request_open")
    acking = ShareFetchRequest(
        "workers",
        MEMBER,
        3,
        max_wait_ms=500,
        min_bytes=1,
        max_bytes=1048576,
        max_records=7,
        batch_size=7,
        acquire_mode=ACQUIRE_RECORD_LIMIT,
        acks={(TOPIC, 1): [(10, 12, [ACCEPT]), (13, 15, [ACCEPT, RELEASE, GAP])]},
        forget=[(OTHER, 4)],
    )
    encodes_as(acking, version, "share_fetch_request_acks")

    answer = decoded(acking, version, "share_fetch_response")
    assert (answer["error_code"], answer["acquisition_lock_timeout_ms"]) == (0, 30000)
    [topic] = answer["responses"]
    assert topic["topic_id"] == TOPIC
    fetched, moved = topic["partitions"]
    assert fetched["records"] == bytes([1, 2, 3, 4, 5])
    assert fetched["acquired_records"] == [
        {"first_offset": 0, "last_offset": 4, "delivery_count": 1},
        {"first_offset": 7, "last_offset": 7, "delivery_count": 3},
    ]
    assert fetched["current_leader"] == {"leader_id": 1, "leader_epoch": 5}
    assert (moved["error_code"], moved["acknowledge_error_code"]) == (6, 121)
    assert (moved["error_message"], moved["acknowledge_error_message"]) == ("moved", "bad state")
    assert moved["records"] == b"" and moved["acquired_records"] == []
    assert answer["node_endpoints"] == [
        {"node_id": 2, "host": "127.0.0.1", "port": 9093, "rack": None}
    ]


def test_a_share_fetch_renewing_locks_needs_v2() -> None:
    renew = ShareFetchRequest(
        "workers",
        MEMBER,
        9,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=0,
        max_records=0,
        batch_size=0,
        acquire_mode=ACQUIRE_RECORD_LIMIT,
        is_renew_ack=True,
        acks={(TOPIC, 3): [(20, 21, [RENEW])]},
    )
    encodes_as(renew, 2, "share_fetch_request_renew")
    with pytest.raises(UnsupportedVersionError, match="RENEW needs v2"):
        built(renew, 1)


@pytest.mark.parametrize("version", [1, 2])
def test_share_acknowledge(version: int) -> None:
    last = RENEW if version == 2 else RELEASE
    request = ShareAcknowledgeRequest(
        "workers",
        MEMBER,
        -1,
        {(TOPIC, 2): [(5, 9, [REJECT]), (11, 11, [last])]},
        is_renew_ack=version == 2,
    )
    encodes_as(request, version, "share_acknowledge_request")
    answer = decoded(request, version, "share_acknowledge_response")
    assert answer["error_code"] == 0
    if version == 2:
        assert answer["acquisition_lock_timeout_ms"] == 15000
    else:
        assert "acquisition_lock_timeout_ms" not in answer
    [topic] = answer["responses"]
    assert topic["partitions"] == [
        {
            "partition_index": 2,
            "error_code": 121,
            "error_message": "not acquired",
            "current_leader": {"leader_id": 1, "leader_epoch": 0},
        }
    ]
    with pytest.raises(UnsupportedVersionError, match="RENEW needs v2"):
        built(ShareAcknowledgeRequest("g", MEMBER, 1, {}, is_renew_ack=True), 1)


@pytest.mark.parametrize("version", [0, 1])
def test_describe_share_group_offsets(version: int) -> None:
    everything = DescribeShareGroupOffsetsRequest("workers")
    encodes_as(everything, version, "describe_share_group_offsets_request_all")
    named = DescribeShareGroupOffsetsRequest("workers", {"jobs": [0, 1]})
    encodes_as(named, version, "describe_share_group_offsets_request_named")
    answer = decoded(named, version, "describe_share_group_offsets_response")
    [group] = answer["groups"]
    [topic] = group["topics"]
    assert (topic["topic_name"], topic["topic_id"]) == ("jobs", TOPIC)
    first, never = topic["partitions"]
    assert (first["partition_index"], first["start_offset"], first["leader_epoch"]) == (0, 42, 1)
    assert never["start_offset"] == -1
    if version == 1:
        assert (first["lag"], never["lag"]) == (8, -1)
    else:
        assert "lag" not in first


def test_alter_and_delete_share_group_offsets() -> None:
    alter = AlterShareGroupOffsetsRequest("workers", {("jobs", 1): 0, ("jobs", 0): 10})
    encodes_as(alter, 0, "alter_share_group_offsets_request")
    answer = decoded(alter, 0, "alter_share_group_offsets_response")
    [topic] = answer["responses"]
    assert [(p["partition_index"], p["error_code"]) for p in topic["partitions"]] == [
        (0, 0),
        (1, 3),
    ]

    delete = DeleteShareGroupOffsetsRequest("workers", ["jobs", "gone"])
    encodes_as(delete, 0, "delete_share_group_offsets_request")
    deleted = decoded(delete, 0, "delete_share_group_offsets_response")
    assert [(t["topic_name"], t["error_code"]) for t in deleted["responses"]] == [
        ("jobs", 0),
        ("gone", 3),
    ]


def test_list_groups_by_type() -> None:
    request = ListGroupsRequest(types=["share"])
    encodes_as(request, 5, "list_groups_request")
    answer = decoded(request, 5, "list_groups_response")
    assert answer["groups"] == [
        {
            "group_id": "workers",
            "protocol_type": "share",
            "group_state": "Stable",
            "group_type": "share",
        }
    ]
    # Every version starts each group with (group_id, protocol_type).
    assert built(ListGroupsRequest(), 2).API_VERSION == 2
    with pytest.raises(UnsupportedVersionError, match="group type"):
        built(ListGroupsRequest(types=["share"]), 4)
    with pytest.raises(UnsupportedVersionError, match="group state"):
        built(ListGroupsRequest(states=["Stable"]), 3)


def test_incremental_alter_configs_of_a_group() -> None:
    request = IncrementalAlterConfigsRequest(
        GROUP_RESOURCE,
        "workers",
        {"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": None},
    )
    encodes_as(request, 1, "incremental_alter_configs_request")
    answer = decoded(request, 1, "incremental_alter_configs_response")
    assert answer["responses"] == [
        {
            "error_code": 40,
            "error_message": "bad value",
            "resource_type": GROUP_RESOURCE,
            "resource_name": "workers",
        }
    ]
