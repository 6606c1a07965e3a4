"""The delivery report handed to users: :class:`RecordMetadata`."""

from __future__ import annotations

from datetime import datetime, timedelta

from ..message import _epoch

__all__ = ["RecordMetadata"]


class RecordMetadata:
    """Where an acknowledged record was written (Java's ``RecordMetadata``).

    Built once per acknowledged record, so a plain ``__slots__`` class like
    :class:`~consumergroup.ConsumerMessage`. ``offset`` is -1 where the broker does not
    say (``acks=0``); ``timestamp_ms`` is the record's timestamp as the log keeps it:
    the one sent, or the broker's append time on a topic with
    ``message.timestamp.type=LogAppendTime``.
    """

    __slots__ = ("offset", "partition", "timestamp_ms", "topic")

    topic: str
    partition: int
    offset: int
    timestamp_ms: int

    def __init__(self, topic: str, partition: int, offset: int, timestamp_ms: int) -> None:
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.timestamp_ms = timestamp_ms

    @property
    def timestamp(self) -> datetime:
        """The record's timestamp as a timezone-aware UTC datetime."""
        return _epoch()[0] + timedelta(milliseconds=max(self.timestamp_ms, 0))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RecordMetadata):
            return NotImplemented
        return (self.topic, self.partition, self.offset, self.timestamp_ms) == (
            other.topic,
            other.partition,
            other.offset,
            other.timestamp_ms,
        )

    def __hash__(self) -> int:
        return hash((self.topic, self.partition, self.offset))

    def __repr__(self) -> str:
        return (
            f"RecordMetadata(topic={self.topic!r}, partition={self.partition}, "
            f"offset={self.offset}, timestamp_ms={self.timestamp_ms})"
        )
