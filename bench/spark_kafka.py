"""``format("consumergroup")`` vs Spark's own Kafka source (``spark-sql-kafka-0-10``).

``python -m bench.spark_kafka [--rows N] [--reps 3] [--masters local,standalone]
[--bootstrap H:P]`` (also ``python -m bench --only spark_kafka``). On Apache Kafka
(:class:`~consumergroup.testing.KafkaCluster`, one node, unless ``--bootstrap``), one
topic of 2 partitions holding ``--rows`` JSON records of ~100 bytes, read as a batch
(startingOffsets earliest to endingOffsets latest) by three sources in the same Spark:

* ``kafka``: Spark's built-in source, its jar resolved by Spark from Maven Central
  (``spark.jars.packages``, the Ivy cache in the repo-local ``.cache/ivy``), the
  version of the installed pyspark (or, where Maven Central has no such release, the
  newest earlier ``X.Y.0`` of the same major, said in the table);
* ``consumergroup``: ours;
* ``memory``: an in-memory Python source serving the very Arrow batches our reader
  makes (memory-mapped files): the ceiling of a Python data source.

Two queries: ``count()`` and a JSON parse + aggregation (``from_json``, group by page,
count / sum / max). Two masters: ``local[2]`` and a standalone cluster (a master and
two one-core workers, :class:`~consumergroup.integrations.spark_cluster.SparkStandalone`).
Each (master, query, source) runs once to warm up, then ``--reps`` times in rotation;
medians. Per run: rows/s; executor CPU per row (standalone: the executor JVMs and their
Python workers; local: the one JVM, driver threads included, and its Python workers);
driver CPU (standalone: the driver's Python, its JVM and planner workers; local: the
driver's Python). Targets: ours >= 0.8x ``kafka`` rows/s on count, >= 1.0x on
parse+aggregate.

Each master's queries run in a driver process of their own (one SparkContext per
process): ``python -m bench.spark_kafka --driver ...`` prints one JSON line per run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from . import harness, spark_source
from .harness import log
from .spark_cpu import _descendants_cpu

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("kafka", "consumergroup", "memory")
QUERIES = ("count", "parse_agg")
TARGETS = {"count": 0.8, "parse_agg": 1.0}
JSON_SCHEMA = "user STRING, page STRING, ms BIGINT"


def json_pool() -> list[bytes]:
    """4096 distinct JSON click records of ~100 bytes."""
    return [
        json.dumps(
            {"user": f"u{i % 997:04d}", "page": f"/page/{i % 23}", "ms": 1_700_000_000_000 + i}
            | {"agent": "Mozilla/5.0 (X11; Linux x86_64)"}
        ).encode()
        for i in range(4096)
    ]


# ------------------------------------------------------------------ driver process


def _session(master: str, connector: str) -> Any:
    from pyspark.sql import SparkSession

    import consumergroup.integrations.spark as cgspark

    os.environ["PYSPARK_PYTHON"] = sys.executable
    spark = (
        SparkSession.builder.master(master)
        .appName("consumergroup-bench-kafka")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.jars.packages", f"org.apache.spark:spark-sql-kafka-0-10_2.13:{connector}")
        .config("spark.jars.ivy", str(ROOT / ".cache" / "ivy"))
        .config("spark.executor.cores", "1")
        .config("spark.cores.max", "2")
        .config("spark.executor.memory", "1g")
        .config("spark.executorEnv.PYTHONPATH", str(ROOT))  # the in-memory source is bench's
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.locality.wait", "0")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    cgspark.register(spark)
    spark.dataSource.register(spark_source.MemorySource)
    return spark


def _frame(spark: Any, source: str, bootstrap: str, topic: str, arrow: str) -> Any:
    if source == "memory":
        return spark.read.format("cgbench_memory").option("path", arrow).load()
    return (
        spark.read.format(source)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .load()
    )


def _query(df: Any, query: str) -> int:
    """Run ``query`` on ``df``; return the rows it read."""
    from pyspark.sql import functions as F

    if query == "count":
        return int(df.count())
    parsed = df.select(F.from_json(F.col("value").cast("string"), JSON_SCHEMA).alias("j"))
    per_page = parsed.groupBy("j.page").agg(
        F.count("*").alias("n"), F.sum("j.ms").alias("ms"), F.max("j.user").alias("last")
    )
    return sum(int(r["n"]) for r in per_page.collect())


def _cpu(roots: list[int]) -> dict[str, float]:
    """CPU seconds so far: this process, and every process below each root, by name."""
    out = {"self": time.process_time()}
    for root in roots:
        for name, seconds in _descendants_cpu(root).values():
            key = "jvm" if name == "java" else "python"
            out[f"{root}:{key}"] = out.get(f"{root}:{key}", 0.0) + seconds
    return out


def drive(args: argparse.Namespace) -> None:
    """The driver process: warm up, then ``reps`` rotations; one JSON line per run."""
    spark = _session(args.master, args.connector)
    me = os.getpid()
    workers = [int(p) for p in args.worker_pids.split(",") if p]
    try:
        for query in QUERIES:
            for source in SOURCES:
                got = _query(_frame(spark, source, args.bootstrap, args.topic, args.arrow), query)
                if got != args.rows:
                    raise SystemExit(f"{source} {query}: read {got:,} rows, not {args.rows:,}")
        for rep in range(args.reps):
            for query in QUERIES:
                order = SOURCES[rep % 3 :] + SOURCES[: rep % 3]  # no source always first
                for source in order:
                    df = _frame(spark, source, args.bootstrap, args.topic, args.arrow)
                    before, started = _cpu([me, *workers]), time.perf_counter()
                    _query(df, query)
                    seconds = time.perf_counter() - started
                    after = _cpu([me, *workers])
                    delta = {k: after[k] - before.get(k, 0.0) for k in after}
                    below_me = sum(v for k, v in delta.items() if k.startswith(f"{me}:"))
                    on_workers = sum(v for k, v in delta.items() if k.split(":")[0] != str(me))
                    if workers:  # executors are the workers' children
                        driver, executors = delta["self"] + below_me, on_workers
                    else:  # local: executors live in the driver's JVM and its Python workers
                        driver, executors = delta["self"], below_me
                    run = {"source": source, "query": query, "seconds": seconds}
                    run |= {"driver_cpu_s": driver, "executor_cpu_s": executors}
                    print(json.dumps(run), flush=True)
    finally:
        spark.stop()


# ------------------------------------------------------------------ orchestration


def _driver(
    master: str, bootstrap: str, topic: str, rows: int, arrow: Path, reps: int, connector: str,
    worker_pids: list[int],
) -> list[dict[str, Any]]:  # fmt: skip
    """Run one master's driver process; its runs (raises with its output if it failed)."""
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYTHONPATH": str(ROOT)}
    command = [
        sys.executable, "-m", "bench.spark_kafka", "--driver", "--master", master,
        "--bootstrap", bootstrap, "--topic", topic, "--rows", str(rows), "--arrow", str(arrow),
        "--reps", str(reps), "--connector", connector,
        "--worker-pids", ",".join(map(str, worker_pids)),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"driver ({master}) failed:\n{(done.stdout + done.stderr)[-4000:]}")
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def _connectors() -> Iterator[str]:
    """The installed pyspark's version, then earlier X.Y.0 releases of its major."""
    import pyspark

    version = pyspark.__version__.split(".dev")[0]
    yield version
    major, minor = (int(x) for x in version.split(".")[:2])
    for earlier in range(minor, -1, -1):
        if f"{major}.{earlier}.0" != version:
            yield f"{major}.{earlier}.0"


