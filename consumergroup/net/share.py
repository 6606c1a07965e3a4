"""Share groups (KIP-932, "queues for Kafka"): the wire codecs of a share consumer and of
its admin tools, at the versions Apache Kafka 4.1+ serves (v0 of the consumer APIs was an
early-access version of 4.0, removed in 4.1).

aiokafka has none of them; these follow the schemas of Apache Kafka 4.4's message classes
(``ShareFetchRequestData.SCHEMAS`` and the others), flexible in every version:

* ShareGroupHeartbeat (76) v1: membership. The member id is the client's (a UUID kept for
  the member's life); epoch 0 joins, -1 leaves; the answer may carry the member's
  assignment by topic id.
* ShareGroupDescribe (77) v1: a share group's state, epochs and members.
* ShareFetch (78) v1-v2: records from a partition leader, in a *share session* per
  (member, broker) whose epoch moves by one with each request (0 opens it, -1 closes it),
  with acknowledgements riding along; the answer names the *acquired* offset ranges and
  their delivery counts next to ordinary record batches, and the lock timeout of the
  acquired records. v2 (Kafka 4.2, KIP-1206 and KIP-1222) adds the acquire mode (0: whole
  batches, 1: at most MaxRecords records) and ``is_renew_ack``.
* ShareAcknowledge (79) v1-v2: acknowledgements alone (accept, release, reject, gap and,
  from v2, renew: a lock extended for another lock duration), in the same share session.
* DescribeShareGroupOffsets (90) v0-v1, AlterShareGroupOffsets (91) v0,
  DeleteShareGroupOffsets (92) v0: a share group's start offsets (v1: and its lag), set
  by an operator while the group is empty.

Topic ids are :class:`~.flexible.Uuid` strings (Kafka's base64 form); Metadata v10+ maps
them to names. Responses decode to aiokafka ``Struct``\\ s (``to_object()`` gives dicts).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from aiokafka.protocol.api import Request, RequestStruct
from aiokafka.protocol.types import (
    Boolean,
    CompactArray,
    CompactBytes,
    Int8,
    Int16,
    Int32,
    Int64,
    Schema,
)

from ..errors import UnsupportedVersionError
from .flexible import STR, NullableStruct, Uuid, request_version, struct, tagged

__all__ = [
    "ACCEPT",
    "ACQUIRE_BATCHES",
    "ACQUIRE_RECORD_LIMIT",
    "GAP",
    "REJECT",
    "RELEASE",
    "RENEW",
    "AckBatches",
    "AlterShareGroupOffsetsRequest",
    "DeleteShareGroupOffsetsRequest",
    "DescribeShareGroupOffsetsRequest",
    "ShareAcknowledgeRequest",
    "ShareFetchRequest",
    "ShareGroupDescribeRequest",
    "ShareGroupHeartbeatRequest",
]

#: Acknowledge types (``AcknowledgeTypes`` entries): an offset that holds no record (a
#: gap: control or compacted-away), handled, handed back for redelivery, archived
#: unhandled, and (v2) the lock extended.
GAP, ACCEPT, RELEASE, REJECT, RENEW = 0, 1, 2, 3, 4

#: ``ShareAcquireMode`` (ShareFetch v2): whole batches (the broker may acquire more than
#: MaxRecords to end on a batch boundary), or at most MaxRecords records.
ACQUIRE_BATCHES, ACQUIRE_RECORD_LIMIT = 0, 1

#: Share-session epochs with a meaning of their own: open a session, close it.
OPEN_SESSION, CLOSE_SESSION = 0, -1

#: ``{(topic_id, partition): [(first_offset, last_offset, [ack types])]}``: one entry per
#: range; one type for the whole range, or one per offset.
AckBatches = Mapping[tuple[str, int], Sequence[tuple[int, int, Sequence[int]]]]

_ACK_BATCH = struct(
    ("first_offset", Int64), ("last_offset", Int64), ("acknowledge_types", CompactArray(Int8))
)
_LEADER = Schema(*tagged(("leader_id", Int32), ("leader_epoch", Int32)))
_NODE_ENDPOINTS = struct(("node_id", Int32), ("host", STR), ("port", Int32), ("rack", STR))


def _acks_by_topic(
    acks: AckBatches, fetch: Sequence[tuple[str, int]] = ()
) -> list[tuple[str, list[tuple[int, list[tuple[int, int, list[int], dict[int, bytes]]]]]]]:
    """``acks`` (and the partitions in ``fetch``, with no acknowledgement) as the
    request's topics array: ``[(topic_id, [(partition, [batch]), ...])]``."""
    topics: dict[str, dict[int, list[tuple[int, int, list[int], dict[int, bytes]]]]] = {}
    for topic_id, partition in fetch:
        topics.setdefault(topic_id, {}).setdefault(partition, [])
    for (topic_id, partition), batches in acks.items():
        entry = topics.setdefault(topic_id, {}).setdefault(partition, [])
        entry.extend((first, last, list(types), {}) for first, last, types in batches)
    return [(tid, list(parts.items())) for tid, parts in topics.items()]


