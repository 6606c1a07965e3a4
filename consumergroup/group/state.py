"""GroupState and the stats snapshot: what a member is doing, readable at no cost.

``ConsumerGroup.state`` is one variable with its transitions in one place (the
group's rebalance loop). ``ConsumerGroup.stats()`` builds a :class:`GroupStats`
from in-memory state only (no broker round trip), so health endpoints and
metrics scrapes can call it on every request.

State machine (see docs/architecture.md)::

    STARTING -> JOINING -> STABLE -> REBALANCING -> JOINING -> ...
         any state -> CLOSING -> CLOSED          (close())
         any state -> FAILED                     (a non-retriable error ended run())
"""

from __future__ import annotations

import enum

from .. import _lazy

TopicPartition = tuple[str, int]


class GroupState(enum.Enum):
    """Where a :class:`~consumergroup.ConsumerGroup` member is in its life."""

    #: Created; not yet asked to join (no ``run()``/``consume()`` so far).
    STARTING = "starting"
    #: Finding the coordinator, JoinGroup/SyncGroup, fetching committed offsets.
    JOINING = "joining"
    #: A session runs: claims are being consumed and heartbeats go out.
    STABLE = "stable"
    #: The session is ending for a rebalance (draining handlers, final commit)
    #: or the member is backing off before it rejoins after a transient error.
    REBALANCING = "rebalancing"
    #: ``close()`` was called and is ending the session and leaving the group.
    CLOSING = "closing"
    #: Closed: no task is left; ``consume()``/``run()`` raise ClosedError.
    CLOSED = "closed"
    #: A non-retriable error ended the member (see ``GroupStats.error``).
    FAILED = "failed"


class GroupObserver:
    """Receives a member's events (metrics exporters, tests): every method is an optional no-op.

    Register with ``ConsumerGroup.add_observer(obs)``. Methods are called on the event
    loop, synchronously, from the runtime's own tasks: they must be cheap and must not
    block or raise (an exception is logged and otherwise ignored).
    """

    def on_state(self, group_id: str, old: GroupState, new: GroupState) -> None:
        """The member moved from ``old`` to ``new``."""

    def on_rebalance(self, group_id: str, duration: float) -> None:
        """A rebalance finished: ``duration`` seconds from the old session's end (or the
        first join's start) until the new session started consuming."""

    def on_commit(self, group_id: str, latency: float, error: BaseException | None) -> None:
        """An OffsetCommit round trip ended (``error`` None: it succeeded)."""

    def on_heartbeat(self, group_id: str, error: BaseException | None) -> None:
        """A heartbeat ended (``error`` None: it succeeded)."""

    def on_fetch(self, group_id: str, latency: float, records: int, nbytes: int) -> None:
        """A Fetch round trip for this member ended, delivering ``records`` (``nbytes``)."""


# GroupStats and PartitionStats live in .stats, imported by the first stats() or the first
# lookup of their names here (two frozen dataclasses, ~8 M instructions: not a cost of
# every member's start). .stats imports this module, never the other way round.
_LAZY: dict[str, tuple[str, str]] = {
    "GroupStats": (f"{__package__}.stats", "GroupStats"),
    "PartitionStats": (f"{__package__}.stats", "PartitionStats"),
}
__getattr__, __dir__ = _lazy.exports(globals(), _LAZY)
