"""RepeatedWarning: a warning that recurs every retry round is logged once, then summarised.

During an outage a retry loop fails every few seconds with the same message; logging
each one floods the log and hides what changed. The first failure of a run is a
warning; later ones are held back (logged at DEBUG) and a summary with their count is
logged at most once per ``interval``; when the loop succeeds again, one INFO line says
how many failures the run had.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

#: Default seconds between two summaries of a run of the same warning.
SUMMARY_INTERVAL = 60.0


class RepeatedWarning:
    """One recurring warning of ``logger`` (e.g. "metadata refresh failed"), rate-limited."""

    def __init__(
        self,
        logger: logging.Logger | logging.LoggerAdapter,  # type: ignore[type-arg]
        interval: float = SUMMARY_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._logger = logger
        self._interval = interval
        self._clock = clock
        self._failures = 0  # in the current run (0: no run)
        self._held = 0  # held back since the last warning or summary
        self._last = 0.0  # when the last warning or summary was logged

    def warning(self, msg: str, *args: object) -> None:
        """Another failure: logged as a warning when it starts a run, else held back and
        summarised (with the count) once ``interval`` has passed since the last line."""
        now = self._clock()
        self._failures += 1
        if self._failures == 1:
            self._logger.warning(msg, *args)
            self._last = now
            return
        self._held += 1
        if now - self._last < self._interval:
            self._logger.debug(msg, *args)
            return
        self._logger.warning(
            msg + " (%d times in the last %.0f s)", *args, self._held, now - self._last
        )
        self._held = 0
        self._last = now

    def recovered(self, what: str) -> None:
        """The operation succeeded: end the run, saying how many failures it had."""
        if self._failures > 1:
            self._logger.info("%s after %d failed attempts", what, self._failures)
        elif self._failures == 1:
            self._logger.info("%s after 1 failed attempt", what)
        self._failures = self._held = 0
