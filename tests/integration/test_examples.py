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
from pathlib import Path

import pytest

import consumergroup as cg
from consumergroup.client import Client
from consumergroup.offsets import OffsetManager
from tests.conftest import TopicFactory, unique
from tests.helpers import produce

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def kill_tree(proc: asyncio.subprocess.Process) -> None:
    """SIGKILL the example and everything it started (its process group)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


async def run_example(name: str, *args: str, timeout: float = 90.0) -> str:
    """Run ``examples/<name>`` to completion; return its stdout (exit 0 asserted)."""
    env = dict(os.environ)
    env.pop("KAFKA_BOOTSTRAP_SERVERS", None)  # standalone unless a bootstrap is passed
    # Its own process group: on a timeout, the embedded broker it started dies with it.
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(EXAMPLES / name), *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env, cwd=ROOT,
        start_new_session=True,
    )  # fmt: skip
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        kill_tree(proc)
        out, err = await proc.communicate()
        pytest.fail(f"{name} ran over {timeout}s:\n{out.decode()}\n{err.decode()}")
    finally:
        if proc.returncode is None:  # cancelled (pytest-timeout): leave nothing behind
            kill_tree(proc)
            await proc.wait()
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
