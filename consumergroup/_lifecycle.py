"""AsyncResource: ``async with`` = ``start()`` ... ``close()``, written once; and
:func:`cancel_and_wait`, the one way a task is stopped and waited for."""

from __future__ import annotations

import abc
import asyncio
from types import TracebackType
from typing import Any, Self


class AsyncResource(abc.ABC):
    """Something started with :meth:`start` and stopped with :meth:`close`."""

    @abc.abstractmethod
    async def start(self) -> None:
        """Acquire what the resource needs (connect, launch, ...)."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Release everything; must be idempotent."""

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


async def cancel_and_wait(*tasks: asyncio.Future[Any]) -> None:
    """Cancel ``tasks`` and wait until all have ended; then re-raise the first one's
    exception other than its cancellation (a task may end with an error instead).

    ``with suppress(CancelledError): await task`` cannot tell the task's cancellation
    from the caller's own: a cancel of the caller landing during that await is eaten and
    the caller runs on. Here the wait is :func:`asyncio.wait`, which raises only for the
    caller's cancel (the tasks, already cancelled, then finish on their own), and each
    task's outcome is read from the finished task.
    """
    if not tasks:
        return
    for task in tasks:
        task.cancel()
    await asyncio.wait(tasks)
    for task in tasks:
        if not task.cancelled():
            task.result()
