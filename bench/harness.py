"""The benchmark harness: broker, data loading, peer processes and the three scenarios.

Every peer runs as its own process (``python -m bench.peers.<peer>``) in a fresh
consumer group and reports over stdout JSON lines (see :mod:`bench.peers._common`).
Runs are interleaved (A B C, A B C, ...) so that a drift of the machine or the broker
hits every peer alike.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

ROOT = Path(__file__).resolve().parent.parent

#: Peer name -> what the tables call it.
PEERS = {
    "cg_batches": "consumergroup batches()",
    "cg_messages": "consumergroup messages()+mark",
    "aiokafka_getmany": "aiokafka getmany()",
    "confluent": "confluent-kafka consume()",
    "cg_batches_keep": "consumergroup batches(), keeping all",
    "aiokafka_keep": "aiokafka getmany(), keeping all",
    "kcat": "kcat (librdkafka, C)",
    "cg_messages_coop": "consumergroup messages()+mark, cooperative-sticky",
    "confluent_coop": "confluent-kafka consume(), cooperative-sticky",
    "cg_messages_consumer": "consumergroup messages()+mark, consumer protocol (KIP-848)",
    "confluent_consumer": "confluent-kafka consume(), group.protocol=consumer",
    "franz": "franz-go PollFetches()+MarkCommitRecords (Go)",
    "sarama": "sarama ConsumerGroup+MarkMessage (Go)",
    "java": "Java KafkaConsumer poll() (kafka-clients)",
}

#: Peers that are not Python: built once and run by :func:`tests.peers.command` (the
#: programs the interop tests run), with the same command line and protocol.
BUILT_PEERS = ("franz", "sarama", "java")

#: Peers left out on Tansu: the Java consumer cannot join a group there, and Tansu
#: closes franz-go's connection during its ApiVersions negotiation (franz-go reports
#: "broker closed the connection immediately during api versions negotiation").
KAFKA_ONLY_PEERS = ("franz", "java")

#: Peers that differ from another only in the rebalance protocol: rebalance section only
#: (the consumer-protocol ones need Apache Kafka 4.x).
COOPERATIVE_PEERS = (
    "cg_messages_coop",
    "confluent_coop",
    "cg_messages_consumer",
    "confluent_consumer",
)


#: The peers on the consumer group protocol (KIP-848): Apache Kafka 4.x only; the broker
#: sets their heartbeat interval.
CONSUMER_PROTOCOL_PEERS = ("cg_messages_consumer", "confluent_consumer")

#: The broker's consumer-group heartbeat settings the rebalance section runs under (Apache
#: Kafka): the test fixture's lowered ones (what ``KafkaCluster`` sets) and Kafka's defaults.
REBALANCE_SETTINGS: dict[str, dict[str, Any]] = {
    "fixture": {"heartbeat_s": 0.5, "properties": {}},
    "default": {
        "heartbeat_s": 5.0,
        "properties": {
            "group.consumer.heartbeat.interval.ms": "5000",
            "group.consumer.session.timeout.ms": "45000",
        },
    },
}


def log(msg: str) -> None:
    """Progress on stderr (the tables go to stdout)."""
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------- broker


#: ``--brokers`` names: what :func:`broker` starts.
BROKERS = ("tansu", "kafka")


#: The GC logs of the Apache Kafka node :func:`broker` started (empty otherwise): the
#: latency section reports the collector's pauses of each run from them.
BROKER_GC_LOGS: list[Path] = []


@contextlib.asynccontextmanager
async def broker(
    bootstrap: str | None, kind: str = "tansu", properties: dict[str, str] | None = None
) -> AsyncIterator[tuple[str, str]]:
    """``(bootstrap, description)``: the given cluster, else an embedded Tansu broker
    (``kind="tansu"``) or a one-node Apache Kafka (``kind="kafka"``, ``properties``
    overriding its ``server.properties``), both on loopback."""
    bootstrap = bootstrap or os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "").split(",")[0] or None
    if bootstrap:
        yield bootstrap, f"external cluster {bootstrap}"
        return
    if kind == "kafka":
        from consumergroup.testing import KAFKA_VERSION, KafkaCluster

        async with KafkaCluster(nodes=1, extra_properties=properties) as cluster:
            BROKER_GC_LOGS[:] = cluster.gc_logs()
            try:
                yield cluster.bootstrap, f"Apache Kafka {KAFKA_VERSION} (1 node, KRaft, loopback)"
            finally:
                BROKER_GC_LOGS.clear()
        return
    from consumergroup.testing import EmbeddedBroker

    async with EmbeddedBroker() as embedded:
        yield embedded.bootstrap, "embedded Tansu (memory storage, loopback)"


async def create_topic(bootstrap: str, partitions: int, prefix: str) -> str:
    """A fresh topic with ``partitions`` partitions."""
    from consumergroup.client import Client

    name = f"bench-{prefix}-{uuid.uuid4().hex[:8]}"
    async with Client([bootstrap]) as client:
        await client.create_topic(name, partitions)
    return name


# ---------------------------------------------------------------------------- loading


@dataclass
class Loaded:
    """A topic filled by :func:`load`."""

    topic: str
    partitions: int
    n: int
    size: int
    key_size: int
    compression: str
    #: Messages per partition (offsets 0..count-1 on a fresh topic).
    counts: list[int]
    seconds: float

    def as_dict(self) -> dict[str, Any]:
        """JSON form (without the per-partition counts)."""
        return {
            "topic": self.topic,
            "partitions": self.partitions,
            "n": self.n,
            "size": self.size,
            "key_size": self.key_size,
            "compression": self.compression,
            "load_seconds": round(self.seconds, 3),
            "load_msgs_per_s": round(self.n / self.seconds) if self.seconds else None,
        }


async def load(
    bootstrap: str,
    topic: str,
    partitions: int,
    n: int,
    size: int,
    key_size: int,
    compression: str,
    batch_bytes: int,
    pool: Sequence[bytes] = (),
) -> Loaded:
    """Write ``n`` records (random ``size``-byte values, ``key_size``-byte keys) round robin.

    ``pool``: the values to cycle through instead of random ones (``size`` is then unused).

    Uses aiokafka's producer with whole batches (``create_batch``/``send_batch``):
    records are appended straight into ~``batch_bytes`` v2 batches and many batches
    are in flight at once, so loading costs about a microsecond per record.
    """
    from aiokafka import AIOKafkaProducer

    rng = random.Random(42)
    pool = list(pool) or [rng.randbytes(size) for _ in range(4096)]
    counts = [n // partitions + (1 if p < n % partitions else 0) for p in range(partitions)]
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        client_id="bench-loader",
        acks=1,
        linger_ms=50,
        max_batch_size=batch_bytes,
        max_request_size=batch_bytes + 65536,
        compression_type=None if compression == "none" else compression,
        request_timeout_ms=120_000,
    )
    started = time.monotonic()
    await producer.start()
    try:
        await producer.partitions_for(topic)
        pending: list[asyncio.Future[Any]] = []
        ts = int(time.time() * 1000)
        # Interleave partitions batch by batch so every partition fills at the same pace.
        next_index = [0] * partitions
        remaining = sum(counts)
        while remaining:
            for p in range(partitions):
                i = next_index[p]
                if i >= counts[p]:
                    continue
                batch = producer.create_batch()
                while i < counts[p]:
                    global_i = i * partitions + p
                    key = global_i.to_bytes(8, "big")[-key_size:] if key_size else None
                    value = pool[global_i % len(pool)]
                    if batch.append(timestamp=ts, key=key, value=value) is None:
                        break
                    i += 1
                remaining -= i - next_index[p]
                next_index[p] = i
                batch.close()
                pending.append(await producer.send_batch(batch, topic, partition=p))
                if len(pending) >= 64:
                    await asyncio.gather(*pending)
                    pending.clear()
        await asyncio.gather(*pending)
    finally:
        await producer.stop()
    return Loaded(
        topic, partitions, n, size, key_size, compression, counts, time.monotonic() - started
    )


# ---------------------------------------------------------------------------- processes


@dataclass
class PeerProc:
    """One running peer process and everything it reported."""

    peer: str
    proc: asyncio.subprocess.Process
    t_spawn: float
    stderr_path: Path
    events: list[dict[str, Any]] = field(default_factory=list)
    #: (partition, t, n, last_offset) of every delivery (stream mode).
    items: list[tuple[int, float, int, int]] = field(default_factory=list)
    result: dict[str, Any] | None = None
    got_result: asyncio.Event = field(default_factory=asyncio.Event)
    on_event: Callable[[PeerProc, dict[str, Any]], None] | None = None
    reader: asyncio.Task[None] | None = None

    def first(self, ev: str) -> dict[str, Any] | None:
        """The first event named ``ev``."""
        return next((e for e in self.events if e["ev"] == ev), None)

    def stderr_tail(self, lines: int = 15) -> str:
        """The end of the peer's stderr, for error messages."""
        try:
            return "\n".join(self.stderr_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no stderr)"

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        while line := await self.proc.stdout.readline():
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if not isinstance(obj, dict) or "ev" not in obj:
                continue
            if obj["ev"] == "consumed":
                self.items.extend((int(i[0]), i[1], int(i[2]), int(i[3])) for i in obj["items"])
            else:
                self.events.append(obj)
            if obj["ev"] == "result":
                self.result = obj
                self.got_result.set()
            if self.on_event is not None:
                self.on_event(self, obj)

    async def stop(self, timeout: float = 20.0) -> None:
        """Ask the peer to finish (a line on stdin), then kill it if it does not exit."""
        proc = self.proc
        if proc.returncode is None and proc.stdin is not None:
            with contextlib.suppress(OSError, RuntimeError):
                proc.stdin.write(b"stop\n")
                await proc.stdin.drain()
                proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), timeout)
        except TimeoutError:
            log(f"{self.peer} (pid {proc.pid}) did not exit within {timeout}s; killing it")
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
        if self.reader is not None:
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(self.reader, 5.0)


