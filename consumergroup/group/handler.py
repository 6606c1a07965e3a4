"""ConsumerGroupHandler: what users implement (sarama's ``ConsumerGroupHandler``)."""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .claim import ConsumerGroupClaim
    from .session import ConsumerGroupSession


class ConsumerGroupHandler(abc.ABC):
    """Callbacks for one member's sessions (every method must be ``async def``; a plain
    ``def`` is rejected when ``run()``/``consume()`` starts).

    Order per session:

    1. :meth:`on_assigned` (heartbeats already run, so slow hooks do not get the
       member evicted), then :meth:`setup`;
    2. :meth:`consume_claim` concurrently, one task per claimed partition, until the
       session ends (a rebalance, ``close()``, a lost or fenced membership);
    3. the claims drain: their iterators end; a handler still running when its share
       of ``rebalance.timeout`` is spent is cancelled;
    4. :meth:`on_revoked` (graceful end) or :meth:`on_lost` (lost or fenced);
    5. :meth:`cleanup`;
    6. the final commit of marked offsets (skipped after :meth:`on_lost`).

    Cooperative (and consumer-protocol) members keep their session across rebalances:
    each rebalance calls :meth:`on_revoked` with only the partitions that leave (after
    their handlers ended) and :meth:`on_assigned` with only those that arrive (then
    their ``consume_claim`` tasks start). The order holds on every path: partitions
    assigned while ``on_assigned``/``setup`` still run wait for them.

    A ``consume_claim`` that returns, or raises with ``consumer.return_errors`` on,
    while its session still runs is started again after a backoff, with a new claim
    from the partition's last marked offset. Raising with ``return_errors`` off ends
    the session and ``run()``. ``on_assigned``/``setup`` raising ends the session like
    a handler error; errors in the later hooks are reported and the teardown goes on.
    ``ConsumerGroup(..., on_assigned=, on_revoked=, on_lost=)`` callables run right
    after the methods of the same name. Partitions are ``(topic, partition)`` tuples.
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
        """Partitions given up gracefully: their handlers have ended (returned, or were
        cancelled past their share of ``rebalance.timeout``), and the commit of these
        partitions' marked offsets follows this call (mark here)."""

    async def on_lost(self, partitions: Sequence[tuple[str, int]]) -> None:  # noqa: B027
        """Partitions lost without a graceful hand-over (fenced, session timed out):
        another member may already own them, so no commit is possible."""

    @abc.abstractmethod
    async def consume_claim(self, session: ConsumerGroupSession, claim: ConsumerGroupClaim) -> None:
        """Process one claimed partition: ``async for msg in claim.messages(): ...``.

        The iterator ends when the session ends (a rebalance, ``close()``).
        Return promptly then: once its share of ``rebalance.timeout`` is spent the
        task is cancelled. Returning earlier restarts the claim (see the class).
        Mark what you have processed with ``session.mark_message(msg)``.
        """
