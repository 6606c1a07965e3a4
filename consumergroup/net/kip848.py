"""The consumer group protocol of KIP-848 (Apache Kafka 4.0+): its two APIs, v0-v1.

aiokafka has no codec for them; these follow Apache Kafka's message definitions
(``ConsumerGroupHeartbeatRequest.json`` and the others), flexible in every version:

* ConsumerGroupHeartbeat (68): v0; v1 adds ``SubscribedTopicRegex`` to the request (and
  requires a member id the client generated).
* ConsumerGroupDescribe (69): v0; v1 adds ``MemberType`` to each member (-1 unknown,
  0 classic, 1 consumer).

Assignments name topics by id (:class:`~.flexible.Uuid`); Metadata v10+ maps the ids to
names.
"""

from __future__ import annotations

from collections.abc import Sequence

from aiokafka.protocol.api import Request, RequestStruct
from aiokafka.protocol.types import (
    Boolean,
    CompactArray,
    Int8,
    Int16,
    Int32,
    Schema,
)

from ..errors import UnsupportedVersionError
from .flexible import STR, NullableStruct, Uuid, request_version, struct, tagged

__all__ = [
    "ConsumerGroupDescribeRequest",
    "ConsumerGroupHeartbeatRequest",
    "TopicPartitions",
]

#: ``[(topic id, [partition, ...])]``: an assignment, or the partitions a member owns.
TopicPartitions = list[tuple[str, list[int]]]

_TOPIC_PARTITIONS = struct(("topic_id", Uuid), ("partitions", CompactArray(Int32)))

# --------------------------------------------------------------- ConsumerGroupHeartbeat


def _heartbeat_request(version: int) -> Schema:
    fields: list[tuple[str, object]] = [
        ("group_id", STR),
        ("member_id", STR),
        ("member_epoch", Int32),
        ("instance_id", STR),
        ("rack_id", STR),
        ("rebalance_timeout_ms", Int32),
        ("subscribed_topic_names", CompactArray(STR)),
    ]
    if version >= 1:
        fields.append(("subscribed_topic_regex", STR))
    fields += [("server_assignor", STR), ("topic_partitions", _TOPIC_PARTITIONS)]
    return Schema(*tagged(*fields))


_HEARTBEAT_RESPONSE = Schema(
    *tagged(
        ("throttle_time_ms", Int32),
        ("error_code", Int16),
        ("error_message", STR),
        ("member_id", STR),
        ("member_epoch", Int32),
        ("heartbeat_interval_ms", Int32),
        ("assignment", NullableStruct(("topic_partitions", _TOPIC_PARTITIONS))),
    )
)

#: Member epochs with a meaning of their own in a heartbeat.
JOIN_EPOCH = 0
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2


class ConsumerGroupHeartbeatRequest(Request[RequestStruct]):  # type: ignore[misc]
    """ConsumerGroupHeartbeat v0-v1. ``None`` for a field means "unchanged since the last
    heartbeat" (the broker keeps what it has); a full heartbeat sends them all.

    ``topic_partitions``: the partitions the member owns, by topic id.
    """

    API_KEY = 68

    def __init__(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        *,
        instance_id: str | None = None,
        rack_id: str | None = None,
        rebalance_timeout_ms: int = -1,
        subscribed_topic_names: Sequence[str] | None = None,
        subscribed_topic_regex: str | None = None,
        server_assignor: str | None = None,
        topic_partitions: TopicPartitions | None = None,
    ) -> None:
        self.group_id = group_id
        self.member_id = member_id
        self.member_epoch = member_epoch
        self.instance_id = instance_id
        self.rack_id = rack_id
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.subscribed_topic_names = subscribed_topic_names
        self.subscribed_topic_regex = subscribed_topic_regex
        self.server_assignor = server_assignor
        self.topic_partitions = topic_partitions

    def build(self, request_struct_class: type[RequestStruct]) -> RequestStruct:
        """The struct for the negotiated version (a regex needs v1)."""
        version = request_struct_class.API_VERSION
        if version < 1 and self.subscribed_topic_regex is not None:
            raise UnsupportedVersionError(
                "ConsumerGroupHeartbeat: a regex subscription needs v1 (Apache Kafka 4.0+); "
                "this broker speaks v0: subscribe to topic names instead, or upgrade it"
            )
        names = None if self.subscribed_topic_names is None else list(self.subscribed_topic_names)
        owned: list[tuple[str, list[int], dict[int, bytes]]] | None = (
            None
            if self.topic_partitions is None
            else [(tid, list(parts), {}) for tid, parts in self.topic_partitions]
        )
        head = (
            self.group_id,
            self.member_id,
            self.member_epoch,
            self.instance_id,
            self.rack_id,
            self.rebalance_timeout_ms,
            names,
        )
        regex = (self.subscribed_topic_regex,) if version >= 1 else ()
        return request_struct_class(*head, *regex, self.server_assignor, owned, {})


ConsumerGroupHeartbeatRequest._CLASSES = tuple(
    request_version("ConsumerGroupHeartbeat", 68, v, _heartbeat_request(v), _HEARTBEAT_RESPONSE)
    for v in (0, 1)
)


# --------------------------------------------------------------- ConsumerGroupDescribe

_DESCRIBE_REQUEST = Schema(
    *tagged(("group_ids", CompactArray(STR)), ("include_authorized_operations", Boolean))
)

_ASSIGNMENT = Schema(
    *tagged(
        (
            "topic_partitions",
            struct(("topic_id", Uuid), ("topic_name", STR), ("partitions", CompactArray(Int32))),
        )
    )
)


def _describe_response(version: int) -> Schema:
    member: list[tuple[str, object]] = [
        ("member_id", STR),
        ("instance_id", STR),
        ("rack_id", STR),
        ("member_epoch", Int32),
        ("client_id", STR),
        ("client_host", STR),
        ("subscribed_topic_names", CompactArray(STR)),
        ("subscribed_topic_regex", STR),
        ("assignment", _ASSIGNMENT),
        ("target_assignment", _ASSIGNMENT),
    ]
    if version >= 1:
        member.append(("member_type", Int8))
    return Schema(
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
                    ("members", struct(*member)),
                    ("authorized_operations", Int32),
                ),
            ),
        )
    )


class ConsumerGroupDescribeRequest(Request[RequestStruct]):  # type: ignore[misc]
    """ConsumerGroupDescribe v0-v1 for ``group_ids`` (authorized operations not asked).

    Each answered group: ``error_code, error_message, group_id, group_state,
    group_epoch, assignment_epoch, assignor_name, members, authorized_operations``;
    each member: ids, epoch, client, subscription, ``assignment`` and
    ``target_assignment`` (``topic_partitions: [(topic_id, topic_name, partitions)]``)
    and, from v1, ``member_type``.
    """

    API_KEY = 69

    def __init__(self, group_ids: Sequence[str]) -> None:
        self.group_ids = list(group_ids)

    def build(self, request_struct_class: type[RequestStruct]) -> RequestStruct:
        """The struct for the negotiated version (both versions ask the same)."""
        return request_struct_class(self.group_ids, False, {})


ConsumerGroupDescribeRequest._CLASSES = tuple(
    request_version("ConsumerGroupDescribe", 69, v, _DESCRIBE_REQUEST, _describe_response(v))
    for v in (0, 1)
)