class Procs:
    """Spawns peers and guarantees every one of them is gone when the block ends."""

    def __init__(self, bootstrap: str, logdir: Path, session_timeout: float, heartbeat: float):
        self.bootstrap = bootstrap
        self.logdir = logdir
        self.session_timeout = session_timeout
        self.heartbeat = heartbeat
        self.running: list[PeerProc] = []
        #: Config overrides for the consumergroup peers (``--cg-set``), experiments only.
        self.cg_set = ""
        #: ``BENCH_GC`` for every peer (``--gc``), experiments only.
        self.gc_mode = "default"
        #: Where each rebalance run writes its members' deliveries and events (``--timeline``).
        self.timeline: Path | None = None

    async def spawn(
        self,
        peer: str,
        topic: str,
        group: str,
        mode: str,
        expect: int = 0,
        on_event: Callable[[PeerProc, dict[str, Any]], None] | None = None,
        extra: Sequence[str] = (),
    ) -> PeerProc:
        """Start ``python -m bench.peers.<peer>`` (or the built program of a
        :data:`BUILT_PEERS` one); ``extra``: more of the peers' options."""
        stderr_path = self.logdir / f"{peer}-{uuid.uuid4().hex[:6]}.stderr"
        if peer in BUILT_PEERS:
            from tests.peers import command  # one build place for the tests and the bench

            program = await asyncio.to_thread(command, peer)
        else:
            program = [sys.executable, "-m", f"bench.peers.{peer}"]
        cmd = [
            *program,
            "--bootstrap",
            self.bootstrap,
            "--topic",
            topic,
            "--group",
            group,
            "--mode",
            mode,
            "--expect",
            str(expect),
            "--session-timeout",
            str(self.session_timeout),
            "--heartbeat",
            str(self.heartbeat),
            *extra,
        ]
        t_spawn = time.monotonic()
        with stderr_path.open("wb") as err:
            proc = await asyncio.create_subprocess_exec(
                *cmd,
                cwd=ROOT,
                env={**os.environ, "BENCH_CG_SET": self.cg_set, "BENCH_GC": self.gc_mode},
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=err,
                limit=256 * 1024 * 1024,
            )
        pp = PeerProc(peer, proc, t_spawn, stderr_path, on_event=on_event)
        pp.reader = asyncio.create_task(pp._read())
        self.running.append(pp)
        return pp

    async def stop_all(self) -> None:
        """Stop every peer still running."""
        procs, self.running = self.running, []
        await asyncio.gather(*(p.stop() for p in procs))


