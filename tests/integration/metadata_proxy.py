"""A Kafka-aware loopback proxy that hides partitions from Metadata answers.

Tansu has no CreatePartitions, so "a topic gains partitions" is staged here: the
topic is created with its final count, and the proxy shows the members (by
client id) only the first ``visible`` partitions until the test reveals more.
It parses frames with aiokafka's codecs and forwards everything else untouched.
"""

from __future__ import annotations

from aiokafka.protocol import metadata

from tests.helpers import KafkaFrameProxy

_METADATA_RESPONSES = {v: getattr(metadata, f"MetadataResponse_v{v}") for v in range(6)}


class MetadataFilterProxy(KafkaFrameProxy):
    """Forwards to ``target``; trims ``topic`` to ``visible`` partitions for ``client_id``."""

    def __init__(self, target_port: int, listen_port: int, topic: str, client_id: str) -> None:
        super().__init__(target_port, listen_port)
        self.topic = topic
        self.client_id = client_id
        self.visible: int | None = None

    def rewrite_response(self, key: int, version: int, client_id: str, frame: bytes) -> bytes:
        """Trim the topic in Metadata answers to the filtered client."""
        if key == 3 and client_id == self.client_id and self.visible is not None:
            return frame[:4] + self._trim(version, frame[4:])
        return frame

    def _trim(self, version: int, body: bytes) -> bytes:
        cls = _METADATA_RESPONSES[version]
        resp = cls.decode(body)
        topics = []
        for t in resp.topics:
            name_at = 1
            if t[name_at] == self.topic:
                parts = [p for p in t[-1] if p[1] < (self.visible or 0)]
                t = (*t[:-1], parts)
            topics.append(t)
        resp.topics = topics
        encoded: bytes = resp.encode()
        return encoded
