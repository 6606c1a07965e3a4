"""The chaos driver: random faults against a consumer group of member processes.

One embedded broker; 3-5 member processes (``tests.integration.member_process``
in chaos mode), each reaching the broker only through its own :class:`FaultProxy`;
an aiokafka producer in this process writing throughout; a monitor polling the
group's committed offsets (OffsetFetch through our own client, directly to the
broker). A seeded RNG picks each cycle's fault; one cycle in the middle is a
total outage (every proxy cuts and refuses everything). At the end the faults
stop, the members catch up and are closed with SIGTERM, and the invariants are
checked (see :meth:`ChaosRun._verdict`). ``python -m tests.chaos`` runs it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from aiokafka import AIOKafkaProducer

import consumergroup as cg
from consumergroup.client import Client
from consumergroup.net.protocol import OffsetFetchRequest
from consumergroup.testing import EmbeddedBroker
from tests.chaos.proxy import FaultProxy
from tests.integration.group_support import wait_for

REPO = Path(__file__).parents[2]
GROUP, TOPIC = "chaos", "chaos-events"
CLOSE_BOUND = 10.0  # seconds each member passes to close()
CLOSE_SLACK = 1.0  # scheduling noise on a loaded machine, on top of the bound
NET_TIMEOUT = 5.0  # the members' net.read_timeout: how long a black hole can hide
RESUME_BOUND = 60.0  # after the outage, consumption must resume within this


@dataclass(frozen=True)
class Profile:
    """How much chaos: cycles, members, fault lengths, production rate."""

    name: str
    cycles: int
    partitions: int
    min_members: int
    max_members: int
    outage: float  # seconds of the total outage (one cycle)
    fault_s: tuple[float, float]  # how long one fault lasts
    settle_s: tuple[float, float]  # quiet time after each fault
    rate: float  # records produced per second
    drain_timeout: float  # seconds for the members to catch up at the end


PROFILES = {
    "short": Profile("short", 11, 6, 3, 4, 30.0, (0.5, 2.5), (0.3, 1.0), 40.0, 90.0),
    "long": Profile("long", 100, 8, 3, 5, 30.0, (1.0, 6.0), (0.5, 3.0), 50.0, 180.0),
}

# Drawn like cards from a shuffled deck of every kind, refilled when empty: any ten
# cycles in a row try every kind. "outage" is not in it: it is the middle cycle.
FAULTS = (
    "cut",
    "cut_all",
    "refuse",
    "delay",
    "drop_mid_response",
    "blackhole",
    "kill9",
    "sigstop",
    "join",
    "leave",
)


class Member:
    """One member slot: its proxy (for the whole run) and its current process, if any."""

    def __init__(self, index: int, proxy: FaultProxy, workdir: Path, assignor: str) -> None:
        self.index = index
        self.proxy = proxy
        self.workdir = workdir
        self.assignor = assignor
        self.proc: asyncio.subprocess.Process | None = None
        self.incarnation = 0
        self.expect_exit = False  # we killed or stopped it: an exit is not a failure
        self.frozen = False  # SIGSTOPped

    @property
    def name(self) -> str:
        """``m<slot>#<incarnation>``, as in the log and the record files."""
        return f"m{self.index}#{self.incarnation}"

    @property
    def alive(self) -> bool:
        """A process runs in this slot."""
        return self.proc is not None and self.proc.returncode is None

    def path(self, kind: str, incarnation: int | None = None) -> Path:
        """The record/status/log file of an incarnation (the current one by default)."""
        return self.workdir / f"m{self.index}-{incarnation or self.incarnation}.{kind}"

    async def start(self) -> None:
        """Start a new member process (a new incarnation) behind this slot's proxy."""
        self.incarnation += 1
        self.expect_exit = False
        self.frozen = False
        with self.path("log").open("wb") as log:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "tests.integration.member_process",
                self.proxy.address,
                GROUP,
                TOPIC,
                "--record",
                str(self.path("jsonl")),
                "--status",
                str(self.path("status")),
                "--close-timeout",
                str(CLOSE_BOUND),
                "--net-timeout",
                str(NET_TIMEOUT),
                "--assignor",
                self.assignor,
                cwd=str(REPO),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,  # its own process group: killpg reaches all of it
            )

    def signal(self, sig: signal.Signals) -> None:
        """Send ``sig`` to the member's process group."""
        if self.alive:
            assert self.proc is not None
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, sig)

    def status(self) -> dict[str, object] | None:
        """The status JSON the current incarnation wrote on exit, if any."""
        try:
            loaded: dict[str, object] = json.loads(self.path("status").read_text())
        except (OSError, ValueError):
            return None
        return loaded

    def log_tail(self, lines: int = 15) -> str:
        """The end of the current incarnation's stderr."""
        try:
            text = self.path("log").read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


