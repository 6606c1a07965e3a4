"""Keeping decoded messages cheap for CPython's cyclic garbage collector.

Every message is one GC-tracked object. A handler that keeps messages (a bulk
write, a micro-batch) makes them survive young collections, so CPython promotes
them to the oldest generation and then runs a full collection each time the
survivors grow by 25 %: every kept message is traversed ~7 times (measured: a
handler keeping 200k messages spent 2/3 of its CPU in the collector). Messages
cannot form reference cycles (their fields are str, int, bytes, None and tuples
of those), so scanning them never frees anything.

:func:`decode_step` wraps one decode step (building one list of messages). The
collector is off while the list is built; afterwards everything the collector
tracks is moved into the oldest generation with ``gc.freeze(); gc.unfreeze()``
(two O(1) list splices), so the new messages skip the young passes, and the
move is not counted as "survivors" towards CPython's next full collection.

The user's own young objects are moved too, so their cyclic garbage would wait
for a full collection that nothing triggers any more. To keep the collector's
promise for them, :func:`decode_step` counts those objects (the young
generation's allocation count, read before our list is built) and runs a full
collection itself once they exceed a quarter of the tracked heap (its size at
the previous full collection plus the messages promoted since): CPython's own
rule for full collections, with only the user's objects counting towards it.
Memory held by the user's cyclic garbage is bounded as before; its collection
can come later than with a young pass.

Left alone: a process that uses ``gc.freeze()`` itself (seen at the first
decode step; unfreezing would undo it), and one that disabled the collector.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Sized
from typing import TypeVar

__all__ = ["decode_step"]

T = TypeVar("T", bound=Sized)

#: Never run a full collection for fewer promoted user objects than this.
_MIN_BUDGET = 10_000


class _Promotion:
    """The state of :func:`decode_step`: whether it applies, and the user's promoted objects."""

    __slots__ = ("checked", "enabled", "heap", "pending")

    def __init__(self) -> None:
        self.checked = False
        self.enabled = True
        # The user's objects promoted since the last full collection run here.
        self.pending = 0
        # Tracked objects at that collection, plus the messages promoted since.
        self.heap = 0


_state = _Promotion()


def decode_step(build: Callable[[], T]) -> T:
    """Run ``build`` (which returns a list of new messages) with the collector off,
    then promote.

    ``build`` must not create reference cycles (nothing would scan them until the
    next full collection).
    """
    if not gc.isenabled():
        return build()
    state = _state
    if not state.checked:
        # O(frozen objects): read once. A process that froze objects wants them frozen.
        state.checked = True
        state.enabled = gc.get_freeze_count() == 0
    young = gc.get_count()[0]
    gc.disable()
    built = 0
    try:
        result = build()
        built = len(result)
        return result
    finally:
        if state.enabled:
            gc.freeze()
            gc.unfreeze()
            state.pending += young
            state.heap += built
            if state.pending > max(_MIN_BUDGET, state.heap // 4):
                state.pending = 0
                gc.collect()
                state.heap = len(gc.get_objects())
        gc.enable()
