"""OffsetFetch: aiokafka's v1-v3 for the classic protocol, v9 of our own for KIP-848 members.

aiokafka 0.14 ships OffsetFetch v1-v3 only. A member of a consumer-protocol group fetches
with its member id and member epoch, which the coordinator checks (UNKNOWN_MEMBER_ID,
STALE_MEMBER_EPOCH), as the Java client does; that needs v9. Following Apache Kafka's
message definition (``OffsetFetchRequest.json``; flexible since v6):

* v8 replaces the request's group id and topics by a ``groups`` array (one request may
  ask for several groups), each ``(group_id, topics)``; the response answers per group,
  with the group's error code, and each partition carries ``committed_leader_epoch``.
* v9 adds ``member_id`` (nullable) and ``member_epoch`` (-1: none) to each group.
* v10 names topics by id (not written: v9 is what a member needs).

* v7 (flexible, the classic shape) adds ``require_stable`` (KIP-447): the coordinator
  answers UNSTABLE_OFFSET_COMMIT for a partition whose offset a transaction has committed
  but not yet decided, instead of the offset before it.

A request without a member goes at v7 where the broker offers it (its answer carries
the committed leader epochs, KIP-320), else at v1-v3 (every broker, Tansu included,
answers those); one with a member goes at v9, which every broker offering the consumer
group protocol has.
"""

from __future__ import annotations

from typing import Any

from aiokafka.protocol.api import Request, RequestStruct
from aiokafka.protocol.commit import (
    OffsetFetchRequest_v1,
    OffsetFetchRequest_v2,
    OffsetFetchRequest_v3,
)
from aiokafka.protocol.types import Boolean, CompactArray, Int16, Int32, Int64, Schema

from .flexible import STR, request_version, struct, tagged

__all__ = ["OffsetFetchRequest", "offset_fetch_topics"]

#: ``[(topic, [(partition, committed offset, metadata, error code, leader epoch)])]``
FetchedTopics = list[tuple[str, list[tuple[int, int, str | None, int, int]]]]

_REQUEST_V9 = Schema(
    *tagged(
        (
            "groups",
            struct(
                ("group_id", STR),
                ("member_id", STR),
                ("member_epoch", Int32),
                ("topics", struct(("name", STR), ("partition_indexes", CompactArray(Int32)))),
            ),
        ),
        ("require_stable", Boolean),
    )
)

_RESPONSE_V9 = Schema(
    *tagged(
        ("throttle_time_ms", Int32),
        (
            "groups",
            struct(
                ("group_id", STR),
                (
                    "topics",
                    struct(
                        ("name", STR),
                        (
                            "partitions",
                            struct(
                                ("partition_index", Int32),
                                ("committed_offset", Int64),
                                ("committed_leader_epoch", Int32),
                                ("metadata", STR),
                                ("error_code", Int16),
                            ),
                        ),
                    ),
                ),
                ("error_code", Int16),
            ),
        ),
    )
)

_PARTITION = struct(
    ("partition_index", Int32),
    ("committed_offset", Int64),
    ("committed_leader_epoch", Int32),
    ("metadata", STR),
    ("error_code", Int16),
)
_REQUEST_V7 = Schema(
    *tagged(
        ("group_id", STR),
        ("topics", struct(("name", STR), ("partition_indexes", CompactArray(Int32)))),
        ("require_stable", Boolean),
    )
)
_RESPONSE_V7 = Schema(
    *tagged(
        ("throttle_time_ms", Int32),
        ("topics", struct(("name", STR), ("partitions", _PARTITION))),
        ("error_code", Int16),
    )
)

_V7 = request_version("OffsetFetch", 9, 7, _REQUEST_V7, _RESPONSE_V7)
_V9 = request_version("OffsetFetch", 9, 9, _REQUEST_V9, _RESPONSE_V9)
_CLASSIC: tuple[type[RequestStruct], ...] = (
    OffsetFetchRequest_v1,
    OffsetFetchRequest_v2,
    OffsetFetchRequest_v3,
)


