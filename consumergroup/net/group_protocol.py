"""Group-coordination request builders that carry ``group_instance_id`` (KIP-345).

aiokafka 0.14 ships JoinGroup up to v5 and SyncGroup up to v3 (both already carry the
instance id) but Heartbeat, LeaveGroup and OffsetCommit only up to v1, v1 and v3, which
cannot. The missing versions are written here with aiokafka's ``Struct``/``Schema``
types, following Apache Kafka's message definitions (``HeartbeatRequest.json`` and the
others), all in the classic non-flexible encoding:

* Heartbeat v2 = v1; v3 adds ``group_instance_id``.
* LeaveGroup v2 = v1; v3 replaces ``member_id`` by a ``members`` array of
  ``(member_id, group_instance_id)``; its response lists one error per member.
* OffsetCommit v4 = v3; v5 drops ``retention_time``; v6 adds
  ``committed_leader_epoch`` per partition; v7 adds ``group_instance_id``.
* JoinGroup v3, v4 = v2; SyncGroup v2 = v1 (so every version Kafka 2.x-4.x offers below
  the first flexible one is buildable).
* OffsetCommit v8 is v7 in the flexible encoding; v9 has the same layout and lets a
  member of a KIP-848 group send its *member epoch* where the generation id goes (the
  broker refuses a lower version from such a member).

Each builder takes ``group_instance_id`` (None for a dynamic member). A static member
must not silently lose its id on an old broker: building a version that cannot carry it
raises :class:`~consumergroup.errors.UnsupportedVersionError` saying what to do.
"""

from __future__ import annotations

from collections.abc import Mapping

from aiokafka.protocol.api import Request, RequestStruct
from aiokafka.protocol.commit import (
    OffsetCommitRequest_v2,
    OffsetCommitRequest_v3,
    OffsetCommitResponse_v3,
)
from aiokafka.protocol.group import (
    HeartbeatRequest_v0,
    HeartbeatRequest_v1,
    HeartbeatResponse_v1,
    JoinGroupRequest_v2,
    JoinGroupRequest_v5,
    JoinGroupResponse_v2,
    LeaveGroupRequest_v0,
    LeaveGroupRequest_v1,
    LeaveGroupResponse_v1,
    SyncGroupRequest_v0,
    SyncGroupRequest_v1,
    SyncGroupRequest_v3,
    SyncGroupResponse_v1,
)
from aiokafka.protocol.types import Array, Int16, Int32, Int64, Schema, String

from ..errors import UnsupportedVersionError
from .flexible import STR as _CSTR
from .flexible import request_version, struct, tagged

__all__ = [
    "HeartbeatRequest",
    "JoinGroupRequest",
    "LeaveGroupRequest",
    "OffsetCommitRequest",
    "SyncGroupRequest",
]

_STR = String("utf-8")


def _static_needs(api: str, version: int, lowest: int, instance_id: str | None) -> None:
    """Refuse to build ``api`` at ``version`` for a static member if it cannot carry the id."""
    if instance_id is not None and version < lowest:
        raise UnsupportedVersionError(
            f"{api}: the broker speaks at most v{version}, and static membership "
            f"(consumer.group.instance_id={instance_id!r}) needs v{lowest}+ (Kafka 2.3+): "
            "upgrade the broker or leave consumer.group.instance_id unset"
        )


def _version(
    api_key: int, version: int, request: Schema, response: Schema, name: str
) -> type[RequestStruct]:
    """A request struct class (and its response class) for one classic version of ``name``."""
    return request_version(name, api_key, version, request, response, flexible=False)


# --------------------------------------------------------------------------- Heartbeat

_HEARTBEAT_V3 = Schema(
    ("group", _STR), ("generation_id", Int32), ("member_id", _STR), ("group_instance_id", _STR)
)


class HeartbeatRequest(Request[RequestStruct]):  # type: ignore[misc]
    """Heartbeat v0-v3."""

    API_KEY = 12

    def __init__(
        self, group: str, generation_id: int, member_id: str, group_instance_id: str | None = None
    ) -> None:
        self._group = group
        self._generation_id = generation_id
        self._member_id = member_id
        self._instance_id = group_instance_id

    def build(self, request_struct_class: type[RequestStruct]) -> RequestStruct:
        """The struct for the negotiated version (the instance id from v3 on)."""
        version = request_struct_class.API_VERSION
        _static_needs("Heartbeat", version, 3, self._instance_id)
        head = (self._group, self._generation_id, self._member_id)
        if version < 3:
            return request_struct_class(*head)
        return request_struct_class(*head, self._instance_id)


HeartbeatRequest._CLASSES = (
    HeartbeatRequest_v0,
    HeartbeatRequest_v1,
    _version(12, 2, HeartbeatRequest_v0.SCHEMA, HeartbeatResponse_v1.SCHEMA, "Heartbeat"),
    _version(12, 3, _HEARTBEAT_V3, HeartbeatResponse_v1.SCHEMA, "Heartbeat"),
)


