"""Acknowledgement batches: decided offsets as the ranges a ShareFetch or ShareAcknowledge
carries.

A member decides records one by one and out of order (up to ``concurrency`` handlers run
at once), so each partition collects its decided offsets per acknowledge type, and only
when a request goes out are they sorted and folded into ranges: ``[(first, last,
[type])]``, ascending, each a run of consecutive offsets with one type. A long run of
accepted records costs one entry on the wire, whatever the order they finished in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

__all__ = ["AckRanges", "fold", "ranges"]

#: ``[(first_offset, last_offset, [ack type])]``, ascending and disjoint.
AckRanges = list[tuple[int, int, list[int]]]


def ranges(offsets: Iterable[int]) -> list[tuple[int, int]]:
    """``offsets`` (any order, no duplicates) as ascending runs ``(first, last)``."""
    out: list[tuple[int, int]] = []
    it = iter(sorted(offsets))
    first = last = next(it, None)
    if first is None or last is None:
        return out
    for offset in it:
        if offset != last + 1:
            out.append((first, last))
            first = offset
        last = offset
    out.append((first, last))
    return out


def fold(decided: Mapping[int, Sequence[int]]) -> AckRanges:
    """``{ack type: [offset, ...]}`` as one ascending list of single-type runs.

    An offset must appear under one type only (a record is decided once)."""
    runs = [
        (first, last, [ack_type])
        for ack_type, offsets in decided.items()
        if offsets
        for first, last in ranges(offsets)
    ]
    runs.sort()
    return runs
