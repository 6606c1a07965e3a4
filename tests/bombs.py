"""Compressed v2 record batches built as a stream: decompression bombs and their kin.

A batch of hundreds of MiB of records is compressed record by record, never held whole,
so a test can build a few hundred KiB that inflate to ~300 MiB without spending that
memory itself. Each codec as Kafka's producers write it: gzip, snappy in xerial framing
(32 KiB blocks), lz4 frames of independent blocks, zstd.
"""

from __future__ import annotations

import asyncio
import struct
import time
import zlib
from collections.abc import Iterable, Iterator

import cramjam
import lz4.frame
from aiokafka.record.util import calc_crc32c

from consumergroup.client import Client
from consumergroup.errors import error_for_code
from consumergroup.net.produce import ProduceRequest

try:
    from compression import zstd  # type: ignore[import-not-found,unused-ignore]
except ImportError:
    from backports import zstd  # type: ignore[no-redef,unused-ignore]

GZIP, SNAPPY, LZ4, ZSTD = 1, 2, 3, 4
CODECS = {"gzip": GZIP, "snappy": SNAPPY, "lz4": LZ4, "zstd": ZSTD}

_XERIAL_HEADER = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024
# base offset, length, leader epoch, magic, crc, then from the attributes on (CRC'd):
_HEAD = struct.Struct(">qiibI")
_CRCD = struct.Struct(">hiqqqhii")  # attributes, last offset delta, timestamps, pid, ...


def _varint(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _head(delta: int, size: int) -> bytes:
    """A record's bytes before its value (a ``size``-byte value, no key): the value and
    a header count of 0 follow."""
    body = b"\0" + _varint(delta) + _varint(delta) + _varint(-1) + _varint(size)
    return _varint(len(body) + size + 1) + body


def records_of(sizes: Iterable[int], fill: bytes = b"\0") -> Iterator[bytes]:
    """Records whose values are ``sizes[i]`` bytes of ``fill`` (in pieces, so a large
    value is never one object), offset deltas 0, 1, ..."""
    piece = fill * (1 << 20)
    for delta, size in enumerate(sizes):
        yield _head(delta, size)
        while size > 0:
            yield piece[: min(size, len(piece))]
            size -= len(piece)
        yield b"\0"


def records_from(values: Iterable[bytes]) -> Iterator[bytes]:
    """Records of ``values``, offset deltas 0, 1, ..."""
    for delta, value in enumerate(values):
        yield _head(delta, len(value)) + value + b"\0"


def compress(codec: int, chunks: Iterable[bytes]) -> bytes:
    """``chunks`` compressed with ``codec`` as Kafka's producers write it."""
    out: list[bytes] = []
    if codec == GZIP:
        gz = zlib.compressobj(9, zlib.DEFLATED, 31)
        out += (gz.compress(chunk) for chunk in chunks)
        out.append(gz.flush())
    elif codec == ZSTD:
        zs = zstd.ZstdCompressor(level=3)
        out += (zs.compress(chunk) for chunk in chunks)
        out.append(zs.flush())
    elif codec == LZ4:
        lz = lz4.frame.LZ4FrameCompressor(block_linked=False)
        out.append(lz.begin())
        out += (lz.compress(chunk) for chunk in chunks)
        out.append(lz.flush())
    elif codec == SNAPPY:
        out.append(_XERIAL_HEADER)
        pending = b""
        for chunk in chunks:
            pending += chunk
            while len(pending) >= _XERIAL_BLOCK:
                block, pending = pending[:_XERIAL_BLOCK], pending[_XERIAL_BLOCK:]
                out.append(_xerial_block(block))
        if pending:
            out.append(_xerial_block(pending))
    else:
        raise ValueError(f"codec {codec}")
    return b"".join(out)


def _xerial_block(block: bytes) -> bytes:
    compressed = bytes(cramjam.snappy.compress_raw(block))
    return struct.pack(">i", len(compressed)) + compressed


def batch(codec: int, records: Iterable[bytes], count: int, base_offset: int = 0) -> bytes:
    """A v2 batch of ``count`` records (``records``: their bytes, in any pieces),
    compressed with ``codec`` (0: none), timestamps 1000 + offset delta."""
    body = b"".join(records) if codec == 0 else compress(codec, records)
    crcd = _CRCD.pack(codec, count - 1, 1000, 1000 + count - 1, -1, -1, -1, count) + body
    return _HEAD.pack(base_offset, 9 + len(crcd), -1, 2, calc_crc32c(crcd)) + crcd


async def produce_encoded(bootstrap: str, topic: str, partition: int, batch: bytes) -> int:
    """Write the encoded ``batch`` as it is, one Produce request (acks=all); its base
    offset. A retriable refusal (a new topic's leader not serving it yet) is sent again
    for up to 20 s."""
    request = ProduceRequest(None, -1, 60_000, [(topic, [(partition, batch)])])
    deadline = time.monotonic() + 20
    async with Client([bootstrap]) as client:
        while True:
            conn = await client.leader(topic, partition)
            answers, _ = await conn.send(request, timeout=90)
            ((_, code, base_offset, *_),) = answers[topic]
            if not code:
                return int(base_offset)
            error = error_for_code(code)(f"Produce to {topic}/{partition}")
            if not error.retriable or time.monotonic() > deadline:
                raise error
            await client.refresh_metadata(topic)
            await asyncio.sleep(0.2)
