"""The driver of the standalone-cluster tests of test_spark_cluster.py, in its own process.

``python -m tests.integration.spark_cluster_job MASTER BOOTSTRAP TOPIC ROWS WORKDIR``

A test process already holds a local SparkSession (one SparkContext per process),
so the cluster's driver runs here. Under WORKDIR it writes ``batch.json`` (what a
batch read of TOPIC returned, and the executors that had run tasks by then), then
streams TOPIC into ``out/`` checkpointed in ``ck/`` with availableNow in small
micro-batches (the test kills a worker meanwhile), and writes ``stream.json``
(the committed output read back through the file sink's log, and the executors).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession


def session(master: str) -> SparkSession:
    """One executor of one core per worker, everything on loopback, the executors'
    Python this one (pyspark reads it from the environment, not the session's conf)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    return (
        SparkSession.builder.master(master)
        .appName("consumergroup-cluster-tests")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.executor.cores", "1")
        .config("spark.executor.memory", "512m")
        .config("spark.cores.max", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.locality.wait", "0")
        .getOrCreate()
    )


def executors(spark: SparkSession) -> list[dict[str, Any]]:
    """Every executor of the application so far (dead ones too) with its task count and
    the web UI of the worker that ran it (its log links name it), from Spark's status
    store (what the UI's executors page shows)."""
    found = spark.sparkContext._jsc.sc().statusStore().executorList(False)
    out = []
    for i in range(found.size()):
        summary = found.apply(i)
        if summary.id() == "driver":
            continue
        stdout = summary.executorLogs().get("stdout")
        link = stdout.get() if stdout.isDefined() else ""
        out.append(
            {
                "id": summary.id(),
                "tasks": summary.totalTasks(),
                "worker_ui": link.split("/logPage")[0],
            }
        )
    return out


def wait_executors(spark: SparkSession, count: int, timeout: float = 120.0) -> None:
    """Wait until ``count`` executors are up (tasks then spread over all of them)."""
    deadline = time.monotonic() + timeout
    tracker = spark.sparkContext._jsc.sc().getExecutorMemoryStatus()  # includes the driver
    while tracker.size() - 1 < count:
        if time.monotonic() > deadline:
            raise SystemExit(f"only {tracker.size() - 1} of {count} executors came up")
        time.sleep(0.2)
        tracker = spark.sparkContext._jsc.sc().getExecutorMemoryStatus()


def main(master: str, bootstrap: str, topic: str, rows: int, workdir: Path) -> None:
    """The batch read, then the streaming query; results as JSON files under ``workdir``."""
    import consumergroup.integrations.spark as cgspark

    spark = session(master)
    spark.sparkContext.setLogLevel("ERROR")
    cgspark.register(spark)
    wait_executors(spark, 2)
    batch = (
        spark.read.format("consumergroup")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("minPartitions", "8")
        .load()
        .selectExpr("partition", "offset")
        .collect()
    )
    (workdir / "batch.json").write_text(
        json.dumps({"rows": [list(r) for r in batch], "executors": executors(spark)})
    )
    query = (
        spark.readStream.format("consumergroup")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(rows // 12))
        .load()
        .selectExpr("partition", "offset", "CAST(value AS STRING) AS value")
        .writeStream.format("parquet")
        .option("path", str(workdir / "out"))
        .option("checkpointLocation", str(workdir / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    got = spark.read.parquet(str(workdir / "out")).collect()
    (workdir / "stream.json").write_text(
        json.dumps({"rows": [list(r) for r in got], "executors": executors(spark)})
    )
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), Path(sys.argv[5]))
