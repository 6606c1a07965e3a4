"""The examples run as users run them: ``python examples/<name>.py``, as subprocesses.

Standalone (no bootstrap anywhere) each starts its own embedded broker,
produces, consumes what it produced and exits 0. Given the test broker's
address, they consume a topic the test filled, and commit what they consumed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import sys
import time
from pathlib import Path

import pytest

import consumergroup as cg
from consumergroup.admin import ClusterAdmin
from consumergroup.client import Client
from consumergroup.group.offsets import OffsetManager
from consumergroup.testing import free_port
from tests.conftest import TopicFactory, unique
from tests.helpers import produce, read_committed_values
from tests.integration.cli_support import ROOT, finish, reaped

pytestmark = pytest.mark.slow

EXAMPLES = ROOT / "examples"


async def spawn_example(name: str, *args: str) -> asyncio.subprocess.Process:
    """Start ``examples/<name>`` standalone unless ``args`` pass a bootstrap, in its own
    process group: killing the group kills the embedded broker it started too."""
    env = dict(os.environ)
    env.pop("KAFKA_BOOTSTRAP_SERVERS", None)
    return await asyncio.create_subprocess_exec(
        sys.executable, str(EXAMPLES / name), *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env, cwd=ROOT,
        start_new_session=True,
    )  # fmt: skip


async def run_example(name: str, *args: str, timeout: float = 90.0) -> str:
    """Run ``examples/<name>`` to completion; return its stdout (exit 0 asserted)."""
    proc = await spawn_example(name, *args)
    out, err = await finish(proc, name, timeout)
    assert proc.returncode == 0, f"{name} exited {proc.returncode}:\n{out.decode()}{err.decode()}"
    assert "Traceback" not in err.decode()
    return out.decode()


def contiguous_from_zero(per_partition: dict[int, list[int]]) -> bool:
    return all(offsets == list(range(len(offsets))) for offsets in per_partition.values())


async def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The broker's committed offsets of ``group`` on ``topic`` (-1: none)."""
    async with Client([bootstrap]) as client:
        got = await OffsetManager(client, group, cg.Config()).fetch_committed(
            [(topic, p) for p in range(partitions)]
        )
    return {p: got[(topic, p)][0] for p in range(partitions)}


async def test_basic_handler_standalone_consumes_what_it_produced() -> None:
    out = await run_example("basic_handler.py")
    line = re.compile(r"^example-topic/(\d+)@(\d+) key=b'key-(\d+)' value=record-(\d+)$")
    found = [m for m in map(line.match, out.splitlines()) if m]
    assert sorted(int(m[4]) for m in found) == list(range(12)), out
    assert all(m[3] == m[4] for m in found)  # key and value travelled together
    per_partition: dict[int, list[int]] = {}
    for m in found:
        per_partition.setdefault(int(m[1]), []).append(int(m[2]))
    assert contiguous_from_zero(per_partition)
    assert "produced 12 records" in out and "consumed 12 messages" in out


async def test_manual_commit_standalone_commits_every_n_and_at_the_end() -> None:
    out = await run_example("manual_commit.py", "--commit-every", "5")
    values = re.findall(r"^example-topic/\d+@\d+ value=record-(\d+)$", out, re.MULTILINE)
    assert sorted(map(int, values)) == list(range(12)), out
    # 12 messages, a commit every 5: two in the loop, one in cleanup.
    assert len(re.findall(r"^committed after \d+ messages$", out, re.MULTILINE)) == 2, out
    assert "committed at the end of the session (12 messages)" in out
    assert "consumed 12 messages" in out


async def test_batch_handler_standalone_marks_whole_batches() -> None:
    out = await run_example("batch_handler.py")
    batches = re.findall(r"^example-topic/(\d+)@(\d+)\.\.(\d+) (\d+) messages", out, re.MULTILINE)
    assert batches, out
    per_partition: dict[int, list[int]] = {}
    for partition, first, last, count in batches:
        assert int(last) - int(first) + 1 == int(count)  # a batch is a contiguous run
        per_partition.setdefault(int(partition), []).extend(range(int(first), int(last) + 1))
    assert contiguous_from_zero(per_partition)
    assert sum(len(v) for v in per_partition.values()) == 300
    assert "consumed 300 messages" in out


async def test_exactly_once_standalone_copies_every_record_once() -> None:
    out = await run_example("exactly_once.py")
    values = re.findall(r"^example-topic/\d+@\d+ -> RECORD-(\d+)$", out, re.MULTILINE)
    assert sorted(map(int, values)) == list(range(12)), out
    assert "copied 12 records to example-topic-upper" in out


