"""``format("consumergroup")`` under a real local Spark (local[2]) on the test broker.

One SparkSession for the whole run (a JVM and its Python workers take ~1 GB and
tens of seconds to start); each test uses its own topics, checkpoints and output.
Select with ``-m spark``.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from aiokafka import AIOKafkaProducer

import consumergroup as cg
from consumergroup.client import Client
from consumergroup.group.offsets import OffsetManager
from consumergroup.integrations._spark_options import parse_options
from consumergroup.testing import EmbeddedBroker, free_port
from tests.conftest import TopicFactory, unique
from tests.integration.cli_support import run_cli

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import DataStreamReader, StreamingQuery

# pyspark is imported only when these tests run: `make test` runs them in a pytest process
# of their own (-m spark), so neither its imports nor the JVM weigh on the other tests.
pytestmark = [
    pytest.mark.spark,
    pytest.mark.slow,
    # One worker starts the local session; the cluster's tests run beside it (-m spark -n 2).
    pytest.mark.xdist_group("spark-local"),
    pytest.mark.skipif(not importlib.util.find_spec("pyspark"), reason="needs the [spark] extra"),
]

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """The run's one local[2] session, bound to loopback, workers on this interpreter."""
    import consumergroup.integrations.spark as cgspark
    from tests.integration import spark_query_process

    session = spark_query_process.local_session()
    session.sparkContext.setLogLevel("ERROR")
    cgspark.register(session)
    yield session
    session.stop()


def source(spark: SparkSession, bootstrap: str, **options: str) -> DataStreamReader:
    """``spark.readStream.format("consumergroup")`` with the broker and ``options``."""
    reader = spark.readStream.format("consumergroup").option("kafka.bootstrap.servers", bootstrap)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader


