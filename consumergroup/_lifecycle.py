"""AsyncResource: ``async with`` = ``start()`` ... ``close()``, written once;
:func:`cancel_and_wait`, the one way a task is stopped and waited for; and
:func:`single_error`, what the public API raises instead of a task group's ExceptionGroup."""

from __future__ import annotations

import abc
import asyncio
from types import TracebackType
from typing import Any, Self

from .errors import ConsumerGroupError


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


def single_error(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """What the public API raises instead of an ExceptionGroup: the one error inside it,
    or a ConsumerGroupError naming them all."""
    leaves: list[BaseException] = []

    def walk(exc: BaseException) -> None:
        if isinstance(exc, BaseExceptionGroup):
            for inner in exc.exceptions:
                walk(inner)
        else:
            leaves.append(exc)

    walk(group)
    for exc in leaves:
        if not isinstance(exc, Exception):
            return exc  # KeyboardInterrupt, SystemExit, cancellation: as they are
    if len(leaves) == 1 and isinstance(leaves[0], ConsumerGroupError):
        return leaves[0]
    err = ConsumerGroupError("; ".join(f"{type(e).__name__}: {e}" for e in leaves))
    err.__cause__ = group
    return err