@contextlib.asynccontextmanager
async def procs(bootstrap: str, session_timeout: float, heartbeat: float) -> AsyncIterator[Procs]:
    """A :class:`Procs` whose peers are all stopped on exit (errors included)."""
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        p = Procs(bootstrap, Path(tmp), session_timeout, heartbeat)
        try:
            yield p
        finally:
            await p.stop_all()


class PeerFailed(RuntimeError):
    """A peer exited or timed out without its result."""


async def wait_result(pp: PeerProc, timeout: float) -> dict[str, Any]:
    """The peer's result event; raises :class:`PeerFailed` with its stderr otherwise."""
    waiter = asyncio.create_task(pp.got_result.wait())
    exited = asyncio.create_task(pp.proc.wait())
    done, _ = await asyncio.wait({waiter, exited}, timeout=timeout, return_when="FIRST_COMPLETED")
    waiter.cancel()
    exited.cancel()
    if pp.result is None and exited in done and pp.reader is not None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(pp.reader), 2.0)
    if pp.result is None:
        why = f"exited with {pp.proc.returncode}" if exited in done else f"timed out ({timeout}s)"
        raise PeerFailed(f"{pp.peer} {why} without a result; stderr:\n{pp.stderr_tail()}")
    return pp.result


# ---------------------------------------------------------------------------- throughput


def _throughput_metrics(pp: PeerProc, res: dict[str, Any], loaded: Loaded) -> dict[str, Any]:
    steady_n = res["count"] - res.get("n_first", 0)
    # The Java peer starts its steady window after its JIT warm-up (``t_steady``).
    steady_s = res["t_last"] - res.get("t_steady", res["t_first"])
    rate = steady_n / steady_s if steady_s > 0 else float("nan")
    hello = pp.first("hello")
    return {
        "count": res["count"],
        "msgs_per_s": rate,
        "mb_per_s": rate * (loaded.size + loaded.key_size) / 1e6,
        "steady_s": steady_s,
        "first_msg_s": res["t_first"] - pp.t_spawn,
        "import_s": (hello["t"] - pp.t_spawn) if hello else None,
        "total_s": res["t_last"] - pp.t_spawn,
        "rss_mb": res["maxrss_kb"] / 1024,
        "cpu_s": res["cpu_user"] + res["cpu_sys"],
        "cpu_us_per_msg": (res["cpu_user"] + res["cpu_sys"]) / max(res["count"], 1) * 1e6,
        # CPU of the steady part only (first -> last message), per message.
        "steady_cpu_us_per_msg": (res["cpu_user"] + res["cpu_sys"] - res["cpu_first"])
        / max(steady_n, 1)
        * 1e6
        if "cpu_first" in res
        else None,
        # Share of the steady wall time the peer spent on CPU (1.0 = one core busy).
        "steady_cpu_share": (res["cpu_user"] + res["cpu_sys"] - res["cpu_first"]) / steady_s
        if "cpu_first" in res and steady_s > 0
        else None,
    }


