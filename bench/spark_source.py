"""The Spark source: ``format("consumergroup")`` against the ceiling of Spark's Python sources.

``python -m bench.spark_source [--quick] [--bootstrap H:P]`` (also ``python -m bench
--only spark``). On one broker and data set:

* ``read()`` alone: our executor read path (fetch + Arrow batches), no Spark, rows/s;
* for local[1] and local[2], and micro-batches of 100k and 500k rows
  (``maxOffsetsPerTrigger``): our source vs an in-memory Python source yielding the
  very Arrow batches our reader produced (memory-mapped Arrow files: the ceiling of
  Spark's Python data source path), same Parquet sink, same batch size, availableNow.
  Warm rows/s = rows / time of every micro-batch but the first; the ratio is ours /
  in-memory (target >= 0.8);
* first-batch latency: start() to the end of the first micro-batch, cold (a fresh
  session: JVM already up, Python workers not) and warm.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from consumergroup.integrations._spark_arrow import ARROW_BATCH_ROWS, SCHEMA_DDL
from consumergroup.integrations._spark_options import parse_options
from consumergroup.integrations._spark_plan import OffsetRange
from consumergroup.integrations._spark_read import read_range

from . import harness
from .harness import log

ROOT = Path(__file__).resolve().parents[1]
PARTITIONS = 2


class MemorySource(DataSource):
    """``format("cgbench_memory")``: Arrow files ``p<N>.arrow`` under option ``path``."""

    @classmethod
    def name(cls) -> str:
        """The format name."""
        return "cgbench_memory"

    def schema(self) -> str:
        """The same rows as ``format("consumergroup")``."""
        return SCHEMA_DDL

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        """Offsets are row positions per file."""
        return MemoryReader(self.options["path"], int(self.options["maxOffsetsPerTrigger"]))

    def reader(self, schema: Any) -> DataSourceReader:
        """A batch read: every file, one task each."""
        return MemoryBatchReader(self.options["path"])


def _arrow_slice(
    path: str, partition: int, first: int, last: int | None
) -> Iterator[pa.RecordBatch]:
    """Rows [first, last) of ``p<partition>.arrow``, in the batch size our reader uses."""
    table = pa.ipc.open_file(pa.memory_map(f"{path}/p{partition}.arrow")).read_all()
    rows = table.slice(first, None if last is None else last - first)
    yield from rows.to_batches(max_chunksize=ARROW_BATCH_ROWS)


class MemoryBatchReader(DataSourceReader):
    """Serves whole memory-mapped Arrow files in ``ARROW_BATCH_ROWS`` batches."""

    def __init__(self, path: str) -> None:
        self.path = path

    def partitions(self) -> list[InputPartition]:
        """One task per file."""
        return [InputPartition(p) for p in range(PARTITIONS)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The file."""
        return _arrow_slice(self.path, partition.value, 0, None)


class MemoryReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Serves slices of memory-mapped Arrow files in ``ARROW_BATCH_ROWS`` batches."""

    def __init__(self, path: str, max_rows: int) -> None:
        self.path = path
        self.max_rows = max_rows
        self.sizes = {
            str(p): pa.ipc.open_file(pa.memory_map(f"{path}/p{p}.arrow")).read_all().num_rows
            for p in range(PARTITIONS)
        }

    def initialOffset(self) -> dict[str, int]:
        """Every file from its first row."""
        return dict.fromkeys(self.sizes, 0)

    def prepareForTriggerAvailableNow(self) -> None:
        """The files do not grow."""

    def getDefaultReadLimit(self) -> ReadLimit:
        """maxOffsetsPerTrigger, as for our source."""
        return ReadMaxRows(self.max_rows)

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        """An even share of the limit per file (the bench loads partitions evenly)."""
        if isinstance(limit, ReadAllAvailable):
            return dict(self.sizes)
        share = limit.max_rows // len(self.sizes) if isinstance(limit, ReadMaxRows) else 0
        return {p: min(self.sizes[p], start[p] + share) for p in self.sizes}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        """One task per file slice."""
        return [InputPartition((int(p), start[p], end[p])) for p in end if end[p] > start[p]]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The slice, in the batch size our reader uses."""
        p, first, last = partition.value
        return _arrow_slice(self.path, p, first, last)


