"""A Kafka-aware loopback proxy that hides partitions from Metadata answers.

Tansu has no CreatePartitions, so "a topic gains partitions" is staged here: the
topic is created with its final count, and the proxy shows the members (by
client id) only the first ``visible`` partitions until the test reveals more.
It parses Metadata answers with the client's codecs (:mod:`.metadata_codec`) and
forwards everything else untouched.
"""

from __future__ import annotations

from tests.helpers import KafkaFrameProxy
from tests.integration.metadata_codec import rewrite_metadata


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
            return self._trim(version, frame)
        return frame

    def _trim(self, version: int, frame: bytes) -> bytes:
        visible = self.visible or 0

        def keep(topic: str, p: dict[str, object]) -> dict[str, object] | None:
            return p if topic != self.topic or p["partition"] < visible else None  # type: ignore[operator]

        return rewrite_metadata(version, frame, partition=keep)
