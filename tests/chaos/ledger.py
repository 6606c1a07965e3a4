"""What a chaos run's members did, read back from their record files, and what it proves.

Every member process (one *life*: one incarnation of a member slot) appends JSON lines
to its own record file: ``{"claims": {topic: [partitions]}, "t"}`` when it is assigned
partitions, ``{"revoked": [...], "t"}`` / ``{"lost": [...], "t"}`` when they go, and
``{"p", "offsets", "t"}`` for each handled batch (written before the batch is marked, so
every committed offset was recorded first), ``{"commit_failed", "t"}`` when a commit
fails. The driver adds what it did to each life (when it was killed with SIGKILL and the
group's committed offsets right after, when it was frozen with SIGSTOP) and the run's
fault log.

From those, :func:`audit` computes the run's numbers and the invariants that concern
records and ownership:

* **lost**: produced (acknowledged) records that no member handled;
* **ownership**: a life owns a partition from its ``claims`` to its ``revoked`` /
  ``lost``, or its death; a member frozen past its session stops owning when the freeze
  began. No partition may be owned by two lives at once, except right after a member
  *lost* its partitions to a fault that hid it from the coordinator (a network fault, a
  broker killed hard): the coordinator gives them away a session timeout after it last
  heard from the member, which learns it only at its next answer or its own timeout;
* **repeats** (records handled more than once): each is put down to what ended the
  first handler's ownership: a SIGKILL (the member re-delivers at most what it had
  handled since its last successful commit, both counted), a freeze, a loss during a
  fault that hid the member from its coordinator (network, broker killed hard), or a
  hand-over (revoked, or the member left) whose commit failed during such a fault; or a
  later handler that was a frozen member handing out, once thawed, what had reached it
  before it learned that the group had moved on (the freeze again).
  Anything else is a violation: a graceful hand-over, a clean broker restart,
  partitions added, members joining and leaving repeat nothing.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

#: Fault kinds (the first word of a fault log entry) that may hide a member from its
#: coordinator, or its coordinator from it: it may lose its partitions, or fail to
#: commit them when it hands them over.
HIDING = {
    "kill_leader": "broker killed",
    "kill_coordinator": "broker killed",
    "cut": "network fault",
    "cut_all": "network fault",
    "refuse": "network fault",
    "delay": "network fault",
    "drop_mid_response": "network fault",
    "blackhole": "network fault",
    "outage": "network fault",
}
#: Seconds after a hiding fault ends during which a loss or a failed hand-over is still
#: its doing: a session timeout, a request timeout and a rejoin on a loaded machine.
AFTERMATH = 25.0
#: Seconds after a hand-over (revoked, or the member's exit) within which a failed commit
#: is the hand-over's own (the revocation's and close()'s budgets are at most 10 s).
HANDOVER = 12.0


@dataclass
class Life:
    """One member process: its record file and what the driver did to it."""

    name: str
    records: Path
    started: float
    ended: float | None = None  # when it was killed, or exited
    killed: bool = False  # SIGKILL
    #: the group's committed offsets (partition -> offset) right after the SIGKILL
    committed_at_kill: dict[int, int] = field(default_factory=dict)
    freezes: list[tuple[float, float]] = field(default_factory=list)  # SIGSTOP..SIGCONT


@dataclass
class Span:
    """One life's ownership of one partition."""

    life: str
    partition: int
    start: float
    end: float
    how: str  # "revoked", "lost", "frozen" (lost after a freeze), "killed", "exited"
    #: a hand-over ("revoked", "exited") whose commit failed: when it failed
    commit_failed: float | None = None


@dataclass
class KillBound:
    """A SIGKILLed life: what it had handled since the last commit, and what was re-read."""

    life: str
    uncommitted: int  # handled by it and not committed when it died
    redelivered: int  # of those, handled again by a later life


@dataclass
class Audit:
    """The numbers and the broken invariants of one run."""

    produced: int = 0
    handled: int = 0  # handle events of produced records, repeats included
    distinct: int = 0
    lost: int = 0
    repeats: Counter[str] = field(default_factory=Counter)  # cause -> records handled again
    kills: list[KillBound] = field(default_factory=list)
    #: two owners at once after a member lost its partitions to a fault: (count, longest s)
    lost_overlaps: tuple[int, float] = (0, 0.0)
    violations: list[str] = field(default_factory=list)
    #: (partition, offset) -> first time handled, for the stall computation
    first: dict[tuple[int, int], float] = field(default_factory=dict)

    @property
    def twice(self) -> int:
        """Handle events beyond the first of each record."""
        return self.handled - self.distinct


