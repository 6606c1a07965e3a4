"""AsyncResource: ``async with`` = ``start()`` ... ``close()``, written once."""

from __future__ import annotations

import abc
from types import TracebackType
from typing import Self


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