def _driver_any_connector(
    known: str | None, master: str, bootstrap: str, topic: str, rows: int, arrow: Path,
    reps: int, worker_pids: list[int],
) -> tuple[list[dict[str, Any]], str]:  # fmt: skip
    """:func:`_driver` with the first spark-sql-kafka-0-10 release that resolves."""
    for connector in [known] if known else _connectors():
        try:
            runs = _driver(master, bootstrap, topic, rows, arrow, reps, connector, worker_pids)
        except RuntimeError as exc:
            if "unresolved dependency" not in str(exc):
                raise
            log(f"spark_kafka: spark-sql-kafka-0-10 {connector} is not on Maven Central")
            continue
        return runs, connector
    raise RuntimeError("no spark-sql-kafka-0-10 release of pyspark's major resolved")


def _summarise(master: str, runs: list[dict[str, Any]], rows: int) -> list[dict[str, Any]]:
    out = []
    for query in QUERIES:
        med: dict[str, dict[str, float]] = {}
        for source in SOURCES:
            mine = [r for r in runs if r["query"] == query and r["source"] == source]
            seconds = statistics.median(r["seconds"] for r in mine)
            med[source] = {
                "rows_per_s": rows / seconds,
                "executor_cpu_us_per_row": 1e6 * statistics.median(
                    r["executor_cpu_s"] for r in mine
                ) / rows,
                "driver_cpu_s": statistics.median(r["driver_cpu_s"] for r in mine),
                "runs": len(mine),
            }  # fmt: skip
        ours = med["consumergroup"]["rows_per_s"]
        out.append(
            {
                "master": master,
                "query": query,
                **med,
                "vs_kafka": ours / med["kafka"]["rows_per_s"],
                "vs_memory": ours / med["memory"]["rows_per_s"],
            }
        )
    return out


