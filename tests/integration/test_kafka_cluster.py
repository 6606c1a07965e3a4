"""KafkaCluster: a genuine Apache Kafka started by the test, as users reach it."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import sys
import textwrap
from pathlib import Path

import pytest

from consumergroup.testing import (
    KAFKA_VERSION,
    KafkaCluster,
    KafkaClusterError,
    _class_sharing,
    kafka_classpath,
)

from ..conftest import unique
from ..helpers import produce
from .group_support import Recorder, running_member, wait_for

pytestmark = pytest.mark.timeout(180)
# The tests that start a cluster (Apache Kafka's JVMs) are marked `kafka`, which keeps them
# out of `make test-quick` (no JVM); those about a missing Java or Maven stay in it.
starts_kafka = pytest.mark.kafka

# The owner: starts a one-node cluster, prints its JVM's pid and its directory, waits.
OWNER = textwrap.dedent(
    """
    import asyncio, json
    from consumergroup.testing import KafkaCluster

    async def main():
        async with KafkaCluster() as kc:
            pids = [node.proc.pid for node in kc._nodes]
            print(json.dumps({"pids": pids, "dir": str(kc.log_dir)}), flush=True)
            await asyncio.sleep(600)

    asyncio.run(main())
    """
)


def _gone(pid: int) -> bool:
    """Dead: no such process, or a zombie waiting to be reaped."""
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().split(") ", 1)[1].startswith("Z")
    except (OSError, IndexError):
        return True


@starts_kafka
async def test_a_group_consumes_from_kafka_and_a_restarted_node_keeps_its_data() -> None:
    # A cluster of its own: restarting the session's would reload every test's topics.
    async with KafkaCluster() as kc:
        topic = unique("kc")
        await kc.create_topic(topic, partitions=3)
        await produce(kc.bootstrap, topic, [b"%d" % i for i in range(30)])
        recorder = Recorder()
        async with running_member(kc.bootstrap, unique(), [topic], recorder):
            await wait_for(lambda: len(recorder.seen) >= 30, 60, "30 messages")
        assert len(set(recorder.seen)) == 30
        # Its heap was sized at start: it grew by no stop-the-world full collection
        # (with -Xms64m the serial collector ran 2-3 of 80-170 ms in its first 25 s, and
        # more as the heap grew; every client's records waited through each).
        gc_log = kc.gc_logs()[0].read_text()
        assert "Pause Young" in gc_log, gc_log[-2000:]
        assert "Pause Full" not in gc_log, gc_log[-2000:]

        await kc.kill_node(0)
        await kc.start_node(0)
        again = Recorder()
        async with running_member(kc.bootstrap, unique(), [topic], again):
            await wait_for(lambda: len(again.seen) >= 30, 60, "30 messages after a restart")
        assert set(again.seen) == set(recorder.seen)


@starts_kafka
@pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_PDEATHSIG is Linux only")
async def test_sigkill_of_the_owner_takes_the_kafka_jvms_along() -> None:
    owner = await asyncio.create_subprocess_exec(
        sys.executable, "-c", OWNER, stdout=asyncio.subprocess.PIPE
    )
    assert owner.stdout is not None
    try:
        async with asyncio.timeout(150):
            started = json.loads(await owner.stdout.readline())
        pids = started["pids"]
        assert not any(_gone(pid) for pid in pids)
        owner.kill()
        await owner.wait()
        await wait_for(lambda: all(_gone(pid) for pid in pids), 10, "the JVMs to die")
    finally:
        if owner.returncode is None:
            owner.kill()
            await owner.wait()
    shutil.rmtree(started["dir"], ignore_errors=True)


async def test_without_java_the_error_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(KafkaClusterError, match="install one"):
        async with KafkaCluster():
            pass


def _java_home() -> str:
    java = shutil.which("java")
    if java is None:
        pytest.skip("no java here")
    return str(Path(os.path.realpath(java)).parent.parent)


async def test_without_maven_the_error_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("JAVA_HOME", _java_home())
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setenv("CONSUMERGROUP_CACHE", str(tmp_path))  # nothing fetched yet
    with pytest.raises(KafkaClusterError, match="apt-get install maven"):
        async with KafkaCluster():
            pass


async def test_a_failed_download_says_what_maven_said(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake = tmp_path / "bin" / "mvn"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'Could not transfer artifact: no network'\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("CONSUMERGROUP_CACHE", str(tmp_path / "cache"))
    with pytest.raises(KafkaClusterError, match=r"(?s)Maven Central is reachable.*no network"):
        async with KafkaCluster():
            pass


@starts_kafka
async def test_a_cluster_id_starting_with_a_dash_still_formats() -> None:
    # The storage tool once read such an id as an option; the id goes as one argument now.
    kc = KafkaCluster()
    kc.cluster_id = "-" + kc.cluster_id[1:]
    async with kc:
        topic = unique("dash")
        await kc.create_topic(topic, partitions=1)
        await produce(kc.bootstrap, topic, [b"x"])


@starts_kafka
async def test_a_port_taken_before_the_node_binds_it_gets_new_ports() -> None:
    # free_port() is only a guess: another process may bind the port before the JVM does.
    kc = KafkaCluster()
    taken = kc._nodes[0].port
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", taken))
        squatter.listen()
        async with kc:
            assert kc._nodes[0].port != taken
            topic = unique("port")
            await kc.create_topic(topic, partitions=1)
            await produce(kc.bootstrap, topic, [b"x"])


def _mappings(pid: int) -> str:
    """The files process ``pid`` has mapped (Linux's /proc/PID/maps)."""
    return Path(f"/proc/{pid}/maps").read_text()


@starts_kafka
@pytest.mark.skipif(sys.platform != "linux", reason="reads the JVM's mappings from /proc")
async def test_the_first_storage_format_writes_a_class_archive_that_the_nodes_map(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A cache of its own (the jars linked in): the suite's already holds an archive.
    jars = Path((await asyncio.to_thread(kafka_classpath)).removesuffix("/*"))
    home = tmp_path / f"kafka-{KAFKA_VERSION}"
    home.mkdir()
    (home / "lib").symlink_to(jars)
    (home / ".complete").touch()
    monkeypatch.setenv("CONSUMERGROUP_CACHE", str(tmp_path))
    async with KafkaCluster() as kc:
        [archive] = home.glob("classes-*.jsa")  # written by the format, moved into place
        assert not list(home.glob("*.tmp"))
        node = kc._nodes[0].proc
        assert node is not None
        # The node's JVM was started with it and mapped it (a refused archive is not mapped).
        assert str(archive) in _mappings(node.pid)
        topic = unique("cds")
        await kc.create_topic(topic, partitions=1)
        await produce(kc.bootstrap, topic, [b"x"])


def test_a_cache_it_cannot_write_leaves_the_jvms_without_an_archive_not_failing(
    tmp_path: Path,
) -> None:
    # A cache read from but not written to (another user's, an image's): no lock file.
    with _class_sharing(tmp_path / "not-there" / "classes-0.jsa") as (options, written):
        assert options == [] and written is None
