"""Compressed record batches, decompressed as a stream into a bounded window of records.

A compressed batch is never inflated whole: a few hundred KiB on the wire can hold
gigabytes of records. :func:`open_stream` reads a batch's compressed bytes as a stream
(gzip, snappy, lz4 and zstd; one or more frames or members each) that hands out at most
the bytes asked for; :class:`RecordWindow` keeps the decompressed bytes the record
decoder reads from, at most :attr:`Bounds.window` bytes plus the record being completed,
and refuses a record larger than :attr:`Bounds.max_record`: its bytes are inflated and
dropped, never held, and the records after it are read on. What each codec holds
besides the window: gzip its 32 KiB history; lz4 one block (at most 4 MiB, the frame
format's largest); zstd the frame's window, which is refused above
``max(Bounds.max_record, 8 MiB)``; snappy one block, which its format keeps below
22 times the block's compressed size (a raw snappy batch is one block; Kafka's xerial
framing cuts 32 KiB blocks).

Ownership: a stream and its window belong to the one reader decoding the batch (the
partition's reader, or the Spark source's task); nothing here is shared.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from .._dataclass import dataclass
from . import _pyrecords

if TYPE_CHECKING:
    from ..config import FetchConfig

__all__ = ["DEFAULT_BOUNDS", "Bounds", "RecordWindow", "Stream", "open_stream"]


@dataclass(frozen=True, slots=True)
class Bounds:
    """How much decompressed data decoding one partition's batch may hold."""

    #: Decompressed bytes read ahead into the window (``consumer.fetch.buffer_bytes``):
    #: the records of one decoding step come from at most this many bytes, or one record.
    window: int = 1 << 20
    #: The largest record read (``consumer.fetch.max_record_bytes``); a larger one is
    #: skipped and reported.
    max_record: int = 64 << 20

    @classmethod
    def of(cls, fetch: FetchConfig) -> Bounds:
        """The bounds the ``consumer.fetch`` settings set."""
        return cls(window=fetch.buffer_bytes, max_record=fetch.max_record_bytes)


DEFAULT_BOUNDS = Bounds()

# Compressed input is fed to a decoder this much at a time: zlib copies what a call
# leaves unconsumed, so feeding a whole batch would copy it again on every call.
_INPUT_CHUNK = 1 << 16
# zstd frames may use a window up to this large even when max_record is smaller: what
# levels up to 19 write (a smaller limit would refuse common frames).
_ZSTD_MIN_WINDOW_LOG = 23
_ZSTD_MAX_WINDOW_LOG = 31
# A snappy element expands at most 64 bytes from 3 (a 2-byte-offset copy): a block
# declaring more than this many times its size is corrupt.
_SNAPPY_MAX_RATIO = 22
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = 16  # magic, version (int32), compatible version (int32)
_INT32 = struct.Struct(">i")
# A record's head past its length varint: attributes (1 byte), timestamp delta and
# offset delta (varints of at most 10 bytes each).
_HEAD_AFTER_LENGTH = 21
_VARINT_MAX = 10


class Stream(Protocol):
    """A batch's compressed bytes as a stream of decompressed bytes."""

    def read(self, n: int) -> bytes:
        """Between 1 and ``n`` (> 0) more bytes; ``b""`` once the stream has ended. Raises
        ValueError (or the codec's error) for a corrupt or truncated stream."""


class _Decompressor(Protocol):
    """One frame's incremental decoder, with the API of the standard library's bz2, lzma
    and zstd decompressors."""

    @property
    def eof(self) -> bool: ...
    @property
    def needs_input(self) -> bool: ...
    @property
    def unused_data(self) -> bytes: ...
    def decompress(self, data: bytes | memoryview, max_length: int = -1) -> bytes: ...


class _GzipMember:
    """One gzip member through :mod:`zlib`, with the :class:`_Decompressor` API."""

    __slots__ = ("_d",)

    def __init__(self) -> None:
        self._d = zlib.decompressobj(16 + zlib.MAX_WBITS)  # gzip framing only, as Java's

    @property
    def eof(self) -> bool:
        return self._d.eof

    @property
    def needs_input(self) -> bool:
        return not self._d.unconsumed_tail

    @property
    def unused_data(self) -> bytes:
        return self._d.unused_data

    def decompress(self, data: bytes | memoryview, max_length: int = -1) -> bytes:
        d = self._d
        return d.decompress(data or d.unconsumed_tail, max(max_length, 0))


