"""Rewriting Metadata answers in test proxies, at every version the client speaks.

The client negotiates Metadata up to v12 (flexible, with topic ids), so a proxy that edits
answers decodes them with the client's own response codecs, by field name: the same edit
works on v1's tuples and v12's (which carry topic ids, leader epochs and tagged fields).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from consumergroup.net.metadata import MetadataRequest

_RESPONSES = {cls.API_VERSION: cls.RESPONSE_TYPE for cls in MetadataRequest._CLASSES}
_FLEXIBLE = {cls.API_VERSION for cls in MetadataRequest._CLASSES if cls.FLEXIBLE_VERSION}

#: Edits one partition of a topic: gets (topic, fields by name), returns them (changed) or
#: None to drop the partition.
PartitionEdit = Callable[[str, dict[str, Any]], dict[str, Any] | None]
#: Keeps a topic (True) or drops it from the answer (False), given its name.
TopicFilter = Callable[[str], bool]


def _item_names(schema: Any, field: str) -> tuple[str, ...]:
    names: tuple[str, ...] = schema.fields[schema.names.index(field)].array_of.names
    return names


def _make(names: tuple[str, ...], values: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(values.get(n, {} if n == "_tagged_fields" else None) for n in names)


def rewrite_metadata(
    version: int,
    frame: bytes,
    *,
    brokers: list[tuple[int, str, int]] | None = None,
    controller_id: int | None = None,
    partition: PartitionEdit | None = None,
    keep_topic: TopicFilter | None = None,
) -> bytes:
    """``frame`` (correlation id onwards) with its brokers, controller, topics and
    partitions replaced as asked."""
    head = 5 if version in _FLEXIBLE else 4  # flexible: the header's empty tagged fields
    cls = _RESPONSES[version]
    resp = cls.decode(frame[head:])
    schema = cls.SCHEMA
    if brokers is not None:
        names = _item_names(schema, "brokers")
        resp.brokers = [_make(names, {"node_id": n, "host": h, "port": p}) for n, h, p in brokers]
    if controller_id is not None and "controller_id" in schema.names:
        resp.controller_id = controller_id
    if keep_topic is not None:
        name_at = _item_names(schema, "topics").index("topic")
        resp.topics = [t for t in resp.topics if keep_topic(t[name_at])]
    if partition is not None:
        topic_names = _item_names(schema, "topics")
        topic_schema = schema.fields[schema.names.index("topics")].array_of
        part_names = _item_names(topic_schema, "partitions")
        topics = []
        for t in resp.topics:
            topic = dict(zip(topic_names, t, strict=True))
            parts = []
            for p in topic["partitions"]:
                edited = partition(topic["topic"], dict(zip(part_names, p, strict=True)))
                if edited is not None:
                    parts.append(_make(part_names, edited))
            topic["partitions"] = parts
            topics.append(_make(topic_names, topic))
        resp.topics = topics
    encoded: bytes = resp.encode()
    return frame[:head] + encoded