# --------------------------------------------------------------------------- LeaveGroup

_LEAVE_GROUP_V3 = Schema(
    ("group", _STR), ("members", Array(("member_id", _STR), ("group_instance_id", _STR)))
)
_LEAVE_GROUP_RESPONSE_V3 = Schema(
    ("throttle_time_ms", Int32),
    ("error_code", Int16),
    ("members", Array(("member_id", _STR), ("group_instance_id", _STR), ("error_code", Int16))),
)


class LeaveGroupRequest(Request[RequestStruct]):  # type: ignore[misc]
    """LeaveGroup v0-v3 for one member (this one); v3's response has an error per member."""

    API_KEY = 13

    def __init__(self, group: str, member_id: str, group_instance_id: str | None = None) -> None:
        self._group = group
        self._member_id = member_id
        self._instance_id = group_instance_id

    def build(self, request_struct_class: type[RequestStruct]) -> RequestStruct:
        """The struct for the negotiated version (the members array from v3 on)."""
        version = request_struct_class.API_VERSION
        _static_needs("LeaveGroup", version, 3, self._instance_id)
        if version < 3:
            return request_struct_class(self._group, self._member_id)
        return request_struct_class(self._group, [(self._member_id, self._instance_id)])


LeaveGroupRequest._CLASSES = (
    LeaveGroupRequest_v0,
    LeaveGroupRequest_v1,
    _version(13, 2, LeaveGroupRequest_v0.SCHEMA, LeaveGroupResponse_v1.SCHEMA, "LeaveGroup"),
    _version(13, 3, _LEAVE_GROUP_V3, _LEAVE_GROUP_RESPONSE_V3, "LeaveGroup"),
)


# --------------------------------------------------------------------------- OffsetCommit


def _offset_commit_schema(*, epoch: bool, instance: bool) -> Schema:
    """OffsetCommit v5+ (no retention time), optionally with leader epochs and instance id."""
    header: list[tuple[str, object]] = [
        ("consumer_group", _STR),
        ("consumer_group_generation_id", Int32),
        ("consumer_id", _STR),
    ]
    if instance:
        header.append(("group_instance_id", _STR))
    partition: list[tuple[str, object]] = [("partition", Int32), ("offset", Int64)]
    if epoch:
        partition.append(("committed_leader_epoch", Int32))
    partition.append(("metadata", _STR))
    return Schema(*header, ("topics", Array(("topic", _STR), ("partitions", Array(*partition)))))


#: committed_leader_epoch when the consumer does not track leader epochs.
NO_LEADER_EPOCH = -1


_OFFSET_COMMIT_V8 = Schema(
    *tagged(
        ("consumer_group", _CSTR),
        ("consumer_group_generation_id", Int32),
        ("consumer_id", _CSTR),
        ("group_instance_id", _CSTR),
        (
            "topics",
            struct(
                ("topic", _CSTR),
                (
                    "partitions",
                    struct(
                        ("partition", Int32),
                        ("offset", Int64),
                        ("committed_leader_epoch", Int32),
                        ("metadata", _CSTR),
                    ),
                ),
            ),
        ),
    )
)
_OFFSET_COMMIT_RESPONSE_V8 = Schema(
    *tagged(
        ("throttle_time_ms", Int32),
        (
            "topics",
            struct(
                ("topic", _CSTR),
                ("partitions", struct(("partition", Int32), ("error_code", Int16))),
            ),
        ),
    )
)


class OffsetCommitRequest(Request[RequestStruct]):  # type: ignore[misc]
    """OffsetCommit v2-v9, with aiokafka's argument order plus ``group_instance_id``.

    ``topics``: ``[(topic, [(partition, offset, metadata)])]``. A KIP-848 member passes
    its member epoch as ``consumer_group_generation_id``. ``leader_epochs``: per
    partition, the leader epoch of the record before the committed offset (KIP-320;
    v6+), -1 where unknown. The response's ``topics`` are
    ``[(topic, [(partition, error_code, ...)], ...)]`` (flexible versions add tagged
    fields at the end of each).
    """

    API_KEY = 8
    DEFAULT_GENERATION_ID = -1
    DEFAULT_RETENTION_TIME = -1

    def __init__(
        self,
        consumer_group: str,
        consumer_group_generation_id: int,
        consumer_id: str,
        retention_time: int,
        topics: list[tuple[str, list[tuple[int, int, str]]]],
        group_instance_id: str | None = None,
        leader_epochs: Mapping[tuple[str, int], int] | None = None,
    ) -> None:
        self._group = consumer_group
        self._generation_id = consumer_group_generation_id
        self._member_id = consumer_id
        self._retention_time = retention_time
        self._topics = topics
        self._instance_id = group_instance_id
        self._epochs = leader_epochs or {}

    def build(self, request_struct_class: type[RequestStruct]) -> RequestStruct:
        """The struct for the negotiated version (see the module docstring for the changes)."""
        version = request_struct_class.API_VERSION
        _static_needs("OffsetCommit", version, 7, self._instance_id)
        head = (self._group, self._generation_id, self._member_id)
        if version < 5:
            return request_struct_class(*head, self._retention_time, self._topics)
        if version == 5:
            return request_struct_class(*head, self._topics)
        # v6+: each partition's leader epoch, NO_LEADER_EPOCH where unknown.
        epochs = self._epochs
        with_epoch = [
            (
                topic,
                [
                    (p, offset, epochs.get((topic, p), NO_LEADER_EPOCH), meta)
                    for p, offset, meta in parts
                ],
            )
            for topic, parts in self._topics
        ]
        if version == 6:
            return request_struct_class(*head, with_epoch)
        if version == 7:
            return request_struct_class(*head, self._instance_id, with_epoch)
        flexible: list[tuple[str, list[tuple[object, ...]], dict[int, bytes]]]
        flexible = [(topic, [(*part, {}) for part in parts], {}) for topic, parts in with_epoch]
        return request_struct_class(*head, self._instance_id, flexible, {})