def drain(df: DataFrame, out: Path, checkpoint: Path) -> StreamingQuery:
    """Run ``df`` with availableNow into Parquet under ``out``; return the ended query."""
    query = (
        df.writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert not query.isActive, "the availableNow query did not end within 120 s"
    if query.exception() is not None:
        raise AssertionError(f"query failed: {query.exception()}")
    return query


def rows(spark: SparkSession, out: Path, *columns: str) -> list[tuple[Any, ...]]:
    """What the file sink committed (Spark lists files through its _spark_metadata log)."""
    return [tuple(r) for r in spark.read.parquet(str(out)).select(*columns).collect()]


async def fill(bootstrap: str, topic: str, partition: int, count: int, tag: str = "v") -> None:
    """``count`` records ``{tag}-{partition}-{i}`` in batches of 500."""
    async with cg.Producer([bootstrap]) as producer:
        for i in range(count):
            await producer.send(topic, f"{tag}-{partition}-{i}".encode(), partition=partition)
            if i % 500 == 499:
                await producer.flush()  # batches of 500 records, as before


async def test_available_now_reads_every_record_once_headers_and_null_keys_exact(
    spark: SparkSession, bootstrap: str, new_topic: TopicFactory, tmp_path: Path
) -> None:
    topic = await new_topic(partitions=3)
    sent = []
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    await producer.start()
    try:
        for i in range(300):
            key = None if i % 3 == 0 else f"k{i}".encode()
            headers = [("n", str(i).encode()), ("empty", b"")] if i % 2 else []
            await producer.send(topic, f"v{i}".encode(), key=key, partition=i % 3, headers=headers)
            sent.append((key, f"v{i}".encode(), headers))
        await producer.flush()
    finally:
        await producer.stop()

    df = source(
        spark, bootstrap, subscribe=topic, startingOffsets="earliest", includeHeaders="true"
    )
    query = drain(df.load(), tmp_path / "out", tmp_path / "ck")
    got = rows(spark, tmp_path / "out", "key", "value", "headers", "topic", "partition", "offset")
    assert len(got) == 300
    assert len({(r[4], r[5]) for r in got}) == 300
    assert {r[3] for r in got} == {topic}
    as_sent = sorted(
        ((bytes(k) if k is not None else None, bytes(v), [(h.key, bytes(h.value)) for h in hs])
         for k, v, hs, *_ in got),
        key=lambda record: record[1],
    )  # fmt: skip
    assert as_sent == sorted(sent, key=lambda record: record[1])
    assert sum(p["numInputRows"] for p in query.recentProgress) == 300


async def test_max_offsets_per_trigger_bounds_batches_and_the_group_mirrors_the_last_batch(
    spark: SparkSession, bootstrap: str, new_topic: TopicFactory, tmp_path: Path
) -> None:
    topic = await new_topic(partitions=2)
    for partition in (0, 1):
        await fill(bootstrap, topic, partition, 500)
    group = unique("spark")
    df = source(
        spark,
        bootstrap,
        subscribe=topic,
        startingOffsets="earliest",
        maxOffsetsPerTrigger="300",
        **{"kafka.group.id": group},
    ).load()
    query = drain(df, tmp_path / "out", tmp_path / "ck")
    batches = [p for p in query.recentProgress if p["numInputRows"]]
    assert [p["numInputRows"] for p in batches] == [300, 300, 300, 100]
    got = rows(spark, tmp_path / "out", "partition", "offset")
    assert sorted(got) == [(p, o) for p in (0, 1) for o in range(500)]
    # The progress shows the log ends (reportLatestOffset) and what is left behind them.
    from consumergroup.integrations.spark import offsets_behind_latest

    first = batches[0]["sources"][0]
    assert json.loads(first["latestOffset"]) == {topic: {"0": 500, "1": 500}}
    assert offsets_behind_latest(first) == {
        "minOffsetsBehindLatest": 350.0,
        "maxOffsetsBehindLatest": 350.0,
        "avgOffsetsBehindLatest": 350.0,
    }

    # The group holds the end of the last batch: lag 0.
    ends = [json.loads(p["sources"][0]["endOffset"])[topic] for p in batches]
    async with Client([bootstrap]) as client:
        committed = await OffsetManager(client, group, client.config).fetch_committed(
            [(topic, 0), (topic, 1)]
        )
    assert {p: committed[(topic, p)][0] for p in (0, 1)} == {int(p): o for p, o in ends[-1].items()}
    lag = await run_cli("lag", "-b", bootstrap, group)
    assert lag.code == 0, lag.err
    assert [line.split()[-1] for line in lag.out.splitlines() if topic in line] == ["0", "0"]


async def test_batch_read_from_starting_to_ending_offsets_split_by_min_partitions(
    spark: SparkSession, bootstrap: str, new_topic: TopicFactory
) -> None:
    topic = await new_topic(partitions=2)
    for partition in (0, 1):
        await fill(bootstrap, topic, partition, 200)
    df = (
        spark.read.format("consumergroup")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("assign", f'{{"{topic}": [0, 1]}}')
        .option("startingOffsets", f'{{"{topic}": {{"0": 10, "1": -2}}}}')
        .option("endingOffsets", f'{{"{topic}": {{"0": 50, "1": -1}}}}')
        .option("minPartitions", "6")
        .load()
    )
    assert df.rdd.getNumPartitions() >= 6
    got = sorted((r.partition, r.offset, bytes(r.value).decode()) for r in df.collect())
    want = [(0, o, f"v-0-{o}") for o in range(10, 50)] + [(1, o, f"v-1-{o}") for o in range(200)]
    assert got == want


async def test_batch_read_from_a_starting_timestamp(
    spark: SparkSession, bootstrap: str, new_topic: TopicFactory
) -> None:
    topic = await new_topic(partitions=1)
    await fill(bootstrap, topic, 0, 20, tag="before")
    await asyncio.sleep(0.05)
    stamp = int(time.time() * 1000)
    await asyncio.sleep(0.05)
    await fill(bootstrap, topic, 0, 20, tag="after")
    df = (
        spark.read.format("consumergroup")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingTimestamp", str(stamp))
        .load()
    )
    got = sorted((r.offset, bytes(r.value).decode()) for r in df.collect())
    assert got == [(20 + i, f"after-0-{i}") for i in range(20)]


async def test_a_topic_appearing_under_subscribe_pattern_mid_stream_is_read(
    spark: SparkSession, bootstrap: str, tmp_path: Path
) -> None:
    prefix = f"grow-{uuid.uuid4().hex[:8]}"
    async with Client([bootstrap]) as client:
        await client.create_topic(f"{prefix}-a", 1)
    await fill(bootstrap, f"{prefix}-a", 0, 50)
    df = source(spark, bootstrap, subscribePattern=f"{prefix}-.*", startingOffsets="earliest")
    query = (
        df.load()
        .writeStream.format("memory")
        .queryName(prefix.replace("-", "_"))
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:
        query.processAllAvailable()
        async with Client([bootstrap]) as client:
            await client.create_topic(f"{prefix}-b", 2)
        for partition in (0, 1):
            await fill(bootstrap, f"{prefix}-b", partition, 30)
        await fill(bootstrap, f"{prefix}-a", 0, 10, tag="late")
        # Waits for a trigger that finds nothing new: that trigger lists topic b too.
        query.processAllAvailable()
        table = spark.table(prefix.replace("-", "_"))
        got = sorted((r.topic, r.partition, r.offset) for r in table.collect())
    finally:
        query.stop()
    want = sorted(
        [(f"{prefix}-a", 0, o) for o in range(60)]
        + [(f"{prefix}-b", p, o) for p in (0, 1) for o in range(30)]
    )
    assert got == want


async def test_fail_on_data_loss_fails_or_skips_when_the_log_shrank(
    spark: SparkSession, tmp_path: Path
) -> None:
    from pyspark.errors import PySparkException

    port = free_port()
    topic = "shrinking"
    out, ck = tmp_path / "out", tmp_path / "ck"

    def query(fail: str) -> DataFrame:
        reader = source(spark, f"127.0.0.1:{port}", subscribe=topic, failOnDataLoss=fail)
        return reader.option("startingOffsets", "earliest").load().select("offset", "value")

    async with EmbeddedBroker(port=port) as broker:
        await broker.create_topic(topic, 1)
        await fill(broker.bootstrap, topic, 0, 100)
        drain(query("true"), out, ck)
    # Same address, an empty log (memory storage): the topic comes back shorter.
    async with EmbeddedBroker(port=port) as broker:
        await broker.create_topic(topic, 1)
        await fill(broker.bootstrap, topic, 0, 10, tag="new")
        with pytest.raises((PySparkException, AssertionError), match="failOnDataLoss"):
            drain(query("true"), out, ck)
        drain(query("false"), out, ck)  # the lost range is skipped and logged
        assert len(rows(spark, out, "offset")) == 100
        await fill(broker.bootstrap, topic, 0, 5, tag="after")
        drain(query("false"), out, ck)
        got = rows(spark, out, "offset", "value")
    assert sorted(o for o, _ in got) == sorted([*range(100), *range(10, 15)])
    assert sorted(
        bytes(v).decode() for o, v in got if o >= 10 and bytes(v).startswith(b"after")
    ) == [f"after-0-{i}" for i in range(5)]


def test_a_failed_group_commit_is_logged_and_does_not_fail_the_query(
    caplog: pytest.LogCaptureFixture,
) -> None:
    dead = f"127.0.0.1:{free_port()}"
    opts = parse_options(
        {"kafka.bootstrap.servers": dead, "subscribe": "t", "kafka.group.id": "mirror"},
        streaming=True,
    )
    from consumergroup.integrations.spark import ConsumerGroupStreamReader

    reader = ConsumerGroupStreamReader(opts)
    try:
        reader.commit({"t": {"0": 5}})  # the broker is unreachable: nothing raises
    finally:
        reader.stop()
    assert "could not commit the processed offsets to group 'mirror'" in caplog.text


async def test_bad_options_unknown_topics_and_dead_brokers_fail_with_a_clear_message(
    spark: SparkSession, bootstrap: str, tmp_path: Path
) -> None:
    from pyspark.errors import PySparkException

    # A bad option fails .load() (not the started query), its message first.
    with pytest.raises(PySparkException) as info:
        source(spark, bootstrap, subscribe="x", maxOffsetsPerTrigger="many").load()
    message = str(info.value).splitlines()
    error = "consumergroup.errors.ConfigurationError: option maxOffsetsPerTrigger='many'"
    assert f"{error}: not an integer" in message
    assert len(message) <= 6, message  # Spark's header, one frame, the error
    with pytest.raises((PySparkException, AssertionError), match="does not exist"):
        drain(
            source(spark, bootstrap, subscribe=unique("missing")).load(),
            tmp_path / "o2",
            tmp_path / "c2",
        )
    dead = f"127.0.0.1:{free_port()}"
    with pytest.raises(PySparkException, match="none of the brokers answered"):
        spark.read.format("consumergroup").option("kafka.bootstrap.servers", dead).option(
            "subscribe", "x"
        ).load().collect()


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


async def _query_process(log: Path, *args: str) -> asyncio.subprocess.Process:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with log.open("wb") as out:  # a file, not a pipe: nobody reads it while Spark runs
        return await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tests.integration.spark_query_process", *args,
            stdout=out, stderr=out, env=env, cwd=ROOT,
            start_new_session=True,  # the driver's JVM dies with it on kill -9
        )  # fmt: skip


@pytest.mark.timeout(420)
@pytest.mark.kafka_only(
    "what is tested is Spark's checkpoint (the offsets of the batches planned, the file "
    "sink's log) taken over by a new driver: the broker only serves reads at offsets, which "
    "the other tests here run on both brokers; Apache Kafka is what users run (a driver JVM "
    "of its own: ~1 min)"
)
async def test_driver_killed_mid_query_restarts_from_the_checkpoint_without_loss_or_duplicate(
    spark: SparkSession, bootstrap: str, new_topic: TopicFactory, tmp_path: Path
) -> None:
    topic = await new_topic(partitions=2)
    for partition in (0, 1):
        await fill(bootstrap, topic, partition, 1500)
    out, ck = tmp_path / "out", tmp_path / "ck"
    args = (bootstrap, topic, str(out), str(ck))
    log = tmp_path / "driver.log"
    proc = await _query_process(log, *args)
    try:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 240  # a JVM start-up, beside the cluster's tests (-n 2)
        # Kill once a few batches are committed and more are under way.
        while len(list((ck / "commits").glob("[0-9]*"))) < 3:
            assert proc.returncode is None, log.read_text(errors="replace")[-3000:]
            assert loop.time() < deadline, "the query committed no 3 batches in 240 s"
            await asyncio.sleep(0.2)
    finally:
        _kill_group(proc)
        await proc.wait()
    committed = len(list((ck / "commits").glob("[0-9]*")))
    assert committed < 10, "the query finished before it could be killed mid-way"
    # A new driver (this process) takes the query over from the checkpoint.
    from tests.integration import spark_query_process

    drain(spark_query_process.query(spark, bootstrap, topic), out, ck)
    got = rows(spark, out, "partition", "offset", "value")
    assert sorted(got) == sorted((p, o, f"v-{p}-{o}") for p in (0, 1) for o in range(1500))


async def test_spark_pipeline_example_counts_every_closed_minute(
    spark: SparkSession, bootstrap: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The example's own functions on this run's session (its main() adds only the
    # embedded broker and a session of its own).
    spec = importlib.util.spec_from_file_location("spark_pipeline", EXAMPLES / "spark_pipeline.py")
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    topic = unique("clicks")
    async with Client([bootstrap]) as client:
        await client.create_topic(topic, 3)
    await example.fill(bootstrap, topic, 1500)  # 5 minutes of clicks
    example.pipeline(spark, bootstrap, topic, str(tmp_path))
    example.summary(spark, str(tmp_path))
    out = capsys.readouterr().out
    assert "streamed 1500 events" in out
    # Minutes 0-2 are closed by the watermark (max event time 4:59.8 - 1 minute).
    minutes = spark.read.parquet(str(tmp_path / "clicks"))
    assert minutes.select("minute").distinct().count() == 3
    assert minutes.groupBy().sum("clicks").collect()[0][0] == 3 * 300
    assert "clicks per page" in out


def test_spark_python_workers_import_pyspark_from_bytecode() -> None:
    """Spark's Python workers find pyspark first in ``pyspark.zip``, which the wheel ships
    without bytecode: each worker compiled what it imported (twice the CPU) and, on a
    loaded machine, missed the 10 s Spark waits for a planning or streaming-source worker
    to connect back. The suite adds bytecode to the zip (tests/spark_bytecode.py)."""
    from tests.spark_bytecode import pyspark_zip

    archive = pyspark_zip()
    assert archive is not None
    path = [str(archive), *(str(p) for p in archive.parent.glob("py4j-*.zip"))]
    done = subprocess.run(
        [sys.executable, "-c", "import pyspark.worker as w, pyspark.sql.worker."
         "plan_data_source_read as p; print(w.__file__); print(p.__file__)"],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(path)},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    files = done.stdout.split()
    assert len(files) == 2, files
    assert all(f.startswith(str(archive)) and f.endswith(".pyc") for f in files), files


@pytest.mark.timeout(480)  # a JVM of its own, an embedded broker, a streaming query
def test_the_spark_example_from_a_clone_with_spark_submit_as_the_guide_writes_it(
    tmp_path: Path,
) -> None:
    """``. .venv/bin/activate`` then ``spark-submit examples/spark_pipeline.py``, from a
    shell whose PATH does not have the venv (spark-submit runs ``python3`` from PATH:
    without the venv's, it found no pyspark and no consumergroup)."""
    guide = (ROOT / "docs" / "guides" / "spark.md").read_text()
    block = guide[guide.index("<!-- spark-submit-clone -->") :]
    block = block[block.index("```sh\n") + 6 :]
    block = block[: block.index("```")]
    commands = [ln.split("#")[0].strip() for ln in block.splitlines() if ln.strip()]
    assert commands[1:3] == [". .venv/bin/activate", "spark-submit examples/spark_pipeline.py"]
    venv = Path(sys.executable).parent.parent
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK", "VIRTUAL_ENV"))}
    venv_bin = os.path.realpath(venv / "bin")
    env["PATH"] = os.pathsep.join(
        p for p in env["PATH"].split(os.pathsep) if os.path.realpath(p) != venv_bin
    )
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    # The guide's command (no web UI: a shared test machine). Its Python workers import
    # pyspark from the zip spark-submit puts first on their path (no cached bytecode):
    # under a heavy load they can miss Spark's time to connect back.
    script = (
        f". {venv}/bin/activate && spark-submit --conf spark.ui.enabled=false "
        f"examples/spark_pipeline.py --events 600 --out {tmp_path / 'out'}"
    )
    done = subprocess.run(
        ["bash", "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=450
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "streamed 600 events" in done.stdout, done.stdout


async def test_the_spark_example_on_a_missing_topic_says_so_in_one_line(bootstrap: str) -> None:
    """Pointed at a broker without the topic it printed a 100-line Py4J traceback."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(EXAMPLES / "spark_pipeline.py"), bootstrap, "--topic", "no-such-t",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 2, (out, err)
    [line] = err.decode().strip().splitlines()
    assert line.startswith("Error: topic 'no-such-t' does not exist at ") and "--create" in line