async def run_throughput_once(
    ps: Procs, peer: str, loaded: Loaded, timeout: float
) -> dict[str, Any]:
    """One peer, one fresh group, the whole topic; returns its metrics."""
    group = f"bench-{peer}-{uuid.uuid4().hex[:8]}"
    pp = await ps.spawn(peer, loaded.topic, group, "throughput", expect=loaded.n)
    try:
        res = await wait_result(pp, timeout)
    finally:
        await pp.stop()
        ps.running.remove(pp)
    if res["count"] < loaded.n:
        raise PeerFailed(f"{peer} read {res['count']} of {loaded.n} messages")
    return _throughput_metrics(pp, res, loaded)


async def interleave(
    peers: Sequence[str],
    reps: int,
    label: str,
    once: Callable[[str], Awaitable[dict[str, Any]]],
    describe: Callable[[dict[str, Any]], str],
) -> dict[str, Any]:
    """``reps`` rounds of ``once(peer)`` over every peer in turn (A B C, A B C, ...).

    A peer that fails is dropped from later rounds. Returns every run, the medians per
    peer and the errors.
    """
    runs: dict[str, list[dict[str, Any]]] = {p: [] for p in peers}
    errors: dict[str, str] = {}
    for rep in range(reps):
        for peer in peers:
            if peer in errors:
                continue
            log(f"{label} rep {rep + 1}/{reps}: {peer}")
            try:
                m = await once(peer)
            except PeerFailed as exc:
                log(f"  FAILED: {exc}")
                errors[peer] = str(exc)
                continue
            runs[peer].append(m)
            log(f"  {describe(m)}")
    return {
        "runs": runs,
        "median": {p: _medians(r) for p, r in runs.items() if r},
        "errors": errors,
    }


async def throughput(
    ps: Procs, peers: Sequence[str], loaded: Loaded, reps: int, timeout: float, label: str = ""
) -> dict[str, Any]:
    """Interleaved reps of every peer over ``loaded``; per peer: every run and the medians."""
    result = await interleave(
        peers,
        reps,
        label or "throughput",
        lambda peer: run_throughput_once(ps, peer, loaded, timeout),
        lambda m: (
            f"{m['msgs_per_s']:,.0f} msgs/s, first message after {m['first_msg_s']:.2f}s, "
            f"RSS {m['rss_mb']:.0f} MB, CPU {m['cpu_s']:.2f}s"
        ),
    )
    return {"data": loaded.as_dict(), **result}


def _medians(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per key, the median over the runs; nested dicts (a rebalance's phases) key by key."""
    # Keys from every run: a metric can be None in one run (no unmoved partition) only.
    keys = list(dict.fromkeys(k for r in runs for k in r))
    out: dict[str, Any] = {}
    for k in keys:
        values = [r[k] for r in runs if r.get(k) is not None]
        if values and all(isinstance(v, dict) for v in values):
            out[k] = _medians(values)
        elif values and all(isinstance(v, (int, float)) for v in values):
            out[k] = statistics.median(values)
    return out


# ---------------------------------------------------------------------------- rebalance


async def steady_producer(
    bootstrap: str,
    topic: str,
    partitions: int,
    rate: int,
    size: int,
    stop: asyncio.Event,
    produced: dict[int, list[float]] | None = None,
) -> int:
    """Produce ``rate`` msgs/s round robin over the partitions (10 ms ticks) until ``stop``;
    ``produced[p][k]``: when the ``k``-th message of partition ``p`` (its offset in a fresh
    topic: one producer, batches retried in order) was handed to the producer."""
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, client_id="bench-steady", linger_ms=2)
    await producer.start()
    sent = 0
    value = b"x" * size
    try:
        loop = asyncio.get_running_loop()
        started = loop.time()
        while not stop.is_set():
            due = int((loop.time() - started) * rate)
            futures = []
            while sent < due:
                p = sent % partitions
                futures.append(await producer.send(topic, value, partition=p))
                if produced is not None:
                    produced.setdefault(p, []).append(time.monotonic())
                sent += 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.01)
        await producer.flush()
    finally:
        await producer.stop()
    return sent


