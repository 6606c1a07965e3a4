"""The chaos ledger finds what it must: lost records, two owners at once, unexplained
repeats, a killed member re-delivering more than it had not committed; and excuses what
a fault explains."""

from __future__ import annotations

import json
from pathlib import Path

from tests.chaos.ledger import Audit, Life, audit

PRODUCED = {(0, o): 100.0 for o in range(10)}


def life(tmp_path: Path, name: str, events: list[dict[str, object]], **kw: object) -> Life:
    path = tmp_path / f"{name}.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events) + '{"torn')
    started = kw.pop("started", 100.0)
    assert isinstance(started, float)
    return Life(name, path, started, **kw)  # type: ignore[arg-type]


def handled(offsets: range, t: float) -> dict[str, object]:
    return {"p": 0, "offsets": list(offsets), "t": t}


def test_a_clean_hand_over_is_no_violation(tmp_path: Path) -> None:
    a = life(
        tmp_path,
        "a",
        [
            {"claims": {"t": [0]}, "t": 101.0},
            handled(range(5), 102.0),
            {"revoked": [0], "t": 103.0},
        ],
    )
    b = life(tmp_path, "b", [{"claims": {"t": [0]}, "t": 104.0}, handled(range(5, 10), 105.0)])
    result = audit([a, b], PRODUCED, [], now=110.0)
    assert (result.handled, result.twice, result.lost, result.violations) == (10, 0, 0, [])


def test_lost_records_two_owners_and_an_unexplained_repeat_are_violations(tmp_path: Path) -> None:
    a = life(tmp_path, "a", [{"claims": {"t": [0]}, "t": 101.0}, handled(range(5), 102.0)])
    b = life(tmp_path, "b", [{"claims": {"t": [0]}, "t": 103.0}, handled(range(3, 8), 104.0)])
    result = audit([a, b], PRODUCED, [], now=110.0)
    assert result.lost == 2  # offsets 8 and 9
    assert result.twice == 2 and result.repeats["unexplained"] == 2
    assert sum("at once" in v for v in result.violations) == 1
    assert len(result.violations) == 3


def test_a_killed_member_may_repeat_what_it_had_not_committed_and_no_more(
    tmp_path: Path,
) -> None:
    events = [{"claims": {"t": [0]}, "t": 101.0}, handled(range(6), 102.0)]
    # Offsets 0-3 were committed (4 is the next to read): 4 and 5 may come again.
    a = life(tmp_path, "a", events, ended=103.0, killed=True, committed_at_kill={0: 4})
    b = life(tmp_path, "b", [{"claims": {"t": [0]}, "t": 109.0}, handled(range(4, 10), 110.0)])
    result = audit([a, b], PRODUCED, [], now=111.0)
    assert result.violations == []
    assert result.repeats["member killed"] == 2
    assert [(k.uncommitted, k.redelivered) for k in result.kills] == [(2, 2)]
    # Committed only up to 2: re-reading from 2 is within the bound, from 1 is not.
    a.committed_at_kill = {0: 2}
    b.records.write_text(b.records.read_text().replace("[4, 5,", "[1, 2, 3, 4, 5,"))
    result = audit([a, b], PRODUCED, [], now=111.0)
    assert [(k.uncommitted, k.redelivered) for k in result.kills] == [(4, 5)]
    assert any("SIGKILL" in v for v in result.violations)


def test_a_frozen_member_stops_owning_when_the_freeze_began(tmp_path: Path) -> None:
    events = [
        {"claims": {"t": [0]}, "t": 101.0},
        handled(range(5), 102.0),
        {"lost": [0], "t": 120.0},
    ]
    a = life(tmp_path, "a", events, freezes=[(103.0, 119.0)])
    b = life(tmp_path, "b", [{"claims": {"t": [0]}, "t": 110.0}, handled(range(3, 10), 111.0)])
    result = audit([a, b], PRODUCED, [], now=121.0)
    assert result.violations == []
    assert result.repeats["member frozen"] == 2