_COMMIT_RESPONSE = OffsetCommitResponse_v3.SCHEMA
OffsetCommitRequest._CLASSES = (
    OffsetCommitRequest_v2,
    OffsetCommitRequest_v3,
    _version(8, 4, OffsetCommitRequest_v2.SCHEMA, _COMMIT_RESPONSE, "OffsetCommit"),
    _version(
        8, 5, _offset_commit_schema(epoch=False, instance=False), _COMMIT_RESPONSE, "OffsetCommit"
    ),
    _version(
        8, 6, _offset_commit_schema(epoch=True, instance=False), _COMMIT_RESPONSE, "OffsetCommit"
    ),
    _version(
        8, 7, _offset_commit_schema(epoch=True, instance=True), _COMMIT_RESPONSE, "OffsetCommit"
    ),
    *(
        request_version("OffsetCommit", 8, v, _OFFSET_COMMIT_V8, _OFFSET_COMMIT_RESPONSE_V8)
        for v in (8, 9)
    ),
)


# --------------------------------------------------------------------------- JoinGroup


class JoinGroupRequest(Request[RequestStruct]):  # type: ignore[misc]
    """JoinGroup v2-v5 (v2 is Kafka 4.0's floor; v5 carries ``group_instance_id``)."""

    API_KEY = 11

    def __init__(
        self,
        group: str,
        session_timeout: int,
        rebalance_timeout: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str,
        group_protocols: list[tuple[str, bytes]],
    ) -> None:
        self._group = group
        self._session_timeout = session_timeout
        self._rebalance_timeout = rebalance_timeout
        self._member_id = member_id
        self._instance_id = group_instance_id
        self._protocol_type = protocol_type
        self._protocols = group_protocols

    def build(self, request_struct_class: type[RequestStruct]) -> RequestStruct:
        """The struct for the negotiated version (the instance id from v5 on)."""
        version = request_struct_class.API_VERSION
        _static_needs("JoinGroup", version, 5, self._instance_id)
        head = (self._group, self._session_timeout, self._rebalance_timeout, self._member_id)
        if version < 5:
            return request_struct_class(*head, self._protocol_type, self._protocols)
        return request_struct_class(*head, self._instance_id, self._protocol_type, self._protocols)


JoinGroupRequest._CLASSES = (
    JoinGroupRequest_v2,
    # v3 and v4 change only broker behaviour (v4: MEMBER_ID_REQUIRED), not the layout.
    _version(11, 3, JoinGroupRequest_v2.SCHEMA, JoinGroupResponse_v2.SCHEMA, "JoinGroup"),
    _version(11, 4, JoinGroupRequest_v2.SCHEMA, JoinGroupResponse_v2.SCHEMA, "JoinGroup"),
    JoinGroupRequest_v5,
)


# --------------------------------------------------------------------------- SyncGroup


class SyncGroupRequest(Request[RequestStruct]):  # type: ignore[misc]
    """SyncGroup v0-v3 (v3 carries ``group_instance_id``)."""

    API_KEY = 14

    def __init__(
        self,
        group: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        group_assignment: list[tuple[str, bytes]],
    ) -> None:
        self._group = group
        self._generation_id = generation_id
        self._member_id = member_id
        self._instance_id = group_instance_id
        self._assignment = group_assignment

    def build(self, request_struct_class: type[RequestStruct]) -> RequestStruct:
        """The struct for the negotiated version (the instance id from v3 on)."""
        version = request_struct_class.API_VERSION
        _static_needs("SyncGroup", version, 3, self._instance_id)
        head = (self._group, self._generation_id, self._member_id)
        if version < 3:
            return request_struct_class(*head, self._assignment)
        return request_struct_class(*head, self._instance_id, self._assignment)


SyncGroupRequest._CLASSES = (
    SyncGroupRequest_v0,
    SyncGroupRequest_v1,
    _version(14, 2, SyncGroupRequest_v0.SCHEMA, SyncGroupResponse_v1.SCHEMA, "SyncGroup"),
    SyncGroupRequest_v3,
)
