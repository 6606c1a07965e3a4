"""KIP-429 cooperative rebalancing: rejoin with the claims running, hand each new
assignment to the :class:`~.reconciler.Reconciler`.

Eager members never get here: a rebalance ends their session. A cooperative member's
session spans generations; :class:`CooperativeRejoin` is its protocol driver (a KIP-848
member has its own driver feeding the same reconciler).

Shared state (one event loop): ``requested`` is set by :meth:`request` (anyone who
learns of a rebalance: heartbeat, commit, a revocation that needs a second round) and
cleared only by :meth:`CooperativeRejoin.run`; ``joined`` is replaced by an unset event
by :meth:`request` and set by :meth:`run` once the join is over (or by :meth:`cancel`);
``joins`` and ``rejoined`` (set and replaced at each completed join) are written only by
:meth:`run` (``rejoined`` also set by :meth:`cancel`); ``active`` by :meth:`request` and
:meth:`run`;
commits read them (to hold back during a rebalance, and to tell a stale fencing answer
from a real one). ``_scope`` (the join in flight) and ``_over`` (set when it is over) are
set by :meth:`run`; :meth:`cancel` (the session's end) sets ``abandoned`` when a join is
in flight, and cancels it only when the end is not graceful. ``_formed`` (the generation
a join in flight at a graceful end brought) is written by :meth:`run` and read by
:meth:`formed_at_end` (the final commit). :meth:`run` writes the session's
``last_heartbeat`` when a join completes or is answered REBALANCE_IN_PROGRESS (an
answer, as a heartbeat's is).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import anyio

from ..errors import ConsumerGroupError, FencedInstanceIdError, RebalanceInProgressError
from ..retry import Backoff, is_transient
from .ending import EndCause

if TYPE_CHECKING:
    from ..config import RetryConfig
    from .membership import Membership
    from .reconciler import Reconciler
    from .roles import Joining


class CooperativeRejoin:
    """The cooperative member's rejoin loop (see the module)."""

    def __init__(
        self,
        session: Joining,
        membership: Membership,
        reconciler: Reconciler,
        topics: list[str],
        rebalancing: Callable[[bool], None] | None,
        *,
        retry: RetryConfig,
        session_timeout: float,
    ) -> None:
        self._session = session
        self._retry = retry
        # No answer from the coordinator for this long (a heartbeat's or a join's): the
        # member is lost (as the heartbeat task decides).
        self._session_timeout = session_timeout
        self._created = anyio.current_time()
        self._membership = membership
        self._reconciler = reconciler
        self._topics = topics
        # Told True when a rebalance starts, False when its assignment is applied.
        self._rebalancing = rebalancing
        self.requested = anyio.Event()
        # JoinGroup/SyncGroup rounds started; ``joined`` is set while no rejoin is pending,
        # in flight or backing off after a failure.
        self.joins = 0
        self.joined = anyio.Event()
        self.joined.set()
        # Set (and replaced) each time a join completes, or when the session ends.
        self.rejoined = anyio.Event()
        self._scope: anyio.CancelScope | None = None
        self._over = anyio.Event()
        # A rebalance is requested, being joined or being applied.
        self.active = False
        # The session ended with a join in flight: the generation may have moved on.
        self.abandoned = False
        # The generation the join in flight at a graceful end formed (None: none, or it
        # failed): what the final commit must carry.
        self._formed: int | None = None

    @property
    def joining(self) -> bool:
        """A JoinGroup/SyncGroup is in flight (heartbeats pause meanwhile)."""
        return self._scope is not None

    @property
    def pending(self) -> bool:
        """A rejoin is pending, in flight or backing off after a failure."""
        return not self.joined.is_set()

    def _silent_for(self) -> float:
        """Seconds since the coordinator last answered (a heartbeat, or a join)."""
        return anyio.current_time() - (self._session.last_heartbeat or self._created)

    def request(self) -> None:
        """The group rebalances: rejoin (a pending join is the answer to it already)."""
        self.active = True
        if not self.pending:
            self.joined = anyio.Event()
            self.requested.set()

    def cancel(self, *, graceful: bool) -> None:
        """The session ends: nobody waits for a rejoin any more. A join in flight at a
        graceful end goes on (until the session's background tasks end, after the final
        commit): the coordinator may have formed the next generation from it already, and
        only its answer tells the final commit that generation (:meth:`formed_at_end`);
        dropped, the commit would carry the old one and be refused ILLEGAL_GENERATION.
        Java's client, too, never drops a join in flight for a metadata change (it rejoins
        after it). After a fencing or lost end (no commit) the join is cancelled."""
        if self._scope is not None:
            self.abandoned = True
            if not graceful:
                self._scope.cancel()
        self.joined.set()  # nobody waits for a join that will not happen
        self.rejoined.set()

    async def formed_at_end(self) -> int | None:
        """After the session's end: wait for the join that was in flight then, and return
        the generation it formed for this member (None when none was in flight, or it
        failed, or it made this a new member). The caller bounds the wait."""
        if self._scope is not None:
            await self._over.wait()
        return self._formed

    async def run(self) -> None:
        """Rejoin whenever requested, until the session ends.

        A transient join failure keeps the claims (Java keeps the owned partitions and
        rejoins) and tries again after a backoff; only a fencing answer or a non-transient
        error ends the session.
        """
        session = self._session
        backoff = Backoff(self._retry.backoff)
        while not session.done.is_set():
            await self.requested.wait()
            self.requested = anyio.Event()
            if session.done.is_set():
                return
            if self._rebalancing is not None:
                self._rebalancing(True)
            member_id = self._membership.member_id
            owned = session.claims
            self.joins += 1
            generation = None
            self._over = anyio.Event()
            try:
                with anyio.CancelScope() as self._scope:
                    generation = await self._membership.join(self._topics, owned)
            except FencedInstanceIdError as exc:
                session.end(EndCause.FENCED, "another member took this group_instance_id", exc)
                return
            except ConsumerGroupError as exc:
                if not is_transient(exc):
                    session.end(EndCause.LOST, f"cooperative rejoin failed: {exc}", exc)
                    return
                if isinstance(exc, RebalanceInProgressError):
                    # The coordinator got the join and holds the member in its rebalance:
                    # alive, as Java's heartbeat counts this answer.
                    session.last_heartbeat = anyio.current_time()
                if self._silent_for() > self._session_timeout:
                    # No answer for a session timeout: the coordinator has given the
                    # partitions away by now (as when heartbeats fail).
                    session.end(
                        EndCause.LOST,
                        f"cooperative rejoin failed ({exc}); no answer from the coordinator "
                        f"for {self._session_timeout}s",
                    )
                    return
                delay = backoff.next()
                session.log.warning(
                    "cooperative rejoin failed (%s); keeping %d partitions, rejoining in %.1fs",
                    exc,
                    sum(map(len, owned.values())),
                    delay,
                )
                with anyio.move_on_after(delay):
                    await session.done.wait()
                self.requested.set()  # still pending: commits keep waiting
                continue
            finally:
                self._scope = None
                self._over.set()
            self.joined.set()
            if generation is None:  # cancelled: the session is ending
                return
            if session.done.is_set():
                # Answered after the session's end: only the final commit needs it.
                if generation.member_id == member_id:
                    self._formed = generation.generation_id
                return
            session.last_heartbeat = anyio.current_time()  # answered: alive as by a heartbeat
            rejoined, self.rejoined = self.rejoined, anyio.Event()
            rejoined.set()
            backoff.reset()
            if generation.member_id != member_id:
                session.end(EndCause.FENCED, "the coordinator forgot this member during the rejoin")
                return
            if generation.generation_id == session.generation_id:
                # No rebalance happened: the coordinator answered with the stored assignment
                # (Tansu does this for a static member), so partitions withheld for the
                # second round stay unassigned until the next rebalance.
                session.log.warning(
                    "rejoined without a new generation (%d): the coordinator did not rebalance",
                    session.generation_id,
                )
            target = [(t, p) for t, parts in generation.assignment.items() for p in parts]
            change = await self._reconciler.reconcile(target, generation.generation_id)
            session.log.info(
                "generation %d (cooperative): revoked %s, added %s",
                generation.generation_id,
                change.revoked,
                change.added,
            )
            if change.revoked:
                self.request()  # the second round hands the revoked partitions out
            else:
                self.active = False
            if self._rebalancing is not None:
                self._rebalancing(False)
