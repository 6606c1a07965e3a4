"""The chaos driver: random faults against a consumer group of member processes.

Two brokers, two kinds of faults:

* **Tansu** (one embedded broker): 3-5 member processes
  (``tests.integration.member_process`` in chaos mode), each reaching the broker only
  through its own :class:`FaultProxy`, which cuts, refuses, delays, drops and black-holes
  its connections; one cycle in the middle is a total outage (every proxy cuts and
  refuses everything).
* **Apache Kafka** (a 3-node ``KafkaCluster``): the members reach the cluster directly,
  and the faults hit the brokers (:mod:`.kafka_faults`: rolling clean restarts, SIGKILL
  of a partition leader or of the group coordinator, partitions added).

On both, members are killed with SIGKILL and restarted, frozen with SIGSTOP (past their
session timeout, sometimes), join and leave (SIGTERM: ``close()`` with a bound). A
producer in this process writes throughout (on Kafka with acks=all, idempotent) and
keeps the acknowledged records; a monitor polls the group's committed offsets. A seeded
RNG picks each cycle's fault. At the end the faults stop, the members catch up and are
closed with SIGTERM, and the invariants are checked (:meth:`ChaosRun._verdict` and
:mod:`.ledger`). ``python -m tests.chaos`` runs it.

Protocols: ``eager`` (the classic protocol, range assignor), ``cooperative`` (classic,
cooperative-sticky) and ``consumer`` (KIP-848, Apache Kafka only).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import random
import signal
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

from aiokafka import AIOKafkaProducer

import consumergroup as cg
from consumergroup.client import Client
from consumergroup.errors import ConsumerGroupError
from consumergroup.net.offset_fetch import offset_fetch_topics
from consumergroup.net.protocol import OffsetFetchRequest
from consumergroup.testing import EmbeddedBroker, KafkaCluster
from tests.chaos.kafka_faults import BrokerFaults
from tests.chaos.ledger import Audit, Life, audit
from tests.chaos.proxy import FaultProxy
from tests.integration.group_support import wait_for

REPO = Path(__file__).parents[2]
CLOSE_BOUND = 10.0  # seconds each member passes to close()
CLOSE_SLACK = 1.0  # scheduling noise on a loaded machine, on top of the bound
NET_TIMEOUT = 5.0  # the members' net.read_timeout: how long a black hole can hide
RESUME_BOUND = 60.0  # after the outage, consumption must resume within this
SESSION_TIMEOUT = 6.0  # the members' (classic) and the Kafka fixture's (consumer protocol)

#: protocol -> (member_process --protocol, --assignor)
PROTOCOLS = {
    "eager": ("classic", "range"),
    "cooperative": ("classic", "cooperative-sticky"),
    "consumer": ("consumer", "range"),
}


@dataclass(frozen=True)
class Profile:
    """How much chaos, on which broker: cycles, members, fault lengths, production rate."""

    name: str
    broker: str  # "tansu" or "kafka"
    cycles: int
    partitions: int
    min_members: int
    max_members: int
    outage: float  # seconds of the total outage (one cycle; 0: none)
    fault_s: tuple[float, float]  # how long one fault lasts
    settle_s: tuple[float, float]  # quiet time after each fault
    rate: float  # records produced per second
    drain_timeout: float  # seconds for the members to catch up at the end
    faults: tuple[str, ...]  # the deck
    max_partitions: int = 0  # add_partitions stops here
    ordered: bool = False  # the faults in the deck's order, each once (cycles: len(faults))


# Tansu: network faults between each member and the broker. "outage" is not in the deck:
# it is the middle cycle.
TANSU_FAULTS = (
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
NETWORK_FAULTS = TANSU_FAULTS[:6]
# Apache Kafka: the brokers fail (one at a time), and the members.
KAFKA_FAULTS = (
    "bounce",
    "kill_leader",
    "kill_coordinator",
    "add_partitions",
    "kill9",
    "sigstop",
    "join",
    "leave",
)


def _profile(name: str, broker: str, **settings: object) -> Profile:
    settings.setdefault("faults", TANSU_FAULTS if broker == "tansu" else KAFKA_FAULTS)
    return Profile(name=name, broker=broker, **settings)  # type: ignore[arg-type]


SHORT_KAFKA_FAULTS = tuple(f for f in KAFKA_FAULTS if f != "kill_leader")

PROFILES = {
    "tansu": {
        "short": _profile(
            "short", "tansu", cycles=11, partitions=6, min_members=3, max_members=4,
            outage=30.0, fault_s=(0.5, 2.5), settle_s=(0.3, 1.0), rate=40.0, drain_timeout=90.0,
        ),
        "long": _profile(
            "long", "tansu", cycles=100, partitions=8, min_members=3, max_members=5,
            outage=30.0, fault_s=(1.0, 6.0), settle_s=(0.5, 3.0), rate=50.0, drain_timeout=180.0,
        ),
    },
    "kafka": {
        # Every kind once, one hard kill (the coordinator's node, which leads partitions
        # too): four broker restarts, ~2-3 min on a loaded machine.
        "short": _profile(
            "short", "kafka", cycles=7, partitions=6, min_members=3, max_members=4,
            outage=0.0, fault_s=(1.0, 3.0), settle_s=(1.0, 2.0), rate=100.0,
            drain_timeout=120.0, max_partitions=8, faults=SHORT_KAFKA_FAULTS,
        ),
        # A rolling restart as an operator runs it, then a node killed, then members
        # killed and restarted, under a steady 500 records/s.
        "rolling": _profile(
            "rolling", "kafka", cycles=5, partitions=6, min_members=3, max_members=4,
            outage=0.0, fault_s=(2.0, 4.0), settle_s=(2.0, 4.0), rate=500.0,
            drain_timeout=120.0, faults=("bounce", "kill_leader", "kill9", "leave", "join"),
            ordered=True,
        ),
        "long": _profile(
            "long", "kafka", cycles=16, partitions=6, min_members=3, max_members=5,
            outage=0.0, fault_s=(1.0, 6.0), settle_s=(1.0, 4.0), rate=300.0,
            drain_timeout=180.0, max_partitions=12,
        ),
    },
}  # fmt: skip


class Member:
    """One member slot: its path to the broker and its current process, if any."""

    def __init__(self, index: int, run: ChaosRun, proxy: FaultProxy | None) -> None:
        self.index = index
        self.run = run
        self.proxy = proxy
        self.proc: asyncio.subprocess.Process | None = None
        self.incarnation = 0
        self.life: Life | None = None
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

    def path(self, kind: str) -> Path:
        """The record/status/log file of the current incarnation."""
        return self.run.workdir / f"m{self.index}-{self.incarnation}.{kind}"

    async def start(self) -> None:
        """Start a new member process (a new incarnation)."""
        self.incarnation += 1
        self.expect_exit = False
        self.frozen = False
        run = self.run
        protocol, assignor = PROTOCOLS[run.protocol]
        address = self.proxy.address if self.proxy is not None else run.bootstrap
        self.life = Life(self.name, self.path("jsonl"), time.time())
        run.lives.append(self.life)
        with self.path("log").open("wb") as log:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "tests.integration.member_process",
                address,
                run.group,
                run.topic,
                "--record",
                str(self.path("jsonl")),
                "--status",
                str(self.path("status")),
                "--close-timeout",
                str(CLOSE_BOUND),
                "--net-timeout",
                str(NET_TIMEOUT),
                "--protocol",
                protocol,
                "--assignor",
                assignor,
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

    async def handles_sigterm(self, bound: float = 60.0) -> None:
        """Wait until the process has its SIGTERM handler (it writes the ``ready`` mark):
        on a loaded machine a member may still be importing seconds after it started, and
        a SIGTERM then kills it the default way, without close() or a status."""
        deadline = time.monotonic() + bound
        while self.alive and not self.path("status.ready").exists():
            if time.monotonic() > deadline:
                return  # the leave that follows reports the member as it finds it
            await asyncio.sleep(0.05)

    def ended(self, killed: bool = False) -> None:
        """The current incarnation is gone (killed, or exited)."""
        if self.life is not None and self.life.ended is None:
            self.life.ended = time.time()
            self.life.killed = killed

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
    broker: str
    protocol: str
    seed: int
    workdir: Path
    cycles: int = 0
    seconds: float = 0.0
    faults: Counter[str] = field(default_factory=Counter)
    audit: Audit = field(default_factory=Audit)
    longest_stall: float = 0.0
    stall_window: tuple[float, float] = (0.0, 0.0)  # seconds since start
    stall_faults: list[str] = field(default_factory=list)
    longest_other_stall: float = 0.0  # the longest one not overlapping the outage
    other_stall_window: tuple[float, float] = (0.0, 0.0)
    other_stall_faults: list[str] = field(default_factory=list)
    outage_resumed_after: float | None = None
    close_times: list[float] = field(default_factory=list)
    offset_polls: int = 0
    load: tuple[float, float, float] = (0.0, 0.0, 0.0)  # os.getloadavg() at the end
    violations: list[str] = field(default_factory=list)

    def format(self) -> str:
        """The human-readable summary ``make chaos`` prints."""
        a = self.audit
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(self.faults.items()))
        closes = (
            f"{len(self.close_times)} calls, longest {max(self.close_times):.2f} s"
            if self.close_times
            else "none"
        )
        causes = ", ".join(f"{k} {n}" for k, n in sorted(a.repeats.items())) or "-"
        kills = ", ".join(f"{k.life}: {k.redelivered} of {k.uncommitted}" for k in a.kills) or "-"
        lines = [
            f"chaos profile {self.profile} on {self.broker}, protocol {self.protocol}, "
            f"seed {self.seed}: {self.cycles} cycles in {self.seconds:.0f} s "
            f"(load {self.load[0]:.1f}; files: {self.workdir})",
            f"faults: {kinds}",
            f"records: produced {a.produced}, handled {a.handled}, distinct {a.distinct}, "
            f"twice {a.twice}, lost {a.lost}",
            f"handled twice because: {causes}",
            f"re-delivered after SIGKILL (of those handled since the last commit): {kills}",
            f"two owners at once after a member lost its partitions to a fault: "
            f"{a.lost_overlaps[0]} times, longest {a.lost_overlaps[1]:.1f} s",
            _stall_line("longest stall", self.longest_stall, self.stall_window, self.stall_faults),
        ]
        if self.outage_resumed_after is not None or self.broker == "tansu":
            resumed = (
                "never"
                if self.outage_resumed_after is None
                else f"{self.outage_resumed_after:.1f} s after it ended"
            )
            lines += [
                _stall_line(
                    "longest stall away from the outage",
                    self.longest_other_stall,
                    self.other_stall_window,
                    self.other_stall_faults,
                ),
                f"total outage: consumption resumed {resumed}",
            ]
        lines += [
            f"close(): {closes} (bound {CLOSE_BOUND} s)",
            f"committed offsets polled {self.offset_polls} times",
            f"violations: {len(self.violations)}",
            *(f"  - {v}" for v in self.violations),
        ]
        return "\n".join(lines)

    def row(self) -> str:
        """One line of ``make chaos``'s table."""
        a = self.audit
        return (
            f"| {self.broker} | {self.protocol} | {self.cycles} | {a.produced} | {a.handled} "
            f"| {a.twice} | {a.lost} | {self.longest_stall:.1f} s | {len(self.violations)} |"
        )