def _forgotten(forget: Sequence[tuple[str, int]]) -> list[tuple[str, list[int], dict[int, bytes]]]:
    topics: dict[str, list[int]] = {}
    for topic_id, partition in forget:
        topics.setdefault(topic_id, []).append(partition)
    return [(tid, parts, {}) for tid, parts in topics.items()]


def _tag_partitions(
    topics: list[tuple[str, list[tuple[int, list[Any]]]]],
) -> list[tuple[str, list[tuple[int, list[Any], dict[int, bytes]]], dict[int, bytes]]]:
    return [(tid, [(p, batches, {}) for p, batches in parts], {}) for tid, parts in topics]


# ------------------------------------------------------------------ ShareGroupHeartbeat

_HEARTBEAT_REQUEST = Schema(
    *tagged(
        ("group_id", STR),
        ("member_id", STR),
        ("member_epoch", Int32),
        ("rack_id", STR),
        ("subscribed_topic_names", CompactArray(STR)),
    )
)

_HEARTBEAT_RESPONSE = Schema(
    *tagged(
        ("throttle_time_ms", Int32),
        ("error_code", Int16),
        ("error_message", STR),
        ("member_id", STR),
        ("member_epoch", Int32),
        ("heartbeat_interval_ms", Int32),
        (
            "assignment",
            NullableStruct(
                (
                    "topic_partitions",
                    struct(("topic_id", Uuid), ("partitions", CompactArray(Int32))),
                )
            ),
        ),
    )
)

#: Member epochs with a meaning of their own in a share-group heartbeat.
JOIN_EPOCH, LEAVE_EPOCH = 0, -1


class ShareGroupHeartbeatRequest(Request[RequestStruct]):  # type: ignore[misc]
    """ShareGroupHeartbeat v1. ``subscribed_topic_names`` None: unchanged since the last
    heartbeat (a join, and a heartbeat after an error, send them)."""

    API_KEY = 76

    def __init__(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        *,
        rack_id: str | None = None,
        subscribed_topic_names: Sequence[str] | None = None,
    ) -> None:
        self.group_id = group_id
        self.member_id = member_id
        self.member_epoch = member_epoch
        self.rack_id = rack_id
        self.subscribed_topic_names = subscribed_topic_names

    def build(self, request_struct_class: type[RequestStruct]) -> RequestStruct:
        """The struct (one version)."""
        names = None if self.subscribed_topic_names is None else list(self.subscribed_topic_names)
        return request_struct_class(
            self.group_id, self.member_id, self.member_epoch, self.rack_id, names, {}
        )


ShareGroupHeartbeatRequest._CLASSES = (
    request_version("ShareGroupHeartbeat", 76, 1, _HEARTBEAT_REQUEST, _HEARTBEAT_RESPONSE),
)

# ------------------------------------------------------------------- ShareGroupDescribe

_DESCRIBE_REQUEST = Schema(
    *tagged(("group_ids", CompactArray(STR)), ("include_authorized_operations", Boolean))
)

