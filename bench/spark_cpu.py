"""Where the Spark source's time goes: CPU per process during the Spark bench's queries.

``python -m bench.spark_cpu [--size N] [--master local[2]] [--reps 2]``: on an embedded
broker, loads one topic (three micro-batches of ``--size`` rows, as ``bench.spark_source``)
and runs our ``availableNow`` query and the in-memory one alternately, each time adding up
the CPU seconds of every process below this one: the JVM (``java``: Spark's Arrow to
row conversion and the Parquet sink), the Python workers (our fetch and decode, or the
in-memory reader; Arrow serialization to the JVM in both), the broker (``tansu``) and this
driver; plus the seconds all cores sat idle. Unlike rows/s on a shared machine, CPU
seconds per query barely depend on what else runs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from consumergroup.testing import EmbeddedBroker

from . import spark_source
from .harness import log

_TICK = os.sysconf("SC_CLK_TCK")


def _descendants_cpu(root: int) -> dict[int, tuple[str, float]]:
    """``pid: (name, CPU seconds)`` of every process below ``root``."""
    children: dict[int, list[tuple[int, str, float]]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue  # exited meanwhile
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat.rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / _TICK  # utime + stime
        children.setdefault(int(fields[1]), []).append((int(entry), name, cpu))
    found: dict[int, tuple[str, float]] = {}
    stack = [root]
    while stack:
        for pid, name, cpu in children.get(stack.pop(), []):
            found[pid] = (name, cpu)
            stack.append(pid)
    return found


def _idle_seconds() -> float:
    with open("/proc/stat") as f:
        return int(f.readline().split()[4]) / _TICK


def _group(name: str) -> str:
    if name.startswith("tansu"):
        return "broker"
    if name == "java":
        return "jvm"
    return "python workers" if "python" in name or "pyspark" in name else name


def cpu_of(run: Callable[[], dict[str, Any]]) -> tuple[dict[str, Any], dict[str, float]]:
    """``run()``'s result and the CPU seconds it took, per process group."""
    before, idle, own = _descendants_cpu(os.getpid()), _idle_seconds(), time.process_time()
    result = run()
    after = _descendants_cpu(os.getpid())
    cpu = {"driver": time.process_time() - own, "idle (all cores)": _idle_seconds() - idle}
    for pid, (name, seconds) in after.items():
        key = _group(name)
        cpu[key] = cpu.get(key, 0.0) + seconds - before.get(pid, (name, 0.0))[1]
    return result, cpu


def measure(bootstrap: str, topic: str, size: int, master: str, reps: int) -> None:
    """Warm up both sources, then ``reps`` alternate queries of each, printed."""
    with tempfile.TemporaryDirectory(prefix="cgbench-sparkcpu-") as tmp:
        work = Path(tmp)
        files = work / "arrow"
        files.mkdir()
        spark_source.read_alone(bootstrap, topic, 3 * size, files)
        sources = {
            "consumergroup": spark_source._ours(bootstrap, topic, size),
            "cgbench_memory": {"path": str(files), "maxOffsetsPerTrigger": str(size)},
        }
        spark = spark_source.session(master)
        try:
            for fmt, options in sources.items():  # Python workers and JIT warm
                spark_source.run_query(spark, fmt, options, work)
            for _ in range(reps):
                for fmt, options in sources.items():
                    res, cpu = cpu_of(
                        lambda fmt=fmt, options=options: spark_source.run_query(
                            spark, fmt, options, work
                        )
                    )
                    shown = ", ".join(f"{k} {v:.2f}" for k, v in cpu.items() if v >= 0.01)
                    print(
                        f"{master} {fmt:15s} {res['rows']:,} rows, warm "
                        f"{res['warm_rows_per_s']:,.0f} rows/s; CPU s: {shown}; "
                        f"load {os.getloadavg()[0]:.1f}",
                        flush=True,
                    )
        finally:
            spark.stop()


def main() -> None:
    """Run on an embedded broker and print one line per query."""
    p = argparse.ArgumentParser(prog="python -m bench.spark_cpu", description=__doc__)
    p.add_argument("--size", type=int, default=500_000, help="rows per micro-batch")
    p.add_argument("--master", default="local[2]")
    p.add_argument("--reps", type=int, default=2)
    args = p.parse_args()

    async def amain() -> None:
        async with EmbeddedBroker() as broker:
            topic = (await spark_source.load_topics(broker.bootstrap, [args.size]))[args.size]
            log(f"spark cpu: topic {topic}")
            await asyncio.to_thread(
                measure, broker.bootstrap, topic, args.size, args.master, args.reps
            )

    asyncio.run(amain())


if __name__ == "__main__":
    main()