def _max_gap(times: list[float], lo: float, hi: float) -> float:
    """Longest interval with no consumption, over gaps that overlap ``[lo, hi]``."""
    best = 0.0
    for a, b in itertools.pairwise(times):
        if b >= lo and a <= hi:
            best = max(best, b - a)
    return best


def _max_stall(
    deliveries: list[tuple[float, int]], produced: list[float], lo: float, hi: float
) -> float:
    """Longest time a partition's records waited with none delivered, over the gaps
    between ``deliveries`` ``(time, first offset delivered)`` that overlap ``[lo, hi]``:
    a gap counts from its start or from when the record that ends it was produced,
    whichever is later (a gap in which nothing was produced is no pause of the consumer's).
    """
    best = 0.0
    for (a, _), (b, first) in itertools.pairwise(deliveries):
        if b >= lo and a <= hi:
            since = max(a, produced[first]) if 0 <= first < len(produced) else a
            best = max(best, b - since)
    return best


def _coverage(items: list[tuple[int, float, int, int]]) -> dict[int, tuple[int, int, int]]:
    """partition -> (delivered, distinct offsets, lowest offset) from delivery records."""
    spans: dict[int, list[tuple[int, int]]] = {}
    delivered: dict[int, int] = {}
    for p, _t, n, last in items:
        spans.setdefault(p, []).append((last - n + 1, last))
        delivered[p] = delivered.get(p, 0) + n
    out = {}
    for p, ss in spans.items():
        ss.sort()
        distinct = 0
        cur_lo, cur_hi = ss[0]
        for lo, hi in ss[1:]:
            if lo > cur_hi + 1:
                distinct += cur_hi - cur_lo + 1
                cur_lo, cur_hi = lo, hi
            else:
                cur_hi = max(cur_hi, hi)
        distinct += cur_hi - cur_lo + 1
        out[p] = (delivered[p], distinct, ss[0][0])
    return out


def _owned(m: PeerProc, until: float = float("inf")) -> dict[int, float]:
    """partition -> when ``m`` (last) gained it, from its assigned/revoked events up to ``until``.

    Eager peers report their whole assignment on both events, cooperative ones the
    increments; adding and removing in order gives the owned set either way.
    """
    owned: dict[int, float] = {}
    for e in list(m.events):
        if e.get("t", until) > until:
            break
        if e["ev"] == "assigned":
            for p in e.get("parts", []):
                owned.setdefault(p, e["t"])
        elif e["ev"] == "revoked":
            for p in e.get("parts", []):
                owned.pop(p, None)
    return owned


class Recorded(Protocol):
    """What a rebalance run reads of a member: its deliveries and its events."""

    items: list[tuple[int, float, int, int]]
    events: list[dict[str, Any]]


def _last_deliverer(
    members: Sequence[Recorded], until: float, since: float = float("-inf")
) -> dict[int, int]:
    """partition -> index of the member that delivered its last record in ``[since, until)``."""
    last: dict[int, tuple[float, int]] = {}
    for i, m in enumerate(members):
        for p, t, _n, _o in m.items:
            if since <= t < until and t >= last.get(p, (-1.0, 0))[0]:
                last[p] = (t, i)
    return {p: i for p, (_t, i) in last.items()}


def flowing_times(
    members: Sequence[Recorded], t0: float, t1: float
) -> dict[int, tuple[int, float]]:
    """partition -> (owner, when it flowed at its owner after ``t0``), as of ``t1``.

    The owner is the member that delivered the partition last before ``t1`` and still
    owns it then (by its own assigned/revoked events); "flowing" is its first delivery at
    or after both ``t0`` and the time it gained the partition (an eager member re-gains
    every partition, so a delivery before its rejoin does not count). Partitions without
    such an owner are left out: they do not flow yet.
    """
    owner = _last_deliverer(members, t1, t0)
    gained = [_owned(m, t1) for m in members]
    out: dict[int, tuple[int, float]] = {}
    for p, i in owner.items():
        if p not in gained[i]:
            continue
        since = max(t0, gained[i][p])
        t = next((t for q, t, _n, _o in members[i].items if q == p and since <= t < t1), None)
        if t is not None:
            out[p] = (i, t)
    return out


def _released(m: Recorded, partition: int, t0: float, flowed: float) -> float | None:
    """When ``m`` was done with ``partition``, revoked in ``[t0, flowed]``: its first commit
    after revoking it, or the revocation itself when no commit came before ``flowed`` (a
    revocation with nothing new to commit sends none). None: ``m`` did not revoke it."""
    revoked = next(
        (
            e["t"]
            for e in m.events
            if e["ev"] == "revoked" and t0 <= e["t"] <= flowed and partition in e.get("parts", ())
        ),
        None,
    )
    if revoked is None:
        return None
    return next(
        (
            e["t"]
            for e in m.events
            if e["ev"] == "committed" and e.get("ok") and revoked <= e["t"] <= flowed
        ),
        revoked,
    )