_DESCRIBE_RESPONSE = Schema(
    *tagged(
        ("throttle_time_ms", Int32),
        (
            "groups",
            struct(
                ("error_code", Int16),
                ("error_message", STR),
                ("group_id", STR),
                ("group_state", STR),
                ("group_epoch", Int32),
                ("assignment_epoch", Int32),
                ("assignor_name", STR),
                (
                    "members",
                    struct(
                        ("member_id", STR),
                        ("rack_id", STR),
                        ("member_epoch", Int32),
                        ("client_id", STR),
                        ("client_host", STR),
                        ("subscribed_topic_names", CompactArray(STR)),
                        (
                            "assignment",
                            Schema(
                                *tagged(
                                    (
                                        "topic_partitions",
                                        struct(
                                            ("topic_id", Uuid),
                                            ("topic_name", STR),
                                            ("partitions", CompactArray(Int32)),
                                        ),
                                    )
                                )
                            ),
                        ),
                    ),
                ),
                ("authorized_operations", Int32),
            ),
        ),
    )
)


class ShareGroupDescribeRequest(Request[RequestStruct]):  # type: ignore[misc]
    """ShareGroupDescribe v1 for ``group_ids`` (authorized operations not asked).

    Each answered group: ``error_code, error_message, group_id, group_state, group_epoch,
    assignment_epoch, assignor_name, members, authorized_operations``; each member: ids,
    rack, epoch, client, subscription and ``assignment``
    (``topic_partitions: [(topic_id, topic_name, partitions)]``).
    """

    API_KEY = 77

    def __init__(self, group_ids: Sequence[str]) -> None:
        self.group_ids = list(group_ids)

    def build(self, request_struct_class: type[RequestStruct]) -> RequestStruct:
        """The struct (one version)."""
        return request_struct_class(self.group_ids, False, {})


ShareGroupDescribeRequest._CLASSES = (
    request_version("ShareGroupDescribe", 77, 1, _DESCRIBE_REQUEST, _DESCRIBE_RESPONSE),
)

# ---------------------------------------------------------------------------- ShareFetch


def _fetch_request(version: int) -> Schema:
    fields: list[tuple[str, object]] = [
        ("group_id", STR),
        ("member_id", STR),
        ("share_session_epoch", Int32),
        ("max_wait_ms", Int32),
        ("min_bytes", Int32),
        ("max_bytes", Int32),
        ("max_records", Int32),
        ("batch_size", Int32),
    ]
    if version >= 2:
        fields += [("share_acquire_mode", Int8), ("is_renew_ack", Boolean)]
    fields += [
        (
            "topics",
            struct(
                ("topic_id", Uuid),
                (
                    "partitions",
                    struct(("partition_index", Int32), ("acknowledgement_batches", _ACK_BATCH)),
                ),
            ),
        ),
        ("forgotten_topics_data", struct(("topic_id", Uuid), ("partitions", CompactArray(Int32)))),
    ]
    return Schema(*tagged(*fields))


_FETCH_RESPONSE = Schema(
    *tagged(
        ("throttle_time_ms", Int32),
        ("error_code", Int16),
        ("error_message", STR),
        ("acquisition_lock_timeout_ms", Int32),
        (
            "responses",
            struct(
                ("topic_id", Uuid),
                (
                    "partitions",
                    struct(
                        ("partition_index", Int32),
                        ("error_code", Int16),
                        ("error_message", STR),
                        ("acknowledge_error_code", Int16),
                        ("acknowledge_error_message", STR),
                        ("current_leader", _LEADER),
                        ("records", CompactBytes),
                        (
                            "acquired_records",
                            struct(
                                ("first_offset", Int64),
                                ("last_offset", Int64),
                                ("delivery_count", Int16),
                            ),
                        ),
                    ),
                ),
            ),
        ),
        ("node_endpoints", _NODE_ENDPOINTS),
    )
)