@dataclass
class ChaosReport:
    """What a run did and which invariants it broke (none, ideally)."""

    profile: str
    seed: int
    workdir: Path
    assignor: str = "range"
    cycles: int = 0
    seconds: float = 0.0
    faults: Counter[str] = field(default_factory=Counter)
    produced: int = 0
    handled: int = 0  # handle events, duplicates included
    distinct: int = 0  # produced records handled at least once
    lost: int = 0
    longest_stall: float = 0.0
    stall_window: tuple[float, float] = (0.0, 0.0)  # seconds since start
    stall_faults: list[str] = field(default_factory=list)
    longest_other_stall: float = 0.0  # the longest one not overlapping the outage
    other_stall_window: tuple[float, float] = (0.0, 0.0)
    other_stall_faults: list[str] = field(default_factory=list)
    outage_resumed_after: float | None = None
    close_times: list[float] = field(default_factory=list)
    offset_polls: int = 0
    violations: list[str] = field(default_factory=list)

    @property
    def duplicated(self) -> int:
        """Handle events beyond the first of each record."""
        return self.handled - self.distinct

    def format(self) -> str:
        """The human-readable summary ``make chaos`` prints."""
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(self.faults.items()))
        resumed = (
            "never"
            if self.outage_resumed_after is None
            else f"{self.outage_resumed_after:.1f} s after it ended"
        )
        closes = (
            f"{len(self.close_times)} calls, longest {max(self.close_times):.2f} s"
            if self.close_times
            else "none"
        )
        lines = [
            f"chaos profile {self.profile}, assignor {self.assignor}, seed {self.seed}: "
            f"{self.cycles} cycles "
            f"in {self.seconds:.0f} s (files: {self.workdir})",
            f"faults: {kinds}",
            f"records: produced {self.produced}, handled {self.handled}, distinct "
            f"{self.distinct}, duplicated {self.duplicated}, lost {self.lost}",
            _stall_line("longest stall", self.longest_stall, self.stall_window, self.stall_faults),
            _stall_line(
                "longest stall away from the outage",
                self.longest_other_stall,
                self.other_stall_window,
                self.other_stall_faults,
            ),
            f"total outage: consumption resumed {resumed}",
            f"close(): {closes} (bound {CLOSE_BOUND} s)",
            f"committed offsets polled {self.offset_polls} times",
            f"violations: {len(self.violations)}",
            *(f"  - {v}" for v in self.violations),
        ]
        return "\n".join(lines)