def phase_metrics(
    members: Sequence[Recorded],
    t0: float,
    t1: float,
    warmup: float,
    partitions: int,
    produced: dict[int, list[float]],
) -> dict[str, Any]:
    """Pause metrics of one membership change (a member joins or leaves at ``t0``),
    observed until ``t1``; ``warmup``: the steady window before ``t0``; ``produced``:
    when each record was produced (:func:`steady_producer`).

    A partition's *pause* is its longest wait with records produced and none delivered
    (:func:`_max_stall`); its *gap* the longest interval between deliveries, a producer
    or broker hiccup included (on a loaded machine every member's partitions show the
    same gap at once when the producer stalls).

    A partition *moved* when the member delivering it last before ``t1`` is not the one
    that delivered it last before ``t0``. Only deliveries before ``t1`` count: the peers
    are stopped after it, one at a time, and the partitions of each go to the others
    while the stream goes on (counting those made every partition "moved").
    """
    by_partition: dict[int, list[tuple[float, int]]] = {}
    for m in members:
        for p, t, n, last in m.items:
            if t < t1:
                by_partition.setdefault(p, []).append((t, last - n + 1))
    for ds in by_partition.values():
        ds.sort()
    lo = t0 - warmup
    gaps = {p: _max_gap([t for t, _ in ds], t0, t1) for p, ds in by_partition.items()}
    pauses = {p: _max_stall(ds, produced.get(p, []), t0, t1) for p, ds in by_partition.items()}
    baseline = {
        p: _max_stall(ds, produced.get(p, []), lo, t0 - 0.05) for p, ds in by_partition.items()
    }
    before = _last_deliverer(members, t0)
    after = _last_deliverer(members, t1, t0)
    moved = [p for p in range(partitions) if before.get(p) != after.get(p)]
    kept = [p for p in range(partitions) if p not in moved and p in pauses]
    kept_pause = max((pauses[p] for p in kept), default=None)
    kept_gap = max((baseline[p] for p in kept), default=None)
    kept_raw = max((gaps[p] for p in kept), default=None)
    flowing = flowing_times(members, t0, t1)
    all_flowing = max(t for _i, t in flowing.values()) if len(flowing) == partitions else None
    # A moved partition's hand-over: from its previous owner's commit after revoking it
    # to its first delivery at the new owner.
    handovers = []
    for p in moved:
        if p not in before or p not in flowing:
            continue
        released = _released(members[before[p]], p, t0, flowing[p][1])
        if released is not None:
            handovers.append(flowing[p][1] - released)
    return {
        "unmoved_partitions": len(kept),
        "unmoved_max_pause_s": kept_pause,
        "unmoved_steady_gap_s": kept_gap,
        "unmoved_max_raw_gap_s": kept_raw,
        # The no-pause target: the unmoved partitions' longest pause over their own
        # longest gap in the warm-up (<= 2 passes).
        "unmoved_pause_vs_gap": kept_pause / kept_gap if kept_pause and kept_gap else None,
        "moved_partitions": len(moved),
        "moved_max_pause_s": max((pauses.get(p, 0.0) for p in moved), default=None),
        "to_all_flowing_s": None if all_flowing is None else all_flowing - t0,
        # None when no moved partition's previous owner reported revoking it.
        "moved_after_commit_s": max(handovers) if handovers else None,
        "moved_with_commit": len(handovers),
    }


