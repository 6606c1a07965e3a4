"""Type stub of the C extension ``_crecords.c``: message-format v2 record decoding
into messages (the consumer) or Arrow-layout column buffers (the Spark source)."""

from typing_extensions import Buffer

from consumergroup.message import ConsumerMessage

def frame_buffer(size: int, /) -> bytearray:
    """A bytearray of ``size`` bytes, not zeroed (written whole before it is read)."""

def bind(cls: type[ConsumerMessage], /) -> None:
    """Use ``cls`` for decoded messages; TypeError when its slots are not the 8 fields."""

def decode_v2(
    body: Buffer,
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
    /,
) -> tuple[list[ConsumerMessage], int, int]:
    """Decode records from byte ``pos``, record ``index`` of ``count`` (offset deltas at
    most ``last_delta``), skipping offsets below ``start``, at most ``limit`` (0: all);
    returns the messages and where to resume. ValueError on corrupt input. With
    ``max_record`` > 0 (``body`` is a window on a longer body), stops at a record cut
    short or longer than ``max_record``."""

def decode_v2_batch(
    batch: Buffer, topic: str, partition: int, start: int, limit: int, /
) -> list[ConsumerMessage] | None:
    """The messages of a whole uncompressed v2 batch (header included) of at most
    ``limit`` records (0: any number), none below ``start``: :func:`decode_v2` of its
    body with the header's fields. None for a compressed batch, one of more than
    ``limit`` records or not v2. ValueError on corrupt input."""

def scan_v2(
    records: Buffer, fetch_offset: int, /
) -> tuple[list[tuple[memoryview, int, int]], int, int, int] | None:
    """``records.scan_records`` of a record set of v2 batches read uncommitted without CRC
    checks: (kept batches, records, next offset, bytes covered); None for anything else
    (another format, a batch too short, offsets out of range)."""

def decode_v2_columns(
    body: Buffer,
    pos: int,
    index: int,
    count: int,
    base_offset: int,
    last_delta: int,
    timestamp: int,
    log_append_time: bool,
    start: int,
    stop: int,
    limit: int,
    max_bytes: int,
    columns: tuple[bytearray, ...],
    headers: tuple[bytearray, ...] | None,
    max_record: int = 0,
    /,
) -> tuple[int, int, bool]:
    """Append records from byte ``pos``, record ``index`` of ``count``, to Arrow-layout
    buffers (9 ``columns``, 6 ``headers`` or None), skipping offsets below ``start``, ending
    before ``stop`` (``ended``), after ``limit`` rows or at ``max_bytes`` of key and value
    data; returns where to resume. ValueError on corrupt input. ``max_record``: as
    in :func:`decode_v2`."""