class ShareFetchRequest(Request[RequestStruct]):  # type: ignore[misc]
    """ShareFetch v1-v2: fetch ``fetch`` (``[(topic_id, partition)]``: partitions added to
    the share session, or all of them when it opens) and acknowledge ``acks``;
    ``forget`` leaves the session.

    ``max_records``: how many records the broker may acquire for this member;
    ``acquire_mode`` :data:`ACQUIRE_RECORD_LIMIT` makes it strict (v2; v1 brokers acquire
    whole batches, :data:`ACQUIRE_BATCHES`). ``is_renew_ack``: ``acks`` hold RENEW entries
    (v2; the fetch sizes must then be 0: nothing is fetched).

    The answer: ``error_code`` (session errors), ``acquisition_lock_timeout_ms``,
    ``responses: [(topic_id, [partition])]`` with each partition's ``error_code``,
    ``acknowledge_error_code``, ``current_leader``, ``records`` (record batches, as a Fetch
    answers them; they may hold offsets not acquired by this member) and
    ``acquired_records: [(first_offset, last_offset, delivery_count)]``.
    """

    API_KEY = 78

    def __init__(
        self,
        group_id: str,
        member_id: str,
        session_epoch: int,
        *,
        max_wait_ms: int,
        min_bytes: int,
        max_bytes: int,
        max_records: int,
        batch_size: int,
        acquire_mode: int = ACQUIRE_BATCHES,
        is_renew_ack: bool = False,
        fetch: Sequence[tuple[str, int]] = (),
        acks: AckBatches | None = None,
        forget: Sequence[tuple[str, int]] = (),
    ) -> None:
        self.group_id = group_id
        self.member_id = member_id
        self.session_epoch = session_epoch
        self.max_wait_ms = max_wait_ms
        self.min_bytes = min_bytes
        self.max_bytes = max_bytes
        self.max_records = max_records
        self.batch_size = batch_size
        self.acquire_mode = acquire_mode
        self.is_renew_ack = is_renew_ack
        self.fetch = list(fetch)
        self.acks = acks or {}
        self.forget = list(forget)

    def build(self, request_struct_class: type[RequestStruct]) -> RequestStruct:
        """The struct for the negotiated version (renewal and strict acquisition need v2)."""
        version = request_struct_class.API_VERSION
        mode: tuple[Any, ...] = ()
        if version >= 2:
            mode = (self.acquire_mode, self.is_renew_ack)
        elif self.is_renew_ack:
            raise UnsupportedVersionError(
                "ShareFetch v1 cannot renew acquisition locks (RENEW needs v2, Kafka 4.2+)"
            )
        topics = _tag_partitions(_acks_by_topic(self.acks, self.fetch))
        return request_struct_class(
            self.group_id,
            self.member_id,
            self.session_epoch,
            self.max_wait_ms,
            self.min_bytes,
            self.max_bytes,
            self.max_records,
            self.batch_size,
            *mode,
            topics,
            _forgotten(self.forget),
            {},
        )


ShareFetchRequest._CLASSES = tuple(
    request_version("ShareFetch", 78, v, _fetch_request(v), _FETCH_RESPONSE) for v in (1, 2)
)

# ---------------------------------------------------------------------- ShareAcknowledge


def _acknowledge_request(version: int) -> Schema:
    fields: list[tuple[str, object]] = [
        ("group_id", STR),
        ("member_id", STR),
        ("share_session_epoch", Int32),
    ]
    if version >= 2:
        fields.append(("is_renew_ack", Boolean))
    fields.append(
        (
            "topics",
            struct(
                ("topic_id", Uuid),
                (
                    "partitions",
                    struct(("partition_index", Int32), ("acknowledgement_batches", _ACK_BATCH)),
                ),
            ),
        )
    )
    return Schema(*tagged(*fields))


