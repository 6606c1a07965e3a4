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

Each builder takes ``group_instance_id`` (None for a dynamic member). A static member
must not silently lose its id on an old broker: building a version that cannot carry it
raises :class:`~consumergroup.errors.UnsupportedVersionError` saying what to do.
"""

from __future__ import annotations

from typing import TypeAlias

from aiokafka.protocol.api import Request, RequestStruct, Response
from aiokafka.protocol.commit import (
    OffsetCommitRequest_v2,
    OffsetCommitRequest_v3,
    OffsetCommitResponse_v3,
)
from aiokafka.protocol.group import (
    HeartbeatRequest_v0,
    HeartbeatRequest_v1,
    HeartbeatResponse_v1,
    JoinGroupRequest_v1,
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


# --------------------------------------------------------------------------- Heartbeat


class HeartbeatResponse_v2(Response):  # type: ignore[misc]
    """Heartbeat response v2 (same layout as v1)."""

    API_KEY = 12
    API_VERSION = 2
    SCHEMA = HeartbeatResponse_v1.SCHEMA


class HeartbeatResponse_v3(Response):  # type: ignore[misc]
    """Heartbeat response v3 (same layout as v1)."""

    API_KEY = 12
    API_VERSION = 3
    SCHEMA = HeartbeatResponse_v1.SCHEMA


class HeartbeatRequest_v2(RequestStruct):  # type: ignore[misc]
    """Heartbeat v2 (same layout as v0)."""

    API_KEY = 12
    API_VERSION = 2
    RESPONSE_TYPE = HeartbeatResponse_v2
    SCHEMA = HeartbeatRequest_v0.SCHEMA


class HeartbeatRequest_v3(RequestStruct):  # type: ignore[misc]
    """Heartbeat v3: adds ``group_instance_id``."""

    API_KEY = 12
    API_VERSION = 3
    RESPONSE_TYPE = HeartbeatResponse_v3
    SCHEMA = Schema(
        ("group", _STR),
        ("generation_id", Int32),
        ("member_id", _STR),
        ("group_instance_id", _STR),
    )


_HeartbeatStruct: TypeAlias = (
    HeartbeatRequest_v0 | HeartbeatRequest_v1 | HeartbeatRequest_v2 | HeartbeatRequest_v3
)


class HeartbeatRequest(Request[_HeartbeatStruct]):  # type: ignore[misc]
    """Heartbeat v0-v3."""

    API_KEY = 12

    def __init__(
        self, group: str, generation_id: int, member_id: str, group_instance_id: str | None = None
    ) -> None:
        self._group = group
        self._generation_id = generation_id
        self._member_id = member_id
        self._instance_id = group_instance_id

    def build(self, request_struct_class: type[_HeartbeatStruct]) -> _HeartbeatStruct:
        """The struct for the negotiated version (the instance id from v3 on)."""
        version = request_struct_class.API_VERSION
        _static_needs("Heartbeat", version, 3, self._instance_id)
        if version < 3:
            return request_struct_class(self._group, self._generation_id, self._member_id)
        return request_struct_class(
            self._group, self._generation_id, self._member_id, self._instance_id
        )


# --------------------------------------------------------------------------- LeaveGroup


class LeaveGroupResponse_v2(Response):  # type: ignore[misc]
    """LeaveGroup response v2 (same layout as v1)."""

    API_KEY = 13
    API_VERSION = 2
    SCHEMA = LeaveGroupResponse_v1.SCHEMA


class LeaveGroupResponse_v3(Response):  # type: ignore[misc]
    """LeaveGroup response v3: an error per departing member besides the top-level one."""

    API_KEY = 13
    API_VERSION = 3
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        ("error_code", Int16),
        (
            "members",
            Array(("member_id", _STR), ("group_instance_id", _STR), ("error_code", Int16)),
        ),
    )


class LeaveGroupRequest_v2(RequestStruct):  # type: ignore[misc]
    """LeaveGroup v2 (same layout as v0)."""

    API_KEY = 13
    API_VERSION = 2
    RESPONSE_TYPE = LeaveGroupResponse_v2
    SCHEMA = LeaveGroupRequest_v0.SCHEMA


class LeaveGroupRequest_v3(RequestStruct):  # type: ignore[misc]
    """LeaveGroup v3: a batch of ``(member_id, group_instance_id)`` leaving together."""

    API_KEY = 13
    API_VERSION = 3
    RESPONSE_TYPE = LeaveGroupResponse_v3
    SCHEMA = Schema(
        ("group", _STR),
        ("members", Array(("member_id", _STR), ("group_instance_id", _STR))),
    )


_LeaveGroupStruct: TypeAlias = (
    LeaveGroupRequest_v0 | LeaveGroupRequest_v1 | LeaveGroupRequest_v2 | LeaveGroupRequest_v3
)


class LeaveGroupRequest(Request[_LeaveGroupStruct]):  # type: ignore[misc]
    """LeaveGroup v0-v3 for one member (this one)."""

    API_KEY = 13

    def __init__(self, group: str, member_id: str, group_instance_id: str | None = None) -> None:
        self._group = group
        self._member_id = member_id
        self._instance_id = group_instance_id

    def build(self, request_struct_class: type[_LeaveGroupStruct]) -> _LeaveGroupStruct:
        """The struct for the negotiated version (the members array from v3 on)."""
        version = request_struct_class.API_VERSION
        _static_needs("LeaveGroup", version, 3, self._instance_id)
        if version < 3:
            return request_struct_class(self._group, self._member_id)
        return request_struct_class(self._group, [(self._member_id, self._instance_id)])


# --------------------------------------------------------------------------- OffsetCommit


def _offset_commit_schema(*, retention: bool, epoch: bool, instance: bool) -> Schema:
    header: list[tuple[str, object]] = [
        ("consumer_group", _STR),
        ("consumer_group_generation_id", Int32),
        ("consumer_id", _STR),
    ]
    if instance:
        header.append(("group_instance_id", _STR))
    if retention:
        header.append(("retention_time", Int64))
    partition: list[tuple[str, object]] = [("partition", Int32), ("offset", Int64)]
    if epoch:
        partition.append(("committed_leader_epoch", Int32))
    partition.append(("metadata", _STR))
    return Schema(*header, ("topics", Array(("topic", _STR), ("partitions", Array(*partition)))))


class OffsetCommitResponse_v4(Response):  # type: ignore[misc]
    """OffsetCommit response v4 (same layout as v3)."""

    API_KEY = 8
    API_VERSION = 4
    SCHEMA = OffsetCommitResponse_v3.SCHEMA


class OffsetCommitResponse_v5(Response):  # type: ignore[misc]
    """OffsetCommit response v5 (same layout as v3)."""

    API_KEY = 8
    API_VERSION = 5
    SCHEMA = OffsetCommitResponse_v3.SCHEMA


class OffsetCommitResponse_v6(Response):  # type: ignore[misc]
    """OffsetCommit response v6 (same layout as v3)."""

    API_KEY = 8
    API_VERSION = 6
    SCHEMA = OffsetCommitResponse_v3.SCHEMA


class OffsetCommitResponse_v7(Response):  # type: ignore[misc]
    """OffsetCommit response v7 (same layout as v3)."""

    API_KEY = 8
    API_VERSION = 7
    SCHEMA = OffsetCommitResponse_v3.SCHEMA


class OffsetCommitRequest_v4(RequestStruct):  # type: ignore[misc]
    """OffsetCommit v4 (same layout as v2)."""

    API_KEY = 8
    API_VERSION = 4
    RESPONSE_TYPE = OffsetCommitResponse_v4
    SCHEMA = OffsetCommitRequest_v2.SCHEMA


class OffsetCommitRequest_v5(RequestStruct):  # type: ignore[misc]
    """OffsetCommit v5: ``retention_time`` is gone (the broker's retention applies)."""

    API_KEY = 8
    API_VERSION = 5
    RESPONSE_TYPE = OffsetCommitResponse_v5
    SCHEMA = _offset_commit_schema(retention=False, epoch=False, instance=False)


class OffsetCommitRequest_v6(RequestStruct):  # type: ignore[misc]
    """OffsetCommit v6: adds ``committed_leader_epoch`` per partition."""

    API_KEY = 8
    API_VERSION = 6
    RESPONSE_TYPE = OffsetCommitResponse_v6
    SCHEMA = _offset_commit_schema(retention=False, epoch=True, instance=False)


class OffsetCommitRequest_v7(RequestStruct):  # type: ignore[misc]
    """OffsetCommit v7: adds ``group_instance_id``."""

    API_KEY = 8
    API_VERSION = 7
    RESPONSE_TYPE = OffsetCommitResponse_v7
    SCHEMA = _offset_commit_schema(retention=False, epoch=True, instance=True)


_OffsetCommitStruct: TypeAlias = (
    OffsetCommitRequest_v2
    | OffsetCommitRequest_v3
    | OffsetCommitRequest_v4
    | OffsetCommitRequest_v5
    | OffsetCommitRequest_v6
    | OffsetCommitRequest_v7
)

#: committed_leader_epoch when the consumer does not track leader epochs.
NO_LEADER_EPOCH = -1


class OffsetCommitRequest(Request[_OffsetCommitStruct]):  # type: ignore[misc]
    """OffsetCommit v2-v7, with aiokafka's argument order plus ``group_instance_id``.

    ``topics``: ``[(topic, [(partition, offset, metadata)])]``.
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
    ) -> None:
        self._group = consumer_group
        self._generation_id = consumer_group_generation_id
        self._member_id = consumer_id
        self._retention_time = retention_time
        self._topics = topics
        self._instance_id = group_instance_id

    def build(self, request_struct_class: type[_OffsetCommitStruct]) -> _OffsetCommitStruct:
        """The struct for the negotiated version (see the module docstring for the changes)."""
        version = request_struct_class.API_VERSION
        _static_needs("OffsetCommit", version, 7, self._instance_id)
        head = (self._group, self._generation_id, self._member_id)
        if version < 5:
            return request_struct_class(*head, self._retention_time, self._topics)
        if version == 5:
            return request_struct_class(*head, self._topics)
        # v6+: no leader epoch is tracked, so every partition commits NO_LEADER_EPOCH.
        with_epoch = [
            (topic, [(p, offset, NO_LEADER_EPOCH, meta) for p, offset, meta in parts])
            for topic, parts in self._topics
        ]
        if version == 6:
            return request_struct_class(*head, with_epoch)
        return request_struct_class(*head, self._instance_id, with_epoch)


# --------------------------------------------------------------------------- JoinGroup


class JoinGroupResponse_v3(Response):  # type: ignore[misc]
    """JoinGroup response v3 (same layout as v2)."""

    API_KEY = 11
    API_VERSION = 3
    SCHEMA = JoinGroupResponse_v2.SCHEMA


class JoinGroupResponse_v4(Response):  # type: ignore[misc]
    """JoinGroup response v4 (same layout as v2)."""

    API_KEY = 11
    API_VERSION = 4
    SCHEMA = JoinGroupResponse_v2.SCHEMA


class JoinGroupRequest_v3(RequestStruct):  # type: ignore[misc]
    """JoinGroup v3 (same layout as v1)."""

    API_KEY = 11
    API_VERSION = 3
    RESPONSE_TYPE = JoinGroupResponse_v3
    SCHEMA = JoinGroupRequest_v1.SCHEMA


class JoinGroupRequest_v4(RequestStruct):  # type: ignore[misc]
    """JoinGroup v4 (same layout as v1; the broker may answer MEMBER_ID_REQUIRED)."""

    API_KEY = 11
    API_VERSION = 4
    RESPONSE_TYPE = JoinGroupResponse_v4
    SCHEMA = JoinGroupRequest_v1.SCHEMA


_JoinGroupStruct: TypeAlias = (
    JoinGroupRequest_v2 | JoinGroupRequest_v3 | JoinGroupRequest_v4 | JoinGroupRequest_v5
)


class JoinGroupRequest(Request[_JoinGroupStruct]):  # type: ignore[misc]
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

    def build(self, request_struct_class: type[_JoinGroupStruct]) -> _JoinGroupStruct:
        """The struct for the negotiated version (the instance id from v5 on)."""
        version = request_struct_class.API_VERSION
        _static_needs("JoinGroup", version, 5, self._instance_id)
        head = (self._group, self._session_timeout, self._rebalance_timeout, self._member_id)
        if version < 5:
            return request_struct_class(*head, self._protocol_type, self._protocols)
        return request_struct_class(*head, self._instance_id, self._protocol_type, self._protocols)


# --------------------------------------------------------------------------- SyncGroup


class SyncGroupResponse_v2(Response):  # type: ignore[misc]
    """SyncGroup response v2 (same layout as v1)."""

    API_KEY = 14
    API_VERSION = 2
    SCHEMA = SyncGroupResponse_v1.SCHEMA


class SyncGroupRequest_v2(RequestStruct):  # type: ignore[misc]
    """SyncGroup v2 (same layout as v0)."""

    API_KEY = 14
    API_VERSION = 2
    RESPONSE_TYPE = SyncGroupResponse_v2
    SCHEMA = SyncGroupRequest_v0.SCHEMA


_SyncGroupStruct: TypeAlias = (
    SyncGroupRequest_v0 | SyncGroupRequest_v1 | SyncGroupRequest_v2 | SyncGroupRequest_v3
)


class SyncGroupRequest(Request[_SyncGroupStruct]):  # type: ignore[misc]
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

    def build(self, request_struct_class: type[_SyncGroupStruct]) -> _SyncGroupStruct:
        """The struct for the negotiated version (the instance id from v3 on)."""
        version = request_struct_class.API_VERSION
        _static_needs("SyncGroup", version, 3, self._instance_id)
        head = (self._group, self._generation_id, self._member_id)
        if version < 3:
            return request_struct_class(*head, self._assignment)
        return request_struct_class(*head, self._instance_id, self._assignment)
