"""Producer-id and transaction request builders (KIP-98, KIP-360, KIP-890).

aiokafka 0.14 ships these APIs at their first versions only; they are written here with
aiokafka's ``Struct``/``Schema`` types after Apache Kafka's message definitions:

* InitProducerId v0-v1 (classic), v2+ flexible; v3 adds the current ``producer_id`` and
  ``producer_epoch``, so an idempotent producer can bump its epoch (KIP-360); v4 and v5
  have v3's layout.
* AddPartitionsToTxn v0-v3, AddOffsetsToTxn v0-v4, EndTxn v0-v5, TxnOffsetCommit v0-v5:
  classic to v2, flexible from v3; TxnOffsetCommit v2 adds each partition's leader epoch
  and v3 the member's generation, id and instance id (KIP-447). v4 of each only admits
  the error TRANSACTION_ABORTABLE (KIP-890). v5 of EndTxn and TxnOffsetCommit is the
  transaction protocol v2 (KIP-890 part 2): EndTxn v5 answers with the producer id and the
  epoch bumped for the next transaction, and a TxnOffsetCommit v5 adds the group's offsets
  partition to the transaction itself (no AddOffsetsToTxn). A client of the protocol v1
  sends at most v4 (and Produce v11): the broker takes the version for the protocol. (v4+
  of AddPartitionsToTxn is the brokers' batched form; a client sends v3 at most, and
  nothing at all under the protocol v2, where the brokers add a partition when its first
  Produce of the transaction arrives.)

Each builder takes ``max_version``: the transaction manager caps the version at the
transaction protocol it runs.
"""

from __future__ import annotations

from collections.abc import Mapping

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
# Each of these is classic up to v2 and flexible from v3.


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
    answer: list[tuple[str, object]] = [("throttle_time_ms", Int32), ("error_code", Int16)]
    if version >= 5:  # the next transaction's producer id and epoch
        answer += [("producer_id", Int64), ("producer_epoch", Int16)]
    return request, _schema(version, answer)


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


class _Capped(Request[RequestStruct]):  # type: ignore[misc]
    """A builder whose version is capped at ``max_version`` (the transaction protocol's)."""

    API_KEY = -1  # each subclass names its own
    _max_version = 1 << 15

    def prepare(self, versions: dict[int, tuple[int, int]]) -> RequestStruct:
        """The struct for the highest version both sides speak, at most ``max_version``."""
        lo, hi = versions.get(self.API_KEY, (0, -1))
        capped = {**versions, self.API_KEY: (lo, min(hi, self._max_version))}
        return super().prepare(capped)


class AddPartitionsToTxnRequest(_Capped):
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


class AddOffsetsToTxnRequest(_Capped):
    """AddOffsetsToTxn v0-v4: the group's offsets commit with the transaction."""

    API_KEY = 25

    def __init__(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        group_id: str,
        max_version: int = 4,
    ) -> None:
        self._args = (transactional_id, producer_id, epoch, group_id)
        self._max_version = max_version

    def build(self, request_struct_class: type[RequestStruct]) -> RequestStruct:
        """The struct for the negotiated version."""
        return request_struct_class(*self._args, *_tags(request_struct_class.API_VERSION))


class EndTxnRequest(_Capped):
    """EndTxn v0-v5: commit (``committed``) or abort the producer's transaction; v5 (the
    transaction protocol v2) answers with the producer id and epoch of the next one."""

    API_KEY = 26

    def __init__(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        committed: bool,
        max_version: int = 4,
    ) -> None:
        self._args = (transactional_id, producer_id, epoch, committed)
        self._max_version = max_version

    def build(self, request_struct_class: type[RequestStruct]) -> RequestStruct:
        """The struct for the negotiated version."""
        return request_struct_class(*self._args, *_tags(request_struct_class.API_VERSION))


class TxnOffsetCommitRequest(_Capped):
    """TxnOffsetCommit v0-v5: offsets ``{(topic, partition): offset}`` (with their
    metadata, ``metadata``) committed by the transaction; v3+ carries the member's
    generation (or member epoch), member id and instance id, so the coordinator fences a
    zombie member (KIP-447); v5 is the transaction protocol v2."""

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
        *,
        metadata: Mapping[tuple[str, int], str] | None = None,
        max_version: int = 4,
    ) -> None:
        self._head = (transactional_id, group_id, producer_id, epoch)
        self._member = (generation_id, member_id, group_instance_id)
        self._offsets = offsets
        self._metadata = metadata or {}
        self._max_version = max_version

    def build(self, request_struct_class: type[RequestStruct]) -> RequestStruct:
        """The struct for the negotiated version (member fields from v3: without them a
        zombie member is not fenced, so an older broker is refused)."""
        v = request_struct_class.API_VERSION
        by_topic: dict[str, list[tuple[object, ...]]] = {}
        for (topic, partition), offset in sorted(self._offsets.items()):
            text = self._metadata.get((topic, partition), "")
            entry: tuple[object, ...] = (partition, offset, *((-1,) if v >= 2 else ()), text)
            by_topic.setdefault(topic, []).append((*entry, *_tags(v)))
        topics = [(t, ps, *_tags(v)) for t, ps in by_topic.items()]
        member = self._member if v >= 3 else ()
        return request_struct_class(*self._head, *member, topics, *_tags(v))


def _versions(name: str, key: int, schemas: object, top: int) -> tuple[type[RequestStruct], ...]:
    return tuple(
        request_version(name, key, v, *schemas(v), flexible=v >= 3)  # type: ignore[operator]
        for v in range(top + 1)
    )


AddPartitionsToTxnRequest._CLASSES = _versions("AddPartitionsToTxn", 24, _add_partitions, 3)
AddOffsetsToTxnRequest._CLASSES = _versions("AddOffsetsToTxn", 25, _add_offsets, 4)
EndTxnRequest._CLASSES = _versions("EndTxn", 26, _end_txn, 5)
TxnOffsetCommitRequest._CLASSES = _versions("TxnOffsetCommit", 28, _txn_offset_commit, 5)
