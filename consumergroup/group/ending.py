"""Why a session ended (:class:`EndCause`): logged, and decides ``on_revoked`` or ``on_lost``."""

from __future__ import annotations

import enum


class EndCause(enum.Enum):
    """Why a session ended: logged, and decides ``on_revoked`` versus ``on_lost``."""

    #: The coordinator started a rebalance (a member joined or left).
    REBALANCE = "rebalance"
    #: A subscribed topic's partition count changed, or the assignment named
    #: partitions this member cannot see yet.
    PARTITIONS_CHANGED = "partitions-changed"
    #: ``setup`` or ``on_assigned`` raised, or ``consume_claim`` did with
    #: ``return_errors`` off.
    HANDLER_ERROR = "handler-error"
    #: ``close()`` was called.
    CLOSED = "closed"
    #: Newly assigned partitions could not be started (their committed offsets could
    #: not be fetched): the member rejoins; what it owns is still its own.
    START_FAILED = "start-failed"
    #: A bug in one of the session's own tasks (logged with its traceback; ``run()``
    #: raises it). The member still owns its partitions.
    INTERNAL_ERROR = "internal-error"
    #: No heartbeat got through for a whole session timeout: the coordinator has
    #: most likely given the partitions to others.
    LOST = "lost"
    #: The coordinator no longer knows this member or this generation (or a static
    #: member took its instance id): the partitions belong to others now.
    FENCED = "fenced"

    @property
    def graceful(self) -> bool:
        """True when the member still owns its partitions at the end: ``on_revoked`` and
        a final commit; False (LOST, FENCED): ``on_lost`` and no commit."""
        return self not in (EndCause.LOST, EndCause.FENCED)