def _acknowledge_response(version: int) -> Schema:
    fields: list[tuple[str, object]] = [
        ("throttle_time_ms", Int32),
        ("error_code", Int16),
        ("error_message", STR),
    ]
    if version >= 2:
        fields.append(("acquisition_lock_timeout_ms", Int32))
    fields += [
        (
            "responses",
            struct(
                ("topic_id", Uuid),
                (
                    "partitions",
                    struct(
                        ("partition_index", Int32),
                        ("error_code", Int16),
                        ("error_message", STR),
                        ("current_leader", _LEADER),
                    ),
                ),
            ),
        ),
        ("node_endpoints", _NODE_ENDPOINTS),
    ]
    return Schema(*tagged(*fields))


class ShareAcknowledgeRequest(Request[RequestStruct]):  # type: ignore[misc]
    """ShareAcknowledge v1-v2: ``acks`` in the share session at ``session_epoch`` (-1 also
    closes it: the broker releases what the member still holds). ``is_renew_ack``: the
    acks hold RENEW entries (v2).

    The answer: ``error_code`` (session errors), from v2 ``acquisition_lock_timeout_ms``,
    and ``responses: [(topic_id, [(partition_index, error_code, error_message,
    current_leader)])]``.
    """

    API_KEY = 79

    def __init__(
        self,
        group_id: str,
        member_id: str,
        session_epoch: int,
        acks: AckBatches,
        *,
        is_renew_ack: bool = False,
    ) -> None:
        self.group_id = group_id
        self.member_id = member_id
        self.session_epoch = session_epoch
        self.acks = acks
        self.is_renew_ack = is_renew_ack

    def build(self, request_struct_class: type[RequestStruct]) -> RequestStruct:
        """The struct for the negotiated version (renewal needs v2)."""
        version = request_struct_class.API_VERSION
        renew: tuple[bool, ...] = ()
        if version >= 2:
            renew = (self.is_renew_ack,)
        elif self.is_renew_ack:
            raise UnsupportedVersionError(
                "ShareAcknowledge v1 cannot renew acquisition locks (RENEW needs v2, Kafka 4.2+)"
            )
        topics = _tag_partitions(_acks_by_topic(self.acks))
        return request_struct_class(
            self.group_id, self.member_id, self.session_epoch, *renew, topics, {}
        )


ShareAcknowledgeRequest._CLASSES = tuple(
    request_version("ShareAcknowledge", 79, v, _acknowledge_request(v), _acknowledge_response(v))
    for v in (1, 2)
)

# ------------------------------------------------------------- DescribeShareGroupOffsets

_DESCRIBE_OFFSETS_REQUEST = Schema(
    *tagged(
        (
            "groups",
            struct(
                ("group_id", STR),
                ("topics", struct(("topic_name", STR), ("partitions", CompactArray(Int32)))),
            ),
        )
    )
)


def _describe_offsets_response(version: int) -> Schema:
    partition: list[tuple[str, object]] = [
        ("partition_index", Int32),
        ("start_offset", Int64),
        ("leader_epoch", Int32),
    ]
    if version >= 1:
        partition.append(("lag", Int64))
    partition += [("error_code", Int16), ("error_message", STR)]
    return Schema(
        *tagged(
            ("throttle_time_ms", Int32),
            (
                "groups",
                struct(
                    ("group_id", STR),
                    (
                        "topics",
                        struct(
                            ("topic_name", STR),
                            ("topic_id", Uuid),
                            ("partitions", struct(*partition)),
                        ),
                    ),
                    ("error_code", Int16),
                    ("error_message", STR),
                ),
            ),
        )
    )


class DescribeShareGroupOffsetsRequest(Request[RequestStruct]):  # type: ignore[misc]
    """DescribeShareGroupOffsets v0-v1: the start offset of each share-partition of
    ``group`` (``topics``: ``{topic: [partition]}``; None: every topic the group has
    state for). Each answered partition: ``partition_index, start_offset, leader_epoch``,
    from v1 ``lag`` (-1: unknown), ``error_code, error_message``; a start offset of -1
    means the share-partition was never initialised."""

    API_KEY = 90

    def __init__(self, group: str, topics: Mapping[str, Sequence[int]] | None = None) -> None:
        self.group = group
        self.topics = topics

    def build(self, request_struct_class: type[RequestStruct]) -> RequestStruct:
        """The struct for the negotiated version (both ask the same)."""
        topics: list[tuple[str, list[int], dict[int, bytes]]] | None = (
            None
            if self.topics is None
            else [(name, list(parts), {}) for name, parts in self.topics.items()]
        )
        return request_struct_class([(self.group, topics, {})], {})


