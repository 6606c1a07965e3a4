"""A Spark pipeline on ``format("consumergroup")``: click events to per-minute page counts.

    python examples/spark_pipeline.py [BOOTSTRAP] [--topic T] [--out DIR] [--events N]
    spark-submit --master spark://HOST:7077 examples/spark_pipeline.py BOOTSTRAP ...

From a clone, ``spark-submit`` must run this venv's Python (it looks for ``python3`` on
PATH): ``. .venv/bin/activate`` first, then ``spark-submit examples/spark_pipeline.py``.

Reads JSON click events (``{"user": "u7", "page": "/docs", "ts": "2026-01-01T10:00:05Z"}``)
from Kafka with Spark Structured Streaming, parses them, counts clicks per page and
per event-time minute with a one-minute watermark, and appends each closed minute to
Parquet, checkpointed (run it again: it continues where it stopped, exactly once).
Then a batch query over the Parquet output prints the clicks per page.

BOOTSTRAP comes from the argument or ``$KAFKA_BOOTSTRAP_SERVERS``. With neither, an
embedded broker is started and filled with ``--events`` clicks, so it runs standalone
(needs Java 17+ and, from a clone, ``make install EXTRAS=spark``; from PyPI,
``pip install 'consumergroup[spark,embedded]'``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
from datetime import UTC, datetime, timedelta

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import consumergroup as cg
from consumergroup.client import Client
from consumergroup.errors import UnknownTopicOrPartitionError
from consumergroup.testing import EmbeddedBroker

PAGES = ["/", "/docs", "/pricing", "/blog", "/signup"]
START = datetime(2026, 1, 1, 10, 0, tzinfo=UTC)
CLICK_SCHEMA = "user STRING, page STRING, ts TIMESTAMP"


def clicks(count: int) -> list[bytes]:
    """``count`` JSON click events spread over the minutes after START (5 per second)."""
    return [
        json.dumps(
            {
                "user": f"u{i % 37}",
                "page": PAGES[(i * 7) % len(PAGES)],
                "ts": (START + timedelta(milliseconds=200 * i)).isoformat().replace("+00:00", "Z"),
            }
        ).encode()
        for i in range(count)
    ]


async def fill(bootstrap: str, topic: str, events: int) -> None:
    """Write the click events round robin over the topic's partitions, in time order."""
    async with cg.Producer([bootstrap]) as producer:
        partitions = await producer.partitions(topic)
        for i, value in enumerate(clicks(events)):
            await producer.send(topic, value, partition=partitions[i % len(partitions)])


async def missing_topic(bootstrap: str, topic: str) -> str | None:
    """Why ``topic`` cannot be read at ``bootstrap`` (None when it can): checked before
    Spark starts, so a typo is one line, not a Py4J traceback from inside the query."""
    try:
        async with Client(bootstrap) as client:
            await client.partitions(topic)
    except UnknownTopicOrPartitionError:
        return (
            f"topic {topic!r} does not exist at {bootstrap}: create it (consumergroup topics "
            f"-b {bootstrap} --create {topic} --partitions 3) or pass --topic"
        )
    except cg.KafkaError as exc:
        return f"cannot read {topic!r} at {bootstrap}: {exc}"
    return None


def session() -> SparkSession:
    """Run with ``python``: a local Spark bound to loopback, its Python workers on this
    interpreter. Run with ``spark-submit``: its ``--master`` and ``--conf`` decide."""
    builder = SparkSession.builder.appName("consumergroup-spark-pipeline")
    if "PYSPARK_GATEWAY_PORT" not in os.environ:  # set by spark-submit for its Python app
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        builder = (
            builder.master("local[2]")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
        )
    spark = (
        builder.config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def pipeline(spark: SparkSession, bootstrap: str, topic: str, out: str) -> None:
    """The streaming part: Kafka -> JSON -> per-minute per-page counts -> Parquet."""
    import consumergroup.integrations.spark as cgspark

    cgspark.register(spark)
    events = (
        spark.readStream.format("consumergroup")  # was: format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", 2000)  # several micro-batches: the watermark moves
        .load()
        .select(F.from_json(F.col("value").cast("string"), CLICK_SCHEMA).alias("click"))
        .select("click.*")
        .where(F.col("page").isNotNull())  # malformed JSON parses to nulls: drop it
    )
    per_minute = (
        events.withWatermark("ts", "1 minute")
        .groupBy(F.window("ts", "1 minute").alias("minute"), "page")
        .agg(F.count("*").alias("clicks"), F.approx_count_distinct("user").alias("users"))
        .select(F.col("minute.start").alias("minute"), "page", "clicks", "users")
    )
    query = (
        per_minute.writeStream.format("parquet")
        .outputMode("append")  # a minute is written once the watermark closes it
        .option("path", os.path.join(out, "clicks"))
        .option("checkpointLocation", os.path.join(out, "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    rows = sum(p["numInputRows"] for p in query.recentProgress)
    print(f"streamed {rows} events in {len(query.recentProgress)} micro-batches", flush=True)


def summary(spark: SparkSession, out: str) -> None:
    """The batch part: read the closed minutes back and total them per page."""
    minutes = spark.read.parquet(os.path.join(out, "clicks"))
    closed = minutes.select("minute").distinct().count()
    print(f"{closed} closed minutes written; clicks per page:")
    totals = minutes.groupBy("page").agg(F.sum("clicks").alias("clicks")).orderBy("page")
    for row in totals.collect():
        print(f"  {row.page:<10} {row.clicks}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Per-minute page clicks with Spark.")
    parser.add_argument("bootstrap", nargs="?", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"))
    parser.add_argument("--topic", default="clicks")
    parser.add_argument("--out", default=None, help="output + checkpoint directory")
    parser.add_argument("--events", type=int, default=6000, help="standalone: events to make")
    args = parser.parse_args(argv)
    out = args.out or tempfile.mkdtemp(prefix="spark-pipeline-")
    loop = asyncio.new_event_loop()
    broker = None
    bootstrap = args.bootstrap
    if not bootstrap:
        broker = EmbeddedBroker()
        loop.run_until_complete(broker.start())
        loop.run_until_complete(broker.create_topic(args.topic, partitions=3))
        loop.run_until_complete(fill(broker.bootstrap, args.topic, args.events))
        bootstrap = broker.bootstrap
        print(f"embedded broker at {bootstrap}: produced {args.events} clicks", flush=True)
    else:
        problem = loop.run_until_complete(missing_topic(bootstrap, args.topic))
        if problem is not None:
            loop.close()
            print(f"Error: {problem}", file=sys.stderr)
            return 2
    spark = session()
    try:
        pipeline(spark, bootstrap, args.topic, out)
        summary(spark, out)
        print(f"output in {out}")
    finally:
        spark.stop()
        if broker is not None:
            loop.run_until_complete(broker.close())
        loop.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
