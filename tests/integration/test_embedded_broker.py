"""EmbeddedBroker as users reach it: ``cg.testing``, and a broker that dies with its owner."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(60)

# The owner: starts a broker, prints the broker's pid and log dir, then waits to be killed.
OWNER = textwrap.dedent(
    """
    import asyncio, json
    from consumergroup.testing import EmbeddedBroker

    async def main():
        async with EmbeddedBroker() as broker:
            print(json.dumps({"pid": broker._proc.pid, "dir": str(broker._logdir)}), flush=True)
            await asyncio.sleep(600)

    asyncio.run(main())
    """
)


def test_testing_is_reachable_from_the_package_without_importing_it_eagerly() -> None:
    # Issue 8 #15: the README's ``cg.testing.EmbeddedBroker()`` raised AttributeError.
    code = (
        "import sys, consumergroup as cg\n"
        "assert 'consumergroup.testing' not in sys.modules\n"
        "print(cg.testing.EmbeddedBroker.__name__)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "EmbeddedBroker"
    import consumergroup as cg

    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = cg.nope  # type: ignore[attr-defined]


def _is_dir(path: Path) -> bool:
    return path.is_dir()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (already dead, not yet reaped by init) counts as gone.
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(") ", 1)[1].startswith("Z"))


@pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_PDEATHSIG is Linux only")
async def test_sigkill_of_the_owner_takes_the_broker_and_its_directory_along() -> None:
    # Issue 8 #23: kill -9 of the owning process left Tansu running and its temp dir behind.
    owner = await asyncio.create_subprocess_exec(
        sys.executable, "-c", OWNER, stdout=asyncio.subprocess.PIPE
    )
    assert owner.stdout is not None
    try:
        async with asyncio.timeout(30):
            started = json.loads(await owner.stdout.readline())
    except BaseException:
        owner.kill()
        await owner.wait()
        raise
    broker_pid, logdir = started["pid"], Path(started["dir"])
    try:
        assert _alive(broker_pid) and _is_dir(logdir)
        owner.kill()
        await owner.wait()
        deadline = time.monotonic() + 10
        while True:
            if not _alive(broker_pid) or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.05)
        assert not _alive(broker_pid), "tansu outlived its SIGKILLed owner"
        # The next broker started on this machine removes the dead owner's directory.
        from consumergroup.testing import EmbeddedBroker

        async with EmbeddedBroker() as broker:
            assert not _is_dir(logdir)
            assert _is_dir(broker._logdir)
        assert not _is_dir(broker._logdir)
    finally:
        if _alive(broker_pid):
            os.kill(broker_pid, 9)
