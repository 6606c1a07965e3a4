"""End-to-end latency: ``python -m bench.latency`` (``python -m bench --only latency``).

How long a record takes from its producer to a consumer's loop body, at a steady rate.

* **Producer**: one neutral producer for every peer, in a process of its own, ``linger``
  0 (so the producer adds no batching delay of its own) and one request in flight:
  ``--producer cg`` (the default: ``consumergroup.Producer``; it runs on both brokers) or
  ``confluent`` (librdkafka; the default until the third quiet reruns). It writes
  ``--rate`` records/s (1,000, 10,000, 100,000), round robin over the partitions, in
  1 ms ticks, each record's value starting with its send time (``CLOCK_MONOTONIC`` ns,
  read for that record just before it is handed to the client), then ``--size`` bytes in
  all. It reports the records it sent inside the measurement window, how far it ever fell
  behind its schedule, and the *write latency* of one record in :data:`ACK_SAMPLE` (send
  time to its acknowledgement, as the producer sees it): the part of every peer's figure
  that no consumer controls.

  Why one request in flight: with librdkafka's default (1,000,000) and ``linger.ms=0``
  every record left in a ProduceRequest of its own, ~1 request a record. A broker serves
  one request of a connection at a time, so at 5,000-10,000 records/s on a shared 2-core
  machine the requests queued on the producer's connection (12,000 awaiting an answer,
  round trip growing to 8 s) and every consumer's latency grew through the window by
  seconds. With one request in flight, the records produced while it is out go together
  in the next one.
  Why not librdkafka: it puts one partition in a ProduceRequest (librdkafka issue
  #1700), so with one request in flight over 8 partitions a record waits for up to 8
  round trips in turn, not one: at 5,000 records/s that is ~1,000 requests a second
  back to back (the broker's request log: one partition each, 0.6 ms of broker time at
  the median), ~0.55 of a core of the test broker for the producer alone, and the chain
  stalls whenever any of its threads waits for a CPU. Every peer's maximum was then the
  same 149-418 ms (the stall check's failure in the third quiet reruns), all of it in the
  write. ``consumergroup.Producer`` sends every partition's pending records in one request,
  so a record waits for at most one round trip and the broker does ~40 % less work for
  the producer (under load 15-34 on the shared machine, interleaved, 6 runs each of
  10 s at 5,000/s, producer alone: write max median 64 ms against 180 ms, p99 43 against
  128 ms; broker CPU 3.4-4.4 s against 4.7-7.4 s a run).
  And why one clock read a record: the send time used to be read once per 32 records,
  which at 1,000 records/s aged a record by up to 31 ms (~16 ms at the median) before it
  was sent.
* **Consumer**: one member of a fresh group, started first (on an empty topic), with the
  client's default settings, in the peer's ``latency`` mode (``bench/peers/_common.py``);
  ``--tuned`` where the client's documentation names latency settings. Its arrival clock
  is read when a record reaches the loop body: per message where the API hands out one
  at a time (ours ``messages()``, confluent-kafka ``poll()``), once per answer otherwise
  (ours ``batches()``, aiokafka ``getmany()``, franz-go ``PollFetches``, Java ``poll``).
  Same machine, same clock: latency = arrival - send.
* **Window**: records sent after ``--warmup`` seconds (5) of production, for ``--window``
  seconds (15). The producer runs warm-up + window, then the consumer gets
  ``--drain`` seconds (2) before it is stopped: a record of the window that has not
  arrived by then counts as *missing* (and the run's max as at least the drain).

Reported per broker, rate and peer: p50, p99, p99.9 and max (ms), records measured, the
producer's worst lag behind its schedule, and how the scheduler served the peer over the
window (Linux's ``/proc/<pid>/task/*/schedstat``, every thread of it: CPU and run-queue
wait per time slice, slices a second; a record also waits for its consumer to get a core
once the answer woke it); with the broker's GC log (a broker the
benchmark starts, or ``--broker-gc-log`` for ``--bootstrap``'s: ``KafkaCluster.gc_logs()``)
also the broker JVM's collector pauses inside each run (how many, how many full, the
longest), during which every client's records wait alike.
Target: ours (each API, defaults) p99 <= the best other peer's p99 with defaults, at
every rate.

**Stall check** (``--stall-runs``, default 10; ``--stall-peers``, default
:data:`STALL_PEERS`: ours ``messages()`` with aiokafka and franz-go beside it, franz-go on
Apache Kafka only): consecutive runs at 5,000 records/s over 8 partitions, the stall peers
*together* (below; each run in a rotated order) so that a stall common to every client
shows as such; each run's maximum is printed, and the verdict is PASS when no record of
ours waited more than 250 ms in any run; a second verdict judges our own part alone
(behind the first peer).

**Reps and the verdict.** By default the peers of a rate run *together* (as the stall
check always does), each one member of a group of its own reading the one stream: every
peer then sees the same writes, broker and machine load, so their differences are the
clients' own (each peer's CPU competes with the others': at 1,000-10,000 records/s a few
percent of a core each). ``--apart`` runs them one after another instead (A B C ...),
and so does every rate from ``--apart-from`` (default :data:`APART_FROM`, 100,000/s) up:
there the five default peers together need more than two cores (the producer fell
seconds behind its schedule), one at a time they do not.
``--reps`` (default :data:`REPS`) repeats the whole sweep of rates, rep after rep (rep 1
at every rate, then rep 2, ...), and each rep starts the peers in a rotated order (rep
``i`` starts at the ``i``-th peer): every waiting Fetch is answered when a write lands
and the clients then compete for the same cores, so a fixed start order could hand one
client the same edge (or handicap) in every rep. Each row shows the medians over reps of
p50, p99 and p99.9 (max: the largest of any rep) and the spread of p99 (its smallest and
largest rep). The p99 verdict is on the medians; its value names both sides' spreads,
so a difference smaller than the spread reads as what it is, and (together) the
difference rep by rep: p99 moves by milliseconds from rep to rep for every peer alike
(the broker, the machine), which cancels out within a rep. Why: ``batches()`` and
``messages()`` share their whole fetch path up to the handler, yet one rep of the fourth
quiet reruns put them 2-3 ms apart at p99 (bench/README.md, "batches() against
messages()").
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import json
import math
import os
import re
import statistics
import sys
import time
import uuid
from array import array
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from .harness import BROKER_GC_LOGS, KAFKA_ONLY_PEERS, PEERS, PeerFailed, Procs, log, procs

_T = TypeVar("_T")

LATENCY_PEERS = ("cg_messages", "cg_batches", "franz", "confluent", "java", "aiokafka_getmany")
#: Ours, each held to the target.
OURS = ("cg_messages", "cg_batches")
#: Rows that are not clients (name -> what the table calls it), asked for by name
#: (``--peers``), never the best peer of a verdict, and not peers of the other sections:
#: ``floor`` (``bench/peers/floor.py``) is the least a one-thread asyncio consumer can do per
#: answer, what ours is measured against when asking what Python allows.
REFERENCE_PEERS = {"floor": "reference: the floor of an asyncio consumer (no group, one callback)"}
#: Peers whose documentation names consumer latency settings beyond their defaults (the
#: peers' ``--tuned``): librdkafka's wiki "How to decrease message latency"
#: (``fetch.wait.max.ms``, ``fetch.error.backoff.ms``). The others name ``fetch.min.bytes
#: = 1`` (or none), which is their default already.
TUNED_PEERS = ("confluent",)
RATES = (1_000, 10_000, 100_000)
#: Reps of the whole sweep by default: p99 moves by a few ms from rep to rep, so one rep
#: cannot tell a 0.4 ms difference from noise; five give a median and a spread.
REPS = 5
STALL_RATE = 5_000
#: From this rate up the peers run one at a time even by default: at 100,000 records/s the
#: five default peers together need more than a 2-core machine has, and the producer fell
#: 6 s behind its schedule (bench/README.md, fourth quiet reruns), so every row measured
#: the machine. One at a time, it keeps up (lag 12-15 ms). 0: every rate together.
APART_FROM = 100_000
#: Ours with a Python and a Go peer beside it (``franz`` on Apache Kafka only).
STALL_PEERS = ("cg_messages", "aiokafka_getmany", "franz")
STALL_LIMIT_MS = 250.0
#: The producer's tick.
TICK_S = 0.001
#: One record in this many gets a delivery report: its write latency is sampled.
ACK_SAMPLE = 16
#: The neutral producers (``--producer``), each with ``linger`` 0 and one request in
#: flight: ``cg`` (``consumergroup.Producer``: one ProduceRequest carries every partition's
#: records) and ``confluent`` (librdkafka: one partition per ProduceRequest).
PRODUCERS = {
    "cg": "consumergroup Producer",
    "confluent": "confluent-kafka",
}
#: The default: its one request a round trip keeps the write path short (module docstring).
PRODUCER = "cg"


# ---------------------------------------------------------------------------- producer


class _Schedule:
    """The producer's schedule, whichever client writes: ``rate`` records/s from now for
    ``seconds``, the window after ``warmup``, the sampled write latencies.

    Owned by the producer process's one thread (the event loop's, for ``cg``)."""

    def __init__(self, rate: int, seconds: float, warmup: float) -> None:
        self.rate = rate
        self.t0 = time.monotonic_ns()
        self.end = self.t0 + int(seconds * 1e9)
        self.w0, self.w1 = self.t0 + int(warmup * 1e9), self.end
        self.per_ns = rate / 1e9
        self.sent = self.in_window = 0
        self.worst_lag = 0.0
        self.acks = array("q")  # write latency (ns) of the sampled records sent in the window

    def due(self) -> int:
        """Records due by now but not sent (0 once the run is over: then ``done``)."""
        now = time.monotonic_ns()
        if now >= self.end:
            return 0
        due = int((now - self.t0) * self.per_ns)
        self.worst_lag = max(self.worst_lag, (due - self.sent) / self.rate)
        return due - self.sent

    def done(self) -> bool:
        return time.monotonic_ns() >= self.end

    def count(self, stamp: int) -> None:
        """One record sent, stamped ``stamp``."""
        self.sent += 1
        self.in_window += self.w0 <= stamp < self.w1

    def acked(self, stamp: int) -> None:
        """The sampled record stamped ``stamp`` was acknowledged now."""
        if self.w0 <= stamp < self.w1:
            self.acks.append(time.monotonic_ns() - stamp)

    def pause(self) -> float:
        """Seconds to sleep before the next record is due (at most one tick)."""
        wait = (self.t0 + (self.sent + 1) / self.per_ns - time.monotonic_ns()) / 1e9
        return min(max(wait, 0.0), TICK_S)

    def result(self, unsent: int) -> dict[str, Any]:
        return {
            "sent": self.sent,
            "in_window": self.in_window,
            "t0": self.t0,
            "window": [self.w0, self.w1],
            "worst_lag_ms": self.worst_lag * 1000,
            "unsent": unsent,
            "write": percentiles(self.acks),
        }


def produce(
    bootstrap: str,
    topic: str,
    partitions: int,
    rate: int,
    seconds: float,
    warmup: float,
    size: int,
    writer: str = PRODUCER,
) -> dict[str, Any]:
    """The producer process: ``rate`` records/s for ``seconds`` with ``writer`` (see
    :data:`PRODUCERS`); what it sent in the window."""

    def schedule() -> _Schedule:  # called once the writer is ready: its set-up is not lag
        return _Schedule(rate, seconds, warmup)

    args = (bootstrap, topic, partitions, schedule, bytes(max(0, size - 8)))
    if writer == "cg":
        return asyncio.run(_produce_cg(*args))
    return _produce_confluent(*args)


async def _produce_cg(
    bootstrap: str, topic: str, partitions: int, schedule: Callable[[], _Schedule], pad: bytes
) -> dict[str, Any]:
    import consumergroup as cg

    config = cg.Config(client_id="bench-latency")
    config.producer.linger = 0.0
    config.producer.max_in_flight = 1
    now_ns = time.monotonic_ns

    def sampled(stamp: int) -> Any:
        def acked(fut: asyncio.Future[Any]) -> None:
            if not fut.cancelled() and fut.exception() is None:
                run.acked(stamp)

        return acked

    async with cg.Producer(bootstrap.split(","), config) as producer:
        await producer.partitions(topic)  # its metadata, before the clock starts
        send = producer.send
        run = schedule()
        while not run.done():
            for _ in range(run.due()):
                now = now_ns()
                fut = await send(
                    topic, now.to_bytes(8, "big") + pad, partition=run.sent % partitions
                )
                if not run.sent % ACK_SAMPLE:
                    fut.add_done_callback(sampled(now))
                run.count(now)
            await asyncio.sleep(run.pause())
        await producer.flush()
    return run.result(0)


def _produce_confluent(
    bootstrap: str, topic: str, partitions: int, schedule: Callable[[], _Schedule], pad: bytes
) -> dict[str, Any]:
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": "bench-latency",
            "linger.ms": 0,
            "max.in.flight.requests.per.connection": 1,
        }
    )
    now_ns = time.monotonic_ns
    run = schedule()

    def acked(err: Any, msg: Any) -> None:
        if err is None:
            run.acked(int.from_bytes(msg.value()[:8], "big"))

    while not run.done():
        due = run.due()
        while due > 0:
            now = now_ns()
            value = now.to_bytes(8, "big") + pad
            try:
                if run.sent % ACK_SAMPLE:
                    producer.produce(topic, value, partition=run.sent % partitions)
                else:
                    producer.produce(
                        topic, value, partition=run.sent % partitions, on_delivery=acked
                    )
            except BufferError:  # librdkafka's queue is full: serve it, then retry
                producer.poll(0.01)
                continue
            run.count(now)
            due -= 1
        producer.poll(0)
        time.sleep(run.pause())
    return run.result(producer.flush(30))


# ---------------------------------------------------------------------------- broker GC

#: A pause line of the JVM's unified GC log with ``time,uptime`` decorations (what
#: ``KafkaCluster`` writes: ``-Xlog:gc:file=...:time,uptime``).
_GC_PAUSE = re.compile(r"^\[([^\]]+)\]\[[\d.]+s\].* GC\(\d+\) Pause (\w+).* ([\d.]+)ms$")


def gc_pauses(paths: Sequence[Path], t0: float, t1: float) -> dict[str, float]:
    """The broker JVMs' collector pauses that overlapped the wall-clock window
    ``[t0, t1]`` (``time.time()`` seconds): how many, the longest (ms), how many full."""
    count = full = 0
    longest = 0.0
    for path in paths:
        with contextlib.suppress(OSError), open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                m = _GC_PAUSE.match(line)
                if m is None:
                    continue
                end = datetime.datetime.strptime(m[1], "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()
                ms = float(m[3])
                if end >= t0 and end - ms / 1000 <= t1:
                    count += 1
                    full += m[2] == "Full"
                    longest = max(longest, ms)
    return {"gc_pauses": count, "gc_full": full, "gc_max_ms": longest}


# ---------------------------------------------------------------------------- one run


def percentiles(lat_ns: Sequence[int]) -> dict[str, float]:
    """p50, p99, p99.9, max of ``lat_ns`` (sorted in place is not assumed), in ms."""
    ordered = sorted(lat_ns)
    n = len(ordered)
    if not n:
        return {"p50": float("nan"), "p99": float("nan"), "p999": float("nan"), "max": float("nan")}

    def at(q: float) -> float:
        return ordered[min(n - 1, int(q * n))] / 1e6

    return {"p50": at(0.50), "p99": at(0.99), "p999": at(0.999), "max": ordered[-1] / 1e6}


def read_pairs(path: Path, window: Sequence[int]) -> dict[int, int]:
    """Send time -> arrival (ns) of the records sent inside ``window``, from a peer's file
    (a send time is one clock read per record: it names the record)."""
    pairs = array("q")
    data = path.read_bytes()
    pairs.frombytes(data[: len(data) // 8 * 8])
    if sys.byteorder == "little":
        pairs.byteswap()
    w0, w1 = window
    return {s: a for s, a in zip(pairs[0::2], pairs[1::2], strict=True) if w0 <= s < w1}


async def _producer(
    bootstrap: str,
    topic: str,
    partitions: int,
    rate: int,
    seconds: float,
    warmup: float,
    size: int,
    writer: str,
) -> dict[str, Any]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench.latency",
        "--produce",
        json.dumps([bootstrap, topic, partitions, rate, seconds, warmup, size, writer]),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), seconds + 60)
    if proc.returncode:
        raise PeerFailed(f"the latency producer failed: {err.decode(errors='replace')[-2000:]}")
    result: dict[str, Any] = json.loads(out.decode().splitlines()[-1])
    return result


def schedstat(pid: int) -> tuple[int, int, int] | None:
    """The scheduler's account of process ``pid``, summed over its threads (Linux's
    ``/proc/<pid>/task/*/schedstat``): ns on a CPU, ns runnable but waiting for one, and
    time slices (each run on a CPU after a wait). None where it cannot be read."""
    total = [0, 0, 0]
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                fields = f.read().split()
            for i in range(3):
                total[i] += int(fields[i])
    except (OSError, ValueError, IndexError):
        return None
    return total[0], total[1], total[2]


async def sched_window(pids: dict[str, int], start: float, length: float) -> dict[str, Any]:
    """Each process's scheduling over the window from ``start`` s to ``start + length`` s
    from now: CPU and run-queue wait per time slice (us), and slices a second. Why: on a
    shared machine a record's latency is also how long its consumer waited for a CPU once
    the answer woke it, and the scheduler favours a process that runs briefly each time."""
    await asyncio.sleep(start)
    before = {name: schedstat(pid) for name, pid in pids.items()}
    await asyncio.sleep(length)
    out: dict[str, Any] = {}
    for name, pid in pids.items():
        a, b = before[name], schedstat(pid)
        if a is None or b is None or b[2] <= a[2]:
            continue
        slices = b[2] - a[2]
        out[name] = {
            "slice_cpu_us": (b[0] - a[0]) / slices / 1e3,
            "slice_wait_us": (b[1] - a[1]) / slices / 1e3,
            "slices_per_s": slices / length,
        }
    return out


#: The scheduler figures of a row (nan where /proc gave none), per time slice.
SCHED_KEYS = ("slice_cpu_us", "slice_wait_us", "slices_per_s")


async def run_once(
    ps: Procs,
    bootstrap: str,
    members: Sequence[tuple[str, bool]],
    rate: int,
    partitions: int,
    warmup: float,
    window: float,
    drain: float,
    size: int,
    gc_logs: Sequence[Path] = (),
    writer: str = PRODUCER,
) -> dict[str, dict[str, Any] | PeerFailed]:
    """``members`` (peer, tuned), each one member of a group of its own, reading one fresh
    topic at one rate at the same time: each one's latency figures (or why it failed),
    with the broker's collector pauses in the run (from ``gc_logs``, when given)."""
    from .harness import PeerProc, create_topic

    topic = await create_topic(bootstrap, partitions, "lat")
    running: dict[str, tuple[PeerProc, Path, asyncio.Event]] = {}
    failed: dict[str, dict[str, Any] | PeerFailed] = {}
    scheduling: asyncio.Task[dict[str, Any]] | None = None
    try:
        for peer, tuned in members:
            name = _row_name(peer, tuned)
            out = ps.logdir / f"{peer}-{uuid.uuid4().hex[:6]}.lat"
            assigned = asyncio.Event()

            def on_event(_pp: Any, ev: dict[str, Any], assigned: asyncio.Event = assigned) -> None:
                if ev["ev"] == "assigned" and ev.get("parts"):
                    assigned.set()

            pp = await ps.spawn(
                peer,
                topic,
                f"bench-lat-{peer}-{uuid.uuid4().hex[:8]}",
                "latency",
                on_event=on_event,
                extra=["--out", str(out), *(["--tuned"] if tuned else [])],
            )
            running[name] = (pp, out, assigned)
        for name, (pp, _out, assigned) in running.items():
            waiter = asyncio.create_task(assigned.wait())
            exited = asyncio.create_task(pp.proc.wait())
            await asyncio.wait({waiter, exited}, timeout=90, return_when="FIRST_COMPLETED")
            waiter.cancel()
            exited.cancel()
            if not assigned.is_set():
                failed[name] = PeerFailed(
                    f"{name} was not assigned the topic; stderr:\n{pp.stderr_tail()}"
                )
        if len(failed) == len(running):
            return failed
        await asyncio.sleep(1.0)  # their first fetches are out
        wall0 = time.time()
        pids = {name: pp.proc.pid for name, (pp, _out, _a) in running.items()}
        scheduling = asyncio.create_task(sched_window(pids, warmup, window))
        produced = await _producer(
            bootstrap, topic, partitions, rate, warmup + window, warmup, size, writer
        )
        sched = await scheduling
        await asyncio.sleep(drain)
        # The measured part: from the end of the warm-up to the end of the drain.
        gc = gc_pauses(gc_logs, wall0 + warmup, time.time()) if gc_logs else {}
    finally:
        if scheduling is not None:
            scheduling.cancel()
        for pp, _out, _assigned in running.values():
            await pp.stop()
            ps.running.remove(pp)
    results: dict[str, dict[str, Any] | PeerFailed] = {}
    arrivals: dict[str, dict[int, int]] = {}
    for name, (pp, out, _assigned) in running.items():
        if name in failed:
            results[name] = failed[name]
        elif pp.result is None or not out.exists():
            results[name] = PeerFailed(f"{name} wrote no latency file; stderr:\n{pp.stderr_tail()}")
        else:
            arrivals[name] = read_pairs(out, produced["window"])
        out.unlink(missing_ok=True)
    first: dict[int, int] = {}
    if len(arrivals) > 1:  # together: each record's first arrival at any peer
        for got in arrivals.values():
            for sent, arrived in got.items():
                if arrived < first.get(sent, arrived + 1):
                    first[sent] = arrived
    for name, got in arrivals.items():
        figures = _figures(got, first, produced, drain)
        result = running[name][0].result or {}
        figures["cpu_s"] = result.get("cpu_user", math.nan) + result.get("cpu_sys", 0.0)
        figures.update(sched.get(name, dict.fromkeys(SCHED_KEYS, math.nan)))
        results[name] = {**figures, **gc}
    return results


def _figures(
    got: dict[int, int], first: dict[int, int], produced: dict[str, Any], drain: float
) -> dict[str, Any]:
    """One peer's figures from its arrivals (``got``: send -> arrival) and, when peers ran
    together, each record's first arrival at any of them (``first``, else empty)."""
    missing = produced["in_window"] - len(got)
    stats = percentiles([a - s for s, a in got.items()])
    if missing > 0:
        stats["max"] = max(stats["max"], drain * 1000)
    behind = percentiles([a - first[s] for s, a in got.items()] if first else [])
    return {
        **stats,
        "behind_p50": behind["p50"],
        "behind_p99": behind["p99"],
        "behind_max": behind["max"],
        "count": len(got),
        "missing": missing,
        "producer_lag_ms": produced["worst_lag_ms"],
        "producer_sent": produced["sent"],
        "write_p50": produced["write"]["p50"],
        "write_p99": produced["write"]["p99"],
    }


# ---------------------------------------------------------------------------- sections


def _row_name(peer: str, tuned: bool) -> str:
    return f"{peer}+tuned" if tuned else peer


async def run(
    bootstrap: str,
    kind: str,
    ps: Procs,
    peers: Sequence[str],
    rates: Sequence[int] = RATES,
    reps: int = REPS,
    partitions: int = 8,
    warmup: float = 5.0,
    window: float = 15.0,
    drain: float = 2.0,
    size: int = 100,
    stall_runs: int = 10,
    stall_peers: Sequence[str] = STALL_PEERS,
    together: bool = True,
    gc_logs: Sequence[Path] = (),
    writer: str = PRODUCER,
    apart_from: int = APART_FROM,
) -> dict[str, Any]:
    """Every rate x peer (and tuned row), all at once on one stream (``together``, below
    ``apart_from`` records/s when that is not 0) or one after another, ``reps`` times over
    every rate, each rep in a rotated peer order; then the stall check."""
    peers = [p for p in peers if kind != "tansu" or p not in KAFKA_ONLY_PEERS]
    stall_peers = [p for p in stall_peers if kind != "tansu" or p not in KAFKA_ONLY_PEERS]
    rows = [(p, False) for p in peers] + [(p, True) for p in peers if p in TUNED_PEERS]
    table: dict[str, dict[str, Any]] = {}
    errors: dict[str, str] = {}

    async def measure(
        members: list[tuple[str, bool]], rate: int, n_partitions: int, at_once: bool
    ) -> dict[str, dict[str, Any] | PeerFailed]:
        groups = [members] if at_once else [[m] for m in members]
        found: dict[str, dict[str, Any] | PeerFailed] = {}
        for group in groups:
            try:
                found.update(
                    await run_once(
                        ps,
                        bootstrap,
                        group,
                        rate,
                        n_partitions,
                        warmup,
                        window,
                        drain,
                        size,
                        gc_logs,
                        writer,
                    )
                )
            except PeerFailed as exc:
                found.update({_row_name(*m): exc for m in group})
        for name, m in found.items():
            if isinstance(m, PeerFailed):
                log(f"  {name} FAILED: {m}")
            else:
                log(
                    f"  {name}: p50 {m['p50']:.2f} p99 {m['p99']:.2f} p99.9 {m['p999']:.2f} "
                    f"max {m['max']:.1f} ms, {m['count']:,} records, missing {m['missing']}, "
                    f"producer lag {m['producer_lag_ms']:.1f} ms, write p50 "
                    f"{m['write_p50']:.2f} p99 {m['write_p99']:.2f} ms, CPU {m['cpu_s']:.2f} s"
                    + (
                        f", behind the first p50 {m['behind_p50']:.2f} p99 {m['behind_p99']:.2f} ms"
                        if at_once
                        else ""
                    )
                    + (
                        f", broker GC {m['gc_pauses']} pauses ({m['gc_full']} full), "
                        f"longest {m['gc_max_ms']:.0f} ms"
                        if "gc_pauses" in m
                        else ""
                    )
                )
        return found

    runs: dict[int, dict[str, list[dict[str, Any]]]] = {
        rate: {_row_name(*r): [] for r in rows} for rate in rates
    }
    for rep in range(reps):
        for rate in rates:
            members = [r for r in rotated(rows, rep) if _row_name(*r) not in errors]
            at_once = together and not (apart_from and rate >= apart_from)
            log(
                f"latency {rate:,}/s rep {rep + 1}/{reps}"
                + (" (together)" if at_once else " (one at a time)")
                + f": {', '.join(_row_name(*m) for m in members)}"
            )
            for name, m in (await measure(members, rate, partitions, at_once)).items():
                if isinstance(m, PeerFailed):
                    errors[name] = str(m)
                else:
                    runs[rate][name].append(m)
    for rate in rates:  # rows in the peers' order, whatever order they ran in
        table[str(rate)] = {name: _summary(r) for name, r in runs[rate].items() if r}
    stall: list[dict[str, Any]] = []
    for i in range(stall_runs if stall_peers else 0):
        log(f"stall check {i + 1}/{stall_runs} at {STALL_RATE:,}/s: {', '.join(stall_peers)}")
        found = await measure(rotated([(p, False) for p in stall_peers], i), STALL_RATE, 8, True)
        for name, m in found.items():
            if isinstance(m, PeerFailed):
                stall.append({"peer": name, "error": str(m)})
            else:
                stall.append({"peer": name, **m})
    return {
        "setup": {
            "partitions": partitions,
            "warmup_s": warmup,
            "window_s": window,
            "drain_s": drain,
            "size": size,
            "reps": reps,
            "together": together,
            "apart_from": apart_from if together else 0,
            "load": os.getloadavg(),
            "gc_logs": [str(p) for p in gc_logs],
            "producer": writer,
        },
        "rates": table,
        "errors": errors,
        "stall": stall,
        "verdicts": verdicts(table, stall),
    }


def rotated(rows: Sequence[_T], rep: int) -> list[_T]:
    """``rows`` in rep ``rep``'s order: starting at its ``rep``-th (mod the length)."""
    k = rep % len(rows) if rows else 0
    return [*rows[k:], *rows[:k]]


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One row over its reps: medians, the largest max, the spread of p99."""
    keys = ("p50", "p99", "p999", "write_p50", "write_p99", "behind_p50", "behind_p99", "cpu_s")
    med = {k: statistics.median(r[k] for r in runs) for k in keys}
    for k in SCHED_KEYS:  # runs from before these figures (or off Linux) have none
        med[k] = statistics.median(r.get(k, math.nan) for r in runs)
    p99s = [r["p99"] for r in runs]
    return {
        **med,
        "p99_min": min(p99s),
        "p99_max": max(p99s),
        "reps": len(runs),
        "max": max(r["max"] for r in runs),
        "count": sum(r["count"] for r in runs),
        "missing": sum(r["missing"] for r in runs),
        "producer_lag_ms": max(r["producer_lag_ms"] for r in runs),
        "runs": runs,
    }


def _spreads(ours: dict[str, Any], best: dict[str, Any], name: str) -> str:
    """``" (median of N reps; ours A-B, best C-D)"``: each side's smallest and largest
    p99 over the reps (empty for one rep, or rows without it)."""
    reps = ours.get("reps", 1)
    if reps < 2 or "p99_min" not in best:
        return ""
    return (
        f" (median of {reps} reps; ours {ours['p99_min']:.2f}-{ours['p99_max']:.2f}, "
        f"{name} {best['p99_min']:.2f}-{best['p99_max']:.2f})"
    )


def _paired(ours: dict[str, Any], best: dict[str, Any], name: str) -> str:
    """``"; ours - best per rep: +0.10, -0.30 ms (ours <= best in 1 of 2)"``: the p99
    difference within each rep where both read the one stream at the same time (their runs
    carry a delay behind the first peer), so what moved every peer alike in a rep (the
    broker, the machine) cancels out. Reps pair by index: a peer that failed leaves the
    later reps, so both lists start at rep 1. Empty for one rep, or runs apart."""
    pairs = list(zip(ours.get("runs", ()), best.get("runs", ()), strict=False))
    if len(pairs) < 2 or any(_apart(r) for pair in pairs for r in pair):
        return ""
    diffs = [a["p99"] - b["p99"] for a, b in pairs]
    wins = sum(d <= 0 for d in diffs)
    return (
        f"; ours - {name} per rep: {', '.join(f'{d:+.2f}' for d in diffs)} ms "
        f"(ours <= {name} in {wins} of {len(diffs)})"
    )


def _apart(run: dict[str, Any]) -> bool:
    """Whether a peer's run was measured alone (no other peer's arrivals to be behind)."""
    return math.isnan(run.get("behind_p50", math.nan))


def verdicts(table: dict[str, Any], stall: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Ours (each API, defaults) p99 <= the best other default peer's, per rate (on the
    medians over reps; with the peers together the value also shows the difference rep
    by rep); the stall check."""
    out: list[dict[str, Any]] = []
    for rate, rows in table.items():
        others = {
            n: r["p99"]
            for n, r in rows.items()
            if n not in OURS and n not in REFERENCE_PEERS and "+tuned" not in n
        }
        if not others:
            continue
        best = min(others, key=lambda n: others[n])
        for ours in OURS:
            if ours in rows:
                value = rows[ours]["p99"]
                out.append(
                    {
                        "target": f"{int(rate):,}/s: {ours} p99 <= best peer's ({best})",
                        "value": f"{value:.2f} vs {others[best]:.2f} ms"
                        + _spreads(rows[ours], rows[best], best)
                        + _paired(rows[ours], rows[best], best),
                        "pass": value <= others[best],
                    }
                )
    by_peer: dict[str, list[dict[str, Any]]] = {}
    for s in stall:
        by_peer.setdefault(s["peer"], []).append(s)
    for peer, runs in by_peer.items():
        maxima = [r.get("max", float("inf")) for r in runs]
        out.append(
            {
                "target": f"stall check: {peer}, {len(runs)} runs at {STALL_RATE:,}/s, "
                f"no record over {STALL_LIMIT_MS:.0f} ms",
                "value": "max per run: " + ", ".join(f"{m:.0f}" for m in maxima) + " ms",
                "pass": all(m <= STALL_LIMIT_MS for m in maxima) and "error" not in str(runs),
            }
        )
        behind = [r.get("behind_max", float("nan")) for r in runs]
        if peer in OURS and not any(math.isnan(m) for m in behind):  # --together
            out.append(
                {
                    "target": f"stall check, the client's own part: {peer} no record over "
                    f"{STALL_LIMIT_MS:.0f} ms behind the first peer to hand it out",
                    "value": "max per run: " + ", ".join(f"{m:.0f}" for m in behind) + " ms",
                    "pass": all(m <= STALL_LIMIT_MS for m in behind),
                }
            )
    return out


def markdown(result: dict[str, Any], broker: str) -> str:
    """The latency tables of one broker (with ``--together``, each row's delay behind the
    first peer to hand each record out, and the stall runs one by one)."""
    s = result["setup"]
    together = s.get("together", False)
    apart_from = s.get("apart_from", 0)
    how = "the peers together" if together else "one peer at a time"
    if together and apart_from and any(int(rate) >= apart_from for rate in result["rates"]):
        how += f" (from {apart_from:,}/s one at a time: together they overload 2 cores)"
    lines = [
        f"### End-to-end latency ({broker}; {s['partitions']} partitions, {s['size']} B "
        f"records, warm-up {s['warmup_s']:.0f} s, window {s['window_s']:.0f} s, "
        f"{s['reps']} rep(s) in rotated peer order, "
        f"{how}; medians over the "
        f"reps; producer: {PRODUCERS[s.get('producer', 'confluent')]}, linger 0, "
        "one request in flight; "
        "write: send to the producer's acknowledgement, 1 record in "
        f"{ACK_SAMPLE}; peer CPU: the consumer process's, start-up included; per slice: "
        "the window's CPU and run-queue wait per time slice the scheduler gave the process, "
        "all its threads)",
        "",
        "| rate | peer | p50 ms | p99 ms | p99 min-max ms | p99.9 ms | max ms | records "
        "| missing | producer lag ms | write p50 ms | write p99 ms | peer CPU s |"
        + (" behind p50 ms | behind p99 ms |" if together else "")
        + " CPU us per slice | wait us per slice | slices per s |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
        + ("---:|---:|" if together else "")
        + "---:|---:|---:|",
    ]
    for rate, rows in result["rates"].items():
        for name, r in rows.items():
            peer, _, tuned = name.partition("+")
            label = PEERS.get(peer) or REFERENCE_PEERS.get(peer, peer)
            label += " (tuned for latency)" if tuned else ""
            lines.append(
                f"| {int(rate):,}/s | {label} | {r['p50']:.2f} | {r['p99']:.2f} | "
                f"{r['p99_min']:.2f}-{r['p99_max']:.2f} | "
                f"{r['p999']:.2f} | {r['max']:.1f} | {r['count']:,} | {r['missing']} | "
                f"{r['producer_lag_ms']:.1f} | {r['write_p50']:.2f} | {r['write_p99']:.2f} | "
                f"{r['cpu_s']:.2f} |"
                + (
                    f" {_or_dash(r['behind_p50'], '.2f')} | {_or_dash(r['behind_p99'], '.2f')} |"
                    if together
                    else ""
                )
                + "".join(f" {_or_dash(r.get(k, math.nan))} |" for k in SCHED_KEYS)
            )
    for name, err in result["errors"].items():
        lines.append(f"| | {name} | FAILED: {err.splitlines()[0][:80]} | | | | | | | | | | |")
    lines += ["", "| target | value | verdict |", "|---|---|---|"]
    for v in result["verdicts"]:
        lines.append(f"| {v['target']} | {v['value']} | {'PASS' if v['pass'] else 'FAIL'} |")
    if result["stall"]:
        lines += [
            "",
            f"Stall runs ({STALL_RATE:,}/s, the peers together):",
            "",
            "| peer | max ms | p99 ms | behind max ms | behind p99 ms | write p99 ms "
            "| broker GC pauses (full) | longest GC pause ms |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for r in result["stall"]:
            gc = (
                f"{r['gc_pauses']} ({r['gc_full']}) | {r['gc_max_ms']:.0f}"
                if "gc_pauses" in r
                else "- | -"
            )
            lines.append(
                f"| {r['peer']} | FAILED |  |  |  |  |  |  |"
                if "error" in r
                else f"| {r['peer']} | {r['max']:.1f} | {r['p99']:.2f} | {r['behind_max']:.1f} | "
                f"{r['behind_p99']:.2f} | {r['write_p99']:.2f} | {gc} |"
            )
    return "\n".join(lines) + "\n"


def _or_dash(value: float, spec: str = ",.0f") -> str:
    """``value`` formatted by ``spec``, or ``-`` where there is none (nan)."""
    return "-" if math.isnan(value) else format(value, spec)


# ---------------------------------------------------------------------------- command line


@contextlib.asynccontextmanager
async def _broker(kind: str, bootstrap: str | None) -> AsyncIterator[tuple[str, str]]:
    from .harness import broker

    async with broker(bootstrap, kind) as found:
        yield found


async def _main(args: argparse.Namespace) -> None:
    async with (
        _broker(args.broker, args.bootstrap) as (bootstrap, description),
        procs(bootstrap, args.session_timeout, args.heartbeat) as ps,
    ):
        log(f"broker: {description}")
        result = await run(
            bootstrap,
            args.broker,
            ps,
            args.peers,
            args.rates,
            args.reps,
            args.partitions,
            args.warmup,
            args.window,
            args.drain,
            args.size,
            args.stall_runs,
            args.stall_peers,
            not args.apart,
            [Path(p) for p in args.broker_gc_log] or BROKER_GC_LOGS,
            args.producer,
            args.apart_from,
        )
    print(markdown(result, description))
    if args.json:
        await asyncio.to_thread(Path(args.json).write_text, json.dumps(result, indent=2) + "\n")


def _csv(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def main(argv: list[str] | None = None) -> None:
    """``python -m bench.latency``: see the module docstring."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--produce"]:  # the producer process
        print(json.dumps(produce(*json.loads(argv[1]))))
        return
    p = argparse.ArgumentParser(prog="python -m bench.latency", description=__doc__)
    p.add_argument("--broker", choices=("tansu", "kafka"), default="kafka")
    p.add_argument("--bootstrap", help="use this cluster instead of starting one")
    p.add_argument("--peers", type=_csv, default=list(LATENCY_PEERS))
    p.add_argument("--rates", type=lambda t: [int(x) for x in _csv(t)], default=list(RATES))
    p.add_argument(
        "--reps",
        type=int,
        default=REPS,
        help="sweeps of every rate, each in a rotated peer order; medians (default %(default)s)",
    )
    p.add_argument("--partitions", type=int, default=8)
    p.add_argument("--warmup", type=float, default=5.0)
    p.add_argument("--window", type=float, default=15.0)
    p.add_argument("--drain", type=float, default=2.0)
    p.add_argument("--size", type=int, default=100)
    p.add_argument("--stall-runs", type=int, default=10)
    p.add_argument("--stall-peers", type=_csv, default=list(STALL_PEERS))
    p.add_argument(
        "--together",
        action="store_true",
        help="the default: the peers of a rate at once (as the stall check), each in its own "
        "group, on one stream: the same broker, producer and machine load for all",
    )
    p.add_argument(
        "--apart",
        action="store_true",
        help="run the peers of a rate one after another instead of together",
    )
    p.add_argument(
        "--apart-from",
        type=int,
        default=APART_FROM,
        help="from this rate up (records/s) the peers run one at a time even without "
        "--apart (default %(default)s: together they overload 2 cores; 0: never)",
    )
    p.add_argument(
        "--broker-gc-log",
        action="append",
        default=[],
        help="the broker JVM's GC log (KafkaCluster.gc_logs(); repeatable): each run then "
        "reports the collector's pauses inside it (a broker started here is found itself)",
    )
    p.add_argument(
        "--producer",
        choices=sorted(PRODUCERS),
        default=PRODUCER,
        help="the neutral producer every peer reads from (default %(default)s; see the module "
        "docstring)",
    )
    p.add_argument("--session-timeout", type=float, default=6.0)
    p.add_argument("--heartbeat", type=float, default=1.0)
    p.add_argument("--json", help="also write the results here")
    args = p.parse_args(argv)
    for peer in args.peers:
        if peer not in LATENCY_PEERS and peer not in REFERENCE_PEERS:
            known = ", ".join((*LATENCY_PEERS, *REFERENCE_PEERS))
            p.error(f"unknown latency peer {peer!r}; known: {known}")
    asyncio.run(_main(args))


if __name__ == "__main__":
    main()
