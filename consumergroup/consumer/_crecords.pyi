"""Type stub of the C extension ``_crecords.c``: message-format v2 record decoding."""

from typing_extensions import Buffer

from consumergroup.message import ConsumerMessage

def bind(cls: type[ConsumerMessage], /) -> None:
    """Use ``cls`` for decoded messages; TypeError when its slots are not the 8 fields."""

def decode_v2(
    body: Buffer,
    pos: int,
    index: int,
    count: int,
    base_offset: int,
    timestamp: int,
    log_append_time: bool,
    topic: str,
    partition: int,
    start: int,
    limit: int,
    /,
) -> tuple[list[ConsumerMessage], int, int]:
    """Decode records from byte ``pos``, record ``index`` of ``count``, skipping offsets
    below ``start``, at most ``limit`` (0: all); returns the messages and where to resume.
    ValueError on corrupt input."""
