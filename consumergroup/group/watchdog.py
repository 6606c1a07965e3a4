"""LoopWatchdog: notices a handler that blocks the event loop, and names it.

Heartbeats run on the event loop; a handler doing blocking work starves them
and the coordinator eventually evicts the member. A task cannot observe its
own loop being blocked, so a watcher *thread* checks a timestamp the loop
refreshes; when it goes stale for longer than ``threshold`` the thread reads
the loop thread's current stack (``sys._current_frames``), finds the claim
being processed and logs where it is stuck. It only reports; it changes nothing.

The stack is captured (every frame and its line) the moment the stall is seen:
the loop may resume at any time after that, and a coroutine frame that has
suspended no longer links to its caller, so a later walk would stop short of
the claim handler.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from types import FrameType

import anyio

log = logging.getLogger(__name__)


class LoopWatchdog:
    """Reports event-loop stalls longer than ``threshold`` seconds.

    ``run()`` must be awaited in a task on the watched loop (it runs until
    cancelled); ``stalls`` counts the stalls seen, ``longest`` the longest one,
    ``lag`` is the loop's lateness at its last tick. ``describe`` names what
    the loop is stuck in from its stack as captured at the stall, innermost frame first.
    """

    def __init__(self, threshold: float, describe: Callable[[Sequence[FrameType]], str]) -> None:
        self.threshold = threshold
        self.stalls = 0
        self.longest = 0.0
        self._lag = 0.0
        # Written by the loop (tick), read by the thread: a float store is atomic.
        self._last = time.monotonic()
        self._describe = describe
        self._loop_thread = threading.get_ident()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def lag(self) -> float:
        """Seconds the loop woke up late at the last tick (0.0 on an idle, healthy loop)."""
        return self._lag

    async def run(self) -> None:
        """Refresh the timestamp a few times per threshold, with the watcher thread alive."""
        self._loop_thread = threading.get_ident()
        self._last = time.monotonic()
        thread = self._thread = threading.Thread(
            target=self._watch, name="consumergroup-watchdog", daemon=True
        )
        thread.start()
        period = self.threshold / 4
        try:
            while True:
                self._last = time.monotonic()
                await anyio.sleep(period)
                self._lag = max(0.0, time.monotonic() - self._last - period)
        finally:
            self._stop.set()
            # Wait for the thread off the loop: it may be mid-report (reading a stack,
            # logging); a join here would block every other task meanwhile.
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(thread.join)

    def _watch(self) -> None:
        reported = False
        while not self._stop.wait(self.threshold / 4):
            stalled = time.monotonic() - self._last
            if stalled <= self.threshold:
                reported = False
                continue
            self.longest = max(self.longest, stalled)
            if reported:
                continue
            reported = True
            stack = capture_stack(sys._current_frames().get(self._loop_thread))
            summary = traceback.StackSummary.extract(reversed(stack), lookup_lines=False)
            log.warning(
                "event loop blocked for %.1fs (> %.1fs, a third of the session timeout): %s. "
                "Heartbeats cannot be sent meanwhile; move blocking work off the loop "
                "(await anyio.to_thread.run_sync(...)). Stack:\n%s",
                stalled,
                self.threshold,
                self._describe([frame for frame, _ in stack]),
                "".join(summary.format()[-6:]),
            )
            self.stalls += 1


def capture_stack(frame: FrameType | None) -> list[tuple[FrameType, int]]:
    """The frames from ``frame`` outwards with the line each is at, read now.

    A coroutine frame links to its caller only while it runs, and its line moves on
    with it: both are read at once, while the watched thread is (still) stuck.
    """
    stack = []
    while frame is not None:
        stack.append((frame, frame.f_lineno))
        frame = frame.f_back
    return stack