def read_alone(bootstrap: str, topic: str, rows: int, out: Path) -> dict[str, Any]:
    """Our read path without Spark over every partition; the batches go to ``out``."""
    opts = parse_options({"kafka.bootstrap.servers": bootstrap, "subscribe": topic}, streaming=True)
    per = rows // PARTITIONS
    total = 0
    seconds = 0.0
    for p in range(PARTITIONS):
        started = time.perf_counter()
        batches = list(read_range(opts, OffsetRange(topic, p, 0, per)))
        seconds += time.perf_counter() - started
        total += sum(b.num_rows for b in batches)
        with pa.ipc.new_file(str(out / f"p{p}.arrow"), batches[0].schema) as writer:
            for batch in batches:
                writer.write_batch(batch)
    return {"rows": total, "seconds": seconds, "rows_per_s": total / seconds}


def session(master: str) -> SparkSession:
    """A fresh local session (the executors import ``bench`` from the repo)."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])
    )
    spark = (
        SparkSession.builder.master(master)
        .appName("consumergroup-bench")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    import consumergroup.integrations.spark as cgspark

    cgspark.register(spark)
    spark.dataSource.register(MemorySource)
    return spark


def run_query(spark: SparkSession, fmt: str, options: dict[str, str], work: Path) -> dict[str, Any]:
    """availableNow into Parquet; rows/s of the warm micro-batches, first-batch latency."""
    reader = spark.readStream.format(fmt)
    for key, value in options.items():
        reader = reader.option(key, value)
    tag = f"{fmt}-{time.monotonic_ns()}"
    started = time.time()
    query = (
        reader.load()
        .writeStream.format("parquet")
        .option("path", str(work / tag / "out"))
        .option("checkpointLocation", str(work / tag / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    if query.exception() is not None:
        raise RuntimeError(f"{fmt} query failed: {query.exception()}")
    batches = [p for p in query.recentProgress if p["numInputRows"]]
    first = batches[0]
    first_end = (
        datetime.fromisoformat(first["timestamp"].replace("Z", "+00:00")).timestamp()
        + first["durationMs"]["triggerExecution"] / 1000
    )
    warm = batches[1:] or batches
    rows = sum(p["numInputRows"] for p in warm)
    seconds = sum(p["durationMs"]["triggerExecution"] for p in warm) / 1000
    return {
        "batches": len(batches),
        "rows": sum(p["numInputRows"] for p in batches),
        "warm_rows_per_s": rows / seconds,
        "first_batch_s": first_end - started,
    }


async def load_topics(bootstrap: str, sizes: list[int]) -> dict[int, str]:
    """One topic per micro-batch size holding three batches of 100-byte records."""
    topics = {}
    for size in sizes:
        topic = await harness.create_topic(bootstrap, PARTITIONS, f"spark{size}")
        loaded = await harness.load(bootstrap, topic, PARTITIONS, 3 * size, 100, 8, "none", 1 << 20)
        log(f"spark: loaded {3 * size:,} records in {loaded.seconds:.1f}s")
        topics[size] = topic
    return topics


def measure(bootstrap: str, topics: dict[int, str], masters: list[str]) -> dict[str, Any]:
    """Every measurement, synchronously (Spark's API blocks)."""
    results: dict[str, Any] = {"runs": [], "cold_first_batch_s": {}}
    with tempfile.TemporaryDirectory(prefix="cgbench-spark-") as tmp:
        work = Path(tmp)
        files = {}
        for size, topic in topics.items():
            files[size] = work / f"arrow{size}"
            files[size].mkdir()
            alone = read_alone(bootstrap, topic, 3 * size, files[size])
            log(f"spark: read() alone, {alone['rows']:,} rows: {alone['rows_per_s']:,.0f} rows/s")
            results.setdefault("read_alone", []).append({"batch_rows": size, **alone})
        for master in masters:
            spark = session(master)
            try:
                small = min(topics)
                cold = run_query(
                    spark, "consumergroup", _ours(bootstrap, topics[small], small), work
                )
                results["cold_first_batch_s"][master] = cold["first_batch_s"]
                for size, topic in topics.items():
                    ours = run_query(spark, "consumergroup", _ours(bootstrap, topic, size), work)
                    memory = run_query(
                        spark,
                        "cgbench_memory",
                        {"path": str(files[size]), "maxOffsetsPerTrigger": str(size)},
                        work,
                    )
                    run = {"master": master, "batch_rows": size, "ours": ours, "memory": memory}
                    run["ratio"] = ours["warm_rows_per_s"] / memory["warm_rows_per_s"]
                    log(
                        f"spark {master} {size:,}/batch: ours {ours['warm_rows_per_s']:,.0f} "
                        f"rows/s, in-memory {memory['warm_rows_per_s']:,.0f} ({run['ratio']:.2f}x)"
                    )
                    results["runs"].append(run)
            finally:
                spark.stop()
    return results


def _ours(bootstrap: str, topic: str, size: int) -> dict[str, str]:
    return {
        "kafka.bootstrap.servers": bootstrap,
        "subscribe": topic,
        "startingOffsets": "earliest",
        "maxOffsetsPerTrigger": str(size),
    }


async def run(bootstrap: str, quick: bool) -> dict[str, Any]:
    """The section, on ``bootstrap``; returns the results tree."""
    sizes = [20_000, 100_000] if quick else [100_000, 500_000]
    topics = await load_topics(bootstrap, sizes)
    return await asyncio.to_thread(measure, bootstrap, topics, ["local[1]", "local[2]"])


def markdown(res: dict[str, Any]) -> str:
    """The section's tables."""
    lines = [
        '### Spark source (format("consumergroup")) vs an in-memory Python source',
        "",
        "| master | rows/batch | ours rows/s | in-memory rows/s | ratio (target >= 0.8) "
        "| ours first batch s | in-memory first batch s |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in res["runs"]:
        verdict = "PASS" if r["ratio"] >= 0.8 else "FAIL"
        lines.append(
            f"| {r['master']} | {r['batch_rows']:,} | {r['ours']['warm_rows_per_s']:,.0f} "
            f"| {r['memory']['warm_rows_per_s']:,.0f} | {r['ratio']:.2f} {verdict} "
            f"| {r['ours']['first_batch_s']:.1f} | {r['memory']['first_batch_s']:.1f} |"
        )
    lines += ["", "| read() alone (no Spark) | rows | rows/s |", "|---|---:|---:|"]
    for r in res["read_alone"]:
        lines.append(
            f"| {3 * r['batch_rows']:,}-row topic | {r['rows']:,} | {r['rows_per_s']:,.0f} |"
        )
    cold = ", ".join(f"{m} {s:.1f} s" for m, s in res["cold_first_batch_s"].items())
    lines += ["", f"First batch on a fresh session (Python workers starting): {cold}.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Run the section on the embedded broker (or ``--bootstrap``), print the tables."""
    p = argparse.ArgumentParser(prog="python -m bench.spark_source", description=__doc__)
    p.add_argument("--quick", action="store_true", help="micro-batches of 20k and 100k rows")
    p.add_argument("--bootstrap", help="use this cluster instead of the embedded broker")
    args = p.parse_args(argv)

    async def amain() -> dict[str, Any]:
        async with harness.broker(args.bootstrap) as (bootstrap, description):
            log(f"broker: {description}")
            return await run(bootstrap, args.quick)

    res = asyncio.run(amain())
    out = ROOT / "bench" / "results" / f"spark-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(res, indent=2) + "\n")
    print(markdown(res))
    log(f"wrote {out}")


if __name__ == "__main__":
    main()
