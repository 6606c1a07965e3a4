"""``python -m bench.hotpath_ir``'s and ``bench.reader_wake``'s modes run (uninstrumented, a
few hundred messages): the tools build a real session, claims and partition consumers, so a
change of their constructors breaks them."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import subprocess
import sys

import pytest
from opentelemetry.sdk.trace import TracerProvider

from bench import __main__ as bench_main
from bench import hotpath_ir, reader_wake, report
from tests.helpers import global_tracer_provider


@pytest.mark.parametrize("mode", hotpath_ir.MODES)
def test_every_mode_consumes_every_message(mode: str) -> None:
    traced = mode.endswith("_traced")
    try:
        with global_tracer_provider(TracerProvider()) if traced else contextlib.nullcontext():
            assert hotpath_ir.run(mode, 300) == 300
    finally:
        gc.enable()  # the tool turns the collector off for its own process; this is pytest's


@pytest.mark.parametrize("mode", reader_wake.MODES)
@pytest.mark.parametrize("records", [1, 5])
def test_every_reader_wake_mode_reads_every_record(mode: str, records: int) -> None:
    try:
        assert reader_wake.run(mode, 200, records) == 200 * records
    finally:
        gc.enable()


def test_absent_child_cannot_import_opentelemetry() -> None:
    """The ``*_absent`` children run as if the extra were not installed: the import fails
    there, the claim streams still deliver, and nothing imports OpenTelemetry behind them."""
    code = (
        "from bench import hotpath_ir\n"
        "hotpath_ir.block_opentelemetry()\n"
        "try:\n"
        "    import opentelemetry.trace\n"
        "except ModuleNotFoundError:\n"
        "    pass\n"
        "else:\n"
        "    raise SystemExit('imported')\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
    for mode in ("claim_messages_absent", "claim_batches_absent"):
        subprocess.run(
            [sys.executable, "-m", "bench.hotpath_ir", "--run", mode, "300"],
            check=True,
            timeout=120,
        )


def test_otel_section_without_valgrind_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hotpath_ir.shutil, "which", lambda _name: None)
    result = hotpath_ir.otel(10, 20)
    assert result == {"skipped": hotpath_ir.NO_VALGRIND}
    assert "SKIPPED: valgrind is not installed" in hotpath_ir.otel_markdown(result)


def test_otel_markdown_verdicts() -> None:
    rows = [
        {"stream": "messages()", "absent_ir": 1000.0, "present_ir": 1019.0, "ratio": 1.019},
        {"stream": "batches()", "absent_ir": 1000.0, "present_ir": 1030.0, "ratio": 1.03},
    ]
    for row in rows:
        row["ok"] = row["ratio"] - 1 <= hotpath_ir.OTEL_BOUND
    text = hotpath_ir.otel_markdown({"low": 1, "high": 2, "bound": 0.02, "rows": rows})
    assert "| messages() | 1,000 | 1,019 | 1.0190x | PASS |" in text
    assert "| batches() | 1,000 | 1,030 | 1.0300x | FAIL |" in text


def test_bench_only_otel_starts_no_broker(monkeypatch: pytest.MonkeyPatch) -> None:
    """``python -m bench --only otel`` runs the section once and starts no broker."""
    calls: list[tuple[int, int]] = []

    def fake_otel(low: int, high: int) -> dict[str, object]:
        calls.append((low, high))
        return {"skipped": "fake"}

    async def no_broker(*_args: object) -> dict[str, object]:
        raise AssertionError("a broker section ran")

    monkeypatch.setattr(hotpath_ir, "otel", fake_otel)
    monkeypatch.setattr(bench_main, "run_on", no_broker)
    results = asyncio.run(bench_main.amain(bench_main.parse_args(["--only", "otel"])))
    assert calls == [(20_000, 120_000)]
    assert results["runs"] == {} and results["otel"] == {"skipped": "fake"}
    assert "Brokers: none." in report.markdown(results)
