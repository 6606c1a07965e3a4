"""The rebalance benchmark's counting (bench/harness.py), on hand-made delivery timelines."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from bench.harness import flowing_times, phase_metrics

STEP = 0.1  # every partition delivers every 0.1 s while owned


@dataclass
class Member:
    items: list[tuple[int, float, int, int]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)

    def deliver(self, partition: int, start: float, end: float) -> None:
        t = start
        while t < end - 1e-9:
            self.items.append((partition, round(t, 3), 1, 0))
            t += STEP
        self.items.sort(key=lambda item: item[1])

    def event(self, ev: str, t: float, parts: list[int] | None = None, **extra: Any) -> None:
        self.events.append({"ev": ev, "t": t, "parts": parts or [], **extra})
        self.events.sort(key=lambda e: e["t"])


def _group() -> list[Member]:
    """a owns 0-1, b owns 2-3 from 0 s; c joins at 10 s and takes 1 (a commits it at
    10.5 s, c delivers it from 11 s); a pause of 0.4 s on b's partition 2 at 12 s. After
    20 s (the end of the phase) a is stopped and b and c deliver its partitions."""
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
    # After the phase: a leaves, its partition 0 goes to b.
    a.event("revoked", 21.0, [0])
    b.event("assigned", 21.5, [0])
    b.deliver(0, 21.5, 30.0)
    return [a, b, c]


def test_only_the_partition_that_changed_owner_moved() -> None:
    m = phase_metrics(_group(), 10.0, 20.0, 3.0, 4)
    # Deliveries after the phase (a stopped, b took partition 0) do not count.
    assert (m["moved_partitions"], m["unmoved_partitions"]) == (1, 3)


def test_pauses_of_moved_and_unmoved_partitions() -> None:
    m = phase_metrics(_group(), 10.0, 20.0, 3.0, 4)
    assert m["unmoved_max_pause_s"] == pytest.approx(0.4)
    assert m["unmoved_steady_gap_s"] == pytest.approx(STEP)
    assert m["moved_max_pause_s"] == pytest.approx(0.7)  # 10.3 at a, 11.0 at c


def test_hand_over_is_timed_from_the_revoking_members_commit() -> None:
    m = phase_metrics(_group(), 10.0, 20.0, 3.0, 4)
    assert m["moved_after_commit_s"] == pytest.approx(0.5)
    assert m["moved_with_commit"] == 1
    assert m["to_all_flowing_s"] == pytest.approx(1.0)


def test_a_partition_still_at_a_member_that_revoked_it_does_not_flow() -> None:
    group = _group()
    # At 10.6 s a has revoked partition 1 and c has not delivered it yet.
    flowing = flowing_times(group, 10.0, 10.6)
    assert sorted(flowing) == [0, 2, 3]
    assert flowing_times(group, 10.0, 11.05)[1] == (2, 11.0)