async def _watch(
    members: list[PeerProc], peer: str, done: Callable[[float], bool], timeout: float, what: str
) -> float:
    """Poll until ``done(now)``; returns that time. Fails when a member exited with an
    error or after ``timeout`` (``what`` did not happen)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        await asyncio.sleep(0.1)
        for m in members:
            if m.proc.returncode not in (None, 0):
                raise PeerFailed(f"{peer} exited early; stderr:\n{m.stderr_tail()}")
        now = time.monotonic()
        if done(now):
            return now
    raise PeerFailed(f"{peer}: {what} within {timeout}s")


async def rebalance_once(
    ps: Procs,
    bootstrap: str,
    peer: str,
    partitions: int,
    rate: int,
    size: int,
    warmup: float,
    settle: float,
    timeout: float,
) -> dict[str, Any]:
    """Two members consume a steady stream; a third joins, then the first leaves.
    Returns the pause metrics of each change (``join``, ``leave``)."""
    topic = await create_topic(bootstrap, partitions, "rebal")
    group = f"bench-rebal-{peer}-{uuid.uuid4().hex[:8]}"
    stop_producer = asyncio.Event()
    produced: dict[int, list[float]] = {}
    producer = asyncio.create_task(
        steady_producer(bootstrap, topic, partitions, rate, size, stop_producer, produced)
    )
    members: list[PeerProc] = []
    leaving: asyncio.Task[None] | None = None
    try:
        for _ in range(2):
            members.append(await ps.spawn(peer, topic, group, "stream"))

        def formed(now: float) -> bool:
            # Both members own partitions, and every partition flows since the last change.
            last_assign = max(
                (e["t"] for m in members for e in m.events if e["ev"] == "assigned"), default=0
            )
            seen = {p for m in members for (p, t, _n, _o) in m.items if t >= last_assign}
            return (
                all(_owned(m) for m in members)
                and now - last_assign > 1.0
                and len(seen) == partitions
            )

        await _watch(members, peer, formed, timeout, "two members never consumed every partition")
        await asyncio.sleep(warmup)

        third = await ps.spawn(peer, topic, group, "stream")
        members.append(third)

        def joined(now: float) -> bool:
            start = third.first("start")
            if start is None:
                return False
            flowing = flowing_times(members, start["t"], now)
            return (
                len(flowing) == partitions
                and any(i == 2 for i, _t in flowing.values())
                and now - max(t for _i, t in flowing.values()) > settle
            )

        t_joined = await _watch(
            members, peer, joined, timeout, "the third member did not get to consume"
        )
        start = third.first("start")
        assert start is not None
        t_join = start["t"]
        await asyncio.sleep(max(0.0, warmup - (time.monotonic() - t_joined)))

        leaver = members[0]
        t_leave = time.monotonic()
        leaving = asyncio.create_task(leaver.stop())

        def left(now: float) -> bool:
            flowing = flowing_times(members, t_leave, now)
            return (
                len(flowing) == partitions
                and all(i != 0 for i, _t in flowing.values())
                and now - max(t for _i, t in flowing.values()) > settle
            )

        t_left = await _watch(
            members, peer, left, timeout, "the others did not take the leaving member's partitions"
        )
        t_end = time.monotonic()
    finally:
        if leaving is not None:
            await leaving
        for m in members:
            await m.stop()
            with contextlib.suppress(ValueError):
                ps.running.remove(m)
        stop_producer.set()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(producer, 30)
    if ps.timeline is not None:
        ps.timeline.mkdir(parents=True, exist_ok=True)
        path = ps.timeline / f"{group}-{partitions}.json"
        path.write_text(
            json.dumps(
                {
                    "peer": peer,
                    "partitions": partitions,
                    "t_join": t_join,
                    "t_leave": t_leave,
                    "t_end": t_end,
                    "members": [{"items": m.items, "events": m.events} for m in members],
                    "produced": produced,
                }
            )
        )
        log(f"  timeline: {path}")
    cov = _coverage([i for m in members for i in m.items if i[1] < t_end])
    return {
        "join": phase_metrics(members, t_join, t_leave, warmup, partitions, produced),
        "leave": phase_metrics(members, t_leave, t_end, warmup, partitions, produced),
        "spawn_to_join_s": t_join - third.t_spawn,
        "redelivered": sum(c[0] for c in cov.values()) - sum(c[1] for c in cov.values()),
        "phase_seconds": {"join": t_joined - t_join, "leave": t_left - t_leave},
    }


def _s(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.2f}s"


def _phase_line(name: str, m: dict[str, Any]) -> str:
    return (
        f"{name}: unmoved {_s(m['unmoved_max_pause_s'])} x{m['unmoved_partitions']} (steady gap "
        f"{_s(m['unmoved_steady_gap_s'])}), moved {_s(m['moved_max_pause_s'])} "
        f"x{m['moved_partitions']}, -> all flowing {_s(m['to_all_flowing_s'])}, "
        f"after commit {_s(m['moved_after_commit_s'])}"
    )


async def rebalance(
    ps: Procs,
    bootstrap: str,
    peers: Sequence[str],
    reps: int,
    partitions: int,
    rate: int,
    size: int,
    warmup: float,
    settle: float,
    timeout: float,
) -> dict[str, Any]:
    """Interleaved rebalance runs; per peer: every run and the medians (per phase)."""
    result = await interleave(
        peers,
        reps,
        "rebalance",
        lambda peer: rebalance_once(
            ps, bootstrap, peer, partitions, rate, size, warmup, settle, timeout
        ),
        lambda m: f"{_phase_line('join', m['join'])}; {_phase_line('leave', m['leave'])}",
    )
    setup = {"partitions": partitions, "rate": rate, "size": size, "members": "2 -> 3 -> 2"}
    return {"setup": setup, **result}


# ---------------------------------------------------------------------------- scaling


async def members_once(
    ps: Procs, peer: str, loaded: Loaded, members: int, timeout: float
) -> dict[str, Any]:
    """``members`` processes in one fresh group read the whole topic together."""
    group = f"bench-scale-{peer}-{uuid.uuid4().hex[:8]}"
    ends = {p: c - 1 for p, c in enumerate(loaded.counts) if c}
    done_at: dict[int, float] = {}
    all_done = asyncio.Event()

    def on_event(pp: PeerProc, obj: dict[str, Any]) -> None:
        if obj["ev"] != "consumed":
            return
        for p, t, _n, last in obj["items"]:
            if p not in done_at and last >= ends.get(p, 1 << 62):
                done_at[p] = t
        if len(done_at) == len(ends):
            all_done.set()

    procs_ = [
        await ps.spawn(peer, loaded.topic, group, "stream", on_event=on_event)
        for _ in range(members)
    ]
    try:
        waiter = asyncio.create_task(all_done.wait())
        exits = [asyncio.create_task(p.proc.wait()) for p in procs_]
        await asyncio.wait({waiter, *exits}, timeout=timeout, return_when="FIRST_COMPLETED")
        for t in (waiter, *exits):
            t.cancel()
        if not all_done.is_set():
            dead = [p for p in procs_ if p.proc.returncode is not None]
            why = f"a member exited; stderr:\n{dead[0].stderr_tail()}" if dead else "timed out"
            raise PeerFailed(f"{peer} x{members}: {why} ({len(done_at)}/{len(ends)} done)")
    finally:
        for p in procs_:
            await p.stop()
            with contextlib.suppress(ValueError):
                ps.running.remove(p)
    results = [p.result for p in procs_ if p.result is not None]
    items = [i for p in procs_ for i in p.items]
    t_first = min(t for _p, t, _n, _o in items)
    t_last = max(done_at.values())
    cov = _coverage(items)
    delivered = sum(c[0] for c in cov.values())
    generations = max(sum(1 for e in p.events if e["ev"] == "assigned") for p in procs_)
    return {
        "members": members,
        "msgs_per_s": loaded.n / (t_last - t_first),
        "first_msg_s": t_first - min(p.t_spawn for p in procs_),
        "rss_mb_total": sum(r["maxrss_kb"] for r in results) / 1024,
        "cpu_s_total": sum(r["cpu_user"] + r["cpu_sys"] for r in results),
        "redelivered": delivered - loaded.n,
        "assignments_per_member_max": generations,
    }


async def load_like(
    bootstrap: str, base: Loaded, partitions: int, n: int, batch_bytes: int, prefix: str
) -> Loaded:
    """A fresh topic of ``partitions`` loaded with ``n`` messages shaped like ``base``'s."""
    topic = await create_topic(bootstrap, partitions, prefix)
    log(f"loading {n:,} messages into {partitions} partitions")
    loaded = await load(
        bootstrap, topic, partitions, n, base.size, base.key_size, base.compression, batch_bytes
    )
    log(f"  loaded in {loaded.seconds:.1f}s")
    return loaded


