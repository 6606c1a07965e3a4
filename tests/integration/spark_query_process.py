"""A streaming query in its own process, for the driver-crash test of test_spark.py.

``python -m tests.integration.spark_query_process BOOTSTRAP TOPIC OUT CHECKPOINT``
reads TOPIC with ``format("consumergroup")`` into Parquet under OUT, checkpointed in
CHECKPOINT, in small micro-batches until killed. The test takes the query over
from the checkpoint with :func:`query` in its own session, built by the same
:func:`local_session`.
"""

from __future__ import annotations

import os
import sys

from pyspark.sql import DataFrame, SparkSession


def query(spark: SparkSession, bootstrap: str, topic: str) -> DataFrame:
    """The query's source side: (partition, offset, value) of TOPIC from the earliest offset."""
    import consumergroup.integrations.spark as cgspark

    cgspark.register(spark)
    return (
        spark.readStream.format("consumergroup")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "300")
        .load()
        .selectExpr("partition", "offset", "CAST(value AS STRING) AS value")
    )


def local_session() -> SparkSession:
    """A local[2] session bound to loopback, its Python workers on this interpreter."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    return (
        SparkSession.builder.master("local[2]")
        .appName("consumergroup-tests")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )


def main(bootstrap: str, topic: str, out: str, checkpoint: str) -> None:
    """Run the query into Parquet until killed."""
    spark = local_session()
    (
        query(spark, bootstrap, topic)
        .writeStream.format("parquet")
        .option("path", out)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime="200 milliseconds")
        .start()
        .awaitTermination()
    )


if __name__ == "__main__":
    main(*sys.argv[1:5])
