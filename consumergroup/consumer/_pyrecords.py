"""Bounds-checked pure-Python parsers for what ``_crecords.c`` does not cover.

:func:`decode_v2` is the C decoder's twin, record for record and error for error (a
``ValueError`` for corrupt or truncated input, never a read past the buffer): it is
the v2 path without the C extension, and reads control records. :func:`decode_legacy`
parses one message of the v0/v1 formats, a compressed wrapper included.

Both follow Kafka's Java client on lengths: a key, value or header value of any
negative length is null; a record's offset delta must lie within the batch's
``lastOffsetDelta``.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable

from consumergroup.message import NO_TIMESTAMP_TYPE, ConsumerMessage

__all__ = ["Inflate", "decode_legacy", "decode_v2", "legacy_crc_ok", "varint"]

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_UINT64_MASK = 2**64 - 1
# Smallest record (length, attributes, timestamp delta, offset delta, key length, value
# length, header count: a byte each): bounds the messages one call can return, as in C.
_MIN_RECORD_SIZE = 7


def varint(data: memoryview, pos: int, end: int) -> tuple[int, int]:
    """The zigzag varint (at most 10 bytes, 64 bits) at ``pos`` before ``end``, and the
    position after it; ValueError when it runs past ``end`` or is longer."""
    raw = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise ValueError("truncated or overlong varint")
        byte = data[pos]
        pos += 1
        raw |= (byte & 0x7F) << shift
        if byte < 0x80:
            raw &= _UINT64_MASK  # a 10th byte's bits past 64 are dropped, as in C
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7


def _span(data: memoryview, pos: int, end: int, what: str) -> tuple[int, int]:
    """A varint length and the bytes after it: (length, position after the length);
    a negative length is returned as is (null); ValueError when the bytes overrun."""
    try:
        n, pos = varint(data, pos, end)
    except ValueError:
        raise ValueError(f"truncated {what} length") from None
    if n > end - pos:
        raise ValueError(f"{what} length {n} overruns the record by {n - (end - pos)} bytes")
    return n, pos


def decode_v2(
    body: memoryview | bytes,
    pos: int,
    index: int,
    count: int,
    base_offset: int,
    last_delta: int,
    timestamp: int,
    log_append_time: bool,
    topic: str,
    partition: int,
    start: int,
    limit: int,
    max_record: int = 0,
) -> tuple[list[ConsumerMessage], int, int]:
    """The records of an uncompressed v2 batch body from byte ``pos``, record ``index``
    (of ``count``) on, skipping offsets below ``start``, at most ``limit`` messages (0:
    no limit): ``(messages, pos, index)`` to resume from. With ``max_record`` > 0,
    ``body`` is a window on a longer body: decoding stops at a record that runs past its
    end or is longer than ``max_record``. See ``_crecords.c``."""
    data = memoryview(body)
    end = len(data)
    if pos < 0 or pos > end or index < 0 or limit < 0:
        raise ValueError("invalid decode position")
    want = max(count - index, 0)
    want = min(want, (end - pos) // _MIN_RECORD_SIZE + 1)
    if limit:
        want = min(want, limit)
    ts_type = 1 if log_append_time else 0
    messages: list[ConsumerMessage] = []
    while index < count and len(messages) < want:
        if max_record > 0 and _cut_short(data, pos, end, max_record):
            break
        length, p = _varint_or(data, pos, end, index)
        if length < 0 or length > end - p:
            raise ValueError(f"record {index} at byte {pos}: invalid or truncated length")
        rec_end = p + length
        if p >= rec_end:
            raise ValueError(f"record {index} at byte {pos}: empty record")
        p += 1  # attributes: unused
        try:
            ts_delta, p = varint(data, p, rec_end)
            offset_delta, p = varint(data, p, rec_end)
        except ValueError:
            raise ValueError(f"record {index} at byte {pos}: truncated record header") from None
        if not 0 <= offset_delta <= last_delta:
            raise ValueError(
                f"record {index}: offset delta {offset_delta} outside the batch's 0..{last_delta}"
            )
        offset = base_offset + offset_delta
        ts = timestamp if log_append_time else timestamp + ts_delta
        if not (_INT64_MIN <= offset <= _INT64_MAX and _INT64_MIN <= ts <= _INT64_MAX):
            raise ValueError(f"record {index}: offset or timestamp out of range")
        index += 1
        pos = rec_end
        if offset < start:  # below the fetch offset: already consumed
            continue
        n, p = _span(data, p, rec_end, "key")
        key = None if n < 0 else bytes(data[p : p + n])
        p += max(n, 0)
        n, p = _span(data, p, rec_end, "value")
        value = None if n < 0 else bytes(data[p : p + n])
        p += max(n, 0)
        headers, p = _headers(data, p, rec_end)
        if p != rec_end:
            raise ValueError(f"record {index - 1}: {rec_end - p} bytes left over after its headers")
        messages.append(ConsumerMessage(topic, partition, offset, key, value, headers, ts, ts_type))
    if index >= count and pos != end:
        raise ValueError(f"{end - pos} unconsumed bytes after all {count} records")
    return messages, pos, index


def _cut_short(data: memoryview, pos: int, end: int, max_record: int) -> bool:
    """Whether the record at ``pos`` ends a window's decoding without being corrupt: its
    length varint has not ended within the (fewer than 10) bytes left, or it is longer
    than what is left or than ``max_record``."""
    try:
        length, p = varint(data, pos, end)
    except ValueError:
        return end - pos < 10
    return length >= 0 and (length > end - p or length > max_record)


def _varint_or(data: memoryview, pos: int, end: int, index: int) -> tuple[int, int]:
    """A record's length varint, or the C decoder's error for it."""
    try:
        return varint(data, pos, end)
    except ValueError:
        raise ValueError(f"record {index} at byte {pos}: invalid or truncated length") from None


def _headers(
    data: memoryview, p: int, end: int
) -> tuple[tuple[tuple[str, bytes | None], ...], int]:
    """A record's headers (the empty tuple, or ``(key, value)`` pairs) and the position
    after them."""
    try:
        count, p = varint(data, p, end)
    except ValueError:
        raise ValueError("truncated header count") from None
    # Each header takes at least 2 bytes (two lengths).
    if count < 0 or count > (end - p) // 2:
        raise ValueError(f"invalid header count {count}")
    if not count:
        return (), p
    headers: list[tuple[str, bytes | None]] = []
    for _ in range(count):
        n, p = _span(data, p, end, "header key")
        if n < 0:
            raise ValueError(f"invalid header key length {n}")
        key = str(data[p : p + n], "utf-8")  # UnicodeDecodeError is a ValueError
        p += n
        n, p = _span(data, p, end, "header value")
        headers.append((key, None if n < 0 else bytes(data[p : p + n])))
        p += max(n, 0)
    return tuple(headers), p


# ---- message formats v0 and v1 (one message per "batch"; a compressed one wraps a set)

#: offset, length, crc, magic, attributes (v1: then an int64 timestamp).
_LEGACY_HEADER = struct.Struct(">qiIbb")
_TIMESTAMP = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_LOG_OVERHEAD = 12
_CRC_START = 16  # the CRC covers the bytes from the magic byte on
_CODEC_MASK = 0x07
_LOG_APPEND_TIME = 0x08
#: ``(codec, compressed) -> decompressed``: ValueError for a corrupt payload, or one
#: that inflates past the caller's bound.
Inflate = Callable[[int, memoryview], bytes]
# v0/v1 know gzip, snappy and lz4 (v1 only: v0's LZ4 framing differs).
_LEGACY_CODECS = ((1, 2), (1, 2, 3))  # per magic


def legacy_crc_ok(message: memoryview) -> bool:
    """Whether the CRC32 of one v0/v1 message (its bytes from the magic on) matches."""
    crc: int = _LEGACY_HEADER.unpack_from(message)[2]
    return zlib.crc32(message[_CRC_START:]) == crc


class _Message:
    """One parsed v0/v1 message (offset as written; key and value as views)."""

    __slots__ = ("attributes", "key", "offset", "timestamp", "value")

    def __init__(self, data: memoryview, magic: int) -> None:
        """Parse the message that is all of ``data`` (ValueError if it is not one)."""
        end = len(data)
        size = _LEGACY_HEADER.size + (8 if magic else 0) + 8  # + key and value lengths
        if end < size:
            raise ValueError(f"message of {end} bytes is shorter than its {size}-byte header")
        offset, length, _, found, attributes = _LEGACY_HEADER.unpack_from(data)
        if length != end - _LOG_OVERHEAD:
            raise ValueError(f"message length {length} does not match its {end} bytes")
        if found != magic:
            raise ValueError(f"message magic {found} inside a magic {magic} message set")
        pos = _LEGACY_HEADER.size
        self.timestamp = -1
        if magic:
            self.timestamp = _TIMESTAMP.unpack_from(data, pos)[0]
            pos += 8
        self.offset = offset
        self.attributes = attributes
        self.key, pos = self._bytes(data, pos, "key")
        self.value, _ = self._bytes(data, pos, "value")

    @staticmethod
    def _bytes(data: memoryview, pos: int, what: str) -> tuple[memoryview | None, int]:
        if len(data) - pos < 4:
            raise ValueError(f"truncated {what} length")
        n = _INT32.unpack_from(data, pos)[0]
        pos += 4
        if n < 0:  # null (Java reads any negative length as null)
            return None, pos
        if n > len(data) - pos:
            raise ValueError(f"{what} length {n} overruns the message by {n - (len(data) - pos)}")
        return data[pos : pos + n], pos + n


def _opt(view: memoryview | None) -> bytes | None:
    return None if view is None else view.tobytes()


def decode_legacy(
    topic: str, partition: int, message: memoryview, magic: int, start: int, inflate: Inflate
) -> list[ConsumerMessage]:
    """The messages (offsets from ``start`` on) of one v0/v1 message: itself, or the
    messages a compressed wrapper holds (one level, decompressed with ``inflate``).
    ValueError for a malformed one."""
    outer = _Message(message, magic)
    codec = outer.attributes & _CODEC_MASK
    ts_type = (1 if outer.attributes & _LOG_APPEND_TIME else 0) if magic else NO_TIMESTAMP_TYPE
    if not codec:
        if outer.offset < start:
            return []
        return [
            ConsumerMessage(
                topic,
                partition,
                outer.offset,
                _opt(outer.key),
                _opt(outer.value),
                (),
                outer.timestamp,
                ts_type,
            )
        ]
    if codec not in _LEGACY_CODECS[magic]:
        raise ValueError(f"unknown compression codec {codec} for message format v{magic}")
    if outer.value is None:
        raise ValueError("a compressed message with a null value")
    inner = memoryview(inflate(codec, outer.value))
    parsed: list[_Message] = []
    pos, end = 0, len(inner)
    while pos < end:
        if end - pos < _LOG_OVERHEAD:
            raise ValueError("truncated message inside a compressed message")
        message_end = pos + _LOG_OVERHEAD + _INT32.unpack_from(inner, pos + 8)[0]
        if not pos + _LOG_OVERHEAD <= message_end <= end:
            raise ValueError("message length inside a compressed message is out of bounds")
        msg = _Message(inner[pos:message_end], magic)
        if msg.attributes & _CODEC_MASK:
            raise ValueError("a compressed message inside a compressed message")
        parsed.append(msg)
        pos = message_end
    # v1 wrappers hold offsets relative to the first inner message, the wrapper's offset
    # being the last one's absolute offset; v0 wrappers hold absolute offsets.
    base = outer.offset - parsed[-1].offset if magic and parsed else 0
    log_append = ts_type == 1
    return [
        ConsumerMessage(
            topic,
            partition,
            base + msg.offset,
            _opt(msg.key),
            _opt(msg.value),
            (),
            outer.timestamp if log_append else msg.timestamp,
            ts_type,
        )
        for msg in parsed
        if base + msg.offset >= start
    ]
