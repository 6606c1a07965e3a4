"""The session's heartbeat task on the consumer group protocol (KIP-848).

It replaces the classic session's heartbeat and cooperative-rejoin tasks: one task sends
a ``ConsumerGroupHeartbeat`` at the interval the broker returns, and a second hands each
new target assignment to the session's :class:`~.reconciler.Reconciler` (the same code
path that applies a cooperative generation: revoke what the target drops, then claim
what it adds). When a
reconciliation finished, the next heartbeat goes out at once: it reports the partitions
the member now owns, which is how the coordinator learns that revoked partitions are free
for their next owner.

Errors: FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID end the session as FENCED (``on_lost``,
no commit; the membership is back at epoch 0); a fenced instance id or a fatal error ends
it with that error; transient errors are retried (every field is sent again) until no
heartbeat got through for a whole session timeout (LOST). NOT_COORDINATOR and
COORDINATOR_NOT_AVAILABLE make the next heartbeat look the coordinator up again (the
membership does it): a coordinator that moved while the old broker stays up would
otherwise answer NOT_COORDINATOR until the member is taken for dead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import anyio

from ..errors import (
    ConsumerGroupError,
    FencedInstanceIdError,
    FencedMemberEpochError,
    UnknownMemberIdError,
)
from .ending import EndCause
from .session_tasks import Notify, heartbeat_failed

if TYPE_CHECKING:
    from ..config import Config
    from .consumer_membership import ConsumerMembership, Subscription
    from .reconciler import Reconciler
    from .roles import EpochBeating


class ConsumerHeartbeat:
    """Heartbeats and reconciliation of one session of a consumer-protocol member.

    It may end the session, write its ``last_heartbeat`` and epoch, and hand targets to
    ``reconciler``; heartbeat answers go to ``notify`` (observers), rebalances it applies
    to ``rebalancing`` (True when one starts, False when it is applied).
    """

    def __init__(
        self,
        session: EpochBeating,
        membership: ConsumerMembership,
        subscription: Subscription,
        *,
        reconciler: Reconciler,
        config: Config,
        notify: Notify,
        rebalancing: Callable[[bool], None] | None,
    ) -> None:
        self._session = session
        self._membership = membership
        self._subscription = subscription
        self._reconciler = reconciler
        self._config = config
        self._notify = notify
        self._rebalancing = rebalancing
        self._wake = anyio.Event()  # set: heartbeat now (an acknowledgement is due)
        self._target: dict[str, list[int]] | None = None  # the newest target not yet applied
        self._pending = anyio.Event()  # set: _target holds a target to apply
        self._beats = 0  # heartbeats answered (what a stale commit waits for)
        self._beaten = anyio.Event()  # set (and replaced) per answer, and when the loop ends
        self._stopped = False  # the heartbeat loop has ended: no new epoch will come

    def wake(self) -> None:
        """Send the next heartbeat now."""
        self._wake.set()

    async def next_epoch(self, *, ending: bool = False) -> bool:
        """Heartbeat now and wait for its answer (a commit refused as STALE_MEMBER_EPOCH
        goes again under the epoch it brings). False when no answer will come: the
        heartbeat loop has ended, or the session is ending, unless ``ending`` (the
        session's final commit: the heartbeat outlives it)."""
        beats = self._beats
        self.wake()
        while self._beats == beats:
            if self._stopped or (self._session.done.is_set() and not ending):
                return False
            await self._beaten.wait()
        return True

    async def run(self) -> None:
        """Both tasks, until the session's task group is cancelled."""
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(self._reconcile_loop)
            await self._heartbeat_loop()
            tasks.cancel_scope.cancel()

    async def _heartbeat_loop(self) -> None:
        try:
            await self._heartbeats()
        finally:
            self._stopped = True
            self._beaten.set()  # whoever waits for an epoch: none is coming

    async def _heartbeats(self) -> None:
        session, membership, notify = self._session, self._membership, self._notify
        last_ok = anyio.current_time()
        full = False  # the join sent every field; send them again after an error
        # Runs while handlers drain and the final commit goes out: the membership (and the
        # epoch those commits carry) stays alive until the session's task group ends.
        while True:
            with anyio.move_on_after(membership.heartbeat_interval):
                await self._wake.wait()
            self._wake = anyio.Event()
            try:
                target = await membership.heartbeat(
                    self._subscription if full else None, session.claims
                )
            except (FencedMemberEpochError, UnknownMemberIdError) as exc:
                notify("on_heartbeat", exc)
                session.end(EndCause.FENCED, f"{type(exc).__name__}: the partitions moved on")
                return
            except FencedInstanceIdError as exc:
                notify("on_heartbeat", exc)
                session.end(EndCause.FENCED, "another member took this group_instance_id", exc)
                return
            except ConsumerGroupError as exc:
                full = True
                if await heartbeat_failed(session, notify, exc, last_ok, self._config):
                    return
                continue
            full = False
            notify("on_heartbeat", None)
            last_ok = session.last_heartbeat = anyio.current_time()
            session.set_epoch(membership.member_epoch)
            self._beats += 1
            self._beaten.set()
            self._beaten = anyio.Event()
            if target is not None:
                self._target = target
                self._pending.set()

    async def _reconcile_loop(self) -> None:
        session = self._session
        while not session.done.is_set():
            await self._pending.wait()
            self._pending = anyio.Event()
            target, self._target = self._target, None
            if target is None or session.done.is_set():
                continue
            assigned = {(t, p) for t, parts in target.items() for p in parts}
            if assigned == set(self._reconciler.owned):
                continue  # a new epoch, the same partitions: nothing to apply
            if self._rebalancing is not None:
                self._rebalancing(True)
            # The epoch is the heartbeat's to set: it may move on while this one applies.
            await self._reconciler.reconcile(assigned)
            if self._rebalancing is not None:
                self._rebalancing(False)
            self.wake()  # acknowledge: tell the coordinator what this member owns now