class ChaosRun:
    """One seeded chaos run; :meth:`run` returns its :class:`ChaosReport`."""

    def __init__(
        self,
        profile: Profile,
        seed: int,
        workdir: Path | None = None,
        log: Callable[[str], None] = print,
        assignor: str = "range",
    ) -> None:
        self.profile = profile
        self.assignor = assignor
        self.rng = random.Random(seed)
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="chaos-"))
        self.report = ChaosReport(profile.name, seed, self.workdir, assignor)
        self._log = log
        self.members: list[Member] = []
        self.produced: dict[tuple[int, int], float] = {}  # (partition, offset) -> acked at
        self.committed: dict[int, int] = {}  # highest committed offset seen per partition
        self.fault_log: list[tuple[float, float, str]] = []  # (start, end, what)
        self._start = time.time()
        self._outage_end: float | None = None
        self._outage_window = (0.0, 0.0)  # (start, end) of the total outage
        self._deck: list[str] = []
        self._warm = 0.0  # when the group first caught up: stalls count from here

    def log(self, text: str) -> None:
        """A progress line, stamped with seconds since the start."""
        self._log(f"[{time.time() - self._start:6.1f}s] {text}")

    def violation(self, text: str) -> None:
        """Record a broken invariant (and show it at once)."""
        self.report.violations.append(text)
        self.log(f"VIOLATION: {text}")

    # ---------------------------------------------------------------- the run

    async def run(self) -> ChaosReport:
        """Start everything, run the cycles, drain, stop, check. Cleans up on any failure."""
        self._start = time.time()
        p = self.profile
        async with EmbeddedBroker() as broker, contextlib.AsyncExitStack() as stack:
            await broker.create_topic(TOPIC, p.partitions)
            for i in range(p.max_members):
                proxy = await stack.enter_async_context(FaultProxy(broker.port))
                self.members.append(Member(i, proxy, self.workdir, self.assignor))
            stop_producing = asyncio.Event()
            background: list[asyncio.Task[None]] = []
            try:
                for m in self.members[: p.min_members]:
                    await m.start()
                background.append(asyncio.create_task(self._produce(broker, stop_producing)))
                background.append(asyncio.create_task(self._monitor(broker)))
                await self._warm_up()
                for i in range(p.cycles):
                    await self._cycle(i)
                    self.report.cycles += 1
                stop_producing.set()
                await background[0]
                await self._drain(broker)
                await asyncio.gather(*(self._leave(m) for m in self.members if m.alive))
                background[1].cancel()
                await self._final_check(broker)
            finally:
                stop_producing.set()
                for task in background:
                    task.cancel()
                await asyncio.gather(*background, return_exceptions=True)
                for m in self.members:
                    m.signal(signal.SIGKILL)
                    if m.proc is not None:
                        await m.proc.wait()
            self._account()
        self.report.seconds = time.time() - self._start
        return self.report

    async def _produce(self, broker: EmbeddedBroker, stop: asyncio.Event) -> None:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=5)
        await producer.start()
        tick = 0.1
        per_tick = max(1, round(self.profile.rate * tick))
        try:
            n = 0
            while not stop.is_set():
                futures = []
                for _ in range(per_tick):
                    futures.append(
                        await producer.send(TOPIC, b"%d" % n, partition=n % self.profile.partitions)
                    )
                    n += 1
                for sent in await asyncio.gather(*futures):
                    self.produced[(sent.partition, sent.offset)] = time.time()
                await asyncio.sleep(tick)
        finally:
            await producer.stop()

    async def _monitor(self, broker: EmbeddedBroker) -> None:
        """Poll committed offsets; any that moves backwards breaks an invariant."""
        async with Client([broker.bootstrap], cg.Config(client_id="chaos-monitor")) as client:
            while True:
                try:
                    committed = await committed_offsets(client, self.profile.partitions)
                except Exception as exc:  # the broker is never faulted; say so, keep polling
                    self.log(f"monitor: OffsetFetch failed: {exc!r}")
                    await asyncio.sleep(0.5)
                    continue
                self.report.offset_polls += 1
                for partition, offset in committed.items():
                    seen = self.committed.get(partition, -1)
                    if offset < seen:
                        self.violation(
                            f"committed offset of partition {partition} moved backwards: "
                            f"{seen} -> {offset}"
                        )
                    self.committed[partition] = max(seen, offset)
                await asyncio.sleep(0.5)

    # ----------------------------------------------------------------- faults

    async def _cycle(self, i: int) -> None:
        p = self.profile
        alive = [m for m in self.members if m.alive]
        if i == p.cycles // 2:
            await self._outage()
            await self._check_members()
            return
        kind = self._draw(len(alive))
        target = self.rng.choice(alive)
        length = self.rng.uniform(*p.fault_s)
        started = time.time()
        what = await self._inject(kind, target, length)
        self.report.faults[kind] += 1
        self.fault_log.append((started, time.time(), what))
        await self._check_members()
        await asyncio.sleep(self.rng.uniform(*p.settle_s))

    def _draw(self, alive: int) -> str:
        """The next fault from the deck that fits the member count (others wait their turn)."""
        if not self._deck:
            self._deck = list(FAULTS)
            self.rng.shuffle(self._deck)
        for kind in self._deck:
            if (kind == "join" and alive >= self.profile.max_members) or (
                kind == "leave" and alive <= self.profile.min_members
            ):
                continue
            self._deck.remove(kind)
            return kind
        return "cut"  # only join/leave are left and neither fits: a cut keeps the pace

    async def _inject(self, kind: str, m: Member, length: float) -> str:
        """Apply one fault, wait it out, heal; returns a description for the log."""
        proxy = m.proxy
        what = f"{kind} {m.name}"
        if kind == "cut":
            proxy.cut()
        elif kind == "cut_all":
            what = kind
            for other in self.members:
                other.proxy.cut()
        elif kind == "refuse":
            what += f" for {length:.1f}s"
            proxy.stop_listening()
            proxy.cut()
        elif kind == "delay":
            proxy.latency = self.rng.uniform(0.2, 2.0)
            what += f" {proxy.latency:.2f}s for {length:.1f}s"
        elif kind == "drop_mid_response":
            count = self.rng.randint(1, 3)
            what += f" x{count}"
            proxy.drop_mid_response(count)
        elif kind == "blackhole":
            # Sometimes longer than the members' request timeout.
            length = self.rng.uniform(length, NET_TIMEOUT + 4.0)
            what += f" for {length:.1f}s"
            proxy.blackhole()
        elif kind == "kill9":
            what += f", restart after {length:.1f}s"
            m.expect_exit = True
            m.signal(signal.SIGKILL)
        elif kind == "sigstop":
            # Sometimes past the session timeout: the group must move on and take it back.
            length = self.rng.uniform(length, 9.0)
            what += f" for {length:.1f}s"
            m.frozen = True
            m.signal(signal.SIGSTOP)
        elif kind == "join":
            m = next(s for s in self.members if not s.alive)
            await m.start()
            what = f"join {m.name}"
        elif kind == "leave":
            what = f"leave {m.name}"
        self.log(what)
        if kind == "leave":
            await self._leave(m)
            return what
        await asyncio.sleep(length)
        await proxy.heal()
        if kind == "sigstop":
            m.frozen = False
            m.signal(signal.SIGCONT)
        elif kind == "kill9":
            assert m.proc is not None
            await m.proc.wait()
            await m.start()
        return what

    async def _outage(self) -> None:
        """Every proxy cuts and refuses everything for ``profile.outage`` seconds."""
        started = time.time()
        self.log(f"total outage for {self.profile.outage:.0f}s")
        for m in self.members:
            m.proxy.stop_listening()
            m.proxy.cut()
        await asyncio.sleep(self.profile.outage)
        for m in self.members:
            await m.proxy.heal()
        self._outage_end = time.time()
        self._outage_window = (started, self._outage_end)
        self.report.faults["outage"] += 1
        self.fault_log.append((started, self._outage_end, "outage"))

    async def _leave(self, m: Member) -> None:
        """SIGTERM: the member closes (bounded) and reports; check what it reports."""
        assert m.proc is not None
        m.expect_exit = True
        if m.frozen:
            m.frozen = False
            m.signal(signal.SIGCONT)
        m.signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(m.proc.wait(), CLOSE_BOUND + 15.0)
        except TimeoutError:
            self.violation(f"{m.name} did not exit within {CLOSE_BOUND + 15.0}s of SIGTERM")
            m.signal(signal.SIGKILL)
            await m.proc.wait()
            return
        self._judge_status(m, asked=True)

    def _judge_status(self, m: Member, asked: bool) -> None:
        status = m.status()
        if status is None:
            self.violation(
                f"{m.name} exited with code {m.proc and m.proc.returncode} and no status; "
                f"stderr: {m.log_tail()}"
            )
            return
        if not asked:
            self.violation(f"{m.name} exited on its own (code {m.proc and m.proc.returncode})")
        if status.get("run_error"):
            self.violation(f"{m.name}: run() failed: {_last_lines(status['run_error'])}")
        if status.get("close_error"):
            self.violation(f"{m.name}: close() raised: {_last_lines(status['close_error'])}")
        close_s = status.get("close_s")
        if isinstance(close_s, float):
            self.report.close_times.append(close_s)
            if close_s > CLOSE_BOUND + CLOSE_SLACK:
                self.violation(f"{m.name}: close(timeout={CLOSE_BOUND}) took {close_s:.1f}s")
        if status.get("leftover_tasks"):
            self.violation(f"{m.name}: tasks left after close(): {status['leftover_tasks']}")
        for error in status.get("loop_errors") or []:  # type: ignore[attr-defined]
            self.violation(f"{m.name}: unhandled exception in a task: {_last_lines(error)}")

    async def _check_members(self) -> None:
        """A member that exited without being told to is a failure; replace it."""
        for m in self.members:
            if m.proc is not None and m.proc.returncode is not None and not m.expect_exit:
                self._judge_status(m, asked=False)
                await m.start()

    # ------------------------------------------------------------- the end

    async def _warm_up(self) -> None:
        """Faults start once the group consumes (the first join takes a few seconds)."""
        deadline = time.monotonic() + 60.0
        while time.monotonic() < deadline:
            await self._check_members()
            handled = {(p, o) for p, o, _ in self._handled()}
            if handled and self.produced and handled >= set(self.produced):
                self._warm = time.time()
                self.log(f"group consuming; {self.profile.cycles} fault cycles follow")
                return
            await asyncio.sleep(0.5)
        self.violation("the group did not start consuming within 60s (before any fault)")

    async def _drain(self, broker: EmbeddedBroker) -> None:
        """Wait (bounded) until every produced record is handled and committed."""
        for m in self.members:
            await m.proxy.heal()
        await self._check_members()
        self.log("faults over; draining")
        end = await end_offsets(broker.bootstrap, self.profile.partitions)
        deadline = time.monotonic() + self.profile.drain_timeout
        while time.monotonic() < deadline:
            await self._check_members()
            handled = {(p, o) for p, o, _ in self._handled()}
            if self.produced.keys() <= handled and all(
                self.committed.get(p, -1) >= end[p] for p in end
            ):
                self.log("drained")
                return
            await asyncio.sleep(1.0)
        self.violation(f"not drained within {self.profile.drain_timeout}s")

    async def _final_check(self, broker: EmbeddedBroker) -> None:
        for m in self.members:
            if m.incarnation and not m.proxy.rewrites:
                self.violation(f"member slot {m.index} never had its broker address rewritten")
        end = await end_offsets(broker.bootstrap, self.profile.partitions)
        async with Client([broker.bootstrap], cg.Config(client_id="chaos-check")) as client:
            committed = await committed_offsets(client, self.profile.partitions)
        for partition, high in sorted(end.items()):
            if committed.get(partition) != high:
                self.violation(
                    f"partition {partition}: committed {committed.get(partition)} "
                    f"!= end offset {high} (Fetch high watermark)"
                )

    def _handled(self) -> list[tuple[int, int, float]]:
        """Every handle event ``(partition, offset, time)`` in every member's record file."""
        events = []
        for path in sorted(self.workdir.glob("*.jsonl")):
            for line in path.read_text().splitlines():
                try:
                    event = json.loads(line)
                except ValueError:
                    continue  # the torn last line of a killed member
                if "p" in event:
                    events.extend((event["p"], o, event["t"]) for o in event["offsets"])
        return events

    def _account(self) -> None:
        """Produced/handled/duplicated/lost, the longest stall, the outage recovery."""
        r = self.report
        events = self._handled()
        first: dict[tuple[int, int], float] = {}
        for p, o, t in events:
            if (p, o) in self.produced:
                first[(p, o)] = min(t, first.get((p, o), t))
        r.produced = len(self.produced)
        r.handled = sum(1 for p, o, _ in events if (p, o) in self.produced)
        r.distinct = len(first)
        r.lost = r.produced - r.distinct
        if r.lost:
            missing = sorted(set(self.produced) - set(first))
            self.violation(f"{r.lost} produced records never handled, e.g. {missing[:5]}")
        self._stall(first)
        if self._outage_end is not None:
            after = [t for t in first.values() if t >= self._outage_end]
            resumed = min(after) - self._outage_end if after else None
            r.outage_resumed_after = resumed
            if resumed is None or resumed > RESUME_BOUND:
                self.violation(f"consumption did not resume within {RESUME_BOUND}s of the outage")

    def _stall(self, first: dict[tuple[int, int], float]) -> None:
        """Longest time with a record waiting and nothing handled (all members together),
        counting records produced after the warm-up."""
        order = sorted(
            (tp for tp in first if self.produced[tp] >= self._warm), key=first.__getitem__
        )
        if len(order) < 2:
            return
        # waiting_since[i]: earliest production among records first handled at order[i] or later
        waiting_since = [0.0] * len(order)
        low = float("inf")
        for i in range(len(order) - 1, -1, -1):
            low = min(low, self.produced[order[i]])
            waiting_since[i] = low
        best = other = (0.0, 0.0, 0.0)  # (gap, start, end); other: not touching the outage
        o_start, o_end = self._outage_window
        for i in range(len(order) - 1):
            start = max(first[order[i]], waiting_since[i + 1])
            end = first[order[i + 1]]
            best = max(best, (end - start, start, end))
            if end <= o_start or start >= o_end:
                other = max(other, (end - start, start, end))
        r = self.report
        r.longest_stall, r.stall_window, r.stall_faults = self._window(best)
        r.longest_other_stall, r.other_stall_window, r.other_stall_faults = self._window(other)

    def _window(
        self, stall: tuple[float, float, float]
    ) -> tuple[float, tuple[float, float], list[str]]:
        """A stall as (seconds, window since the start, the faults active in it)."""
        gap, start, end = stall
        faults = [what for f0, f1, what in self.fault_log if f0 < end and f1 > start]
        return gap, (start - self._start, end - self._start), faults