DescribeShareGroupOffsetsRequest._CLASSES = tuple(
    request_version(
        "DescribeShareGroupOffsets",
        90,
        v,
        _DESCRIBE_OFFSETS_REQUEST,
        _describe_offsets_response(v),
    )
    for v in (0, 1)
)

# ---------------------------------------------------------------- AlterShareGroupOffsets

_ALTER_OFFSETS_REQUEST = Schema(
    *tagged(
        ("group_id", STR),
        (
            "topics",
            struct(
                ("topic_name", STR),
                ("partitions", struct(("partition_index", Int32), ("start_offset", Int64))),
            ),
        ),
    )
)

_ALTER_OFFSETS_RESPONSE = Schema(
    *tagged(
        ("throttle_time_ms", Int32),
        ("error_code", Int16),
        ("error_message", STR),
        (
            "responses",
            struct(
                ("topic_name", STR),
                ("topic_id", Uuid),
                (
                    "partitions",
                    struct(
                        ("partition_index", Int32), ("error_code", Int16), ("error_message", STR)
                    ),
                ),
            ),
        ),
    )
)


class AlterShareGroupOffsetsRequest(Request[RequestStruct]):  # type: ignore[misc]
    """AlterShareGroupOffsets v0: set the start offset of share-partitions of ``group``
    (``offsets``: ``{(topic, partition): start_offset}``; the group must be empty)."""

    API_KEY = 91

    def __init__(self, group: str, offsets: Mapping[tuple[str, int], int]) -> None:
        self.group = group
        self.offsets = offsets

    def build(self, request_struct_class: type[RequestStruct]) -> RequestStruct:
        """The struct (one version)."""
        topics: dict[str, list[tuple[int, int, dict[int, bytes]]]] = {}
        for (topic, partition), offset in sorted(self.offsets.items()):
            topics.setdefault(topic, []).append((partition, offset, {}))
        return request_struct_class(
            self.group, [(name, parts, {}) for name, parts in topics.items()], {}
        )


AlterShareGroupOffsetsRequest._CLASSES = (
    request_version(
        "AlterShareGroupOffsets", 91, 0, _ALTER_OFFSETS_REQUEST, _ALTER_OFFSETS_RESPONSE
    ),
)

# --------------------------------------------------------------- DeleteShareGroupOffsets

_DELETE_OFFSETS_REQUEST = Schema(
    *tagged(("group_id", STR), ("topics", struct(("topic_name", STR))))
)

_DELETE_OFFSETS_RESPONSE = Schema(
    *tagged(
        ("throttle_time_ms", Int32),
        ("error_code", Int16),
        ("error_message", STR),
        (
            "responses",
            struct(
                ("topic_name", STR),
                ("topic_id", Uuid),
                ("error_code", Int16),
                ("error_message", STR),
            ),
        ),
    )
)


class DeleteShareGroupOffsetsRequest(Request[RequestStruct]):  # type: ignore[misc]
    """DeleteShareGroupOffsets v0: forget ``group``'s state for ``topics`` (the group must
    be empty); the next member starts them as a new group would
    (``share.auto.offset.reset``)."""

    API_KEY = 92

    def __init__(self, group: str, topics: Sequence[str]) -> None:
        self.group = group
        self.topics = list(topics)

    def build(self, request_struct_class: type[RequestStruct]) -> RequestStruct:
        """The struct (one version)."""
        return request_struct_class(self.group, [(name, {}) for name in self.topics], {})


DeleteShareGroupOffsetsRequest._CLASSES = (
    request_version(
        "DeleteShareGroupOffsets", 92, 0, _DELETE_OFFSETS_REQUEST, _DELETE_OFFSETS_RESPONSE
    ),
)
