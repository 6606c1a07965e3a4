"""Producer-id and transaction request builders (KIP-98, KIP-360, KIP-890).

aiokafka 0.14 ships these APIs at their first versions only; they are written here with
aiokafka's ``Struct``/``Schema`` types after Apache Kafka's message definitions:

* InitProducerId v0-v1 (classic), v2+ flexible; v3 adds the current ``producer_id`` and
  ``producer_epoch``, so an idempotent producer can bump its epoch (KIP-360); v4 and v5
  have v3's layout.
* AddPartitionsToTxn, AddOffsetsToTxn, EndTxn and TxnOffsetCommit v0-v3: classic to v2,
  flexible at v3; TxnOffsetCommit v2 adds each partition's leader epoch and v3 the
  member's generation, id and instance id (KIP-447).
"""

from __future__ import annotations

from aiokafka.protocol.api import Request, RequestStruct
from aiokafka.protocol.types import (
    Array,
    Boolean,
    CompactArray,
    Int16,
    Int32,
    Int64,
    Schema,
    String,
)

from .flexible import STR, request_version, struct, tagged

__all__ = [
    "AddOffsetsToTxnRequest",
    "AddPartitionsToTxnRequest",
    "EndTxnRequest",
    "InitProducerIdRequest",
    "TxnOffsetCommitRequest",
]

_STR = String("utf-8")


def _init_producer_id(version: int) -> tuple[Schema, Schema]:
    flexible = version >= 2
    fields: list[tuple[str, object]] = [
        ("transactional_id", STR if flexible else _STR),
        ("transaction_timeout_ms", Int32),
    ]
    if version >= 3:
        fields += [("producer_id", Int64), ("producer_epoch", Int16)]
    answer = [
        ("throttle_time_ms", Int32),
        ("error_code", Int16),
        ("producer_id", Int64),
        ("producer_epoch", Int16),
    ]
    if flexible:
        return Schema(*tagged(*fields)), Schema(*tagged(*answer))
    return Schema(*fields), Schema(*answer)


class InitProducerIdRequest(Request[RequestStruct]):  # type: ignore[misc]
    """InitProducerId v0-v5: a producer id and epoch for an idempotent or transactional
    producer. ``producer_id``/``producer_epoch`` (-1: none yet) ask for an epoch bump of
    that id (v3+; an older broker cannot bump and is sent none)."""

    API_KEY = 22

    def __init__(
        self,
        transactional_id: str | None,
        transaction_timeout_ms: int,
        producer_id: int = -1,
        producer_epoch: int = -1,
    ) -> None:
        self._transactional_id = transactional_id
        self._timeout_ms = transaction_timeout_ms
        self._producer_id = producer_id
        self._producer_epoch = producer_epoch

    def build(self, request_struct_class: type[RequestStruct]) -> RequestStruct:
        """The struct for the negotiated version."""
        version = request_struct_class.API_VERSION
        fields: tuple[object, ...] = (self._transactional_id, self._timeout_ms)
        if version >= 3:
            fields += (self._producer_id, self._producer_epoch)
        if version >= 2:
            fields += ({},)  # no tagged fields
        return request_struct_class(*fields)


InitProducerIdRequest._CLASSES = tuple(
    request_version("InitProducerId", 22, v, *_init_producer_id(v), flexible=v >= 2)
    for v in range(6)
)


# ------------------------------------------------------------------ transactions
# Each of these is classic up to v2 and flexible from v3 (the versions a client sends
# below KIP-890's: AddPartitionsToTxn v4+ is for brokers, EndTxn v5 returns a new epoch).


def _schema(version: int, fields: list[tuple[str, object]]) -> Schema:
    return Schema(*tagged(*fields)) if version >= 3 else Schema(*fields)


def _array(version: int, *fields: tuple[str, object]) -> object:
    return struct(*fields) if version >= 3 else Array(*fields)


def _int_array(version: int) -> object:
    return CompactArray(Int32) if version >= 3 else Array(Int32)


def _text(version: int) -> object:
    return STR if version >= 3 else _STR


def _add_partitions(version: int) -> tuple[Schema, Schema]:
    s = _text(version)
    request = _schema(
        version,
        [
            ("transactional_id", s),
            ("producer_id", Int64),
            ("producer_epoch", Int16),
            ("topics", _array(version, ("name", s), ("partitions", _int_array(version)))),
        ],
    )
    results = _array(
        version,
        ("name", s),
        ("results", _array(version, ("partition_index", Int32), ("error_code", Int16))),
    )
    return request, _schema(version, [("throttle_time_ms", Int32), ("results", results)])


def _add_offsets(version: int) -> tuple[Schema, Schema]:
    s = _text(version)
    request = _schema(
        version,
        [
            ("transactional_id", s),
            ("producer_id", Int64),
            ("producer_epoch", Int16),
            ("group_id", s),
        ],
    )
    return request, _schema(version, [("throttle_time_ms", Int32), ("error_code", Int16)])


def _end_txn(version: int) -> tuple[Schema, Schema]:
    request = _schema(
        version,
        [
            ("transactional_id", _text(version)),
            ("producer_id", Int64),
            ("producer_epoch", Int16),
            ("committed", Boolean),
        ],
    )
    return request, _schema(version, [("throttle_time_ms", Int32), ("error_code", Int16)])


