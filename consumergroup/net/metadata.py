"""Metadata v0-v5 (aiokafka's codecs) and v11-v12 (ours): the latter carry topic ids.

KIP-848 assignments name topics by id, so a member of a consumer-protocol group must
map ids to names: Metadata v10+ answers each topic's ``topic_id``. v11 (Kafka 2.8+)
dropped the cluster authorized operations; v12 (3.1+) only makes a topic's name
nullable (a request by id). Both are flexible. The decoded shape keeps aiokafka's field
names (``topic``, ``partition``, ``leader``, ``replicas``, ``isr``) so one parser reads
every version; v11+ add ``topic_id`` per topic and ``leader_epoch`` per partition.
"""

from __future__ import annotations

from aiokafka.protocol.api import Request, RequestStruct
from aiokafka.protocol.metadata import MetadataRequest as _AiokafkaMetadataRequest
from aiokafka.protocol.types import Boolean, CompactArray, Int16, Int32, Schema

from .flexible import NULL_TOPIC_ID, STR, Uuid, flexible_version, struct, tagged

__all__ = ["MetadataRequest"]

_REQUEST_V11 = Schema(
    *tagged(
        ("topics", struct(("topic_id", Uuid), ("topic", STR))),
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
        topics: list[tuple[str, str, dict[int, bytes]]] | None
        topics = None if self._topics is None else [(NULL_TOPIC_ID, t, {}) for t in self._topics]
        auto = self._auto_create if self._auto_create is not None else True
        return request_struct_class(topics, auto, False, {})


MetadataRequest._CLASSES = (
    *_AiokafkaMetadataRequest._CLASSES,
    *(flexible_version("Metadata", 3, v, _REQUEST_V11, _RESPONSE_V11) for v in (11, 12)),
)