class OffsetFetchRequest(Request[RequestStruct]):  # type: ignore[misc]
    """The committed offsets of ``partitions`` (``[(topic, [partition, ...])]``) in
    ``consumer_group``. With ``member_id`` (a KIP-848 member) the request carries it and
    ``member_epoch`` and goes at v9; without, at v7 (or v1-v3). Read the answer with
    :func:`offset_fetch_topics`."""

    API_KEY = 9

    def __init__(
        self,
        consumer_group: str,
        partitions: list[tuple[str, list[int]]],
        *,
        member_id: str | None = None,
        member_epoch: int = -1,
        require_stable: bool = False,
    ) -> None:
        self.group = consumer_group
        self.partitions = partitions
        self.member_id = member_id
        self.member_epoch = member_epoch
        self.require_stable = require_stable

    def prepare(self, versions: dict[int, tuple[int, int]]) -> RequestStruct:
        """v9 for a member, else v7 where the broker offers it (the committed leader
        epochs, KIP-320, and stable offsets when asked for), else the highest of v1-v3
        the broker offers (without v7 stable offsets are read as they are: such a broker
        predates KIP-447's transactions)."""
        low, high = versions.get(self.API_KEY, (0, -1))
        if self.member_id is not None:
            candidates: tuple[type[RequestStruct], ...] = (_V9,)
        elif low <= 7 <= high:
            candidates = (_V7,)
        else:
            candidates = _CLASSIC
        for cls in reversed(candidates):
            if low <= cls.API_VERSION <= high:
                return self.build(cls)
        # prepare() in net/protocol.py turns this into UnsupportedVersionError.
        raise NotImplementedError(
            "OffsetFetch with a member epoch needs v9 (Apache Kafka 4.0+)"
            if self.member_id is not None
            else "OffsetFetch v1-v3"
        )

    def build(self, request_struct_class: type[RequestStruct]) -> RequestStruct:
        """The struct for ``request_struct_class``'s version."""
        version = request_struct_class.API_VERSION
        if version == 7:
            named: list[tuple[str, list[int], dict[int, bytes]]] = [
                (topic, list(parts), {}) for topic, parts in self.partitions
            ]
            return request_struct_class(self.group, named, self.require_stable, {})
        if version < 8:
            return request_struct_class(self.group, self.partitions)
        topics: list[tuple[str, list[int], dict[int, bytes]]] = [
            (topic, list(parts), {}) for topic, parts in self.partitions
        ]
        group: tuple[str, str | None, int, object, dict[int, bytes]] = (
            self.group,
            self.member_id,
            self.member_epoch,
            topics,
            {},
        )
        return request_struct_class([group], self.require_stable, {})


# Every version, so codec_versions() shows the range.
OffsetFetchRequest._CLASSES = (*_CLASSIC, _V7, _V9)


def offset_fetch_topics(response: Any) -> tuple[int, FetchedTopics]:
    """An OffsetFetch answer of any version as ``(error code, topics)``: the top-level
    code (v2-v7) or the group's (v8+; the request asked for one group). Each partition
    is ``(partition, offset, metadata, error code, committed leader epoch)``, the epoch
    -1 below v5 (none was committed, or the version has none)."""
    if response.API_VERSION == 7:
        return response.error_code, [
            (name, [(p, offset, meta, err, epoch) for p, offset, epoch, meta, err, _ in parts])
            for name, parts, _ in response.topics
        ]
    if response.API_VERSION < 8:
        return getattr(response, "error_code", 0), [
            (name, [(p, offset, meta, err, -1) for p, offset, meta, err in parts])
            for name, parts in response.topics
        ]
    _group_id, topics, code, _tags = response.groups[0]
    return code, [
        (name, [(p, offset, meta, err, epoch) for p, offset, epoch, meta, err, _ in parts])
        for name, parts, _ in topics
    ]
