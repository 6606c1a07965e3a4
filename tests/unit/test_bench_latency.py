"""The latency benchmark's arithmetic (``bench/latency.py``): no broker, no peer."""

from __future__ import annotations

import asyncio
import math
import os
import sys
from array import array
from pathlib import Path
from typing import Any

import pytest

from bench import latency

PRODUCED = {
    "in_window": 3,
    "worst_lag_ms": 1.0,
    "sent": 5,
    "write": {"p50": 0.5, "p99": 0.9, "p999": 0.9, "max": 0.9},
}


def test_read_pairs_keeps_the_window_keyed_by_send_time(tmp_path: Path) -> None:
    pairs = array("q", [5, 7, 10, 15, 20, 21, 30, 40])
    if sys.byteorder == "little":
        pairs.byteswap()
    path = tmp_path / "peer.lat"
    path.write_bytes(pairs.tobytes())
    assert latency.read_pairs(path, [10, 30]) == {10: 15, 20: 21}


def test_together_each_record_is_measured_behind_its_first_arrival() -> None:
    fast = {10: 12, 20: 25, 30: 31}
    slow = {10: 14, 20: 25, 30: 131}
    first = {10: 12, 20: 25, 30: 31}
    figures = latency._figures(slow, first, PRODUCED, drain=2.0)
    assert figures["behind_max"] == 100 / 1e6
    assert figures["max"] == 101 / 1e6
    assert latency._figures(fast, first, PRODUCED, 2.0)["behind_max"] == 0
    alone = latency._figures(slow, {}, PRODUCED, 2.0)
    assert math.isnan(alone["behind_p99"])
    assert alone["write_p99"] == 0.9


def test_a_record_missing_counts_as_waiting_the_whole_drain() -> None:
    figures = latency._figures({10: 12, 20: 25}, {}, PRODUCED, drain=2.0)
    assert figures["missing"] == 1
    assert figures["max"] == 2000.0


def test_the_stall_check_judges_our_own_part_only_when_the_peers_ran_together() -> None:
    def run(peer: str, worst: float, behind: float) -> dict[str, object]:
        return {"peer": peer, "max": worst, "behind_max": behind}

    together = [run("cg_messages", 600.0, 120.0), run("franz", 590.0, 0.0)]
    verdicts = {v["target"]: v["pass"] for v in latency.verdicts({}, together)}
    own = [t for t in verdicts if "own part" in t]
    assert len(own) == 1 and "cg_messages" in own[0] and verdicts[own[0]]
    assert not verdicts[next(t for t in verdicts if t.startswith("stall check: cg_messages"))]
    alone = [run("cg_messages", 100.0, math.nan)]
    assert [v["pass"] for v in latency.verdicts({}, alone)] == [True]


def test_the_broker_gc_pauses_of_a_run_are_those_overlapping_its_window(tmp_path: Path) -> None:
    # The lines KafkaCluster's JVM writes (-Xlog:gc:file=...:time,uptime); a pause is
    # logged at its end, so one ending just after the window opened began inside it.
    log = tmp_path / "gc.log"
    log.write_text(
        "[2026-11-27T21:35:40.000+0000][530.000s] Using Serial\n"
        "[2026-11-27T21:35:40.100+0000][530.100s] GC(110) Pause Young (Allocation Failure)"
        " 90M->60M(107M) 50.000ms\n"
        "[2026-11-27T21:35:44.624+0000][536.362s] GC(111) Pause Full (Allocation Failure)"
        " 76M->52M(127M) 348.009ms\n"
        "[2026-11-27T21:35:50.020+0000][542.000s] GC(112) Pause Young (Allocation Failure)"
        " 60M->52M(127M) 30.000ms\n"
        "[2026-11-27T21:35:59.000+0000][551.000s] GC(113) Pause Young (Allocation Failure)"
        " 80M->52M(127M) 40.000ms\n"
    )
    t0 = 1795815344.4  # 21:35:44.400 UTC, inside the full pause (21:35:44.276-.624)
    t1 = 1795815350.0  # 21:35:50.000: the next pause (ending at .020) began at 49.990
    assert latency.gc_pauses([log], t0, t1) == {"gc_pauses": 2, "gc_full": 1, "gc_max_ms": 348.009}
    assert latency.gc_pauses([tmp_path / "absent.log"], t0, t1)["gc_pauses"] == 0


