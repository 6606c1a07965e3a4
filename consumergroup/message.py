"""The record type handed to users: :class:`ConsumerMessage`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from datetime import datetime, timedelta

__all__ = [
    "CREATE_TIME",
    "LOG_APPEND_TIME",
    "NO_TIMESTAMP_TYPE",
    "ConsumerMessage",
    "RecordHeader",
]

RecordHeader = tuple[str, bytes | None]
"""One record header: ``(key, value)``. Kafka allows a null header value, hence ``None``."""

CREATE_TIME = 0
"""``timestamp_type``: the producer set the timestamp."""
LOG_APPEND_TIME = 1
"""``timestamp_type``: the broker set the timestamp when it appended the record."""
NO_TIMESTAMP_TYPE = -1
"""``timestamp_type``: the record has no timestamp (message format v0)."""


def _epoch() -> tuple[datetime, timedelta]:
    """The Unix epoch as an aware UTC datetime, and one millisecond. ``datetime`` (~4 M
    instructions) is imported by the first :attr:`ConsumerMessage.timestamp`, not by
    ``import consumergroup``."""
    global _EPOCH
    if _EPOCH is None:
        from datetime import UTC, datetime, timedelta

        _EPOCH = (datetime(1970, 1, 1, tzinfo=UTC), timedelta(milliseconds=1))
    return _EPOCH


# Set once by _epoch(); threads racing there compute the same value.
_EPOCH: tuple[datetime, timedelta] | None = None


class ConsumerMessage:
    """One consumed record.

    Built once per record on the decode hot path, so it is a plain ``__slots__`` class
    with a positional ``__init__``. Measured on CPython 3.11, per object built in a list
    comprehension (loop included, 8 fields): ``__slots__`` + ``__init__`` 201 ns,
    ``dataclass(slots=True)`` 204 ns, ``tuple.__new__`` on a namedtuple subclass 194 ns,
    ``NamedTuple(...)`` 279 ns, ``_make`` 229 ns, ``__dict__`` class 253 ns, bare tuple
    110 ns; inside the decoder, 319 vs 304 ns/record for ``__slots__`` vs the namedtuple
    trick. That 5% is not worth attribute reads ~2.5x slower (12 vs 5 ns) and tuple
    behaviour (indexing, unpacking) leaking into the API.

    Decoded v2 messages are allocated by the C decoder (``consumer/_crecords.c``), which
    stores the slots directly and never calls ``__init__``: keep ``__init__`` plain
    assignments and ``__slots__`` these 8 names (the decoder checks the layout at import
    and, if it differs, warns and leaves decoding to the Python path).

    ``timestamp_ms`` is milliseconds since the Unix epoch, ``-1`` when unknown;
    ``timestamp_type`` is :data:`CREATE_TIME`, :data:`LOG_APPEND_TIME` or
    :data:`NO_TIMESTAMP_TYPE`. ``headers`` is a tuple of ``(key, value)`` pairs
    (the shared empty tuple when there are none).
    """

    __slots__ = (
        "headers",
        "key",
        "offset",
        "partition",
        "timestamp_ms",
        "timestamp_type",
        "topic",
        "value",
    )

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Sequence[RecordHeader]
    timestamp_ms: int
    timestamp_type: int

    def __init__(
        self,
        topic: str,
        partition: int,
        offset: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[RecordHeader],
        timestamp_ms: int,
        timestamp_type: int,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.key = key
        self.value = value
        self.headers = headers
        self.timestamp_ms = timestamp_ms
        self.timestamp_type = timestamp_type

    @property
    def timestamp(self) -> datetime:
        """The record timestamp as a timezone-aware UTC datetime.

        Computed on access (never at decode time) with exact integer arithmetic.
        A record without a timestamp (``timestamp_ms < 0``) yields the Unix epoch.
        """
        epoch, millisecond = _EPOCH or _epoch()
        ms = self.timestamp_ms
        if ms < 0:
            return epoch
        return epoch + millisecond * ms

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ConsumerMessage):
            return NotImplemented
        return (
            self.topic == other.topic
            and self.partition == other.partition
            and self.offset == other.offset
            and self.key == other.key
            and self.value == other.value
            # One source yields a list of headers, another a tuple: compare contents.
            and list(self.headers) == list(other.headers)
            and self.timestamp_ms == other.timestamp_ms
            and self.timestamp_type == other.timestamp_type
        )

    def __repr__(self) -> str:
        return (
            f"ConsumerMessage(topic={self.topic!r}, partition={self.partition}, "
            f"offset={self.offset}, key={self.key!r}, value={self.value!r}, "
            f"headers={self.headers!r}, timestamp_ms={self.timestamp_ms}, "
            f"timestamp_type={self.timestamp_type})"
        )
