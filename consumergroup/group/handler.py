"""ConsumerGroupHandler: what users implement (sarama's ``ConsumerGroupHandler``)."""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .claim import ConsumerGroupClaim
    from .session import ConsumerGroupSession


class ConsumerGroupHandler(abc.ABC):
    """Callbacks for one member's sessions.

    Per session: :meth:`setup` once, then :meth:`consume_claim` concurrently in
    one task per claimed partition, then :meth:`cleanup` once after every claim
    has returned (or was cancelled after ``rebalance.timeout``), then the final
    commit of marked offsets.
    """

    async def setup(self, session: ConsumerGroupSession) -> None:  # noqa: B027 - optional hook
        """Called once a session has its claims, before any ``consume_claim``."""

    async def cleanup(self, session: ConsumerGroupSession) -> None:  # noqa: B027 - optional hook
        """Called once every ``consume_claim`` of the session has ended."""

    async def on_assigned(  # noqa: B027 - optional hook
        self, session: ConsumerGroupSession, partitions: Sequence[tuple[str, int]]
    ) -> None:
        """Partitions this member now owns, before ``setup`` (the new ones, when cooperative)."""

    async def on_revoked(  # noqa: B027 - optional hook
        self, session: ConsumerGroupSession, partitions: Sequence[tuple[str, int]]
    ) -> None:
        """Partitions given up gracefully: their handlers have returned, and the final
        commit of their marked offsets follows this call (mark or commit here)."""

    async def on_lost(self, partitions: Sequence[tuple[str, int]]) -> None:  # noqa: B027
        """Partitions lost without a graceful hand-over (fenced, session timed out):
        another member may already own them, so no commit is possible."""

    @abc.abstractmethod
    async def consume_claim(self, session: ConsumerGroupSession, claim: ConsumerGroupClaim) -> None:
        """Process one claimed partition: ``async for msg in claim.messages(): ...``.

        The iterator ends when the session ends (a rebalance, ``close()``).
        Return promptly then: after ``rebalance.timeout`` the task is cancelled.
        Mark what you have processed with ``session.mark_message(msg)``.
        """
