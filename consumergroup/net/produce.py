"""Our own Produce codec: the request encoder and the response decoder, v3-v12.

The producer's hot request, written like :mod:`.fetch`: the request's bytes are joined
once from precompiled ``struct``\\ s around the record batches (which the producer has
already encoded, and which are never copied into an intermediate structure), and the
response is read field by field over a ``memoryview``.

Versions: v3 is the floor of Kafka 4.0 (and adds ``transactional_id``); v9 is the first
flexible one (request header v2, compact strings and arrays, tagged fields); v12 is
KIP-890's: the broker adds a transaction's partitions itself (the client sends no
AddPartitionsToTxn). The fields of every version up to v12 are the same; v13 names
topics by id and is not spoken here.

The response gives per partition ``(partition, error_code, base_offset,
log_append_time_ms, log_start_offset, error_message)`` (-1 and None where the version
lacks a field); v8+ carry the per-record errors, whose messages are folded into
``error_message`` (the producer fails the whole batch either way).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from ..errors import CorruptMessageError, UnsupportedVersionError
from .fetch import _count
from .fetch import _string as _fetch_string
from .fetch import _uvarint_bytes as _uvarint

__all__ = [
    "PRODUCE_VERSIONS",
    "PartitionResponse",
    "ProduceFrame",
    "ProduceRequest",
    "decode_produce_response",
]

#: The Produce versions this client encodes and decodes.
PRODUCE_VERSIONS = (3, 12)
_MIN_VERSION, _MAX_VERSION = PRODUCE_VERSIONS
_FLEXIBLE = 9

_HEADER = struct.Struct(">hhih")  # api_key, api_version, correlation_id, client_id length
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_ACKS_TIMEOUT = struct.Struct(">hi")
_NO_TAGS = b"\x00"

#: ``(partition, error_code, base_offset, log_append_time_ms, log_start_offset, message)``
PartitionResponse = tuple[int, int, int, int, int, str | None]
#: ``[(topic, [(partition, record batch bytes)])]``
Topics = Sequence[tuple[str, Sequence[tuple[int, bytes | bytearray | memoryview]]]]


def _string(text: str | None, flexible: bool) -> bytes:
    if text is None:  # a null string: length -1 (compact: 0)
        return b"\x00" if flexible else b"\xff\xff"
    return _fetch_string(text, flexible)


class ProduceFrame:
    """A Produce request encoded at one version (what the connection writes)."""

    API_KEY = 0
    __slots__ = ("API_VERSION", "parts")

    def __init__(self, version: int, parts: list[bytes | bytearray | memoryview]) -> None:
        self.API_VERSION = version
        self.parts = parts

    def frame(self, correlation_id: int, client_id: str, *, sized: bool = False) -> bytes:
        """Request header + body (``sized``: after the int32 size prefix, in the same
        join: the record batches, most of the request, are copied once, not twice)."""
        client = client_id.encode()
        header = _HEADER.pack(self.API_KEY, self.API_VERSION, correlation_id, len(client))
        head = (header, client, _NO_TAGS) if self.API_VERSION >= _FLEXIBLE else (header, client)
        if not sized:
            return b"".join((*head, *self.parts))
        size = sum(map(len, head)) + sum(map(len, self.parts))
        return b"".join((_I32.pack(size), *head, *self.parts))

    def __repr__(self) -> str:
        return f"<ProduceFrame v{self.API_VERSION}>"


class ProduceRequest:
    """A Produce request, encoded by :meth:`build` at the negotiated version.

    ``acks``: 0 (no answer comes: send it with the connection's ``post``), 1 or -1
    (all in-sync replicas); ``timeout_ms``: how long the leader waits for the replicas.
    """

    API_KEY = 0
    __slots__ = ("acks", "max_version", "timeout_ms", "topics", "transactional_id")

    def __init__(
        self,
        transactional_id: str | None,
        acks: int,
        timeout_ms: int,
        topics: Topics,
        *,
        max_version: int = _MAX_VERSION,
    ) -> None:
        self.transactional_id = transactional_id
        self.acks = acks
        self.timeout_ms = timeout_ms
        self.topics = topics
        # Below v12 unless a transaction runs KIP-890's protocol (the broker would then
        # add the partitions to the transaction on its own).
        self.max_version = max_version

    def build(self, version: int) -> ProduceFrame:
        """The request encoded at ``version``."""
        version = min(version, self.max_version)
        if not _MIN_VERSION <= version <= _MAX_VERSION:
            raise UnsupportedVersionError(
                f"Produce v{version} is not spoken here {PRODUCE_VERSIONS}: the broker is "
                "older than Kafka 0.11; upgrade it"
            )
        flexible = version >= _FLEXIBLE
        out: list[bytes | bytearray | memoryview] = [
            _string(self.transactional_id, flexible),
            _ACKS_TIMEOUT.pack(self.acks, self.timeout_ms),
            _count(len(self.topics), flexible),
        ]
        for topic, parts in self.topics:
            out.append(_string(topic, flexible))
            out.append(_count(len(parts), flexible))
            for partition, records in parts:
                out.append(_I32.pack(partition))
                out.append(_uvarint(len(records) + 1) if flexible else _I32.pack(len(records)))
                out.append(records)
                if flexible:
                    out.append(_NO_TAGS)
            if flexible:
                out.append(_NO_TAGS)
        if flexible:
            out.append(_NO_TAGS)
        return ProduceFrame(version, out)


# ---------------------------------------------------------------- response


class _Reader:
    """Reads a response frame's fields in order (raises on a short frame)."""

    __slots__ = ("pos", "view")

    def __init__(self, payload: bytes | bytearray) -> None:
        self.view = memoryview(payload)
        self.pos = 0

    def take(self, fmt: struct.Struct) -> tuple[int, ...]:
        values = fmt.unpack_from(self.view, self.pos)
        self.pos += fmt.size
        return values

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            byte = self.view[self.pos]
            self.pos += 1
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value
            shift += 7
            if shift > 63:
                raise ValueError("varint too long")

    def count(self, flexible: bool) -> int:
        return self.uvarint() - 1 if flexible else self.take(_I32)[0]

    def string(self, flexible: bool) -> str | None:
        n = self.uvarint() - 1 if flexible else self.take(_I16)[0]
        if n < 0:
            return None
        end = self.pos + n
        if end > len(self.view):
            raise ValueError("string runs past the end of the frame")
        text = str(self.view[self.pos : end], "utf-8")
        self.pos = end
        return text

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            size = self.uvarint()  # read before pos: ``pos += uvarint()`` reads pos first
            self.pos += size
        if self.pos > len(self.view):
            raise ValueError("tagged fields run past the end of the frame")


_PART_V3 = struct.Struct(">ihqq")  # partition, error_code, base_offset, log_append_time
_Q = struct.Struct(">q")


def decode_produce_response(
    version: int, payload: bytes | bytearray
) -> tuple[dict[str, list[PartitionResponse]], int]:
    """Decode a Produce response frame (header included): ``({topic: [partition
    answers]}, throttle_time_ms)``; a malformed frame raises CorruptMessageError."""
    try:
        return _decode(version, _Reader(payload))
    except (struct.error, UnicodeDecodeError, IndexError, ValueError) as exc:
        raise CorruptMessageError(f"malformed Produce v{version} response: {exc}") from exc


def _decode(version: int, r: _Reader) -> tuple[dict[str, list[PartitionResponse]], int]:
    flexible = version >= _FLEXIBLE
    r.pos = 4  # correlation id
    if flexible:
        r.skip_tags()  # response header v1
    topics: dict[str, list[PartitionResponse]] = {}
    for _ in range(r.count(flexible)):
        name = r.string(flexible) or ""
        answers = topics.setdefault(name, [])
        for _ in range(r.count(flexible)):
            partition, code, base_offset, append_time = r.take(_PART_V3)
            log_start = r.take(_Q)[0] if version >= 5 else -1
            message: str | None = None
            if version >= 8:
                errors = []
                for _ in range(r.count(flexible)):
                    index = r.take(_I32)[0]
                    text = r.string(flexible)
                    errors.append(f"record {index}: {text}")
                    if flexible:
                        r.skip_tags()
                message = r.string(flexible)
                if errors:
                    message = "; ".join(filter(None, (message, *errors)))
            if flexible:
                r.skip_tags()
            answers.append((partition, code, base_offset, append_time, log_start, message))
        if flexible:
            r.skip_tags()
    throttle = r.take(_I32)[0]
    return topics, throttle
