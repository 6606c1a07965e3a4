"""The records a ShareFetch answer acquired for this member, out of its record batches.

A partition's answer holds ordinary record batches (decoded by the fetch path's
:mod:`~consumergroup.consumer.records`) and the offset ranges acquired for this member,
each with its delivery count. The batches may hold more than was acquired (other members
hold the rest, or it was acknowledged already): only records inside an acquired range are
handed out, each as a :class:`~.record.ShareRecord` of its range's delivery count.

An acquired offset with no record in a complete batch (a control record, one compacted
away) is a *gap*: acknowledged as such, it never comes back. An acquired offset past the
last complete batch (an answer cut short) is not a gap: it is released, so it comes again.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from operator import attrgetter
from typing import NamedTuple

from ..consumer.records import scan_records
from ..errors import CorruptMessageError
from ..message import ConsumerMessage
from .record import ShareRecord, record_class

__all__ = ["Acquired", "acquired_records"]

_OFFSET = attrgetter("offset")


class Acquired(NamedTuple):
    """One partition's share of a ShareFetch answer."""

    #: Records to hand out, ascending by offset.
    records: list[ShareRecord]
    #: Acquired offsets that hold no record: acknowledged as gaps.
    gaps: list[int]
    #: Acquired offsets this answer did not bring whole (cut short, or undecodable):
    #: released at once, so they come again.
    missing: list[int]
    #: How many of ``records`` were delivered before (delivery count above 1).
    redelivered: int


def acquired_records(
    topic: str,
    partition: int,
    records: bytes | memoryview | None,
    acquired: Sequence[tuple[int, int, int]],
) -> Acquired:
    """The records of ``records`` inside ``acquired`` (``[(first, last, delivery count)]``).

    Raises :class:`~consumergroup.errors.CorruptMessageError` when no batch can be read.
    """
    ranges = sorted(acquired)
    if not ranges:
        return Acquired([], [], [], 0)
    start = ranges[0][0]
    stop = max(last for _, last, _ in ranges)
    rs = scan_records(topic, partition, records, start)
    messages: list[ConsumerMessage] = []
    end = rs.next_offset  # past the last complete batch: what the answer covered
    try:
        # Only the acquired span is decoded: the answer brings whole batches, which may
        # hold far more (a producer's batch of thousands for an ask of a hundred). The
        # decoder skips records below ``start`` without building them, and each list
        # holds at most the span, so decoding stops at the first list reaching ``stop``.
        for chunk in rs.decode_batches(limit=stop - start + 1):
            messages += chunk
            if chunk[-1].offset >= stop:
                break
    except CorruptMessageError:
        if not messages:
            raise
        end = messages[-1].offset + 1  # hand out what precedes the bad batch
    out: list[ShareRecord] = []
    gaps: list[int] = []
    missing: list[int] = []
    redelivered = 0
    for first, last, count in ranges:
        lo = bisect_left(messages, first, key=_OFFSET)
        hi = bisect_right(messages, last, lo=lo, key=_OFFSET)
        taken = messages[lo:hi]
        cls = record_class(count)
        for message in taken:
            message.__class__ = cls
        out += taken  # type: ignore[arg-type]  # each one is a ShareRecord now
        if count > 1:
            redelivered += len(taken)
        if len(taken) != last - first + 1:
            present = {m.offset for m in taken}
            for offset in range(first, last + 1):
                if offset not in present:
                    (gaps if offset < end else missing).append(offset)
    return Acquired(out, gaps, missing, redelivered)