def read_events(path: Path) -> list[dict[str, object]]:
    """A record file's events (a killed member's torn last line is skipped)."""
    events: list[dict[str, object]] = []
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return events
    for line in lines:
        try:
            events.append(json.loads(line))
        except ValueError:
            continue
    return events


def _partitions(claims: object) -> set[int]:
    assert isinstance(claims, dict)
    return {p for parts in claims.values() for p in parts}


def spans(life: Life, events: list[dict[str, object]], now: float) -> list[Span]:
    """The life's ownership spans, from its claims/revoked/lost events and its death.

    A partition lost after a freeze stopped being this life's when the freeze began: the
    group gave it away while the process could not run (what it handled once it ran
    again shows up as repeats, attributed to the freeze). A hand-over carries the first
    commit failure the life recorded within :data:`HANDOVER` seconds after it.
    """
    out: list[Span] = []
    owned: dict[int, float] = {}
    failures = sorted(
        float(t)
        for e in events
        if "commit_failed" in e and isinstance(t := e.get("t"), float | int)
    )

    def close(partition: int, at: float, how: str) -> None:
        start = owned.pop(partition)
        if how == "lost":
            frozen = [f0 for f0, _ in life.freezes if start <= f0 <= at]
            if frozen:
                at, how = min(frozen), "frozen"
        out.append(Span(life.name, partition, start, max(at, start), how))

    last = life.started
    for event in events:
        t = event.get("t")
        if not isinstance(t, float | int):
            continue
        last = float(t)
        if "claims" in event:
            now_owned = _partitions(event["claims"])
            for p in now_owned - owned.keys():
                owned[p] = last
            for p in set(owned) - now_owned:
                close(p, last, "revoked")
        for how in ("revoked", "lost"):
            gone = event.get(how)
            if isinstance(gone, list):
                for p in gone:
                    if p in owned:
                        close(p, last, how)
    end = life.ended if life.ended is not None else now
    for p in list(owned):
        close(p, max(end, last), "killed" if life.killed else "exited")
    for span in out:
        if span.how in ("revoked", "exited"):
            span.commit_failed = next(
                (t for t in failures if span.end <= t <= span.end + HANDOVER), None
            )
    return out


def audit(
    lives: list[Life],
    produced: dict[tuple[int, int], float],
    faults: list[tuple[float, float, str]],
    now: float,
) -> Audit:
    """Account for every produced record and check the record invariants (see the module).

    ``faults``: the run's fault log, ``(start, end, description)``, the description's
    first word the fault's kind.
    """
    a = Audit(produced=len(produced))
    handles: dict[tuple[int, int], list[tuple[float, str]]] = defaultdict(list)
    all_spans: list[Span] = []
    by_name = {life.name: life for life in lives}
    for life in lives:
        events = read_events(life.records)
        all_spans.extend(spans(life, events, now))
        for event in events:
            offsets = event.get("offsets")
            if "p" in event and isinstance(offsets, list):
                p, t = event["p"], event["t"]
                assert isinstance(p, int) and isinstance(t, float | int)
                for o in offsets:
                    if (p, o) in produced:
                        handles[(p, o)].append((float(t), life.name))
    for key, seen in handles.items():
        seen.sort()
        a.handled += len(seen)
        a.first[key] = seen[0][0]
    a.distinct = len(handles)
    a.lost = a.produced - a.distinct
    if a.lost:
        missing = sorted(set(produced) - set(handles))
        a.violations.append(f"{a.lost} acknowledged records never handled, e.g. {missing[:5]}")
    hiding = [(f0, f1 + AFTERMATH, HIDING[what.split()[0]]) for f0, f1, what in faults
              if what.split()[0] in HIDING]  # fmt: skip
    _check_ownership(a, all_spans, hiding)
    _attribute_repeats(a, handles, by_name, all_spans, hiding)
    _bound_kills(a, handles, by_name, all_spans)
    return a


def _hidden(at: float, hiding: list[tuple[float, float, str]]) -> str | None:
    """The kind of hiding fault whose window (aftermath included) holds ``at``."""
    return next((kind for f0, f1, kind in hiding if f0 <= at <= f1), None)


Window = tuple[float, float, str]  # (start, end with its aftermath, what it is)