def test_each_rep_starts_the_peers_at_the_next_one() -> None:
    rows = ["a", "b", "c"]
    assert [latency.rotated(rows, rep) for rep in range(4)] == [
        ["a", "b", "c"],
        ["b", "c", "a"],
        ["c", "a", "b"],
        ["a", "b", "c"],
    ]
    assert latency.rotated([], 3) == []


def _rep(p99: float) -> dict[str, float]:
    figures = dict.fromkeys(
        ("p50", "p999", "write_p50", "write_p99", "behind_p50", "behind_p99", "cpu_s"), 1.0
    )
    return {
        **figures,
        "p99": p99,
        "max": p99 + 5,
        "count": 10,
        "missing": 0,
        "producer_lag_ms": 1.0,
    }


def test_the_p99_verdict_is_on_the_medians_over_reps_and_names_the_spreads() -> None:
    # Ours loses one rep by far and wins the others: the median decides, not the worst rep.
    ours = latency._summary([_rep(40.0), _rep(47.0), _rep(39.0)])
    franz = latency._summary([_rep(40.5), _rep(39.5), _rep(41.0)])
    assert (ours["p99"], ours["p99_min"], ours["p99_max"], ours["reps"]) == (40.0, 39.0, 47.0, 3)
    assert ours["max"] == 52.0
    [verdict] = latency.verdicts({"1000": {"cg_messages": ours, "franz": franz}}, [])
    assert verdict["pass"]
    assert verdict["value"] == (
        "40.00 vs 40.50 ms (median of 3 reps; ours 39.00-47.00, franz 39.50-41.00); "
        "ours - franz per rep: -0.50, +7.50, -2.00 ms (ours <= franz in 2 of 3)"
    )
    slower = latency._summary([_rep(41.0), _rep(40.9), _rep(39.0)])
    [verdict] = latency.verdicts({"1000": {"cg_messages": slower, "franz": franz}}, [])
    assert not verdict["pass"]
    one = latency._summary([_rep(40.0)])
    [verdict] = latency.verdicts({"1000": {"cg_messages": one, "franz": franz}}, [])
    assert verdict["value"] == "40.00 vs 40.50 ms"


def test_together_the_verdict_shows_the_p99_difference_rep_by_rep() -> None:
    # Every peer's p99 moves with the rep; the difference within each rep does not.
    ours = latency._summary([_rep(40.0), _rep(47.0), _rep(39.0)])
    franz = latency._summary([_rep(40.5), _rep(46.0), _rep(39.2)])
    [verdict] = latency.verdicts({"1000": {"cg_messages": ours, "franz": franz}}, [])
    assert verdict["value"] == (
        "40.00 vs 40.50 ms (median of 3 reps; ours 39.00-47.00, franz 39.20-46.00); "
        "ours - franz per rep: -0.50, +1.00, -0.20 ms (ours <= franz in 2 of 3)"
    )
    # A peer that failed in rep 3 left the later reps: the pairs are the reps both ran.
    short = latency._summary([_rep(40.5), _rep(46.0)])
    [verdict] = latency.verdicts({"1000": {"cg_messages": ours, "franz": short}}, [])
    assert verdict["value"].endswith("per rep: -0.50, +1.00 ms (ours <= franz in 1 of 2)")
    # Apart (no delay behind another peer), reps read different streams: no pairing.
    alone = {**_rep(40.0), "behind_p50": math.nan, "behind_p99": math.nan}
    apart = latency._summary([alone, alone])
    [verdict] = latency.verdicts({"1000": {"cg_messages": apart, "franz": franz}}, [])
    assert verdict["value"] == (
        "40.00 vs 40.50 ms (median of 2 reps; ours 40.00-40.00, franz 39.20-46.00)"
    )