class _Frames:
    """A stream of one or more frames (gzip members, lz4 or zstd frames) back to back."""

    __slots__ = ("_codec", "_d", "_data", "_done", "_new", "_pending", "_zero_padding")

    def __init__(
        self,
        codec: str,
        data: memoryview,
        new: Callable[[], _Decompressor],
        *,
        zero_padding: bool = False,
    ) -> None:
        self._codec = codec
        self._data = data  # the compressed input not yet fed
        self._pending = b""  # input a finished frame left over, fed first
        self._new = new
        self._d = new()
        self._done = False
        # gzip allows zero bytes after a member (Python's gzip module skips them too).
        self._zero_padding = zero_padding

    def _take(self) -> bytes | memoryview:
        if self._pending:
            pending, self._pending = self._pending, b""
            return pending
        data, self._data = self._data[:_INPUT_CHUNK], self._data[_INPUT_CHUNK:]
        return data

    def _next_frame(self) -> None:
        """The frame ended: start the next one, or end the stream if no input is left."""
        self._pending = self._d.unused_data
        if self._zero_padding:
            self._pending = self._pending.lstrip(b"\0")
            if not self._pending:
                skipped = len(self._data) - len(bytes(self._data).lstrip(b"\0"))
                self._data = self._data[skipped:]
        if not self._pending and not self._data:
            self._done = True
            return
        self._d = self._new()

    def read(self, n: int) -> bytes:
        while not self._done:
            d = self._d
            if d.eof:
                self._next_frame()
                continue
            data = self._take() if d.needs_input else b""
            piece = d.decompress(data, n)
            if piece:
                return piece
            if not data and d.needs_input and not d.eof:
                raise ValueError(f"the {self._codec} stream is truncated")
        return b""


class _Snappy:
    """A snappy stream: Kafka's xerial framing (blocks of a 32-bit length and a raw snappy
    block) or one raw block. A block is inflated whole (snappy can copy from anywhere
    before in its block), after its declared size is checked."""

    __slots__ = ("_data", "_out", "_raw", "_snappy", "_used")

    def __init__(self, data: memoryview) -> None:
        # Imported by the first snappy batch: a consumer of uncompressed, gzip, lz4 or
        # zstd batches never loads cramjam (a start-up cost of every consumer otherwise).
        import cramjam

        self._snappy = cramjam.snappy
        self._raw = not (len(data) >= _XERIAL_HEADER and data[:8] == _XERIAL_MAGIC)
        self._data = data if self._raw else data[_XERIAL_HEADER:]
        self._out = memoryview(b"")
        self._used = 0

    def _next_block(self) -> memoryview | None:
        data = self._data
        if self._raw:
            self._raw, self._data = False, data[len(data) :]
            return data if len(data) else None
        if not len(data):
            return None
        if len(data) < 4:
            raise ValueError("the snappy stream is truncated in a block length")
        size = _INT32.unpack_from(data)[0]
        if not 0 <= size <= len(data) - 4:
            raise ValueError(f"snappy block length {size} with {len(data) - 4} bytes left")
        self._data = data[4 + size :]
        return data[4 : 4 + size]

    def read(self, n: int) -> bytes:
        while self._used >= len(self._out):
            block = self._next_block()
            if block is None:
                return b""
            size = self._snappy.decompress_raw_len(block)
            if size > _SNAPPY_MAX_RATIO * len(block):
                raise ValueError(f"a snappy block of {len(block)} bytes declares {size}: corrupt")
            self._out = memoryview(self._snappy.decompress_raw(block))
            self._used = 0
        piece = self._out[self._used : self._used + n]
        self._used += len(piece)
        return bytes(piece)


class _ZstdFrame:
    """One zstd frame, its window capped per :attr:`Bounds.max_record` (the decoder
    holds a window of history: a frame may declare up to 2 GiB)."""

    __slots__ = ("_d", "_window_log")

    def __init__(self, bounds: Bounds) -> None:
        try:  # the standard library's from Python 3.14 on
            from compression import zstd  # type: ignore[import-not-found,unused-ignore]
        except ImportError:
            from backports import zstd  # type: ignore[no-redef,unused-ignore]
        log = max(_ZSTD_MIN_WINDOW_LOG, (bounds.max_record - 1).bit_length())
        self._window_log = min(log, _ZSTD_MAX_WINDOW_LOG)
        options = {zstd.DecompressionParameter.window_log_max: self._window_log}
        self._d: _Decompressor = zstd.ZstdDecompressor(options=options)

    @property
    def eof(self) -> bool:
        return self._d.eof

    @property
    def needs_input(self) -> bool:
        return self._d.needs_input

    @property
    def unused_data(self) -> bytes:
        return self._d.unused_data

    def decompress(self, data: bytes | memoryview, max_length: int = -1) -> bytes:
        try:
            return self._d.decompress(data, max_length)
        except Exception as exc:
            if "memory" in str(exc):  # "Frame requires too much memory for decoding"
                raise ValueError(
                    f"a zstd frame needs a window larger than {1 << self._window_log} bytes, "
                    "the most consumer.fetch.max_record_bytes allows (8 MiB at least): "
                    "raise it to the frame's window"
                ) from exc
            raise


def _lz4_frame() -> _Decompressor:
    import lz4.frame  # type: ignore[import-untyped]

    decompressor: _Decompressor = lz4.frame.LZ4FrameDecompressor()
    return decompressor


