"""``cg.run(main())``: ``asyncio.run`` for a program that must stop cleanly on a signal.

``asyncio.run`` cancels ``main()`` on Ctrl-C but then raises ``KeyboardInterrupt`` (a
traceback and exit status 130 although everything was closed), and SIGTERM — what
``docker stop``, Kubernetes and systemd send — kills the process at once (143) without
running any ``finally`` or ``async with`` exit: no final commit, no LeaveGroup. Here both
signals cancel ``main()``, so every ``async with cg.ConsumerGroup(...)`` block closes (the
session ends, marked offsets are committed, LeaveGroup is sent), and ``run()`` returns:
the process exits 0, quietly. A second signal while closing forces the stop (Python's
default for it: SIGINT raises, and ``run()`` exits with status 130; SIGTERM ends the
process with 143).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import signal
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

log = logging.getLogger("consumergroup")

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def run(main: Coroutine[Any, Any, T], *, debug: bool | None = None) -> T | None:
    """Run ``main()`` to completion, with SIGINT and SIGTERM cancelling it.

    Like ``asyncio.run(main())``, which it uses: a new event loop, closed at the end.
    Returns what ``main()`` returned, or None when a signal cancelled it; raises what it
    raised. A signal is a normal way to stop, so the process exits 0 after it::

        async def main() -> None:
            async with cg.ConsumerGroup(["127.0.0.1:9092"], "my-group", config) as group:
                await group.run(["topic-a"], Handler())

        cg.run(main())   # Ctrl-C or SIGTERM: final commit, LeaveGroup, exit 0

    A second signal while ``main()`` is closing forces the stop: SIGINT exits with
    status 130 (``SystemExit``), SIGTERM ends the process (143).
    """
    if not inspect.iscoroutine(main):
        raise TypeError(f"cg.run() takes a coroutine (call main(): cg.run(main())), not {main!r}")
    try:
        return asyncio.run(_until_signalled(main), debug=debug)
    except KeyboardInterrupt:
        # A second Ctrl-C while closing (or one before the handlers were in place).
        raise SystemExit(130) from None


async def _until_signalled(main: Coroutine[Any, Any, T]) -> T | None:
    """Await ``main`` in this task; the first stop signal cancels the task."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    # Written by the signal handler (on the loop), read when the cancellation arrives.
    received: list[signal.Signals] = []

    def stop(sig: signal.Signals) -> None:
        received.append(sig)
        log.info("%s received: stopping (send it again to force)", sig.name)
        # The next one gets Python's default: KeyboardInterrupt / termination.
        for each in STOP_SIGNALS:
            loop.remove_signal_handler(each)
        task.cancel()

    installed = []
    for sig in STOP_SIGNALS:
        with contextlib.suppress(NotImplementedError, RuntimeError):  # Windows, not main thread
            loop.add_signal_handler(sig, stop, sig)
            installed.append(sig)
    try:
        return await main
    except asyncio.CancelledError:
        if not received:
            raise
        task.uncancel()
        return None
    finally:
        if not received:
            for sig in installed:
                loop.remove_signal_handler(sig)