def test_from_the_apart_rate_up_the_table_says_so_and_dashes_the_behind_columns() -> None:
    alone = {**_rep(9.0), "behind_p50": math.nan, "behind_p99": math.nan}
    result = _result({"cg_messages": latency._summary([alone])}, reps=1, together=True)
    result["rates"] = {"100000": result["rates"]["1000"]}
    result["setup"]["apart_from"] = 100_000
    text = latency.markdown(result, "a broker")
    assert "the peers together (from 100,000/s one at a time: together they overload" in text
    assert "| 100,000/s | consumergroup messages()+mark | 1.00 | 9.00 |" in text
    assert "| 1.00 | - | - |" in text  # peer CPU, then no delay behind another peer


def test_the_floor_reference_is_never_the_best_peer_of_a_verdict() -> None:
    # It is not a client anyone can use: ours is judged against the clients only.
    rows = {
        "cg_messages": latency._summary([_rep(40.0)]),
        "floor": latency._summary([_rep(30.0)]),
        "franz": latency._summary([_rep(40.5)]),
    }
    [verdict] = latency.verdicts({"1000": rows}, [])
    assert verdict["target"] == "1,000/s: cg_messages p99 <= best peer's (franz)"
    assert verdict["pass"]
    text = latency.markdown(_result(rows, reps=1, together=True), "a broker")
    assert "| 1,000/s | reference: the floor of an asyncio consumer" in text


def _result(rows: dict[str, Any], reps: int, together: bool) -> dict[str, Any]:
    """A latency result at 1,000/s holding ``rows``, as :func:`latency.markdown` takes it."""
    setup = {"partitions": 8, "size": 100, "warmup_s": 5.0, "window_s": 15.0}
    return {
        "setup": {**setup, "reps": reps, "together": together, "producer": "cg"},
        "rates": {"1000": rows},
        "errors": {},
        "stall": [],
        "verdicts": [],
    }


def test_the_table_shows_each_rows_p99_spread() -> None:
    rows = {"cg_messages": latency._summary([_rep(40.0), _rep(47.0), _rep(39.0)])}
    text = latency.markdown(_result(rows, reps=3, together=True), "a broker")
    assert "3 rep(s) in rotated peer order, the peers together" in text
    assert "producer: consumergroup Producer," in text
    assert "| 40.00 | 39.00-47.00 |" in text


def test_the_scheduler_figures_are_per_time_slice_of_the_window() -> None:
    async def measure() -> dict[str, Any]:
        busy = await asyncio.create_subprocess_exec(
            sys.executable, "-c", "import time\nwhile True: time.sleep(0.001)"
        )
        try:
            return await latency.sched_window({"sleeper": busy.pid, "gone": 2**22 + 7}, 0.1, 0.5)
        finally:
            busy.kill()
            await busy.wait()

    if latency.schedstat(os.getpid()) is None:
        pytest.skip("no /proc/<pid>/task/*/schedstat here")
    got = asyncio.run(measure())
    assert set(got) == {"sleeper"}  # a process that is not there has no row
    sleeper = got["sleeper"]
    # Waking every millisecond: hundreds of slices a second, each one short.
    assert 100 < sleeper["slices_per_s"] < 2000, sleeper
    assert 0 < sleeper["slice_cpu_us"] < 1000, sleeper
    assert sleeper["slice_wait_us"] >= 0


def test_rows_without_scheduler_figures_show_dashes() -> None:
    rows = {"franz": latency._summary([_rep(40.0)])}
    assert math.isnan(rows["franz"]["slice_cpu_us"])
    with_sched = latency._summary(
        [{**_rep(40.0), "slice_cpu_us": 41.6, "slice_wait_us": 180.2, "slices_per_s": 640.0}]
    )
    rows = {**rows, "cg_messages": with_sched}
    text = latency.markdown(_result(rows, reps=1, together=False), "a broker")
    assert "| 1.00 | - | - | - |" in text
    assert "| 1.00 | 42 | 180 | 640 |" in text