async def scaling(
    ps: Procs,
    bootstrap: str,
    peers: Sequence[str],
    base: Loaded,
    member_counts: Sequence[int],
    partition_counts: Sequence[int],
    scaling_n: int,
    reps: int,
    batch_bytes: int,
    timeout: float,
    wide: tuple[int, int] | None = None,
) -> dict[str, Any]:
    """1 -> K members on ``base``; then 8 -> 1000 partitions on one member; then
    ``wide`` = (partitions, members): that many members on a topic that wide."""
    out: dict[str, Any] = {"members": {}, "partitions": {}, "loads": {}, "errors": {}}
    for k in member_counts:
        runs: dict[str, list[dict[str, Any]]] = {p: [] for p in peers}
        for rep in range(reps):
            for peer in peers:
                log(f"scaling members={k} rep {rep + 1}/{reps}: {peer}")
                try:
                    m = await members_once(ps, peer, base, k, timeout)
                except PeerFailed as exc:
                    log(f"  FAILED: {exc}")
                    out["errors"][f"{peer} members={k}"] = str(exc)
                    continue
                runs[peer].append(m)
                log(
                    f"  {m['msgs_per_s']:,.0f} msgs/s, RSS total {m['rss_mb_total']:.0f} MB, "
                    f"redelivered {m['redelivered']}"
                )
        out["members"][k] = {p: _medians(r) for p, r in runs.items() if r}
    for parts in partition_counts:
        if parts == base.partitions and scaling_n == base.n:
            loaded = base
        else:
            loaded = await load_like(bootstrap, base, parts, scaling_n, batch_bytes, f"p{parts}")
            out["loads"][parts] = loaded.as_dict()
        label = f"scaling partitions={parts}"
        res = await throughput(ps, peers, loaded, reps, timeout, label=label)
        out["partitions"][parts] = res["median"]
        for peer, err in res["errors"].items():
            out["errors"][f"{peer} partitions={parts}"] = err
    if wide:
        parts, k = wide
        loaded = await load_like(bootstrap, base, parts, scaling_n, batch_bytes, f"w{parts}")
        out["loads"][f"wide{parts}"] = loaded.as_dict()
        wide_runs: dict[str, dict[str, Any]] = {}
        for peer in peers:
            log(f"scaling {parts} partitions over {k} members: {peer}")
            try:
                wide_runs[peer] = await members_once(ps, peer, loaded, k, timeout)
            except PeerFailed as exc:
                log(f"  FAILED: {exc}")
                out["errors"][f"{peer} {parts} partitions x{k}"] = str(exc)
                continue
            log(f"  {wide_runs[peer]['msgs_per_s']:,.0f} msgs/s")
        out["wide"] = {"partitions": parts, "members": k, "n": scaling_n, "peers": wide_runs}
    return out
