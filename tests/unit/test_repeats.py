"""RepeatedWarning: the first of a run of failures is a warning, the rest a counted summary."""

from __future__ import annotations

import logging

import pytest

from consumergroup._repeats import RepeatedWarning


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_run_of_failures_is_one_warning_then_a_summary_with_the_count(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="test.repeats")
    clock = Clock()
    repeated = RepeatedWarning(logging.getLogger("test.repeats"), interval=60.0, clock=clock)
    for _ in range(30):  # every 2 s for a minute
        repeated.warning("refresh failed (%s)", "refused")
        clock.now += 2.0
    repeated.warning("refresh failed (%s)", "refused")  # 60 s after the first
    repeated.recovered("refreshed")
    repeated.warning("refresh failed (%s)", "again")  # a new run starts with a warning
    lines = [(r.levelname, r.getMessage()) for r in caplog.records if r.levelname != "DEBUG"]
    assert lines == [
        ("WARNING", "refresh failed (refused)"),
        ("WARNING", "refresh failed (refused) (30 times in the last 60 s)"),
        ("INFO", "refreshed after 31 failed attempts"),
        ("WARNING", "refresh failed (again)"),
    ]
    assert sum(r.levelname == "DEBUG" for r in caplog.records) == 29  # held back
