"""The "consumer" embedded protocol: JoinGroup member metadata and SyncGroup assignments.

These payloads are opaque to the broker; every member of a group must agree on their layout,
so the encoding here is byte-compatible with the Java client's ``ConsumerProtocol`` (and thus
librdkafka, sarama and aiokafka). Layouts use Kafka's classic (non-flexible) encoding: int32 array
lengths, int16 string lengths, int32 bytes lengths where -1 means null.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import field

from .._dataclass import dataclass

SUBSCRIPTION_MAX_VERSION = 3
"""Highest ConsumerProtocolSubscription version this module knows the fields of."""

ASSIGNMENT_MAX_VERSION = 3
"""Highest ConsumerProtocolAssignment version this module knows (v0..v3 share one layout)."""

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT16_MAX = 0x7FFF


class WireReader:
    """Bounds-checked cursor over classic-encoded bytes; any malformed input raises ValueError."""

    __slots__ = ("_data", "_pos", "_what")

    def __init__(self, data: bytes, what: str) -> None:
        """Read ``data``; ``what`` names the structure in error messages."""
        self._data = data
        self._pos = 0
        self._what = what

    @property
    def remaining(self) -> int:
        """Number of bytes not consumed yet."""
        return len(self._data) - self._pos

    def error(self, message: str) -> ValueError:
        """A ValueError naming the structure and the offset where decoding failed."""
        return ValueError(f"malformed {self._what} at offset {self._pos}: {message}")

    def _take(self, size: int, name: str) -> bytes:
        if size > self.remaining:
            raise self.error(f"{name} needs {size} bytes, only {self.remaining} left")
        start = self._pos
        self._pos += size
        return self._data[start : self._pos]

    def int16(self, name: str) -> int:
        """Read a big-endian int16."""
        value: int = _INT16.unpack(self._take(2, name))[0]
        return value

    def int32(self, name: str) -> int:
        """Read a big-endian int32."""
        value: int = _INT32.unpack(self._take(4, name))[0]
        return value

    def nullable_string(self, name: str) -> str | None:
        """Read an int16-length-prefixed UTF-8 string; length -1 is null."""
        length = self.int16(f"{name} length")
        if length < 0:
            if length != -1:
                raise self.error(f"{name} has invalid length {length}")
            return None
        raw = self._take(length, name)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self.error(f"{name} is not valid UTF-8: {exc}") from None

    def string(self, name: str) -> str:
        """Read a non-nullable string."""
        value = self.nullable_string(name)
        if value is None:
            raise self.error(f"{name} is null but the field is not nullable")
        return value

    def nullable_bytes(self, name: str) -> bytes | None:
        """Read int32-length-prefixed bytes; length -1 is null."""
        length = self.int32(f"{name} length")
        if length < 0:
            if length != -1:
                raise self.error(f"{name} has invalid length {length}")
            return None
        return self._take(length, name)

    def array_length(self, name: str) -> int:
        """Read a non-nullable array's int32 element count."""
        length = self.int32(f"{name} length")
        if length < 0:
            raise self.error(f"{name} has invalid array length {length}")
        return length

    def int32_array(self, name: str) -> list[int]:
        """Read a non-nullable array of int32."""
        count = self.array_length(name)
        raw = self._take(4 * count, name)
        return list(struct.unpack(f">{count}i", raw))

    def topic_partitions(self, name: str) -> dict[str, list[int]]:
        """Read array(topic string, array int32); repeated topics are merged."""
        result: dict[str, list[int]] = {}
        for _ in range(self.array_length(name)):
            topic = self.string(f"{name} topic")
            result.setdefault(topic, []).extend(self.int32_array(f"{name} partitions"))
        return result


class WireWriter:
    """Accumulates classic-encoded fields; values that do not fit raise ValueError."""

    __slots__ = ("_parts",)

    def __init__(self) -> None:
        """Start an empty buffer."""
        self._parts: list[bytes] = []

    def getvalue(self) -> bytes:
        """The bytes written so far."""
        return b"".join(self._parts)

    def _pack(self, codec: struct.Struct, value: int) -> None:
        try:
            self._parts.append(codec.pack(value))
        except struct.error as exc:
            raise ValueError(f"{value!r} does not fit the wire field: {exc}") from None

    def int16(self, value: int) -> None:
        """Write a big-endian int16."""
        self._pack(_INT16, value)

    def int32(self, value: int) -> None:
        """Write a big-endian int32."""
        self._pack(_INT32, value)

    def nullable_string(self, value: str | None) -> None:
        """Write an int16-length-prefixed UTF-8 string (None as length -1)."""
        if value is None:
            self.int16(-1)
            return
        raw = value.encode("utf-8")
        if len(raw) > _INT16_MAX:
            raise ValueError(f"string of {len(raw)} bytes is too long for the wire")
        self.int16(len(raw))
        self._parts.append(raw)

    def nullable_bytes(self, value: bytes | None) -> None:
        """Write int32-length-prefixed bytes (None as length -1)."""
        if value is None:
            self.int32(-1)
            return
        self.int32(len(value))
        self._parts.append(bytes(value))

    def int32_array(self, values: Sequence[int]) -> None:
        """Write an array of int32."""
        self.int32(len(values))
        for value in values:
            self.int32(value)

    def topic_partitions(self, topics: Mapping[str, Sequence[int]]) -> None:
        """Write array(topic string, array int32) in the mapping's order."""
        self.int32(len(topics))
        for topic, partitions in topics.items():
            self.nullable_string(topic)
            self.int32_array(partitions)