TABLE_HEAD = (
    "| broker | protocol | cycles | acked | handled | twice | lost | longest stall "
    "| violations |\n|---|---|---|---|---|---|---|---|---|"
)


class ChaosRun:
    """One seeded chaos run; :meth:`run` returns its :class:`ChaosReport`.

    ``cluster``: on Kafka, a running 3-node cluster to use (the test suite's); by default
    the run starts its own (and Tansu runs always do).
    """

    def __init__(
        self,
        profile: Profile,
        seed: int,
        workdir: Path | None = None,
        log: Callable[[str], None] = print,
        protocol: str = "eager",
        cluster: KafkaCluster | None = None,
    ) -> None:
        if protocol == "consumer" and profile.broker != "kafka":
            raise ValueError("the consumer protocol (KIP-848) runs on Apache Kafka only")
        self.profile = profile
        self.protocol = protocol
        self.rng = random.Random(seed)
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="chaos-"))
        self.report = ChaosReport(profile.name, profile.broker, protocol, seed, self.workdir)
        self._log = log
        self._cluster = cluster
        suffix = "" if cluster is None else f"-{uuid.uuid4().hex[:8]}"
        self.group, self.topic = f"chaos{suffix}", f"chaos-events{suffix}"
        self.partitions = profile.partitions
        self.bootstrap = ""  # where members (Kafka), the producer and the monitor connect
        self._tansu_port = 0  # the embedded broker's port, behind the members' proxies
        self.members: list[Member] = []
        self.lives: list[Life] = []
        self.faults: BrokerFaults | None = None
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
        async with self._brokers() as stack:
            for i in range(p.max_members):
                proxy = None
                if p.broker == "tansu":
                    proxy = await stack.enter_async_context(FaultProxy(self._tansu_port))
                self.members.append(Member(i, self, proxy))
            stop_producing = asyncio.Event()
            background: list[asyncio.Task[None]] = []
            try:
                for m in self.members[: p.min_members]:
                    await m.start()
                background.append(asyncio.create_task(self._produce(stop_producing)))
                background.append(asyncio.create_task(self._monitor()))
                await self._warm_up()
                for i in range(p.cycles):
                    await self._cycle(i)
                    self.report.cycles += 1
                stop_producing.set()
                await background[0]
                await self._drain()
                await asyncio.gather(*(self._leave(m) for m in self.members if m.alive))
                background[1].cancel()
                await self._final_check()
            finally:
                stop_producing.set()
                for task in background:
                    task.cancel()
                await asyncio.gather(*background, return_exceptions=True)
                for m in self.members:
                    m.signal(signal.SIGKILL)
                    if m.proc is not None:
                        await m.proc.wait()
                        m.ended()
            self._account()
        self.report.seconds = time.time() - self._start
        self.report.load = os.getloadavg()
        return self.report

    @contextlib.asynccontextmanager
    async def _brokers(self) -> AsyncIterator[contextlib.AsyncExitStack]:
        """The broker(s) for the run, and an exit stack for what lives as long."""
        p = self.profile
        async with contextlib.AsyncExitStack() as stack:
            if p.broker == "tansu":
                broker = await stack.enter_async_context(EmbeddedBroker())
                self.bootstrap = broker.bootstrap
                self._tansu_port = broker.port
                await broker.create_topic(self.topic, p.partitions)
            else:
                cluster = self._cluster
                if cluster is None:
                    cluster = KafkaCluster(nodes=3)
                    await stack.enter_async_context(cluster)
                self.bootstrap = cluster.bootstrap
                await cluster.create_topic(self.topic, p.partitions, replication_factor=3)
                faults = BrokerFaults(cluster, self.topic, self.group, self.rng, self.log)
                self.faults = await stack.enter_async_context(faults)
                await faults.healthy()
            yield stack

    @property
    def _seeds(self) -> list[str]:
        return self.bootstrap.split(",")

    async def _produce(self, stop: asyncio.Event) -> None:
        # Partitions added during the run are produced to once the producer's metadata
        # shows them (refreshed every second).
        settings: dict[str, object] = {"linger_ms": 5, "metadata_max_age_ms": 1000}
        if self.profile.broker == "kafka":
            settings.update(acks="all", enable_idempotence=True, request_timeout_ms=15000)
        producer = AIOKafkaProducer(bootstrap_servers=self._seeds, **settings)
        await producer.start()
        tick = 0.1
        per_tick = max(1, round(self.profile.rate * tick))
        try:
            n = 0
            while not stop.is_set():
                futures = []
                known = len(await producer.partitions_for(self.topic))
                for _ in range(per_tick):
                    partition = n % min(known, self.partitions)
                    futures.append(await producer.send(self.topic, b"%d" % n, partition=partition))
                    n += 1
                for sent in await asyncio.gather(*futures, return_exceptions=True):
                    if not isinstance(sent, BaseException):  # not acknowledged: not promised
                        self.produced[(sent.partition, sent.offset)] = time.time()
                await asyncio.sleep(tick)
        finally:
            await producer.stop()

    async def _monitor(self) -> None:
        """Poll committed offsets; any that moves backwards breaks an invariant."""
        failing = False
        async with Client(self._seeds, cg.Config(client_id="chaos-monitor")) as client:
            while True:
                try:
                    committed = await committed_offsets(client, self.group, self.topic)
                except ConsumerGroupError as exc:  # a broker may be down: say so, keep polling
                    if not failing:
                        self.log(f"monitor: OffsetFetch failed (until said otherwise): {exc!r}")
                    failing = True
                    await asyncio.sleep(0.5)
                    continue
                if failing:
                    self.log("monitor: OffsetFetch answered again")
                failing = False
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
        if p.outage and i == p.cycles // 2:
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
        """The next fault from the deck that fits (others wait their turn)."""
        p = self.profile
        if not self._deck:
            self._deck = list(p.faults)
            if not p.ordered:
                self.rng.shuffle(self._deck)
        if p.ordered:  # the profile's own scenario: no draw
            return self._deck.pop(0)
        for kind in self._deck:
            if (
                (kind == "join" and alive >= p.max_members)
                or (kind == "leave" and alive <= p.min_members)
                or (kind == "add_partitions" and self.partitions >= p.max_partitions)
            ):
                continue
            self._deck.remove(kind)
            return kind
        # Only what does not fit is left: a fault that always fits keeps the pace.
        return "cut" if p.broker == "tansu" else "kill9"

    async def _inject(self, kind: str, m: Member, length: float) -> str:
        """Apply one fault, wait it out, heal; returns a description for the log."""
        if self.faults is not None and kind in ("bounce", "kill_leader", "kill_coordinator"):
            self.log(f"{kind} ...")
            if kind == "bounce":
                what = await self.faults.bounce()
            elif kind == "kill_leader":
                what = await self.faults.kill_leader(length)
            else:
                what = await self.faults.kill_coordinator(length)
            self.log(what)
            return what
        if self.faults is not None and kind == "add_partitions":
            what, self.partitions = await self.faults.add_partitions()
            self.log(what)
            return what
        proxy = m.proxy
        what = f"{kind} {m.name}"
        if kind in NETWORK_FAULTS:
            assert proxy is not None, f"{kind} needs the member's proxy (Tansu profiles)"
            what, length = self._network_fault(kind, m, proxy, length)
        elif kind == "kill9":
            what += f", restart after {length:.1f}s"
            m.expect_exit = True
            m.signal(signal.SIGKILL)
            assert m.proc is not None
            await m.proc.wait()
            m.ended(killed=True)
            await self._committed_at_kill(m)
        elif kind == "sigstop":
            # Past the session timeout (on Tansu: sometimes), the group must move on
            # without the member and take it back once it wakes.
            low = SESSION_TIMEOUT + 1.0 if self.faults is not None else length
            length = self.rng.uniform(low, SESSION_TIMEOUT + 3.0)
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
        frozen_at = time.time()
        await asyncio.sleep(length)
        if proxy is not None:
            await proxy.heal()
        if kind == "sigstop":
            m.frozen = False
            m.signal(signal.SIGCONT)
            if m.life is not None:
                m.life.freezes.append((frozen_at, time.time()))
        elif kind == "kill9":
            await m.start()
        return what

    def _network_fault(
        self, kind: str, m: Member, proxy: FaultProxy, length: float
    ) -> tuple[str, float]:
        """Start one of the Tansu profile's network faults (healed by the caller): its
        description and how long it lasts."""
        what = f"{kind} {m.name}"
        if kind == "cut":
            proxy.cut()
        elif kind == "cut_all":
            what = kind
            for other in self.members:
                if other.proxy is not None:
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
        return what, length

    async def _committed_at_kill(self, m: Member) -> None:
        """The group's commits right after a SIGKILL: what the member had got committed."""
        assert m.life is not None
        async with Client(self._seeds, cg.Config(client_id="chaos-kill")) as client:
            for _ in range(20):
                try:
                    m.life.committed_at_kill = await committed_offsets(
                        client, self.group, self.topic
                    )
                    return
                except ConsumerGroupError:
                    await asyncio.sleep(0.25)
        self.log(f"could not read the commits after killing {m.name}: its bound is loose")

    async def _outage(self) -> None:
        """Every proxy cuts and refuses everything for ``profile.outage`` seconds."""
        started = time.time()
        self.log(f"total outage for {self.profile.outage:.0f}s")
        for m in self.members:
            assert m.proxy is not None
            m.proxy.stop_listening()
            m.proxy.cut()
        await asyncio.sleep(self.profile.outage)
        for m in self.members:
            assert m.proxy is not None
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
        await m.handles_sigterm()
        m.signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(m.proc.wait(), CLOSE_BOUND + 15.0)
        except TimeoutError:
            self.violation(f"{m.name} did not exit within {CLOSE_BOUND + 15.0}s of SIGTERM")
            m.signal(signal.SIGKILL)
            await m.proc.wait()
            m.ended(killed=True)
            return
        m.ended()
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
                m.ended()
                self._judge_status(m, asked=False)
                await m.start()

    # ------------------------------------------------------------- the end

    def _handled(self) -> set[tuple[int, int]]:
        """Every (partition, offset) some member recorded as handled."""
        handled: set[tuple[int, int]] = set()
        for path in self.workdir.glob("*.jsonl"):
            for line in path.read_text().splitlines():
                with contextlib.suppress(ValueError):
                    event = json.loads(line)
                    if "p" in event:
                        handled.update((event["p"], o) for o in event["offsets"])
        return handled

    async def _warm_up(self) -> None:
        """Faults start once the group consumes (the first join takes a few seconds)."""
        deadline = time.monotonic() + 60.0
        while time.monotonic() < deadline:
            await self._check_members()
            if self.produced and self._handled() >= set(self.produced):
                self._warm = time.time()
                self.log(f"group consuming; {self.profile.cycles} fault cycles follow")
                return
            await asyncio.sleep(0.5)
        self.violation("the group did not start consuming within 60s (before any fault)")

    async def _drain(self) -> None:
        """Wait (bounded) until every produced record is handled and committed."""
        for m in self.members:
            if m.proxy is not None:
                await m.proxy.heal()
        await self._check_members()
        self.log("faults over; draining")
        end = await end_offsets(self.bootstrap, self.topic, self.partitions)
        deadline = time.monotonic() + self.profile.drain_timeout
        while time.monotonic() < deadline:
            await self._check_members()
            if self.produced.keys() <= self._handled() and all(
                self.committed.get(p, -1) >= end[p] for p in end
            ):
                self.log("drained")
                return
            await asyncio.sleep(1.0)
        self.violation(f"not drained within {self.profile.drain_timeout}s")

    async def _final_check(self) -> None:
        for m in self.members:
            if m.proxy is not None and m.incarnation and not m.proxy.rewrites:
                self.violation(f"member slot {m.index} never had its broker address rewritten")
        end = await end_offsets(self.bootstrap, self.topic, self.partitions)
        async with Client(self._seeds, cg.Config(client_id="chaos-check")) as client:
            committed = await committed_offsets(client, self.group, self.topic)
        for partition, high in sorted(end.items()):
            if committed.get(partition) != high:
                self.violation(
                    f"partition {partition}: committed {committed.get(partition)} "
                    f"!= end offset {high} (Fetch high watermark)"
                )

    def _account(self) -> None:
        """The ledger's numbers and invariants, the longest stall, the outage recovery."""
        r = self.report
        r.audit = audit(self.lives, self.produced, self.fault_log, time.time())
        # What the ledger was given besides the record files, for a post-mortem.
        (self.workdir / "run.json").write_text(
            json.dumps(
                {
                    "lives": [dataclasses.asdict(life) for life in self.lives],
                    "faults": self.fault_log,
                },
                default=str,
            )
        )
        for v in r.audit.violations:
            self.violation(v)
        first = r.audit.first
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


