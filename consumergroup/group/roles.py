"""The session as each of its collaborators sees it: small protocols, no implementation.

:class:`~.session.ConsumerGroupSession` builds the pieces that do its work (the
reconciler, the heartbeat tasks, the cooperative rejoin, the ticker, the watcher) and
hands each what it may read and what it may ask, no more: one of these protocols for
the session itself (all public members of the session), plus the explicit objects and
callables each constructor names. None of the pieces imports ``session.py``; this module
imports nothing of the group but the leaves :mod:`.ending` and :mod:`.logs`, so the
group's modules import each other without a cycle.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import anyio

    from ..consumer.partition import PartitionConsumer
    from .claim import ConsumerGroupClaim
    from .ending import EndCause
    from .logs import GroupLogger

TopicPartition = tuple[str, int]


class Lifetime(Protocol):
    """Every piece: whether the session is ending, its logger, and ending it (the first
    cause wins) or asking for a rebalance (cooperative: rejoin, eager: end)."""

    @property
    def done(self) -> anyio.Event:
        """Set once the session is ending."""

    @property
    def log(self) -> GroupLogger:
        """The session's logger (group and member in every line)."""

    def end(self, cause: EndCause, detail: str = "", fatal: BaseException | None = None) -> None:
        """Start ending the session."""

    def rebalance(self, detail: str) -> None:
        """The group rebalances."""


class Rejoining(Lifetime, Protocol):
    """A piece that may end the session for a partition change: the next join must then
    start as a new member (``rejoin_fresh``)."""

    rejoin_fresh: bool


class ClaimOwner(Rejoining, Protocol):
    """What the reconciler reads of the session and may ask of it (besides handing it to
    the user's callbacks as their ``session`` argument)."""

    def set_epoch(self, generation_id: int) -> None:
        """A new generation (or member epoch): what reports and commits carry from now."""


class Beating(Lifetime, Protocol):
    """A heartbeat task: the time of the last good answer is its to write."""

    last_heartbeat: float | None


class EpochBeating(Beating, Protocol):
    """The consumer protocol's heartbeat: it also reports what the member owns and moves
    the session to the member epoch each answer brings."""

    @property
    def claims(self) -> dict[str, list[int]]:
        """topic -> partitions owned now."""

    def set_epoch(self, generation_id: int) -> None:
        """A new member epoch."""


class Joining(Beating, Protocol):
    """The cooperative rejoin: what the member owns (sent with each join) and the
    generation it is in; a join answered is as good as a heartbeat's answer
    (``last_heartbeat``)."""

    @property
    def claims(self) -> dict[str, list[int]]:
        """topic -> partitions owned now."""

    @property
    def generation_id(self) -> int:
        """The current generation."""


class Owned(Protocol):
    """The reconciler's registry as the other pieces read it (never write)."""

    @property
    def owned(self) -> Mapping[TopicPartition, PartitionConsumer]:
        """Each owned partition and the partition consumer of its current claim."""


class ClaimHandler(Protocol):
    """The user's handler as the reconciler calls it (:class:`~.handler.ConsumerGroupHandler`
    has this shape; its other hooks are looked up by name)."""

    async def consume_claim(self, session: Any, claim: ConsumerGroupClaim) -> None:
        """Process one claim until its stream ends."""
