"""cancel_and_wait: stop a task and wait for it without eating the caller's own cancel.

The rule test walks ``consumergroup/`` with :mod:`ast`: no ``suppress(CancelledError)``
(around an ``await task`` it swallows the caller's cancellation too).
"""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path

import pytest

import consumergroup
from consumergroup._lifecycle import cancel_and_wait

PACKAGE = Path(consumergroup.__file__).resolve().parent


def _slow_to_stop(release: asyncio.Event, stopped: list[str]) -> asyncio.Task[None]:
    """A task whose cleanup after a cancel waits for ``release``."""

    async def run() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            await release.wait()
            stopped.append("stopped")

    return asyncio.create_task(run())


async def test_the_callers_cancel_during_the_wait_propagates() -> None:
    release = asyncio.Event()
    stopped: list[str] = []
    task = _slow_to_stop(release, stopped)
    await asyncio.sleep(0)  # the task runs up to its wait
    after: list[str] = []

    async def caller() -> None:
        await cancel_and_wait(task)
        after.append("ran on")  # must not: the caller was cancelled

    waiting = asyncio.create_task(caller())
    await asyncio.sleep(0)  # the caller waits for the task's cleanup
    assert not task.done()
    waiting.cancel()
    await asyncio.sleep(0)
    release.set()  # the task's cleanup ends: with the cancel eaten, the caller would run on
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert after == []
    await asyncio.wait({task})
    assert stopped == ["stopped"] and task.cancelled()


async def test_the_tasks_own_cancellation_is_not_raised() -> None:
    release = asyncio.Event()
    release.set()
    stopped: list[str] = []
    tasks = [_slow_to_stop(release, stopped) for _ in range(3)]
    await asyncio.sleep(0)
    await cancel_and_wait(*tasks)
    assert stopped == ["stopped"] * 3 and all(t.cancelled() for t in tasks)
    await cancel_and_wait()  # nothing to stop


async def test_an_error_the_task_ended_with_is_raised() -> None:
    async def fails_on_cancel() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            raise ValueError("cleanup failed")

    task = asyncio.create_task(fails_on_cancel())
    await asyncio.sleep(0)
    with pytest.raises(ValueError, match="cleanup failed"):
        await cancel_and_wait(task)


def _suppresses_cancel(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute | ast.Name)
        and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id) == "suppress"
        and any(ast.unparse(arg).endswith("CancelledError") for arg in node.args)
    )


def test_no_suppress_cancelled_error_in_the_package() -> None:
    found = [
        f"{path.relative_to(PACKAGE)}:{node.lineno}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if _suppresses_cancel(node)
    ]
    assert not found, f"suppress(CancelledError) (use _lifecycle.cancel_and_wait): {found}"
