"""The latency benchmark's arithmetic (``bench/latency.py``): no broker, no peer."""

from __future__ import annotations

import math
import sys
from array import array
from pathlib import Path

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
