"""Share groups (KIP-932): records/s and CPU per record, ours vs the Java KafkaShareConsumer
and franz-go's share consumer, on Apache Kafka.

``python -m bench.share_throughput [--n 1000000] [--size 100] [--partitions 8]
[--members 1,3] [--reps 3] [--peers ours,ours100,java,franz] [--slow-n 60000]
[--bootstrap HOST:PORT]``

Starts a one-node Apache Kafka 4.4.0 (``KafkaCluster(quick_share_groups=True)``; or uses
``--bootstrap``), loads ``--n`` records of ``--size`` bytes into ``--partitions`` partitions
once, then for each repetition, each peer and each member count runs that many member
processes of the peer in a fresh share group (starting at the earliest offset) until
they have handled every record between them, implicit acknowledgement (a record handled
is accepted):

* ``ours``: ``bench/peers/cg_share.py``, ``ShareGroup.run()`` at the default concurrency
  (100) and ``max_poll_records`` (5,000), a handler that counts the record, and
  ``config.share.acquire_mode = "batch_optimized"`` (whole record batches, the Java
  client's default mode); ``ours100``: every setting at its default (strict
  ``record_limit`` acquisition);
* ``java``: the Java peer's ``--protocol share`` (``KafkaShareConsumer``, implicit mode,
  ``max.poll.records`` 500);
* ``franz``: the franz peer's ``-share`` (``kgo.ShareGroup``, ``ShareMaxRecords(500)``
  strict).

Measured between the moment a tenth of the records were handled (warm-up: JIT, joins,
first fetches) and the last record: records/s, and CPU seconds per record of all the
member processes together (user + system, every thread, from ``/proc/<pid>/stat``: the
same for every peer). Then one more row, ours alone: one member, ``concurrency=100``, a
handler that awaits 10 ms per record, ``--slow-n`` records: its records/s against
0.9 x concurrency / 10 ms = 9,000/s (a consumer group handling each partition in order
reaches 8 / 10 ms = 800/s there). Beside it, the ceiling of this machine: as many loops of
``asyncio.sleep(10 ms)`` alone, with no broker and no runtime, counting their iterations
(an event loop's sleep lasts longer than asked: its wake-up is rounded up to the poll's
millisecond and to the kernel's timer slack; 11.2-11.3 ms on the machine of the eighth
quiet reruns, where the loops alone reached 8,750-8,940/s, under the target).

Prints a markdown table (medians over the repetitions, with the machine's load average),
and writes ``bench/results/share-<timestamp>.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .fetch_throughput import produce

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
#: Handled records before the measured window opens (of the total).
WARMUP = 0.1
#: The 10 ms-handler row: one member, this concurrency, this delay (ms), its target.
SLOW_CONCURRENCY, SLOW_DELAY_MS, SLOW_TARGET = 100, 10.0, 9_000.0
_TICKS = os.sysconf("SC_CLK_TCK")


def command(peer: str, bootstrap: str, topic: str, group: str, delay_ms: float = 0) -> list[str]:
    """The command line of one member process of ``peer``."""
    if peer in ("ours", "ours100"):
        mode = "batch_optimized" if peer == "ours" else "record_limit"
        return [
            sys.executable, "-m", "bench.peers.cg_share", "--bootstrap", bootstrap,
            "--topic", topic, "--group", group, "--concurrency", str(SLOW_CONCURRENCY),
            "--delay-ms", str(delay_ms), "--acquire-mode", mode,
        ]  # fmt: skip
    from tests.peers import command as peer_command

    if peer == "java":
        return [
            *peer_command("java"), "--bootstrap", bootstrap, "--topic", topic, "--group", group,
            "--protocol", "share", "--max-poll-records", "500",
        ]  # fmt: skip
    return [
        *peer_command("franz"), "-bootstrap", bootstrap, "-topic", topic, "-group", group,
        "-share", "-max-records", "500",
    ]  # fmt: skip


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (all its threads) so far."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICKS


@dataclass
class Run:
    """One run: ``members`` processes of ``peer`` until ``records`` were handled."""

    peer: str
    members: int
    records: int
    seconds: float = 0.0
    cpu: float = 0.0
    per_member: list[int] = field(default_factory=list)

    @property
    def rate(self) -> float:
        """Records/s in the measured window."""
        return self.records * (1 - WARMUP) / self.seconds if self.seconds else 0.0

    @property
    def cpu_us(self) -> float:
        """CPU microseconds per record in the measured window (all members)."""
        return self.cpu / (self.records * (1 - WARMUP)) * 1e6 if self.records else 0.0


async def sleep_ceiling(concurrency: int, delay_ms: float, n: int) -> float:
    """Iterations a second of ``concurrency`` loops that only ``asyncio.sleep(delay_ms)``,
    ``n`` iterations in all: what a handler that sleeps that long can reach here at best."""
    each = max(1, n // concurrency)

    async def loop() -> None:
        for _ in range(each):
            await asyncio.sleep(delay_ms / 1e3)

    started = time.perf_counter()
    await asyncio.gather(*(loop() for _ in range(concurrency)))
    return each * concurrency / (time.perf_counter() - started)


async def run_members(
    peer: str, bootstrap: str, topic: str, records: int, members: int, delay_ms: float = 0
) -> Run:
    """Start ``members`` processes of ``peer`` in a fresh group; measure until ``records``."""
    from consumergroup.admin import ClusterAdmin

    group = f"share-bench-{uuid.uuid4().hex[:8]}"
    async with ClusterAdmin([bootstrap]) as admin:
        await admin.alter_group_configs(group, {"share.auto.offset.reset": "earliest"})
    argv = command(peer, bootstrap, topic, group, delay_ms)
    procs = [
        await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            cwd=ROOT,
            limit=64 << 20,
        )
        for _ in range(members)
    ]
    counts = [0] * members
    marks: dict[str, tuple[float, float]] = {}  # "start"/"end" -> (item time, CPU of all)
    done = asyncio.Event()

    def cpu_all() -> float:
        return sum(cpu_seconds(p.pid) for p in procs)

    async def read(i: int) -> None:
        stdout = procs[i].stdout
        assert stdout is not None
        async for line in stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if event.get("ev") != "consumed":
                continue
            for _, t, n, _ in event["items"]:
                counts[i] += n
                total = sum(counts)
                if "start" not in marks and total >= records * WARMUP:
                    marks["start"] = (t, cpu_all())
                if "end" not in marks and total >= records:
                    marks["end"] = (t, cpu_all())
                    done.set()

    readers = [asyncio.create_task(read(i)) for i in range(members)]
    try:
        await asyncio.wait_for(done.wait(), timeout=900)
    finally:
        for proc in procs:
            if proc.stdin is not None and proc.returncode is None:
                proc.stdin.write(b"stop\n")
                await proc.stdin.drain()
        for proc in procs:
            try:
                await asyncio.wait_for(proc.wait(), 30)
            except TimeoutError:
                proc.kill()
                await proc.wait()
        for reader in readers:
            reader.cancel()
    (t0, cpu0), (t1, cpu1) = marks["start"], marks["end"]
    return Run(peer, members, records, t1 - t0, cpu1 - cpu0, counts)


def table(runs: list[Run]) -> str:
    """Medians per (peer, members), with the ratios the issue's targets name."""
    rows = ["| peer | members | records/s | CPU µs/record | vs Java rate | vs franz CPU |",
            "|---|---:|---:|---:|---:|---:|"]  # fmt: skip
    keys = sorted({(r.peer, r.members) for r in runs}, key=lambda k: (k[1], k[0]))
    for peer, members in keys:
        mine = [r for r in runs if r.peer == peer and r.members == members]
        rate = statistics.median(r.rate for r in mine)
        cpu = statistics.median(r.cpu_us for r in mine)
        java = _median(runs, "java", members, "rate")
        franz = _median(runs, "franz", members, "cpu_us")
        rows.append(
            f"| {peer} | {members} | {rate:,.0f} | {cpu:.2f} | "
            f"{rate / java:.2f}x | {cpu / franz:.2f}x |"
            if java and franz
            else f"| {peer} | {members} | {rate:,.0f} | {cpu:.2f} | - | - |"
        )
    return "\n".join(rows)