def open_stream(codec: int, data: memoryview, bounds: Bounds = DEFAULT_BOUNDS) -> Stream:
    """The decompressed bytes of ``data``, compressed with Kafka codec ``codec`` (1 gzip,
    2 snappy, 3 lz4, 4 zstd); ValueError for another codec."""
    if codec == 1:
        return _Frames("gzip", data, _GzipMember, zero_padding=True)
    if codec == 2:
        return _Snappy(data)
    if codec == 3:
        return _Frames("lz4", data, _lz4_frame)
    if codec == 4:
        return _Frames("zstd", data, lambda: _ZstdFrame(bounds))
    raise ValueError(f"unknown compression codec {codec}")


def read_bounded(stream: Stream, limit: int) -> bytes | None:
    """All of ``stream``, or None once it passes ``limit`` bytes (read no further)."""
    pieces: list[bytes] = []
    size = 0
    while True:
        piece = stream.read(limit + 1 - size)
        if not piece:
            return b"".join(pieces)
        pieces.append(piece)
        size += len(piece)
        if size > limit:
            return None


class RecordWindow:
    """The decompressed records of one compressed v2 batch, a bounded window at a time.

    The decoder reads records from ``buf`` at ``pos`` (record ``index`` of the batch) in
    window mode (``max_record``) and stops at a record that runs past the window, or is
    longer than ``max_record``; :meth:`more` then
    reads on until the window holds that record whole, or skips it when it is larger
    than ``bounds.max_record``. :meth:`finish` checks the stream ended with the last
    record. ``buf`` holds at most ``max(bounds.window, the record being read)`` bytes.
    """

    __slots__ = ("_bounds", "_stream", "buf", "index", "max_record", "pos")

    def __init__(self, stream: Stream | None, bounds: Bounds) -> None:
        self._stream = stream
        self._bounds = bounds
        self.buf: bytes | memoryview = b""
        self.pos = 0
        self.index = 0
        #: The decoders' window mode: stop at a record longer than this, or cut short
        #: by the window's end (0: ``buf`` holds every record whole).
        self.max_record = bounds.max_record if stream is not None else 0
        if stream is not None:
            self._fill(bounds.window)

    @classmethod
    def whole(cls, records: memoryview) -> RecordWindow:
        """All of a batch's records, already in memory (an uncompressed batch)."""
        window = cls(None, DEFAULT_BOUNDS)
        window.buf = records
        return window

    def _fill(self, size: int) -> None:
        """Read on until ``buf`` holds ``size`` bytes or the stream ended."""
        buf = self.buf
        if len(buf) >= size or self._stream is None:
            return
        pieces = [buf]
        have = len(buf)
        while have < size:
            piece = self._read(size - have)
            if not piece:
                break
            pieces.append(piece)
            have += len(piece)
        self.buf = b"".join(pieces)

    def more(self, base_offset: int, last_delta: int) -> tuple[int, int] | None:
        """The decoder stopped at ``pos``, inside the window's last record: read that
        record whole, or skip it when it is larger than ``bounds.max_record`` and return
        ``(its offset, its size)``. ValueError when the stream ends inside it."""
        if self.pos:
            self.buf, self.pos = self.buf[self.pos :], 0
        self._fill(_VARINT_MAX)
        buf = memoryview(self.buf)
        try:
            length, body = _pyrecords.varint(buf, 0, len(buf))
        except ValueError:
            raise self._cut_short() from None
        if length <= 0:
            raise ValueError(f"record {self.index}: invalid length {length}")
        size = body + length
        if length > self._bounds.max_record:
            return self._skip(size, body, base_offset, last_delta)
        self._fill(max(size, self._bounds.window))
        if len(self.buf) < size:
            raise self._cut_short()
        return None

    def _read(self, n: int) -> bytes:
        return self._stream.read(n) if self._stream is not None else b""

    def _cut_short(self) -> ValueError:
        return ValueError(f"the compressed records end before record {self.index} does")

    def _skip(self, size: int, body: int, base_offset: int, last_delta: int) -> tuple[int, int]:
        """Drop the record of ``size`` bytes at the window's start, reading its bytes on
        and throwing them away; its offset and size."""
        self._fill(body + _HEAD_AFTER_LENGTH)
        head = memoryview(self.buf)[: min(size, len(self.buf))]
        try:
            _, at = _pyrecords.varint(head, body + 1, len(head))  # timestamp delta
            delta, _ = _pyrecords.varint(head, at, len(head))
        except ValueError:
            raise ValueError(f"record {self.index}: truncated record header") from None
        if not 0 <= delta <= last_delta:
            raise ValueError(
                f"record {self.index}: offset delta {delta} outside the batch's 0..{last_delta}"
            )
        left = size - len(head)
        self.buf = self.buf[len(head) :]
        while left:
            piece = self._read(min(left, self._bounds.window))
            if not piece:
                raise self._cut_short()
            left -= len(piece)
        self.index += 1
        return base_offset + delta, size - body

    def finish(self) -> None:
        """After the last record: ValueError unless the stream ends there too."""
        extra = len(self.buf) - self.pos
        if extra or self._read(1):
            raise ValueError("decompressed bytes left over after the batch's last record")