def _txn_offset_commit(version: int) -> tuple[Schema, Schema]:
    s = _text(version)
    partition: list[tuple[str, object]] = [("partition_index", Int32), ("committed_offset", Int64)]
    if version >= 2:
        partition.append(("committed_leader_epoch", Int32))
    partition.append(("committed_metadata", s))
    fields: list[tuple[str, object]] = [
        ("transactional_id", s),
        ("group_id", s),
        ("producer_id", Int64),
        ("producer_epoch", Int16),
    ]
    if version >= 3:
        fields += [("generation_id", Int32), ("member_id", s), ("group_instance_id", s)]
    fields.append(
        ("topics", _array(version, ("name", s), ("partitions", _array(version, *partition))))
    )
    topics = _array(
        version,
        ("name", s),
        ("partitions", _array(version, ("partition_index", Int32), ("error_code", Int16))),
    )
    return _schema(version, fields), _schema(
        version, [("throttle_time_ms", Int32), ("topics", topics)]
    )


def _tags(version: int) -> tuple[object, ...]:
    return ({},) if version >= 3 else ()


class AddPartitionsToTxnRequest(Request[RequestStruct]):  # type: ignore[misc]
    """AddPartitionsToTxn v0-v3: ``topics`` ``{topic: [partition, ...]}`` join the
    producer's transaction (answers per partition)."""

    API_KEY = 24

    def __init__(
        self, transactional_id: str, producer_id: int, epoch: int, topics: dict[str, list[int]]
    ) -> None:
        self._args = (transactional_id, producer_id, epoch)
        self._topics = topics

    def build(self, request_struct_class: type[RequestStruct]) -> RequestStruct:
        """The struct for the negotiated version."""
        v = request_struct_class.API_VERSION
        topics = [(t, list(ps), *_tags(v)) for t, ps in self._topics.items()]
        return request_struct_class(*self._args, topics, *_tags(v))


class AddOffsetsToTxnRequest(Request[RequestStruct]):  # type: ignore[misc]
    """AddOffsetsToTxn v0-v3: the group's offsets commit with the transaction."""

    API_KEY = 25

    def __init__(self, transactional_id: str, producer_id: int, epoch: int, group_id: str) -> None:
        self._args = (transactional_id, producer_id, epoch, group_id)

    def build(self, request_struct_class: type[RequestStruct]) -> RequestStruct:
        """The struct for the negotiated version."""
        return request_struct_class(*self._args, *_tags(request_struct_class.API_VERSION))


class EndTxnRequest(Request[RequestStruct]):  # type: ignore[misc]
    """EndTxn v0-v3: commit (``committed``) or abort the producer's transaction."""

    API_KEY = 26

    def __init__(
        self, transactional_id: str, producer_id: int, epoch: int, committed: bool
    ) -> None:
        self._args = (transactional_id, producer_id, epoch, committed)

    def build(self, request_struct_class: type[RequestStruct]) -> RequestStruct:
        """The struct for the negotiated version."""
        return request_struct_class(*self._args, *_tags(request_struct_class.API_VERSION))


class TxnOffsetCommitRequest(Request[RequestStruct]):  # type: ignore[misc]
    """TxnOffsetCommit v0-v3: offsets ``{(topic, partition): offset}`` committed by the
    transaction; v3 carries the member's generation (or member epoch), member id and
    instance id, so the coordinator fences a zombie member (KIP-447)."""

    API_KEY = 28

    def __init__(
        self,
        transactional_id: str,
        group_id: str,
        producer_id: int,
        epoch: int,
        offsets: dict[tuple[str, int], int],
        generation_id: int = -1,
        member_id: str = "",
        group_instance_id: str | None = None,
    ) -> None:
        self._head = (transactional_id, group_id, producer_id, epoch)
        self._member = (generation_id, member_id, group_instance_id)
        self._offsets = offsets

    def build(self, request_struct_class: type[RequestStruct]) -> RequestStruct:
        """The struct for the negotiated version (member fields from v3: without them a
        zombie member is not fenced, so an older broker is refused)."""
        v = request_struct_class.API_VERSION
        by_topic: dict[str, list[tuple[object, ...]]] = {}
        for (topic, partition), offset in sorted(self._offsets.items()):
            entry: tuple[object, ...] = (partition, offset, *((-1,) if v >= 2 else ()), "")
            by_topic.setdefault(topic, []).append((*entry, *_tags(v)))
        topics = [(t, ps, *_tags(v)) for t, ps in by_topic.items()]
        member = self._member if v >= 3 else ()
        return request_struct_class(*self._head, *member, topics, *_tags(v))


def _versions(name: str, key: int, schemas: object) -> tuple[type[RequestStruct], ...]:
    return tuple(
        request_version(name, key, v, *schemas(v), flexible=v >= 3)  # type: ignore[operator]
        for v in range(4)
    )


AddPartitionsToTxnRequest._CLASSES = _versions("AddPartitionsToTxn", 24, _add_partitions)
AddOffsetsToTxnRequest._CLASSES = _versions("AddOffsetsToTxn", 25, _add_offsets)
EndTxnRequest._CLASSES = _versions("EndTxn", 26, _end_txn)
TxnOffsetCommitRequest._CLASSES = _versions("TxnOffsetCommit", 28, _txn_offset_commit)