def test_a_frozen_member_that_hands_out_after_the_thaw_repeats_for_the_freeze(
    tmp_path: Path,
) -> None:
    """The new owner handles first; the frozen member, thawed, hands out an answer that
    had reached it before it learns it was fenced: a repeat of the freeze, not a
    violation (the Kafka chaos run on the consumer protocol, SIGSTOP of 7.1 s)."""
    events = [
        {"claims": {"t": [0]}, "t": 101.0},
        handled(range(3), 102.0),
        handled(range(3, 8), 119.5),  # after the thaw, before it learns
        {"lost": [0], "t": 119.6},
    ]
    a = life(tmp_path, "a", events, freezes=[(103.0, 119.4)])
    b = life(tmp_path, "b", [{"claims": {"t": [0]}, "t": 110.0}, handled(range(3, 10), 111.0)])
    result = audit([a, b], PRODUCED, [], now=121.0)
    assert result.violations == []
    assert result.repeats["member frozen"] == 5
    # Handled by a member that was never frozen, the same repeat is a violation.
    a.freezes = []
    assert audit([a, b], PRODUCED, [], now=121.0).repeats["unexplained"] == 5


def test_a_member_that_lost_its_partitions_to_a_network_fault_is_excused(
    tmp_path: Path,
) -> None:
    """Its coordinator gave its partitions away while it could not hear: two owners for a
    moment, and what it had not committed read again. The same without a fault is not."""
    events = [
        {"claims": {"t": [0]}, "t": 101.0},
        handled(range(5), 102.0),
        {"lost": [0], "t": 112.0},
    ]
    a = life(tmp_path, "a", events)
    b = life(tmp_path, "b", [{"claims": {"t": [0]}, "t": 111.0}, handled(range(3, 10), 111.5)])
    blackhole = [(103.0, 108.0, "blackhole m0#1 for 5.0s")]
    result = audit([a, b], PRODUCED, blackhole, now=120.0)
    assert result.violations == []
    assert result.repeats["network fault"] == 2
    assert result.lost_overlaps == (1, 1.0)
    # A clean restart hides nobody: the same story is two violations.
    result = audit([a, b], PRODUCED, [(103.0, 108.0, "bounce 0->1->2")], now=120.0)
    assert len(result.violations) == 2, result.violations


def test_a_hand_over_whose_commit_failed_in_a_fault_is_excused(tmp_path: Path) -> None:
    """The last short run on Tansu: a member's partitions were revoked a moment before a
    total outage began, and the revocation's commit failed in it; the member got them
    back afterwards and read again from the commit before. The fault began after the
    revocation, so it is the failed commit that explains the repeat: with the commit
    having succeeded, or failing with no fault to explain it, it is a violation."""

    def run(commit: dict[str, object] | None, faults: list[tuple[float, float, str]]) -> Audit:
        events: list[dict[str, object]] = [
            {"claims": {"t": [0]}, "t": 101.0},
            handled(range(5), 102.0),
            {"revoked": [0], "t": 104.9},
            *([commit] if commit else []),
            {"claims": {"t": [0]}, "t": 150.0},
            handled(range(4, 10), 151.0),
        ]
        return audit([life(tmp_path, "a", events)], PRODUCED, faults, now=160.0)

    failed = {"commit_failed": "KafkaConnectionError()", "t": 105.2}
    outage = [(105.0, 135.0, "outage 30.0s")]
    result = run(failed, outage)
    assert result.violations == [] and result.repeats["network fault"] == 1
    assert len(run(None, outage).violations) == 1  # the hand-over's commit went through
    assert len(run(failed, []).violations) == 1  # a commit failure no fault explains
    late = {"commit_failed": "KafkaConnectionError()", "t": 130.0}  # not the hand-over's
    assert len(run(late, outage).violations) == 1