def _median(runs: list[Run], peer: str, members: int, what: str) -> float | None:
    values = [getattr(r, what) for r in runs if r.peer == peer and r.members == members]
    return statistics.median(values) if values else None


async def main(args: argparse.Namespace) -> None:
    from consumergroup.testing import KafkaCluster

    cluster = None
    bootstrap = args.bootstrap
    if bootstrap is None:
        cluster = KafkaCluster(quick_share_groups=True)
        await cluster.start()
        bootstrap = cluster.bootstrap
    try:
        from consumergroup.admin import ClusterAdmin

        topic = f"share-bench-{uuid.uuid4().hex[:8]}"
        slow_topic = f"{topic}-slow"
        async with ClusterAdmin([bootstrap]) as admin:
            await admin.create_topic(topic, args.partitions)
            await admin.create_topic(slow_topic, args.partitions)
        t0 = time.perf_counter()
        await produce(bootstrap, topic, args.n, args.size, args.partitions)
        if args.slow_n:
            await produce(bootstrap, slow_topic, args.slow_n, args.size, args.partitions)
        print(f"loaded {args.n:,} x {args.size} B in {time.perf_counter() - t0:.1f}s", flush=True)
        runs: list[Run] = []
        for rep in range(args.reps):
            for members in args.members:
                for peer in args.peers:
                    run = await run_members(peer, bootstrap, topic, args.n, members)
                    runs.append(run)
                    print(
                        f"rep {rep + 1} {peer} x{members}: {run.rate:,.0f} records/s, "
                        f"{run.cpu_us:.2f} µs CPU/record, per member {run.per_member}, "
                        f"load {os.getloadavg()[0]:.1f}",
                        flush=True,
                    )
        slow: list[Run] = []
        for rep in range(args.reps if args.slow_n else 0):
            run = await run_members("ours100", bootstrap, slow_topic, args.slow_n, 1, SLOW_DELAY_MS)
            slow.append(run)
            print(f"rep {rep + 1} 10 ms handler: {run.rate:,.0f} records/s", flush=True)
    finally:
        if cluster is not None:
            await cluster.close()
    load = os.getloadavg()
    report = [
        f"Share groups, Apache Kafka 4.4.0, {args.n:,} x {args.size} B, {args.partitions} "
        f"partitions, implicit acknowledgement, medians of {args.reps} (load average "
        f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} at the end)",
        "",
        table(runs),
    ]
    ceiling: float | None = None
    if slow:
        rate = statistics.median(r.rate for r in slow)
        verdict = "PASS" if rate >= SLOW_TARGET else "FAIL"
        ceiling = await sleep_ceiling(SLOW_CONCURRENCY, SLOW_DELAY_MS, args.slow_n)
        report += [
            "",
            f"10 ms handler, one member, concurrency={SLOW_CONCURRENCY}, {args.partitions} "
            f"partitions, {args.slow_n:,} records: {rate:,.0f} records/s "
            f"(target >= {SLOW_TARGET:,.0f}: {verdict}); {SLOW_CONCURRENCY} loops of "
            f"asyncio.sleep({SLOW_DELAY_MS:g} ms) alone on this machine: {ceiling:,.0f}/s "
            f"(ours {rate / ceiling:.3f}x that)",
        ]
    print("\n".join(report))
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    (RESULTS / f"share-{stamp}.json").write_text(
        json.dumps(
            {
                "args": vars(args),
                "load": load,
                "runs": [asdict(r) | {"rate": r.rate, "cpu_us": r.cpu_us} for r in runs],
                "slow": [asdict(r) | {"rate": r.rate} for r in slow],
                "slow_ceiling": ceiling,
            },
            indent=1,
        )
    )


def _names(text: str) -> list[str]:
    names = [x for x in text.split(",") if x]
    for name in names:
        if name not in ("ours", "ours100", "java", "franz"):
            raise argparse.ArgumentTypeError(f"unknown peer {name!r}: ours, ours100, java, franz")
    return names


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--members", type=lambda s: [int(x) for x in s.split(",")], default=[1, 3])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--peers", type=_names, default=["ours", "ours100", "java", "franz"])
    parser.add_argument("--slow-n", type=int, default=60_000)
    parser.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"))
    return parser.parse_args(argv)


if __name__ == "__main__":
    asyncio.run(main(parse()))