async def committed_offsets(client: Client, group: str, topic: str) -> dict[int, int]:
    """The group's committed offsets of every partition of ``topic`` (OffsetFetch; -1
    where none); a coordinator that moved is looked up again on the next call.

    Stable offsets, as the members fetch them: without, Kafka's coordinator answers from
    a snapshot at its partition's high watermark, which on a coordinator elected a
    moment ago lags behind commits its predecessor acknowledged (a monitor saw 768, then
    766, right after a coordinator move, though the partition's one owner throughout had
    handled 768 before it and only ever commits forward)."""
    await client.refresh_metadata(topic)
    partitions = client.cached_partitions(topic) or []
    try:
        conn = await client.coordinator(group)
        request = OffsetFetchRequest(group, [(topic, partitions)], require_stable=True)
        resp = await conn.send(request)
    except ConsumerGroupError:
        client.invalidate_coordinator(group)
        raise
    code, topics = offset_fetch_topics(resp)  # v7 where the broker offers it
    if code:
        client.invalidate_coordinator(group)
        raise cg.ConsumerGroupError(f"OffsetFetch answered error {code}")
    out: dict[int, int] = {}
    for _topic, parts in topics:
        for partition, offset, _metadata, code, _epoch in parts:
            if not code:
                out[partition] = offset
    return out


async def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    """Each partition's log end, read from a Fetch's high watermark (not ListOffsets: Tansu)."""
    config = cg.Config(client_id="chaos-end")
    config.consumer.max_wait_time = 0.1
    async with cg.Consumer(bootstrap.split(","), config) as consumer:
        pcs = await consumer.consume_partitions(
            {(topic, p): cg.OFFSET_NEWEST for p in range(partitions)}
        )
        await wait_for(
            lambda: all(pc.high_water_mark_offset >= 0 for pc in pcs.values()), 30, "the ends"
        )
        ends = {p: pcs[(topic, p)].high_water_mark_offset for p in range(partitions)}
        for pc in pcs.values():
            await pc.close()
    return ends


def _stall_line(what: str, gap: float, window: tuple[float, float], faults: list[str]) -> str:
    shown = ", ".join(faults[:6]) + (f", ... ({len(faults)} in all)" if len(faults) > 6 else "")
    since = f"t={window[0]:.1f}..{window[1]:.1f} s"
    return f"{what}: {gap:.1f} s ({since}; faults then: {shown or '-'})"


def _last_lines(text: object, lines: int = 3) -> str:
    return " | ".join(str(text).strip().splitlines()[-lines:])
