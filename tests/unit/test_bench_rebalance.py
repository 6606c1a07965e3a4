"""The rebalance benchmark's counting (bench/harness.py), on hand-made delivery timelines."""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any

import pytest

from bench.harness import flowing_times, phase_metrics

STEP = 0.1  # a record of each partition every 0.1 s; a delivery 0.05 s after each
#: Record k of each partition produced at k * STEP, up to 30 s.
PRODUCED = {p: [k * STEP for k in range(300)] for p in range(4)}


@dataclass
class Member:
    items: list[tuple[int, float, int, int]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    times: list[tuple[int, float]] = field(default_factory=list)

    def deliver(self, partition: int, start: float, end: float) -> None:
        t = start
        while t < end - 1e-9:
            self.times.append((partition, round(t + STEP / 2, 3)))
            t += STEP

    def event(self, ev: str, t: float, parts: list[int] | None = None, **extra: Any) -> None:
        self.events.append({"ev": ev, "t": t, "parts": parts or [], **extra})
        self.events.sort(key=lambda e: e["t"])


def records(members: list[Member], produced: dict[int, list[float]], skip: float = 0) -> None:
    """Each delivery hands over every record produced since the partition's last one
    (none: no delivery); ``skip``: no delivery in (skip, skip + 0.6)."""
    last = {p: -1 for p in produced}
    deliveries = sorted((t, p, i) for i, m in enumerate(members) for p, t in m.times)
    for m in members:
        m.items = []
    for t, p, i in deliveries:
        if skip and skip < t < skip + 0.6:
            continue
        newest = bisect.bisect_right(produced[p], t) - 1
        if newest > last[p]:
            members[i].items.append((p, t, newest - last[p], newest))
            last[p] = newest


def _group(produced: dict[int, list[float]] = PRODUCED, skip: float = 0) -> list[Member]:
    """a owns 0-1, b owns 2-3 from 0 s; c joins at 10 s and takes 1 (a revokes it at
    10.4 s, commits at 10.5 s, c delivers it from 11 s); b's partition 2 delivers nothing
    from 12 s to 12.3 s. After 20 s (the end of the phase) a leaves: b takes 0."""
    a, b, c = Member(), Member(), Member()
    a.event("assigned", 0.0, [0, 1])
    b.event("assigned", 0.0, [2, 3])
    a.deliver(0, 0.0, 21.0)
    a.deliver(1, 0.0, 10.4)
    a.event("revoked", 10.4, [1])
    a.event("committed", 10.5, ok=True)
    c.event("assigned", 10.9, [1])
    c.deliver(1, 11.0, 30.0)
    b.deliver(2, 0.0, 12.0)
    b.deliver(2, 12.3, 30.0)
    b.deliver(3, 0.0, 30.0)
    a.event("revoked", 21.0, [0])
    b.event("assigned", 21.5, [0])
    b.deliver(0, 21.5, 30.0)
    records([a, b, c], produced, skip)
    return [a, b, c]


def test_only_the_partition_that_changed_owner_moved() -> None:
    m = phase_metrics(_group(), 10.0, 20.0, 3.0, 4, PRODUCED)
    # Deliveries after the phase (a left, b took partition 0) do not count.
    assert (m["moved_partitions"], m["unmoved_partitions"]) == (1, 3)


def test_pauses_of_moved_and_unmoved_partitions() -> None:
    m = phase_metrics(_group(), 10.0, 20.0, 3.0, 4, PRODUCED)
    assert m["unmoved_max_pause_s"] == pytest.approx(0.35)  # 12.0's record, at 12.35
    assert m["unmoved_max_raw_gap_s"] == pytest.approx(0.4)
    assert m["unmoved_steady_gap_s"] == pytest.approx(STEP / 2)
    assert m["moved_max_pause_s"] == pytest.approx(0.65)  # 10.4's record, at c at 11.05


def test_hand_over_is_timed_from_the_revoking_members_commit() -> None:
    m = phase_metrics(_group(), 10.0, 20.0, 3.0, 4, PRODUCED)
    assert m["moved_after_commit_s"] == pytest.approx(0.55)
    assert m["moved_with_commit"] == 1
    assert m["to_all_flowing_s"] == pytest.approx(1.05)


def test_a_partition_still_at_a_member_that_revoked_it_does_not_flow() -> None:
    group = _group()
    # At 10.6 s a has revoked partition 1 and c has not delivered it yet.
    assert sorted(flowing_times(group, 10.0, 10.6)) == [0, 2, 3]
    assert flowing_times(group, 10.0, 11.1)[1] == (2, 11.05)


def test_a_gap_in_which_nothing_was_produced_is_no_pause() -> None:
    # The producer stalls from 15 s to 15.6 s: every partition shows the gap.
    produced = {p: [t for t in ts if not 15.0 < t < 15.6] for p, ts in PRODUCED.items()}
    m = phase_metrics(_group(produced), 10.0, 20.0, 3.0, 4, produced)
    assert m["unmoved_max_raw_gap_s"] == pytest.approx(0.6)
    assert m["unmoved_max_pause_s"] == pytest.approx(0.35)  # b's own pause at 12 s


def test_records_that_wait_while_nothing_is_delivered_are_a_pause() -> None:
    m = phase_metrics(_group(skip=15.0), 10.0, 20.0, 3.0, 4, PRODUCED)
    assert m["unmoved_max_pause_s"] == pytest.approx(0.65)  # 15.0's record, at 15.65