async def committed_offsets(client: Client, partitions: int) -> dict[int, int]:
    """The group's committed offsets (OffsetFetch; -1 where none)."""
    conn = await client.coordinator(GROUP)
    resp = await conn.send(OffsetFetchRequest(GROUP, [(TOPIC, list(range(partitions)))]))
    out: dict[int, int] = {}
    for _topic, parts in resp.topics:
        for partition, offset, _metadata, code in parts:
            if not code:
                out[partition] = offset
    return out


async def end_offsets(bootstrap: str, partitions: int) -> dict[int, int]:
    """Each partition's log end, read from a Fetch's high watermark (not ListOffsets: Tansu)."""
    config = cg.Config(client_id="chaos-end")
    config.consumer.max_wait_time = 0.1
    async with cg.Consumer([bootstrap], config) as consumer:
        pcs = await consumer.consume_partitions(
            {(TOPIC, p): cg.OFFSET_NEWEST for p in range(partitions)}
        )
        await wait_for(
            lambda: all(pc.high_water_mark_offset >= 0 for pc in pcs.values()), 30, "the ends"
        )
        ends = {p: pcs[(TOPIC, p)].high_water_mark_offset for p in range(partitions)}
        for pc in pcs.values():
            await pc.close()
    return ends


def _stall_line(what: str, gap: float, window: tuple[float, float], faults: list[str]) -> str:
    shown = ", ".join(faults[:6]) + (f", ... ({len(faults)} in all)" if len(faults) > 6 else "")
    since = f"t={window[0]:.1f}..{window[1]:.1f} s"
    return f"{what}: {gap:.1f} s ({since}; faults then: {shown or '-'})"


def _last_lines(text: object, lines: int = 3) -> str:
    return " | ".join(str(text).strip().splitlines()[-lines:])
