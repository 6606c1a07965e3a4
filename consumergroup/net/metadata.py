"""Metadata v0-v5 (aiokafka's codecs) and v11-v12 (ours): the latter carry topic ids.

KIP-848 assignments name topics by id, so a member of a consumer-protocol group must
map ids to names: Metadata v10+ answers each topic's ``topic_id``. v11 (Kafka 2.8+)
dropped the cluster authorized operations; v12 (3.1+) only makes a topic's name
nullable (a request by id). Both are flexible. The decoded shape keeps aiokafka's field
names (``topic``, ``partition``, ``leader``, ``replicas``, ``isr``) so one parser reads
every version; v11+ add ``topic_id`` per topic and ``leader_epoch`` per partition.
"""

from __future__ import annotations

from io import BytesIO

from aiokafka.protocol.api import Request, RequestStruct
from aiokafka.protocol.metadata import MetadataRequest as _AiokafkaMetadataRequest
from aiokafka.protocol.types import (
    Boolean,
    CompactArray,
    Int16,
    Int32,
    Schema,
    UnsignedVarInt32,
)

from .flexible import NULL_TOPIC_ID, STR, Uuid, request_version, struct, tagged

__all__ = ["MetadataRequest"]


class _TopicsByName:
    """The request's topics, all named (no topic id): ``None`` (every topic) or names.

    Written directly rather than as an array of structs: a request may name hundreds of
    thousands of topics, and each element is the same null id, the name and no tags."""

    _item = Schema(*tagged(("topic_id", Uuid), ("topic", STR)))

    def encode(self, names: list[str] | None) -> bytes:
        """A compact array of (null topic id, name, no tags)."""
        if names is None:
            null: bytes = UnsignedVarInt32.encode(0)
            return null
        null_id = Uuid.encode(NULL_TOPIC_ID)
        parts = [UnsignedVarInt32.encode(len(names) + 1)]
        parts.extend(null_id + STR.encode(name) + b"\x00" for name in names)
        return b"".join(parts)

    def decode(self, data: BytesIO) -> list[tuple[object, ...]] | None:
        """The elements as ``(topic_id, name, tags)`` (for tests and logs)."""
        length = UnsignedVarInt32.decode(data) - 1
        return None if length < 0 else [self._item.decode(data) for _ in range(length)]

    def repr(self, value: object) -> str:
        """For aiokafka's struct repr."""
        return repr(value)


_REQUEST_V11 = Schema(
    *tagged(
        ("topics", _TopicsByName()),
        ("allow_auto_topic_creation", Boolean),
        ("include_topic_authorized_operations", Boolean),
    )
)

_RESPONSE_V11 = Schema(
    *tagged(
        ("throttle_time_ms", Int32),
        ("brokers", struct(("node_id", Int32), ("host", STR), ("port", Int32), ("rack", STR))),
        ("cluster_id", STR),
        ("controller_id", Int32),
        (
            "topics",
            struct(
                ("error_code", Int16),
                ("topic", STR),
                ("topic_id", Uuid),
                ("is_internal", Boolean),
                (
                    "partitions",
                    struct(
                        ("error_code", Int16),
                        ("partition", Int32),
                        ("leader", Int32),
                        ("leader_epoch", Int32),
                        ("replicas", CompactArray(Int32)),
                        ("isr", CompactArray(Int32)),
                        ("offline_replicas", CompactArray(Int32)),
                    ),
                ),
                ("topic_authorized_operations", Int32),
            ),
        ),
    )
)


class MetadataRequest(Request[RequestStruct]):  # type: ignore[misc]
    """Metadata for ``topics`` (None: every topic), v0-v5 and v11-v12."""

    API_KEY = 3

    def __init__(
        self, topics: list[str] | None = None, allow_auto_topic_creation: bool | None = None
    ) -> None:
        self._topics = topics
        self._auto_create = allow_auto_topic_creation
        self._legacy = _AiokafkaMetadataRequest(topics, allow_auto_topic_creation)

    def build(self, request_struct_class: type[RequestStruct]) -> RequestStruct:
        """The struct for the negotiated version."""
        if request_struct_class.API_VERSION <= 5:
            legacy: RequestStruct = self._legacy.build(request_struct_class)
            return legacy
        auto = self._auto_create if self._auto_create is not None else True
        return request_struct_class(self._topics, auto, False, {})


MetadataRequest._CLASSES = (
    *_AiokafkaMetadataRequest._CLASSES,
    *(request_version("Metadata", 3, v, _REQUEST_V11, _RESPONSE_V11) for v in (11, 12)),
)
