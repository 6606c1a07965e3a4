"""LoopWatchdog: stopping it never blocks the loop; it reports the loop's lag."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from types import FrameType

from consumergroup.group.watchdog import LoopWatchdog


async def test_stopping_waits_for_the_thread_off_the_loop() -> None:
    # Issue 8 #13: run()'s finally called Thread.join(timeout=1.0) on the loop. A report
    # in progress (here: describe() waits for something the loop must do) then froze
    # the loop for a second and the thread outlived the watchdog.
    release = threading.Event()
    reporting = threading.Event()

    def describe(stack: Sequence[FrameType]) -> str:
        reporting.set()
        release.wait(10)
        return "test"

    dog = LoopWatchdog(0.04, describe)
    task = asyncio.create_task(dog.run())
    await asyncio.sleep(0.02)
    time.sleep(0.2)  # noqa: ASYNC251 - block the loop: a stall the thread reports
    async with asyncio.timeout(10):
        while True:
            if reporting.is_set():
                break
            await asyncio.sleep(0.01)
    # Only a loop that keeps running while the watchdog stops releases the report.
    asyncio.get_running_loop().call_later(0.05, release.set)
    task.cancel()
    async with asyncio.timeout(10):
        await asyncio.gather(task, return_exceptions=True)
    assert dog._thread is not None and not dog._thread.is_alive()
    assert dog.stalls == 1


async def test_lag_reports_how_late_the_loop_woke() -> None:
    dog = LoopWatchdog(0.2, lambda stack: "test")
    task = asyncio.create_task(dog.run())
    try:
        await asyncio.sleep(0.01)
        assert dog.lag == 0.0
        time.sleep(0.3)  # noqa: ASYNC251 - the tick due after 0.05 s runs 0.25 s late
        async with asyncio.timeout(10):
            while True:
                if dog.lag:
                    break
                await asyncio.sleep(0.01)
        assert dog.lag >= 0.2
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_the_stack_is_the_one_of_the_stall_even_after_the_loop_moved_on() -> None:
    # A fresh clone's report said "outside any claim handler": the thread walked the stack
    # after formatting it, by when the handler's coroutine had suspended and no longer
    # linked to its caller. Here the loop resumes and suspends before describe() looks.
    released = threading.Event()
    suspended = threading.Event()
    described = threading.Event()
    seen: list[bool] = []

    def describe(stack: Sequence[FrameType]) -> str:
        released.set()
        suspended.wait(10)
        seen.append(handler.__code__ in {frame.f_code for frame in stack})
        described.set()
        return "test"

    def block() -> None:
        released.wait(10)  # the loop is stuck until the watchdog reports

    async def blocking() -> None:
        block()

    async def handler() -> None:
        await blocking()
        asyncio.get_running_loop().call_soon(suspended.set)  # runs once handler awaits
        await asyncio.sleep(3600)

    dog = LoopWatchdog(0.04, describe)
    watching = asyncio.create_task(dog.run())
    await asyncio.sleep(0)  # the watcher thread starts before the loop blocks
    handling = asyncio.create_task(handler())
    try:
        await asyncio.to_thread(described.wait, 10)
    finally:
        for task in (handling, watching):
            task.cancel()
        await asyncio.gather(handling, watching, return_exceptions=True)
    assert seen == [True]