def _check_ownership(a: Audit, all_spans: list[Span], hiding: list[Window]) -> None:
    by_partition: dict[int, list[Span]] = defaultdict(list)
    for span in all_spans:
        by_partition[span.partition].append(span)
    excused: list[float] = []
    for partition, owned in sorted(by_partition.items()):
        owned.sort(key=lambda s: s.start)
        for i, s in enumerate(owned):
            for later in owned[i + 1 :]:
                if later.start >= s.end:
                    break
                if later.life == s.life:
                    continue
                if s.how == "lost" and _hidden(s.end, hiding):
                    excused.append(s.end - later.start)
                    continue
                a.violations.append(
                    f"partition {partition}: owned by {s.life} ({s.how} at {s.end:.3f}) and "
                    f"{later.life} (from {later.start:.3f}) at once"
                )
    a.lost_overlaps = (len(excused), max(excused, default=0.0))


def _after_freeze(spans: list[Span], t: float) -> bool:
    """True when ``t`` is past the end of a span its freeze ended: the life handled it
    after the thaw, while the group had given the partition away."""
    last = max((s for s in spans if s.start <= t), key=lambda s: s.end, default=None)
    return last is not None and last.how == "frozen" and t > last.end


def _attribute_repeats(
    a: Audit,
    handles: dict[tuple[int, int], list[tuple[float, str]]],
    lives: dict[str, Life],
    all_spans: list[Span],
    hiding: list[tuple[float, float, str]],
) -> None:
    ends: dict[tuple[str, int], list[Span]] = defaultdict(list)
    for s in all_spans:
        ends[(s.life, s.partition)].append(s)
    unexplained: list[str] = []
    for (p, o), seen in handles.items():
        if len(seen) < 2:
            continue
        t1, first = seen[0]
        # The first handler's ownership of the partition at that time: how it ended.
        span = next((s for s in ends[(first, p)] if s.start <= t1 <= s.end), None)
        if span is None:  # handled after the span ended: a frozen member's last batch
            span = max((s for s in ends[(first, p)] if s.start <= t1), key=lambda s: s.end,
                       default=None)  # fmt: skip
        cause = "unexplained"
        if any(_after_freeze(ends[(life, p)], t) for t, life in seen[1:]):
            # A later handler was a frozen member that ran again: it handed out what had
            # reached it (an answer waiting in its socket) before its first answer after
            # the thaw told it the group had moved on; the first handler is the new owner.
            cause = "member frozen"
        elif span is not None:
            if span.how == "killed":
                cause = "member killed"
            elif span.how == "frozen":
                cause = "member frozen"
            elif span.how == "lost":
                cause = _hidden(span.end, hiding) or "unexplained"
            elif span.commit_failed is not None:  # a hand-over whose commit failed
                cause = _hidden(span.commit_failed, hiding) or "unexplained"
        a.repeats[cause] += len(seen) - 1
        if cause == "unexplained" and len(unexplained) < 5:
            how = f"{span.how} at {span.end:.3f}" if span is not None else "not owned"
            if span is not None and span.commit_failed is not None:
                how += f", its commit failed at {span.commit_failed:.3f}"
            unexplained.append(f"{p}/{o} by {first} at {t1:.3f} ({how}), again at {seen[1][0]:.3f}")
    if a.repeats["unexplained"]:
        a.violations.append(
            f"{a.repeats['unexplained']} records handled twice with no member killed or frozen "
            f"and no fault that hid a member from its coordinator, e.g. {'; '.join(unexplained)}"
        )


def _bound_kills(
    a: Audit,
    handles: dict[tuple[int, int], list[tuple[float, str]]],
    lives: dict[str, Life],
    all_spans: list[Span],
) -> None:
    """A SIGKILLed life re-delivers at most what it handled since its last commit."""
    for life in lives.values():
        if not life.killed or life.ended is None:
            continue
        died = life.ended
        owned = {s.partition for s in all_spans if s.life == life.name and s.how == "killed"}
        top: dict[int, int] = {}
        redelivered = 0
        for (p, o), seen in handles.items():
            if p not in owned or not any(name == life.name for _, name in seen):
                continue
            top[p] = max(top.get(p, -1), o)
            if any(t > died and name != life.name for t, name in seen):
                redelivered += 1
        uncommitted = sum(
            max(0, high + 1 - max(life.committed_at_kill.get(p, 0), 0)) for p, high in top.items()
        )
        a.kills.append(KillBound(life.name, uncommitted, redelivered))
        if redelivered > uncommitted:
            a.violations.append(
                f"{life.name} (SIGKILL) had handled {uncommitted} records since its last "
                f"commit, and {redelivered} of its records were handled again"
            )