def _check_version(version: int, highest: int, what: str) -> None:
    if not 0 <= version <= highest:
        raise ValueError(f"cannot encode {what} version {version}; supported: 0..{highest}")


@dataclass(slots=True)
class MemberSubscription:
    """ConsumerProtocolSubscription (v0..v3): what a member sends in its JoinGroup metadata.

    ``owned_partitions`` is carried from v1, ``generation_id`` from v2 and ``rack_id`` from v3;
    encoding at a lower ``version`` drops them.
    """

    topics: list[str]
    user_data: bytes | None = None
    owned_partitions: dict[str, list[int]] = field(default_factory=dict)
    generation_id: int = -1
    rack_id: str | None = None
    version: int = 1

    def encode(self) -> bytes:
        """Serialize at ``self.version``."""
        _check_version(self.version, SUBSCRIPTION_MAX_VERSION, "ConsumerProtocolSubscription")
        out = WireWriter()
        out.int16(self.version)
        out.int32(len(self.topics))
        for topic in self.topics:
            out.nullable_string(topic)
        out.nullable_bytes(self.user_data)
        if self.version >= 1:
            out.topic_partitions(self.owned_partitions)
        if self.version >= 2:
            out.int32(self.generation_id)
        if self.version >= 3:
            out.nullable_string(self.rack_id)
        return out.getvalue()

    @classmethod
    def decode(cls, data: bytes) -> MemberSubscription:
        """Parse subscription bytes; raises ValueError if they are malformed.

        Versions above :data:`SUBSCRIPTION_MAX_VERSION` are read as that version (Kafka only
        ever appends fields), and the result carries the capped version, as the Java client does.
        """
        reader = WireReader(data, "ConsumerProtocolSubscription")
        version = reader.int16("version")
        if version < 0:
            raise reader.error(f"negative version {version}")
        topics = [reader.string("topics") for _ in range(reader.array_length("topics"))]
        user_data = reader.nullable_bytes("user_data")
        subscription = cls(topics, user_data, version=min(version, SUBSCRIPTION_MAX_VERSION))
        # Some third-party clients label v0 bodies as v1+ (sarama tolerates this too), so a body
        # that ends exactly at a versioned field's boundary means "field absent", not an error.
        if version >= 1 and reader.remaining:
            subscription.owned_partitions = reader.topic_partitions("owned_partitions")
        if version >= 2 and reader.remaining:
            subscription.generation_id = reader.int32("generation_id")
        if version >= 3 and reader.remaining:
            subscription.rack_id = reader.nullable_string("rack_id")
        return subscription


@dataclass(slots=True)
class MemberAssignment:
    """ConsumerProtocolAssignment (v0..v3 share one layout): a member's share of the plan."""

    topics: dict[str, list[int]]
    user_data: bytes | None = None
    version: int = 1

    def encode(self) -> bytes:
        """Serialize at ``self.version``."""
        _check_version(self.version, ASSIGNMENT_MAX_VERSION, "ConsumerProtocolAssignment")
        out = WireWriter()
        out.int16(self.version)
        out.topic_partitions(self.topics)
        out.nullable_bytes(self.user_data)
        return out.getvalue()

    @classmethod
    def decode(cls, data: bytes) -> MemberAssignment:
        """Parse assignment bytes; raises ValueError if they are malformed.

        Empty bytes are an empty assignment: leaders may send nothing to a member that gets no
        partitions.
        """
        if not data:
            return cls({})
        reader = WireReader(data, "ConsumerProtocolAssignment")
        version = reader.int16("version")
        if version < 0:
            raise reader.error(f"negative version {version}")
        topics = reader.topic_partitions("assigned_partitions")
        user_data = reader.nullable_bytes("user_data")
        return cls(topics, user_data, min(version, ASSIGNMENT_MAX_VERSION))
