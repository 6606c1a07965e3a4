"""``python -m bench.hotpath_ir``'s modes run (uninstrumented, a few hundred messages): the
tool builds a real session and claims, so a change of their constructors breaks it."""

from __future__ import annotations

import contextlib
import gc

import pytest
from opentelemetry.sdk.trace import TracerProvider

from bench import hotpath_ir
from tests.helpers import global_tracer_provider


@pytest.mark.parametrize("mode", hotpath_ir.MODES)
def test_every_mode_consumes_every_message(mode: str) -> None:
    traced = mode.endswith("_traced")
    try:
        with global_tracer_provider(TracerProvider()) if traced else contextlib.nullcontext():
            assert hotpath_ir.run(mode, 300) == 300
    finally:
        gc.enable()  # the tool turns the collector off for its own process; this is pytest's
