"""``format("consumergroup")`` on a Spark standalone cluster: a master and two workers.

The cluster (:class:`~consumergroup.integrations.spark_cluster.SparkStandalone`) runs
from the pip pyspark on loopback; each worker offers one core, so the application's
two executors run one on each worker. The drivers run in processes of their own
(this test process may hold a local SparkSession already). The guide's spark-submit
runs first: the worker-kill test leaves one worker. Select with ``-m spark``.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import re
import shlex
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from consumergroup.client import Client
from tests.conftest import TopicFactory, unique
from tests.integration.test_spark import fill

if TYPE_CHECKING:
    from consumergroup.integrations.spark_cluster import SparkStandalone

pytestmark = [
    pytest.mark.spark,
    pytest.mark.slow,
    # One worker starts the cluster; the local session's tests run beside it (-m spark -n 2).
    pytest.mark.xdist_group("spark-cluster"),
    pytest.mark.skipif(not importlib.util.find_spec("pyspark"), reason="needs the [spark] extra"),
]

ROOT = Path(__file__).resolve().parents[2]
ROWS = 6000  # over 3 partitions; the stream reads them in 12 micro-batches

#: Why these tests run on Apache Kafka only.
KAFKA = (
    "what is tested here is Spark's side (executors on workers, a lost worker's tasks run "
    "again, the guide's spark-submit command): the source's reads from the broker are the "
    "same as under local[2], where test_spark.py runs them on both brokers; Apache Kafka "
    "is what users run (each run here starts a driver and two executor JVMs: ~1.5 min)"
)


@pytest.fixture(scope="module")
def cluster() -> Iterator[SparkStandalone]:
    """A master and two one-core workers for this module's tests."""
    from consumergroup.integrations.spark_cluster import SparkStandalone

    with SparkStandalone(workers=2, cores=1, memory="1g") as standalone:
        yield standalone


def driver_env() -> dict[str, str]:
    """The drivers' environment: this virtualenv activated (its ``python3``,
    ``spark-submit``), Spark on loopback, this checkout importable."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    return {**os.environ, "PATH": path, "SPARK_LOCAL_IP": "127.0.0.1", "PYTHONPATH": str(ROOT)}


def worker_of(cluster: SparkStandalone, executor: dict[str, Any]) -> int:
    """Which worker ran ``executor`` (its log links name the worker's web UI)."""
    port = int(executor["worker_ui"].rsplit(":", 1)[1])
    return next(i for i in range(len(cluster.workers)) if cluster.worker_ui_port(i) == port)


async def kill_group(proc: asyncio.subprocess.Process) -> None:
    """SIGKILL a driver's process group (its JVM and Python workers) unless it ended."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()


def tail(log: Path) -> str:
    """The end of a driver's log, for a failure message."""
    return log.read_text(errors="replace")[-3000:]


async def wait_for(check: Any, proc: asyncio.subprocess.Process, log: Path, what: str) -> None:
    """Poll ``check()`` until true; fail with the driver's log if it exits or 240 s pass."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 240
    while not check():
        if proc.returncode is not None or loop.time() > deadline:
            raise AssertionError(f"no {what} (driver exit code {proc.returncode}):\n{tail(log)}")
        await asyncio.sleep(0.05)


def in_flight(ck: Path) -> bool:
    """A micro-batch is planned (offsets/N) and not yet committed (commits/N)."""
    planned = {p.name for p in (ck / "offsets").glob("[0-9]*")} if ck.exists() else set()
    done = {p.name for p in (ck / "commits").glob("[0-9]*")} if ck.exists() else set()
    return bool(done) and bool(planned - done)


def readme_command(marker: str) -> list[str]:
    """The shell command of the Spark guide's code block after ``<!-- marker -->``, as argv."""
    text = (ROOT / "docs" / "guides" / "spark.md").read_text()
    block = re.search(rf"<!-- {marker} -->\s*```sh\n(.*?)```", text, re.DOTALL)
    assert block is not None, f"the Spark guide has no sh block after <!-- {marker} -->"
    lines = [ln for ln in block.group(1).replace("\\\n", " ").splitlines() if ln.strip()]
    [command] = [ln for ln in lines if ln.lstrip().startswith("spark-submit")]
    return shlex.split(command, comments=True)


@pytest.mark.kafka_only(KAFKA)
@pytest.mark.timeout(420)  # the first of the module: it bears the cluster's start-up
async def test_the_readme_spark_submit_command_runs_the_pipeline_on_the_cluster(
    cluster: SparkStandalone, bootstrap: str, tmp_path: Path
) -> None:
    spec = importlib.util.spec_from_file_location(
        "spark_pipeline", ROOT / "examples" / "spark_pipeline.py"
    )
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    topic = unique("clicks")
    async with Client([bootstrap]) as client:
        await client.create_topic(topic, 3)
    await example.fill(bootstrap, topic, 1500)
    placeholders = {
        "spark://MASTER:7077": cluster.master_url,
        "/opt/cg/bin/python": sys.executable,
        "BROKER:9092": bootstrap,
        "/shared/clicks-pipeline": str(tmp_path / "pipeline"),
    }

    def filled(arg: str) -> str:
        if arg == "clicks":  # the topic
            return topic
        for placeholder, value in placeholders.items():
            arg = arg.replace(placeholder, value)
        return arg

    argv = [filled(arg) for arg in readme_command("spark-submit-cluster")]
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env=driver_env(),
        cwd=ROOT,
        start_new_session=True,
    )
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), 240)
    finally:
        await kill_group(proc)
    text = out.decode(errors="replace")
    assert proc.returncode == 0, text[-3000:]
    assert "streamed 1500 events" in text
    assert "3 closed minutes written" in text


