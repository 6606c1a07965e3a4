"""Running the ``consumergroup`` command as a real subprocess, for the CLI tests."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "consumergroup"]
# Small session timeout: Tansu holds every JoinGroup for about half of it.
FAST = ["--session-timeout", "6"]


@dataclass
class Result:
    code: int
    out: str
    err: str


def cli_env() -> dict[str, str]:
    """This environment without the variables --bootstrap falls back to."""
    env = dict(os.environ)
    for name in ("KAFKA_BOOTSTRAP_SERVERS", "CONSUMERGROUP_BOOTSTRAP"):
        env.pop(name, None)  # --bootstrap falls back to them
    env["PYTHONUNBUFFERED"] = "1"
    return env


async def spawn(
    *args: str, env: dict[str, str] | None = None, stdin: int = asyncio.subprocess.DEVNULL
) -> asyncio.subprocess.Process:
    """Start the command in its own process group (so kill_tree reaches a demo's broker);
    ``env`` adds to the environment, stdin is empty unless ``stdin`` says otherwise."""
    return await asyncio.create_subprocess_exec(
        *CLI,
        *args,
        stdin=stdin,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=cli_env() | (env or {}),
        cwd=ROOT,
        start_new_session=True,
    )


def kill_tree(proc: asyncio.subprocess.Process) -> None:
    """SIGKILL the command and everything it started (its process group)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


@contextlib.asynccontextmanager
async def reaped(proc: asyncio.subprocess.Process) -> AsyncIterator[asyncio.subprocess.Process]:
    """Leave nothing behind: when the block ends with ``proc`` still running (a failed
    assertion, a timeout, pytest-timeout's cancellation), kill it and everything it started."""
    try:
        yield proc
    finally:
        if proc.returncode is None:
            kill_tree(proc)
            await proc.wait()


async def finish(
    proc: asyncio.subprocess.Process, what: str, timeout: float, stdin: bytes | None = None
) -> tuple[bytes, bytes]:
    """Feed ``stdin`` to ``proc`` and wait for it to exit: its (stdout, stderr). Killed and
    failed after ``timeout`` seconds, the failure naming ``what`` and showing its output."""
    async with reaped(proc):
        try:
            return await asyncio.wait_for(proc.communicate(stdin), timeout)
        except TimeoutError:
            kill_tree(proc)
            out, err = await proc.communicate()
            pytest.fail(
                f"{what} ran over {timeout}s:\n{out.decode(errors='replace')}\n"
                f"{err.decode(errors='replace')}"
            )


async def run_cli(
    *args: str, timeout: float = 90.0, env: dict[str, str] | None = None, stdin: bytes = b""
) -> Result:
    """Run the command to completion with ``stdin`` as its input (killed and failed after
    ``timeout`` seconds)."""
    proc = await spawn(*args, env=env, stdin=asyncio.subprocess.PIPE)
    out, err = await finish(proc, str(args), timeout, stdin)
    assert proc.returncode is not None
    return Result(proc.returncode, out.decode(), err.decode())