def measure(bootstrap: str, topic: str, rows: int, masters: list[str], reps: int) -> dict[str, Any]:
    """Every master's runs (blocking)."""
    from consumergroup.integrations.spark_cluster import SparkStandalone

    results: dict[str, Any] = {"rows": rows, "reps": reps, "table": []}
    with tempfile.TemporaryDirectory(prefix="cgbench-sparkkafka-") as tmp:
        arrow = Path(tmp)
        alone = spark_source.read_alone(bootstrap, topic, rows, arrow)
        log(f"spark_kafka: read() alone {alone['rows_per_s']:,.0f} rows/s")
        for master in masters:
            cluster = (
                SparkStandalone(workers=2, cores=1, memory="2g") if master != "local" else None
            )
            try:
                if cluster is not None:
                    cluster.start()
                url = cluster.master_url if cluster else "local[2]"
                pids = [w.proc.pid for w in cluster.workers] if cluster else []
                runs, results["connector"] = _driver_any_connector(
                    results.get("connector"), url, bootstrap, topic, rows, arrow, reps, pids
                )
                results["table"] += _summarise(
                    "standalone (2 workers x 1 core)" if cluster else "local[2]", runs, rows
                )
                results.setdefault("runs", {})[master] = runs
            finally:
                if cluster is not None:
                    cluster.close()
    return results


def markdown(res: dict[str, Any]) -> str:
    """The comparison table with verdicts."""
    import pyspark

    lines = [
        f"### Spark's Kafka source vs format(\"consumergroup\") ({res['rows']:,} JSON "
        f"rows, 2 partitions, Apache Kafka; medians of {res['reps']}; spark-sql-kafka-0-10 "
        f"{res['connector']} on pyspark {pyspark.__version__})",
        "",
        "| master | query | kafka rows/s | ours rows/s | memory rows/s | ours/kafka (target) "
        "| ours/memory | exec CPU us/row kafka / ours / memory "
        "| driver CPU s kafka / ours / memory |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]  # fmt: skip
    for r in res["table"]:
        target = TARGETS[r["query"]]
        verdict = "PASS" if r["vs_kafka"] >= target else "FAIL"
        cpu = " / ".join(f"{r[s]['executor_cpu_us_per_row']:.2f}" for s in SOURCES)
        driver = " / ".join(f"{r[s]['driver_cpu_s']:.2f}" for s in SOURCES)
        lines.append(
            f"| {r['master']} | {r['query']} | {r['kafka']['rows_per_s']:,.0f} "
            f"| {r['consumergroup']['rows_per_s']:,.0f} | {r['memory']['rows_per_s']:,.0f} "
            f"| {r['vs_kafka']:.2f} (>= {target}) {verdict} | {r['vs_memory']:.2f} | {cpu} "
            f"| {driver} |"
        )
    return "\n".join([*lines, ""])


async def run(bootstrap: str | None, rows: int, masters: list[str], reps: int) -> dict[str, Any]:
    """Load the topic on ``bootstrap`` (or a fresh Apache Kafka) and measure."""
    from consumergroup.testing import KafkaCluster

    async with contextlib.AsyncExitStack() as stack:
        if bootstrap is None:
            kafka = await stack.enter_async_context(KafkaCluster())
            bootstrap = kafka.bootstrap
        topic = await harness.create_topic(bootstrap, spark_source.PARTITIONS, "sparkkafka")
        pool = json_pool()
        loaded = await harness.load(
            bootstrap, topic, spark_source.PARTITIONS, rows, 0, 0, "none", 1 << 20, pool
        )
        log(f"spark_kafka: loaded {rows:,} JSON records in {loaded.seconds:.1f}s")
        return await asyncio.to_thread(measure, bootstrap, topic, rows, masters, reps)


def main(argv: list[str] | None = None) -> None:
    """Run the comparison and print its table (or, with --driver, be one master's driver)."""
    p = argparse.ArgumentParser(prog="python -m bench.spark_kafka", description=__doc__)
    p.add_argument("--rows", type=int, default=2_000_000)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--masters", default="local,standalone")
    p.add_argument("--bootstrap", help="an Apache Kafka to use instead of a fresh one")
    for internal in ("--master", "--topic", "--arrow", "--connector", "--worker-pids"):
        p.add_argument(internal, help=argparse.SUPPRESS)
    p.add_argument("--driver", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.driver:
        drive(args)
        return
    res = asyncio.run(run(args.bootstrap, args.rows, args.masters.split(","), args.reps))
    out = ROOT / "bench" / "results" / f"spark-kafka-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(res, indent=2) + "\n")
    print(markdown(res))
    log(f"wrote {out}")


if __name__ == "__main__":
    main()