@pytest.mark.kafka_only(KAFKA)
@pytest.mark.timeout(420)
async def test_batch_read_and_exactly_once_stream_with_a_worker_killed_mid_batch(
    cluster: SparkStandalone, bootstrap: str, new_topic: TopicFactory, tmp_path: Path
) -> None:
    topic = await new_topic(partitions=3)
    for partition in range(3):
        await fill(bootstrap, topic, partition, ROWS // 3)
    log = tmp_path / "driver.log"
    with log.open("wb") as out:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tests.integration.spark_cluster_job",
            cluster.master_url, bootstrap, topic, str(ROWS), str(tmp_path),
            stdout=out, stderr=out, env=driver_env(), cwd=ROOT,
            start_new_session=True,  # its JVM and Python workers die with it (kill_group)
        )  # fmt: skip
    try:
        await wait_for((tmp_path / "batch.json").exists, proc, log, "batch read")
        batch = json.loads((tmp_path / "batch.json").read_text())
        await wait_for(lambda: in_flight(tmp_path / "ck"), proc, log, "micro-batch under way")
        # Its executor and Python workers with it, mid-batch: the executor on worker 1 runs
        # the lost tasks again and the rest of the stream (no replacement: it would only
        # add a worker's and an executor's JVM start-up to the test).
        cluster.kill_worker(0)
        assert await asyncio.wait_for(proc.wait(), 300) == 0, tail(log)
    finally:
        await kill_group(proc)
    stream = json.loads((tmp_path / "stream.json").read_text())

    want = sorted((p, o) for p in range(3) for o in range(ROWS // 3))
    assert sorted((p, o) for p, o in batch["rows"]) == want
    ran = [e for e in batch["executors"] if e["tasks"] > 0]
    assert {worker_of(cluster, e) for e in ran} == {0, 1}, batch["executors"]
    # Exactly once across the loss of a worker mid-batch: each record, once.
    assert sorted((p, o, v) for p, o, v in stream["rows"]) == sorted(
        (p, o, f"v-{p}-{o}") for p, o in want
    )
    ran = [e for e in stream["executors"] if e["tasks"] > 0]
    print(f"executors seen: {len(ran)} on workers {sorted({worker_of(cluster, e) for e in ran})}")
    assert {worker_of(cluster, e) for e in ran} >= {0, 1}, stream["executors"]