async def test_exactly_once_on_a_given_bootstrap_commits_output_and_offsets(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    topic, out = await new_topic(partitions=2), await new_topic(partitions=1)
    group = unique()
    await produce(bootstrap, topic, [f"e{i}".encode() for i in range(6)])
    printed = await run_example(
        "exactly_once.py", bootstrap, "--topic", topic, "--out", out, "--group", group,
        "--max-messages", "6",
    )  # fmt: skip
    assert "copied 6 records" in printed
    # The offsets were committed by the example's transactions, with the copies.
    assert sum((await committed(bootstrap, group, topic, 2)).values()) == 6
    assert sorted(await read_committed_values(bootstrap, out, 1)) == sorted(
        f"E{i}".encode() for i in range(6)
    )


async def test_basic_handler_on_a_given_bootstrap(bootstrap: str, new_topic: TopicFactory) -> None:
    topic = await new_topic(partitions=2)
    group = unique()
    await produce(bootstrap, topic, [f"given-{i}".encode() for i in range(6)])
    out = await run_example(
        "basic_handler.py", bootstrap, "--topic", topic, "--group", group, "--max-messages", "6"
    )
    assert sorted(re.findall(r"value=(given-\d+)$", out, re.MULTILINE)) == sorted(
        f"given-{i}" for i in range(6)
    )
    assert "embedded broker" not in out  # it used the broker it was given
    # Marks were auto-committed, and close() committed the rest: all six.
    assert sum((await committed(bootstrap, group, topic, 2)).values()) == 6


async def test_manual_commit_on_a_given_bootstrap_commits_what_it_read(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    topic = await new_topic(partitions=3)
    group = unique()
    await produce(bootstrap, topic, [f"m{i}".encode() for i in range(9)])
    out = await run_example(
        "manual_commit.py", bootstrap, "--topic", topic, "--group", group,
        "--commit-every", "4", "--max-messages", "9",
    )  # fmt: skip
    assert "consumed 9 messages" in out
    # Auto-commit is off: these offsets exist only because the example committed them.
    offsets = await committed(bootstrap, group, topic, 3)
    assert sum(offsets.values()) == 9, offsets


@pytest.mark.parametrize("name", ["fastapi_service.py", "aiohttp_service.py"])
async def test_service_standalone_serves_totals_health_and_metrics_then_stops(name: str) -> None:
    import httpx  # here, not at the top: every pytest-xdist worker collects this module

    port = free_port()
    proc = await spawn_example(name, "--port", str(port))
    async with reaped(proc):
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=5) as http:
            deadline = time.monotonic() + 90
            stats: dict[str, object] = {}
            while stats.get("orders") != 60:
                assert time.monotonic() < deadline, f"{name} never consumed the 60 orders: {stats}"
                await asyncio.sleep(0.2)
                with contextlib.suppress(httpx.TransportError):  # not listening yet
                    stats = (await http.get("/stats")).json()
            # 60 orders of five customers, amounts 1.5 + i % 7 (see examples/_orders.py).
            assert stats["revenue"] == sum(1.5 + i % 7 for i in range(60))
            assert stats["rejected"] == 0
            ready = await http.get("/health/ready")
            assert ready.status_code == 200, ready.text
            assert ready.json()["groups"][0]["claims"] == {"orders": [0, 1, 2]}
            assert (await http.get("/health/live")).status_code == 200
            metrics = (await http.get("/metrics")).text
            assert 'consumergroup_records_consumed_total{group="order-service"' in metrics
        proc.send_signal(signal.SIGTERM)
        # Shutting down closes the group (final commit, LeaveGroup) and the embedded broker.
        out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 0, f"{name} exited {proc.returncode}:\n{out.decode()}{err.decode()}"
    assert "Traceback" not in err.decode(), err.decode()


def readme_usage_snippet(bootstrap: str, topic: str) -> str:
    """README's usage example, as written, pointed at the test broker and topic."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    usage = text[text.index("## Usage") :]
    code = usage[usage.index("```python\n") + len("```python\n") :]
    code = code[: code.index("```")]
    assert '"127.0.0.1:9092"' in code and '"topic-a"' in code
    return code.replace('"127.0.0.1:9092"', repr(bootstrap)).replace('"topic-a"', repr(topic))


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=lambda s: s.name)
async def test_a_signal_ends_the_readme_usage_snippet_cleanly(
    bootstrap: str, new_topic: TopicFactory, tmp_path: Path, sig: signal.Signals
) -> None:
    """README's snippet as written (``cg.run(main())``), stopped as a terminal (Ctrl-C) and
    as ``docker stop`` / Kubernetes (SIGTERM) stop it: exit 0, nothing on stderr, the marks
    committed, and the member gone from the group at once (LeaveGroup, not a session
    timeout later)."""
    # Before cg.run: Ctrl-C gave a 40-line CancelledError/KeyboardInterrupt traceback, and
    # SIGTERM killed the snippet with 143: no final commit, no LeaveGroup.
    topic = await new_topic(partitions=1)
    await produce(bootstrap, topic, [b"one", b"two"])
    script = tmp_path / "snippet.py"
    script.write_text(readme_usage_snippet(bootstrap, topic), encoding="utf-8")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(script),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=ROOT,
        start_new_session=True,
    )  # fmt: skip
    async with reaped(proc):
        assert proc.stdout is not None
        lines = [await asyncio.wait_for(proc.stdout.readline(), 60) for _ in range(2)]
        assert [line.split()[-1] for line in lines] == [b"b'one'", b"b'two'"], lines
        async with ClusterAdmin([bootstrap]) as admin:
            [before] = await admin.describe_groups(["my-group"])
            assert len(before.members) == 1, before
            proc.send_signal(sig)
            _, err = await finish(proc, "the README snippet", 30)
            assert err.decode() == "", err.decode()
            assert proc.returncode == 0
            [after] = await admin.describe_groups(["my-group"])
            assert after.members == [], after  # it left: no session timeout to wait for
    assert await committed(bootstrap, "my-group", topic, 1) == {0: 2}  # marked, committed


@pytest.mark.parametrize(
    ("name", "pattern"),
    [
        ("basic_handler.py", r"^example-topic/\d+@\d+ key="),
        ("batch_handler.py", r"^example-topic/\d+@\d+\.\.\d+ (\d+) messages"),
        ("manual_commit.py", r"^example-topic/\d+@\d+ value="),
    ],
)
async def test_examples_stop_at_exactly_max_messages(name: str, pattern: str) -> None:
    # basic_handler printed 4 messages for --max-messages 3 (the other partitions' claims
    # went on until the close), batch_handler consumed whole batches (6 for 3).
    proc = await spawn_example(name, "--max-messages", "3")
    out, err = await finish(proc, name, 90)
    assert proc.returncode == 0, err.decode()
    lines = [m for m in map(re.compile(pattern).match, out.decode().splitlines()) if m]
    handled = sum(int(m[1]) for m in lines) if "(" in pattern else len(lines)
    assert handled == 3, out.decode()
    assert "consumed 3 messages" in out.decode()
    assert "Traceback" not in err.decode() and "WARNING" not in err.decode(), err.decode()


@pytest.mark.kafka_only("share groups need Apache Kafka 4.2+ (Tansu has none)")
async def test_share_worker_does_every_job_once_and_archives_the_poison(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    """examples/share_worker.py on the test broker: 36 jobs done (2 of them after a failed
    first delivery), 4 poison jobs rejected; health, readiness and metrics; SIGTERM stops it."""
    import httpx

    topic = await new_topic(partitions=2)
    group = unique("share-worker")
    jobs = [
        b"not a job"
        if i % 10 == 9
        else f'{{"id": {i}, "ms": 30, "flaky": {str(i in (3, 13)).lower()}}}'.encode()
        for i in range(40)
    ]
    await produce(bootstrap, topic, jobs)
    port = free_port()
    proc = await spawn_example(
        "share_worker.py", bootstrap, "--topic", topic, "--group", group, "--port", str(port),
        "--concurrency", "16",
    )  # fmt: skip
    async with reaped(proc):
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=5) as http:
            deadline = time.monotonic() + 90
            stats: dict[str, int] = {}
            while stats.get("done") != 36 or stats.get("rejected") != 4:
                assert time.monotonic() < deadline, f"the worker never did the 36 jobs: {stats}"
                await asyncio.sleep(0.2)
                with contextlib.suppress(httpx.TransportError):  # not listening yet
                    stats = (await http.get("/stats")).json()
            assert stats["retried"] == 2 and stats["most_running"] > 2  # beyond the partitions
            ready = await http.get("/health/ready")
            assert ready.status_code == 200, ready.text
            assert ready.json()["groups"][0]["protocol"] == "share"
            metrics = (await http.get("/metrics")).text
            assert f'consumergroup_share_acknowledged_total{{group="{group}"' in metrics
        proc.send_signal(signal.SIGTERM)
        out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 0, f"exited {proc.returncode}:\n{out.decode()}{err.decode()}"
    assert "Traceback" not in err.decode(), err.decode()
