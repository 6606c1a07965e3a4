"""Fetch v12 on the wire, written independently of ``consumergroup.net.fetch`` for tests.

aiokafka 0.14 has no Fetch codec past v11, so the v12 decoder is checked against
frames built here, the v12 encoder against the reader here, and the scripted broker
answers v12 with them. Written field by field from the Kafka protocol spec
(``FetchRequest.json`` / ``FetchResponse.json``), one ``write``/``read`` per field.
"""

from __future__ import annotations

import struct
from io import BytesIO
from typing import Any

#: v12 partition tagged fields: tag -> struct of its fields (each ends in its own tags).
TAGS = {0: ">iq", 1: ">ii", 2: ">qi"}  # diverging_epoch, current_leader, snapshot_id


def uvarint(value: int) -> bytes:
    """An unsigned varint."""
    out = b""
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out += bytes([low | 0x80])
        else:
            return out + bytes([low])


def read_uvarint(buf: BytesIO) -> int:
    """Read an unsigned varint."""
    value = shift = 0
    while True:
        byte = buf.read(1)[0]
        value += (byte & 0x7F) << shift
        if not byte & 0x80:
            return value
        shift += 7


def _read(buf: BytesIO, fmt: str) -> Any:
    values = struct.unpack(fmt, buf.read(struct.calcsize(fmt)))
    return values[0] if len(values) == 1 else values


def _compact_bytes(data: bytes | None) -> bytes:
    return b"\x00" if data is None else uvarint(len(data) + 1) + data


def _read_compact_string(buf: BytesIO) -> str | None:
    n = read_uvarint(buf)
    return None if n == 0 else buf.read(n - 1).decode()


def _skip_tags(buf: BytesIO) -> None:
    for _ in range(read_uvarint(buf)):
        read_uvarint(buf)
        buf.read(read_uvarint(buf))


def encode_response(
    correlation_id: int,
    throttle: int,
    error: int,
    session: int,
    topics: list[tuple[str, list[tuple[Any, ...]]]] | None,
    *,
    unknown_tag: bool = False,
) -> bytes:
    """A Fetch v12 response frame (header v1 included, no size prefix).

    A partition is ``(partition, error, high_watermark, last_stable_offset,
    log_start_offset, aborted | None, preferred_read_replica, diverging_epoch,
    current_leader, snapshot_id, records | None)``, the tagged ones None or a tuple
    of their fields. ``unknown_tag`` adds a tag no version defines (tag 9) to every
    partition and topic: a reader must skip it.
    """
    out = BytesIO()
    out.write(struct.pack(">i", correlation_id))
    out.write(b"\x00")  # response header v1: no tagged fields
    out.write(struct.pack(">i", throttle))
    out.write(struct.pack(">h", error))
    out.write(struct.pack(">i", session))
    if topics is None:
        out.write(b"\x00")
        out.write(b"\x00")
        return out.getvalue()
    out.write(uvarint(len(topics) + 1))
    extra = [(9, b"\x01\x02\x03")] if unknown_tag else []
    for name, partitions in topics:
        out.write(_compact_bytes(name.encode()))
        out.write(uvarint(len(partitions) + 1))
        for p in partitions:
            out.write(struct.pack(">i", p[0]))
            out.write(struct.pack(">h", p[1]))
            for value in p[2:5]:
                out.write(struct.pack(">q", value))
            aborted = p[5]
            if aborted is None:
                out.write(b"\x00")
            else:
                out.write(uvarint(len(aborted) + 1))
                for producer_id, first_offset in aborted:
                    out.write(struct.pack(">qq", producer_id, first_offset) + b"\x00")
            out.write(struct.pack(">i", p[6]))
            out.write(_compact_bytes(p[10]))
            tags = [
                (tag, struct.pack(TAGS[tag], *value) + b"\x00")
                for tag, value in enumerate(p[7:10])
                if value is not None
            ] + extra
            out.write(uvarint(len(tags)))
            for tag, data in tags:
                out.write(uvarint(tag) + uvarint(len(data)) + data)
        _write_tags(out, extra)
    _write_tags(out, extra)
    return out.getvalue()


def _write_tags(out: BytesIO, tags: list[tuple[int, bytes]]) -> None:
    out.write(uvarint(len(tags)))
    for tag, data in tags:
        out.write(uvarint(tag) + uvarint(len(data)) + data)


def decode_request(data: bytes) -> dict[str, Any]:
    """A Fetch v12 request: ``data`` is what follows the client id (header tags, body)."""
    buf = BytesIO(data)
    _skip_tags(buf)  # request header v2
    names = ("replica_id", "max_wait_time", "min_bytes", "max_bytes", "isolation_level")
    out: dict[str, Any] = dict(zip(names, _read(buf, ">iiiib"), strict=True))
    out["session_id"], out["session_epoch"] = _read(buf, ">ii")
    out["topics"] = []
    for _ in range(read_uvarint(buf) - 1):
        topic = _read_compact_string(buf)
        partitions = []
        for _ in range(read_uvarint(buf) - 1):
            fields = _read(buf, ">iiqiqi")
            keys = (
                "partition",
                "current_leader_epoch",
                "fetch_offset",
                "last_fetched_epoch",
                "log_start_offset",
                "max_bytes",
            )
            partitions.append(dict(zip(keys, fields, strict=True)))
            _skip_tags(buf)
        _skip_tags(buf)
        out["topics"].append({"topic": topic, "partitions": partitions})
    out["forgotten_topics_data"] = []
    for _ in range(read_uvarint(buf) - 1):
        topic = _read_compact_string(buf)
        gone = [_read(buf, ">i") for _ in range(read_uvarint(buf) - 1)]
        _skip_tags(buf)
        out["forgotten_topics_data"].append({"topic": topic, "partitions": gone})
    out["rack_id"] = _read_compact_string(buf)
    _skip_tags(buf)
    if buf.read():
        raise ValueError("bytes left after the Fetch v12 request")
    return out
