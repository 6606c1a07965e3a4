"""Our own Fetch codec: the request encoder and the response decoder, v1-v12.

Requests: :class:`FetchRequest` is built by the connection at the negotiated
version (:func:`~.protocol.prepare` picks the highest version both sides
speak) into a :class:`FetchFrame`, whose bytes are written with precompiled
``struct``\\ s, one per partition entry, and joined once. Below v12 the bytes
equal aiokafka's ``FetchRequest`` encoding (tested), plus the KIP-227 session
fields from v7. v12 is the first flexible version: request header v2, compact
strings and arrays (lengths as unsigned varints + 1), tagged fields, and
``last_fetched_epoch`` per partition (KIP-320: the broker then answers a
partition whose log diverged from ours with ``diverging_epoch``).

Responses: aiokafka's generic ``Struct`` decoder reads a response field by
field through ``BytesIO`` in Python, and copies every partition's record set;
with 1,000 partitions per response that parse was 18 % of the consumer's CPU.
This decoder reads each partition's fixed fields with one precompiled
``struct`` call over a ``memoryview`` of the frame and hands the record sets
out as slices of that view (no copy).

The result has the shape of aiokafka's (``API_VERSION``, ``throttle_time_ms``,
``error_code``, ``session_id``, ``topics`` = ``[(topic, [partition tuple])]``
with the version's fields in schema order), so callers index partitions the same
way; only the record sets are ``memoryview``\\ s instead of ``bytes``. v12 (which
aiokafka does not decode) adds the partition's tagged fields before the record
set: ``diverging_epoch`` ``(epoch, end_offset)``, ``current_leader``
``(leader_id, leader_epoch)`` and ``snapshot_id`` ``(end_offset, epoch)``, each
None when absent. A malformed frame raises
:class:`~consumergroup.errors.CorruptMessageError`; whatever aiokafka's decoder
accepts, this one decodes to the same values (fuzz-tested against it).
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Sequence
from typing import Any

from ..errors import CorruptMessageError, UnsupportedVersionError

__all__ = [
    "FETCH_VERSIONS",
    "FetchFrame",
    "FetchRequest",
    "FetchResponse",
    "decode_fetch_response",
]

#: The Fetch versions this client encodes and decodes (v13+ name topics by id).
FETCH_VERSIONS = (1, 12)
_MIN_VERSION, _MAX_VERSION = FETCH_VERSIONS
_FLEXIBLE = 12  # the first flexible Fetch version (header v2, compact fields, tags)

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")

# ---------------------------------------------------------------- request

#: api_key, api_version, correlation_id, client_id length (request header v1 / v2).
_HEADER = struct.Struct(">hhih")
# The fields before the topics array: replica_id (-1: a consumer), max_wait_ms,
# min_bytes, [max_bytes (v3+), [isolation_level (v4+), [session_id, epoch (v7+)]]].
_HEAD_V1 = struct.Struct(">iii")
_HEAD_V3 = struct.Struct(">iiii")
_HEAD_V4 = struct.Struct(">iiiib")
_HEAD_V7 = struct.Struct(">iiiibii")
# One partition entry. v1-v4: partition, fetch_offset, max_bytes. v5: log_start_offset
# (-1: a consumer) before max_bytes. v9: current_leader_epoch (-1: not checked) after
# partition. v12: last_fetched_epoch after fetch_offset, and an empty tagged-field set.
_PART_V1 = struct.Struct(">iqi")
_PART_V5 = struct.Struct(">iqqi")
_PART_V9 = struct.Struct(">iiqqi")
_PART_V12 = struct.Struct(">iiqiqib")
_NO_TAGS = b"\x00"

#: ``[(topic, [(partition, fetch_offset, max_bytes[, last_fetched_epoch])])]``
Topics = Sequence[tuple[str, Sequence[tuple[int, ...]]]]


# The one-byte unsigned varints: nearly every count and length of a request.
_SHORT_UVARINTS = tuple(bytes((i,)) for i in range(0x80))


def _uvarint_bytes(value: int) -> bytes:
    """``value`` (>= 0) as an unsigned varint."""
    if value < 0x80:
        return _SHORT_UVARINTS[value]
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


@functools.lru_cache(maxsize=256)
def _string(text: str, flexible: bool) -> bytes:
    # Cached: a Fetch names the same few topics round after round, every few
    # milliseconds when caught up.
    data = text.encode()
    return (_uvarint_bytes(len(data) + 1) if flexible else _I16.pack(len(data))) + data


def _count(n: int, flexible: bool) -> bytes:
    if flexible:
        # Three per Fetch, every round: the table of short varints inline.
        return _SHORT_UVARINTS[n + 1] if n < 0x7F else _uvarint_bytes(n + 1)
    return _I32.pack(n)


class FetchFrame:
    """A Fetch request encoded at one version (what the connection writes)."""

    API_KEY = 1
    __slots__ = ("API_VERSION", "body")

    def __init__(self, version: int, body: bytes) -> None:
        self.API_VERSION = version
        self.body = body

    def frame(self, correlation_id: int, client_id: str, *, sized: bool = False) -> bytes:
        """Request header + body (``sized``: after the int32 size prefix, in one join)."""
        client = client_id.encode()
        header = _HEADER.pack(self.API_KEY, self.API_VERSION, correlation_id, len(client))
        tags = _NO_TAGS if self.API_VERSION >= _FLEXIBLE else b""  # header v2's tagged fields
        if not sized:
            return b"".join((header, client, tags, self.body))
        size = _I32.pack(len(header) + len(client) + len(tags) + len(self.body))
        return b"".join((size, header, client, tags, self.body))

    def __repr__(self) -> str:
        return f"<FetchFrame v{self.API_VERSION} {len(self.body)} bytes>"


class FetchRequest:
    """A Fetch request, encoded by :meth:`build` at the version the connection negotiated.

    ``topics``: ``[(topic, [(partition, fetch_offset, max_bytes)])]``; the entries
    may carry a fourth field (all of a topic's, or none), the leader epoch of the last
    batch fetched before ``fetch_offset`` (sent from v12, -1 = unknown).
    ``session_id``, ``epoch`` and ``forgotten`` are the KIP-227 session fields (sent
    from v7; the defaults, id 0 and epoch -1, mean "no session", as aiokafka sends).
    Below v7 the request is the full one ``topics`` holds (a session is only planned
    after a v7+ answer).
    """

    API_KEY = 1
    __slots__ = (
        "epoch",
        "forgotten",
        "isolation_level",
        "max_bytes",
        "max_wait_time",
        "min_bytes",
        "rack_id",
        "session_id",
        "topics",
    )

    def __init__(
        self,
        max_wait_time: int,
        min_bytes: int,
        max_bytes: int,
        isolation_level: int,
        topics: Topics,
        *,
        session_id: int = 0,
        epoch: int = -1,
        forgotten: Sequence[tuple[str, Sequence[int]]] = (),
        rack_id: str = "",
    ) -> None:
        self.max_wait_time = max_wait_time
        self.min_bytes = min_bytes
        self.max_bytes = max_bytes
        self.isolation_level = isolation_level
        self.topics = topics
        self.session_id = session_id
        self.epoch = epoch
        self.forgotten = forgotten
        self.rack_id = rack_id

    def build(self, version: int) -> FetchFrame:
        """The request encoded at ``version``."""
        if not _MIN_VERSION <= version <= _MAX_VERSION:
            raise ValueError(f"Fetch v{version} is not encoded here {FETCH_VERSIONS}")
        if version < 4 and self.isolation_level:
            raise UnsupportedVersionError(
                f"read_committed needs Fetch v4 or later; the broker offers at most v{version}: "
                "use consumer.isolation_level = 'read_uncommitted' or upgrade the broker"
            )
        flexible = version >= _FLEXIBLE
        args = (-1, self.max_wait_time, self.min_bytes)
        if version >= 7:
            head = _HEAD_V7.pack(
                *args, self.max_bytes, self.isolation_level, self.session_id, self.epoch
            )
        elif version >= 4:
            head = _HEAD_V4.pack(*args, self.max_bytes, self.isolation_level)
        elif version >= 3:
            head = _HEAD_V3.pack(*args, self.max_bytes)
        else:
            head = _HEAD_V1.pack(*args)
        out = [head, _count(len(self.topics), flexible)]
        for topic, parts in self.topics:
            out.append(_string(topic, flexible))
            out.append(_count(len(parts), flexible))
            if flexible:
                pack = _PART_V12.pack
                if parts and len(parts[0]) > 3:  # entries carry their last fetched epoch
                    out += [pack(p[0], -1, p[1], p[3], -1, p[2], 0) for p in parts]
                else:
                    out += [pack(p[0], -1, p[1], -1, -1, p[2], 0) for p in parts]
                out.append(_NO_TAGS)
            elif version >= 9:
                pack = _PART_V9.pack
                out += [pack(p[0], -1, p[1], -1, p[2]) for p in parts]
            elif version >= 5:
                pack = _PART_V5.pack
                out += [pack(p[0], p[1], -1, p[2]) for p in parts]
            else:
                pack = _PART_V1.pack
                out += [pack(p[0], p[1], p[2]) for p in parts]
        if version >= 7:
            out.append(_count(len(self.forgotten), flexible))
            for topic, partitions in self.forgotten:
                out.append(_string(topic, flexible))
                out.append(_count(len(partitions), flexible))
                out += [_I32.pack(p) for p in partitions]
                if flexible:
                    out.append(_NO_TAGS)
        if version >= 11:
            out.append(_string(self.rack_id, flexible))
        if flexible:
            out.append(_NO_TAGS)
        return FetchFrame(version, b"".join(out))


# ---------------------------------------------------------------- response

_V7_HEAD = struct.Struct(">ihi")  # throttle_time_ms, error_code, session_id
# A partition's fixed fields up to the next variable-length one, in one call each:
# partition, error_code, high watermark, [last stable offset, [log start offset,]]
# then the aborted-transactions count (v4+) or the record set length (v1-v3).
_P1 = struct.Struct(">ihqi")
_P4 = struct.Struct(">ihqqi")
_P5 = struct.Struct(">ihqqqi")
# v12: partition, error_code, high watermark, last stable offset, log start offset; and
# the common case in one call: then the aborted-transactions count, preferred replica and
# the first byte of the record set length (both varints short: no aborted transactions,
# a record set under 127 bytes, i.e. a partition with nothing new).
_P12 = struct.Struct(">ihqqq")
_P12_SHORT = struct.Struct(">ihqqqBiB")
_NO_RECORDS = memoryview(b"")
_REPLICA_LEN = struct.Struct(">ii")  # v11: preferred_read_replica, record set length
# The common case in one call (no aborted transactions: the count is 0 and the next
# field follows at once): v5-v10 then the record set length; v11 the preferred
# replica and the record set length. A valid entry is at least this long.
_P5_NONE = struct.Struct(">ihqqqii")
_P11_NONE = struct.Struct(">ihqqqiii")
_P5_SIZE, _P11_SIZE = _P5_NONE.size, _P11_NONE.size
_ABORTED = struct.Struct(">qq")  # producer_id, first_offset
# v12 partition tagged fields: 0 diverging_epoch (epoch, end_offset), 1 current_leader
# (leader_id, leader_epoch), 2 snapshot_id (end_offset, epoch); each ends in its own tags.
_TAGGED = {0: struct.Struct(">iq"), 1: struct.Struct(">ii"), 2: struct.Struct(">qi")}


class FetchResponse:
    """A decoded Fetch response (aiokafka's field names and partition tuple layout)."""

    __slots__ = ("API_VERSION", "error_code", "session_id", "throttle_time_ms", "topics")

    def __init__(
        self,
        version: int,
        throttle_time_ms: int,
        error_code: int,
        session_id: int,
        topics: list[tuple[str | None, list[tuple[Any, ...]] | None]] | None,
    ) -> None:
        self.API_VERSION = version
        self.throttle_time_ms = throttle_time_ms
        self.error_code = error_code
        self.session_id = session_id
        self.topics = topics

    def __repr__(self) -> str:
        return (
            f"<FetchResponse v{self.API_VERSION} error={self.error_code} "
            f"session={self.session_id} topics={len(self.topics or ())}>"
        )


def decode_fetch_response(version: int, payload: bytes | bytearray) -> FetchResponse:
    """Decode a Fetch response frame (response header included) of ``version``."""
    if not _MIN_VERSION <= version <= _MAX_VERSION:
        raise ValueError(f"Fetch v{version} is not decoded here ({_MIN_VERSION}-{_MAX_VERSION})")
    try:
        if version >= _FLEXIBLE:
            return _decode_flexible(version, memoryview(payload))
        return _decode(version, memoryview(payload))
    except (struct.error, UnicodeDecodeError, IndexError, _Underrun) as exc:
        # IndexError: a varint's byte read past the end of the frame.
        raise CorruptMessageError(f"malformed Fetch v{version} response: {exc}") from exc


class _Underrun(Exception):
    """A length field points past the end of the frame."""


def _decode(version: int, view: memoryview) -> FetchResponse:
    size = len(view)
    pos = 4  # correlation id (response header v0: Fetch v1-v11 are not flexible)
    if version >= 7:
        throttle, error, session = _V7_HEAD.unpack_from(view, pos)
        pos += _V7_HEAD.size
    else:
        throttle = _I32.unpack_from(view, pos)[0]
        error = session = 0
        pos += 4
    unpack_i32 = _I32.unpack_from
    unpack_v11, unpack_v5 = _P11_NONE.unpack_from, _P5_NONE.unpack_from
    v11, v5 = version >= 11, 5 <= version < 11  # v5 is the layout of v5-v10 only
    n_topics = unpack_i32(view, pos)[0]
    pos += 4
    topics: list[tuple[str | None, list[tuple[Any, ...]] | None]] | None = (
        None if n_topics == -1 else []
    )
    for _ in range(n_topics):  # a negative count is an empty array, as in aiokafka
        name_len = _I16.unpack_from(view, pos)[0]
        pos += 2
        name: str | None = None
        if name_len >= 0:
            end = pos + name_len
            if end > size:
                raise _Underrun("topic name runs past the end of the frame")
            name = str(view[pos:end], "utf-8")
            pos = end
        n_parts = unpack_i32(view, pos)[0]
        pos += 4
        parts: list[tuple[Any, ...]] | None = None if n_parts == -1 else []
        for _ in range(n_parts):
            part: tuple[Any, ...]
            if version < 4:
                partition, error_code, hwm, length = _P1.unpack_from(view, pos)
                pos += _P1.size
                pos, records = _records(view, pos, length, size)
                part = (partition, error_code, hwm, records)
            elif v11 and size - pos >= _P11_SIZE:
                partition, error_code, hwm, lso, log_start, n, replica, length = unpack_v11(
                    view, pos
                )
                if n == 0:
                    pos, records = _records(view, pos + _P11_SIZE, length, size)
                    part = (partition, error_code, hwm, lso, log_start, [], replica, records)
                else:
                    pos, part = _partition(version, view, pos, size)
            elif v5 and size - pos >= _P5_SIZE:
                partition, error_code, hwm, lso, log_start, n, length = unpack_v5(view, pos)
                if n == 0:
                    pos, records = _records(view, pos + _P5_SIZE, length, size)
                    part = (partition, error_code, hwm, lso, log_start, [], records)
                else:
                    pos, part = _partition(version, view, pos, size)
            else:
                pos, part = _partition(version, view, pos, size)
            assert parts is not None  # n_parts > 0 here
            parts.append(part)
        assert topics is not None  # n_topics > 0 here
        topics.append((name, parts))
    return FetchResponse(version, throttle, error, session, topics)


def _partition(version: int, view: memoryview, pos: int, size: int) -> tuple[int, tuple[Any, ...]]:
    """The v4-v11 partition entry at ``pos``, any case: the position after it, its fields."""
    if version >= 5:
        partition, error_code, hwm, lso, log_start, n = _P5.unpack_from(view, pos)
        pos += _P5.size
    else:
        partition, error_code, hwm, lso, n = _P4.unpack_from(view, pos)
        pos += _P4.size
    aborted: list[tuple[int, int]] | None = None
    if n == 0 or n < -1:  # other negative counts: an empty array, as aiokafka
        aborted = []
    elif n > 0:
        end = pos + 16 * n
        if end > size:
            raise _Underrun("aborted transactions run past the end of the frame")
        aborted = [_ABORTED.unpack_from(view, at) for at in range(pos, end, 16)]
        pos = end
    if version >= 11:
        replica, length = _REPLICA_LEN.unpack_from(view, pos)
        pos += 8
    else:
        length = _I32.unpack_from(view, pos)[0]
        pos += 4
    pos, records = _records(view, pos, length, size)
    if version >= 11:
        return pos, (partition, error_code, hwm, lso, log_start, aborted, replica, records)
    if version >= 5:
        return pos, (partition, error_code, hwm, lso, log_start, aborted, records)
    return pos, (partition, error_code, hwm, lso, aborted, records)


def _records(view: memoryview, pos: int, length: int, size: int) -> tuple[int, memoryview | None]:
    """The record set of ``length`` bytes at ``pos`` (None when null) and the position after."""
    if length <= 0:  # null, or empty (most partitions of a large answer)
        return pos, None if length else _NO_RECORDS
    end = pos + length
    if end > size:
        raise _Underrun("a record set runs past the end of the frame")
    return end, view[pos:end]


def _uvarint(view: memoryview, pos: int) -> tuple[int, int]:
    """The unsigned varint at ``pos`` and the position after it."""
    value = shift = 0
    while True:
        byte = view[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise _Underrun("a varint is longer than 5 bytes")


def _skip_tags(view: memoryview, pos: int, size: int) -> int:
    """Skip a tagged-field section (none of which we read); the position after it."""
    n, pos = _uvarint(view, pos)
    for _ in range(n):
        _, pos = _uvarint(view, pos)
        length, pos = _uvarint(view, pos)
        pos += length
        if pos > size:
            raise _Underrun("a tagged field runs past the end of the frame")
    return pos


def _decode_flexible(version: int, view: memoryview) -> FetchResponse:
    """Fetch v12: response header v1, compact arrays and strings, tagged fields."""
    # Decoded once per answer, every few milliseconds when caught up: the counts and
    # lengths below are single-byte varints but in huge answers, and empty tagged-field
    # sections a single zero, so each is read inline and _uvarint/_skip_tags called only
    # when it is longer.
    size = len(view)
    # The correlation id, then the header's tagged fields.
    pos = 5 if view[4] == 0 else _skip_tags(view, 4, size)
    throttle, error, session = _V7_HEAD.unpack_from(view, pos)
    pos += _V7_HEAD.size
    n_topics = view[pos]
    if n_topics < 0x80:
        pos += 1
    else:
        n_topics, pos = _uvarint(view, pos)
    topics: list[tuple[str | None, list[tuple[Any, ...]] | None]] | None = (
        None if n_topics == 0 else []
    )
    unpack_i32 = _I32.unpack_from
    for _ in range(n_topics - 1):
        name_len = view[pos]
        if name_len < 0x80:
            pos += 1
        else:
            name_len, pos = _uvarint(view, pos)
        name: str | None = None
        if name_len:
            end = pos + name_len - 1
            if end > size:
                raise _Underrun("topic name runs past the end of the frame")
            name = str(view[pos:end], "utf-8")
            pos = end
        n_parts = view[pos]
        if n_parts < 0x80:
            pos += 1
        else:
            n_parts, pos = _uvarint(view, pos)
        parts: list[tuple[Any, ...]] | None = None if n_parts == 0 else []
        for _ in range(n_parts - 1):
            # A valid entry has at least 37 bytes (the tagged-field count follows these).
            partition, error_code, hwm, lso, log_start, n, replica, length = _P12_SHORT.unpack_from(
                view, pos
            )
            aborted: list[tuple[int, int]] | None
            records: memoryview | None
            if n == 1 and length == 1:  # no aborted transactions, an empty record set
                pos += 36
                aborted, records = [], _NO_RECORDS
            else:
                pos += 30
                if n < 0x80:
                    pos += 1
                else:
                    n, pos = _uvarint(view, pos)
                aborted = None
                if n == 1:
                    aborted = []
                elif n > 1:
                    if pos + 17 * (n - 1) > size:
                        raise _Underrun("aborted transactions run past the end of the frame")
                    aborted = []
                    for _ in range(n - 1):
                        aborted.append(_ABORTED.unpack_from(view, pos))
                        pos = _skip_tags(view, pos + 16, size)
                replica = unpack_i32(view, pos)[0]
                length = view[pos + 4]
                if length < 0x80:
                    pos += 5
                else:
                    length, pos = _uvarint(view, pos + 4)
                records = None
                if length:  # 0: null, else the length + 1
                    end = pos + length - 1
                    if end > size:
                        raise _Underrun("a record set runs past the end of the frame")
                    records = view[pos:end]
                    pos = end
            diverging = leader = snapshot = None
            if view[pos] == 0:  # no tagged fields: the common case
                pos += 1
            else:
                n_tags, pos = _uvarint(view, pos)
                for _ in range(n_tags):
                    tag, pos = _uvarint(view, pos)
                    length, pos = _uvarint(view, pos)
                    end = pos + length
                    if end > size:
                        raise _Underrun("a tagged field runs past the end of the frame")
                    layout = _TAGGED.get(tag)
                    if layout is not None:
                        if length < layout.size + 1:  # its fields and its own tag count
                            raise _Underrun(f"tagged field {tag} is {length} bytes")
                        value = layout.unpack_from(view, pos)
                        if tag == 0:
                            diverging = value
                        elif tag == 1:
                            leader = value
                        else:
                            snapshot = value
                    pos = end
            assert parts is not None  # n_parts > 1 here
            parts.append(
                (
                    partition,
                    error_code,
                    hwm,
                    lso,
                    log_start,
                    aborted,
                    replica,
                    diverging,
                    leader,
                    snapshot,
                    records,
                )
            )
        pos = pos + 1 if view[pos] == 0 else _skip_tags(view, pos, size)
        assert topics is not None  # n_topics > 1 here
        topics.append((name, parts))
    if view[pos] != 0:
        _skip_tags(view, pos, size)
    return FetchResponse(version, throttle, error, session, topics)
