"""ConsumerGroupSession: one generation of membership, run as one task group.

Inside the session's task group (nothing outlives it):

* the heartbeat task, started first (before any user code, as sarama does) —
  REBALANCE_IN_PROGRESS, a fencing error or a lost coordinator ends the session;
* one task per claim running ``handler.consume_claim`` (restarted from the
  last marked offset if it returns or raises while the session runs);
* the auto-commit ticker;
* the partition watcher — every member (not only the leader, unlike sarama)
  ends the session when a subscribed topic's partition count changes;
* the loop watchdog (see :mod:`.watchdog`).

Order of the user's callbacks: ``on_assigned`` → ``setup`` → one
``consume_claim`` task per claim … the session ends (:class:`EndCause`) → the
claims drain → ``on_revoked`` (graceful end) or ``on_lost`` (lost / fenced) →
``cleanup`` → final commit (skipped when lost) → release.

Time budget of the end: the coordinator gives every member ``rebalance.timeout``
to rejoin, so the whole teardown fits in that window (and in ``close()``'s bound):
handlers drain until ``2 * reserve`` before its end, hooks and cleanup until
``reserve`` before it, and the final commit gets the last ``reserve``
(``reserve = min(net.read_timeout, window / 4)``).

Cooperative members (KIP-429, every configured strategy cooperative): a
rebalance does not end the session. The heartbeat's REBALANCE_IN_PROGRESS wakes
:meth:`_cooperative_loop`, which rejoins while every claim keeps running, then
ends only the revoked claims (drain, ``on_revoked``, commit, release), starts the
added ones, calls ``on_assigned`` with them, and rejoins once more if it revoked
anything. One session then spans several generations: ``generation_id`` is the
current one, ``claims`` the current claims, and marks of kept partitions carry
over (see docs/architecture.md, "Cooperative rebalancing").
"""

from __future__ import annotations

import enum
import inspect
import logging
import math
import re
from collections.abc import Awaitable, Callable, Iterable, Sequence
from types import FrameType
from typing import TYPE_CHECKING

import anyio

from ..errors import (
    ConsumerError,
    ConsumerGroupError,
    FencedInstanceIdError,
    IllegalGenerationError,
    RebalanceInProgressError,
    StaleMemberEpochError,
    UnknownMemberIdError,
)
from ..retry import FENCED, Backoff, is_transient
from .claim import ConsumerGroupClaim
from .consumer_membership import ConsumerMembership
from .logs import GroupLogger
from .membership import Membership
from .watchdog import LoopWatchdog

if TYPE_CHECKING:
    from ..client import Client
    from ..config import Config
    from ..consumer.consumer import Consumer
    from ..message import ConsumerMessage
    from .consumer_heartbeat import ConsumerHeartbeat
    from .consumer_membership import Subscription
    from .handler import ConsumerGroupHandler
    from .membership import Generation
    from .offsets import OffsetManager

_log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
ErrorSink = Callable[[ConsumerError], None]
#: A rebalance hook given to ``ConsumerGroup(..., on_assigned=...)``: sync or async.
HookFn = Callable[..., Awaitable[None] | None]
#: (event name, *args) -> the group's observers.
Notify = Callable[..., None]
#: Starts fetching newly assigned partitions: (claims, partitions not in metadata yet).
OpenClaims = Callable[
    [list[TopicPartition]],
    Awaitable[tuple[dict[TopicPartition, ConsumerGroupClaim], list[TopicPartition]]],
]


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


class ConsumerGroupSession:
    """One generation's claims, marks and lifecycle (sarama's ``ConsumerGroupSession``).

    Handed to every handler callback. ``done`` is set when the session is
    ending; ``claims`` maps topic -> claimed partitions; ``end_cause`` (an
    :class:`EndCause`) and ``end_reason`` (its text) say why it ended.
    """

    def __init__(
        self,
        *,
        group_id: str,
        generation: Generation,
        claims: dict[TopicPartition, ConsumerGroupClaim],
        partition_counts: dict[str, int],
        client: Client,
        consumer: Consumer,
        membership: Membership | ConsumerMembership,
        offsets: OffsetManager,
        config: Config,
        on_error: ErrorSink,
        notify: Notify,
        hooks: dict[str, HookFn],
        on_end: Callable[[EndCause], None],
        open_claims: OpenClaims | None = None,
        rebalancing: Callable[[bool], None] | None = None,
        subscription: Subscription | None = None,
    ) -> None:
        self.group_id = group_id
        self.member_id = generation.member_id
        self.generation_id = generation.generation_id
        self.done = anyio.Event()
        # The registry of claims this session owns; _revoke() removes them one by one.
        self._claims = claims
        # Subscribed topic -> its partition count when the session began.
        self._partition_counts = partition_counts
        self._client = client
        self._consumer = consumer
        self._membership = membership
        self.offsets = offsets
        # mark_message runs once per consumed message: binding the manager's own method
        # here saves a Python call per message. It shadows the method below, which
        # documents it and does the same.
        self.mark_message = offsets.mark_message  # type: ignore[method-assign]
        self._config = config
        self._on_error = on_error
        self._notify = notify
        self._hooks = hooks
        self._on_end = on_end
        self.log = GroupLogger(_log, group_id, lambda: self.member_id)
        # Why the session ended (None: still running); a fatal error ends run().
        self.end_cause: EndCause | None = None
        self.end_reason: str | None = None
        self.fatal: BaseException | None = None
        # Set when the next join must start as a new member (see _watch_partitions).
        self.rejoin_fresh = False
        # Handlers still running; _claims_done is set when it drops to zero.
        self._running_claims = 0
        self._claims_done = anyio.Event()
        # --- cooperative rebalancing (see the module docstring) ---
        self.cooperative = generation.cooperative
        self._open_claims = open_claims
        # Told True when a cooperative rebalance starts, False when it is applied.
        self._rebalancing = rebalancing
        self._rejoin = anyio.Event()  # set: rejoin while the claims keep running
        # Cooperative JoinGroup/SyncGroup rounds started, and set while none is in flight:
        # together they tell a commit's stale fencing answer from a real one (_commit).
        self._joins = 0
        self._joined = anyio.Event()
        self._joined.set()
        self._revoking: set[TopicPartition] = set()
        # What the member subscribes to (a pattern: the partition watcher also looks for
        # new matching topics); on the consumer protocol (KIP-848), the task that
        # heartbeats and applies each new target assignment while the session runs.
        self._subscription = subscription
        self._consumer_heartbeat: ConsumerHeartbeat | None = None
        # Per claim task: its cancel scope and an event set when it has ended.
        self._claim_tasks: dict[TopicPartition, tuple[anyio.CancelScope, anyio.Event]] = {}
        self._claim_group: anyio.abc.TaskGroup | None = None
        self._handler: ConsumerGroupHandler | None = None  # set by run()
        # Teardown deadlines (anyio clock): the rebalance window from end(), and the
        # bound close() sets; _step is the running teardown step's scope and slack.
        self._ended_at: float | None = None
        self._close_deadline = math.inf
        self._step: tuple[anyio.CancelScope, int] | None = None
        # Observability, written by the heartbeat task (anyio clock).
        self.started_at = anyio.current_time()
        self.last_heartbeat: float | None = None
        self._rate_sample: dict[TopicPartition, tuple[float, int]] = {}
        self.rates: dict[TopicPartition, float] = {}
        self.watchdog = LoopWatchdog(config.consumer.group.session_timeout / 3, _claim_on_stack)

    def __repr__(self) -> str:
        return (
            f"<ConsumerGroupSession {self.group_id} member={self.member_id} "
            f"generation={self.generation_id} claims={self.claims}>"
        )

    @property
    def _classic(self) -> Membership:
        """The membership, on the classic protocol (the only one its loops run for)."""
        assert isinstance(self._membership, Membership)
        return self._membership

    def set_epoch(self, epoch: int) -> None:
        """The consumer protocol's member epoch changed: commits and ``generation_id``
        carry the new one from now on."""
        self.generation_id = self.offsets.generation_id = epoch

    @property
    def claims(self) -> dict[str, list[int]]:
        """topic -> sorted partitions this member owns in this generation."""
        out: dict[str, list[int]] = {}
        for topic, partition in sorted(self._claims):
            out.setdefault(topic, []).append(partition)
        return out

    # ------------------------------------------------------------------ marking

    def mark_message(self, msg: ConsumerMessage, metadata: str = "") -> None:
        """Mark ``msg`` processed: its offset + 1 is committed next (sarama semantics)."""
        self.offsets.mark_message(msg, metadata)

    def mark_offset(self, topic: str, partition: int, offset: int, metadata: str = "") -> None:
        """Mark ``offset`` as the next to consume (only moves forward)."""
        self.offsets.mark(topic, partition, offset, metadata)

    def reset_offset(self, topic: str, partition: int, offset: int, metadata: str = "") -> None:
        """Set the next offset to commit, backwards too (takes effect at the next commit)."""
        self.offsets.reset(topic, partition, offset, metadata)

    async def commit(self) -> None:
        """Commit marked offsets now (also done every ``auto_commit.interval`` and at the end).

        A commit that raced a cooperative rejoin is sent again under the new generation
        once the rejoin is over.
        """
        while not await self._commit():
            await self._joined.wait()  # set unless a cooperative rejoin is in flight

    @property
    def _joining(self) -> bool:
        """A cooperative JoinGroup/SyncGroup is in flight."""
        return not self._joined.is_set()

    async def _commit(self) -> bool:
        """Commit the marks; False when the commit raced a cooperative rejoin.

        A commit sent while a rejoin is in flight, or answered after one ended, carries a
        generation the coordinator may already have replaced: its ILLEGAL_GENERATION /
        REBALANCE_IN_PROGRESS / UNKNOWN_MEMBER_ID says nothing about the current generation
        (the rejoin itself tells whether the member was fenced). Its marks stay uncommitted
        and go out with the next commit, under the new generation and only for the
        partitions still owned. Any other fencing answer raises.
        """
        joins, joining = self._joins, self._joining
        try:
            await self.offsets.commit()
        except StaleMemberEpochError:
            if self._consumer_heartbeat is None or self.done.is_set():
                raise
            # The coordinator moved the member to a newer epoch than this commit carried:
            # the marks of partitions still owned go again under the epoch the next
            # heartbeat brings (those of revoked partitions were released with them).
            self.log.info("commit carried a stale member epoch; committing again")
            await self._consumer_heartbeat.next_epoch()
            return False
        except FENCED as exc:
            if not joining and joins == self._joins:
                raise
            self.log.info(
                "commit raced a cooperative rejoin (%s); its marks go out under generation %d",
                type(exc).__name__,
                self.generation_id,
            )
            return False
        return True

    # ------------------------------------------------------------------ lifecycle

    def end(self, cause: EndCause, detail: str = "", fatal: BaseException | None = None) -> None:
        """Start ending the session (idempotent): set ``done`` and end every claim's stream."""
        if fatal is not None and self.fatal is None:
            self.fatal = fatal
        if self.done.is_set():
            return
        self.end_cause = cause
        self.end_reason = f"{cause.value}: {detail}" if detail else cause.value
        self._ended_at = anyio.current_time()
        self.log.info("generation %d: session ending (%s)", self.generation_id, self.end_reason)
        self.done.set()
        for claim in self._claims.values():
            claim._pc.stop()
        self._on_end(cause)

    def close_by(self, deadline: float) -> None:
        """End for ``close()``, with every teardown step done by ``deadline`` (anyio clock)."""
        self._close_deadline = min(self._close_deadline, deadline)
        self.end(EndCause.CLOSED, "close() was called")
        if self._step is not None:
            scope, slack = self._step
            scope.deadline = min(scope.deadline, self._deadline(slack))

    def _deadline(self, slack: int) -> float:
        """End of a teardown step: ``slack`` reserves before the end of the window."""
        ended = self._ended_at if self._ended_at is not None else anyio.current_time()
        final = min(ended + self._config.consumer.group.rebalance.timeout, self._close_deadline)
        reserve = min(self._config.net.read_timeout, max(final - ended, 0.0) / 4)
        return final - slack * reserve

    def _scope(self, slack: int) -> anyio.CancelScope:
        scope = anyio.CancelScope(deadline=self._deadline(slack))
        self._step = (scope, slack)
        return scope

    async def run(self, handler: ConsumerGroupHandler) -> EndCause:
        """Run the session to its end, then revoke/lose, cleanup, final commit and release.

        Returns why it ended. Never raises for a handler error (see ``fatal``).
        """
        if self.end_cause is EndCause.CLOSED:
            self.abandon()  # close() won the race with the join: no user code runs
            return EndCause.CLOSED
        assigned = sorted(self._claims)
        try:
            async with anyio.create_task_group() as background:
                if isinstance(self._membership, ConsumerMembership):
                    # The consumer protocol: the coordinator's assignments arrive by
                    # heartbeat (and cover partition-count changes too).
                    from .consumer_heartbeat import ConsumerHeartbeat

                    assert self._subscription is not None
                    self._consumer_heartbeat = ConsumerHeartbeat(
                        self, self._membership, self._subscription, handler
                    )
                    background.start_soon(self._guard, self._consumer_heartbeat.run)
                else:
                    background.start_soon(self._guard, self._heartbeat_loop)
                    background.start_soon(self._guard, self._watch_partitions)
                if self.cooperative:
                    self._handler = handler
                if self.cooperative and self._consumer_heartbeat is None:
                    background.start_soon(self._guard, self._cooperative_loop)
                background.start_soon(self._guard, self.watchdog.run)
                if self._config.consumer.offsets.auto_commit.enable:
                    background.start_soon(self._guard, self._commit_loop)
                try:
                    if await self._user("on_assigned", handler, self, assigned) and (
                        await self._user("setup", handler, self)
                    ):
                        await self._consume(handler)
                finally:
                    self.end(EndCause.CLOSED, "the session task was cancelled")
                    with anyio.CancelScope(shield=True):
                        await self._finish(handler)
                    background.cancel_scope.cancel()
        finally:
            self.abandon()
        assert self.end_cause is not None
        return self.end_cause

    def abandon(self) -> None:
        """Release every claim without user code or commit (teardown after failure)."""
        self._revoke(list(self._claims))

    async def _consume(self, handler: ConsumerGroupHandler) -> None:
        async with anyio.create_task_group() as claims:
            self._claim_group = claims
            if not self._claims or self.done.is_set():
                self._claims_done.set()
            else:
                self._start_claims(handler, list(self._claims.values()))
            await self.done.wait()
            with self._scope(2):
                await self._claims_done.wait()
            if not self._claims_done.is_set():
                self.log.warning(
                    "handlers still running %.1fs after the session ended; cancelling them",
                    anyio.current_time() - (self._ended_at or 0.0),
                )
                claims.cancel_scope.cancel()

    def _start_claims(
        self, handler: ConsumerGroupHandler, claims: Iterable[ConsumerGroupClaim]
    ) -> None:
        """One ``consume_claim`` task per claim, in the session's claims task group."""
        assert self._claim_group is not None
        for claim in claims:
            if self._running_claims == 0 and self._claims_done.is_set():
                self._claims_done = anyio.Event()  # claims run again (cooperative add)
            self._running_claims += 1
            self._claim_group.start_soon(
                self._run_claim, handler, claim, name=f"claim-{claim.topic}-{claim.partition}"
            )

    async def _finish(self, handler: ConsumerGroupHandler) -> None:
        """on_revoked / on_lost, cleanup, final commit, release: each bounded."""
        assigned = sorted(self._claims)
        graceful = self.end_cause is not None and self.end_cause.graceful
        with self._scope(1):
            if graceful:
                await self._user("on_revoked", handler, self, assigned)
            else:
                await self._user("on_lost", handler, assigned)
            await self._user("cleanup", handler, self)
        if graceful:
            with self._scope(0):
                try:
                    await self.offsets.commit()
                except FENCED as exc:
                    self.log.warning(
                        "final commit refused (%s): the partitions moved on; uncommitted "
                        "messages will be read again by their new owner",
                        type(exc).__name__,
                    )
                except ConsumerGroupError as exc:
                    self._report(ConsumerError(f"final commit failed: {exc}", cause=exc))
        self._step = None
        self._revoke(assigned)

    def _revoke(self, partitions: Sequence[TopicPartition]) -> None:
        """Drop claims from the registry and release their offsets (after their commit)."""
        for tp in partitions:
            claim = self._claims.pop(tp, None)
            if claim is not None:
                claim._pc.stop()
        self.offsets.release(partitions)

    async def _user(self, name: str, handler: ConsumerGroupHandler, *args: object) -> bool:
        """Call the handler's hook ``name``, then the group's ``name=`` callable, if any.

        An error in ``on_assigned``/``setup`` ends the session like a handler error;
        later hooks only report theirs. Returns False when the hook raised.
        """
        try:
            await getattr(handler, name)(*args)
            extra = self._hooks.get(name)
            if extra is not None:
                result = extra(*args)
                if inspect.isawaitable(result):
                    await result
        except Exception as exc:
            err = ConsumerError(f"{name} raised {exc!r}", cause=exc)
            if name in ("on_assigned", "setup"):
                self._handler_failed(err, f"{name} raised")
            else:
                self._report(err)
            return False
        return True

    async def _run_claim(self, handler: ConsumerGroupHandler, claim: ConsumerGroupClaim) -> None:
        """Run ``consume_claim`` for one claim until the session ends.

        A handler that returns, or raises with ``return_errors`` on, while the session
        still runs is restarted after a backoff with a fresh claim starting at the
        partition's last marked offset: a partition is never left owned but unread.
        """
        tp = (claim.topic, claim.partition)
        scope = anyio.CancelScope()
        ended = anyio.Event()
        self._claim_tasks[tp] = (scope, ended)
        try:
            with scope:
                await self._claim_loop(handler, claim)
        finally:
            self._running_claims -= 1
            if self._running_claims == 0:
                self._claims_done.set()
            self._claims.get(tp, claim)._pc.stop()
            ended.set()

    async def _claim_loop(self, handler: ConsumerGroupHandler, claim: ConsumerGroupClaim) -> None:
        """The body of :meth:`_run_claim`: handle, and restart while the claim is owned."""
        tp = (claim.topic, claim.partition)
        backoff = Backoff(self._config.consumer.retry.backoff)
        while True:
            marked = self.offsets.marked(*tp)
            try:
                await handler.consume_claim(self, claim)
                what = "returned"
            except Exception as exc:
                err = ConsumerError(
                    "consume_claim raised; its unmarked messages will be read again",
                    topic=claim.topic,
                    partition=claim.partition,
                    cause=exc,
                )
                if not self._config.consumer.return_errors:
                    self.end(EndCause.HANDLER_ERROR, f"handler failed on {tp}", fatal=err)
                    return
                self._report(err)
                what = "raised"
            claim._pc.stop()
            if self.done.is_set() or tp in self._revoking:
                return
            if self.offsets.marked(*tp) != marked:
                backoff.reset()  # it made progress: not a handler failing in a loop
            next_claim = await self._reclaim(claim, what, backoff)
            if next_claim is None:
                return
            claim = next_claim

    async def _reclaim(
        self, claim: ConsumerGroupClaim, what: str, backoff: Backoff
    ) -> ConsumerGroupClaim | None:
        """A new claim on the same partition from its marked offset, after a backoff;
        None when the session ends first."""
        tp = (claim.topic, claim.partition)
        while True:
            delay = backoff.next()
            self.log.warning(
                "consume_claim for %s/%d %s while the session runs; restarting it in %.1fs "
                "from offset %d",
                *tp,
                what,
                delay,
                self.offsets.marked(*tp),
            )
            with anyio.move_on_after(delay):
                await self.done.wait()
            if self.done.is_set() or tp in self._revoking:
                return None
            try:
                pcs = await self._consumer.consume_partitions(
                    {tp: self.offsets.marked(*tp)}, paused=[tp] if claim._pc.paused else ()
                )
            except ConsumerGroupError as exc:
                what = f"could not be restarted ({exc})"
                continue
            pc = pcs[tp]
            if self.done.is_set() or tp in self._revoking:  # ended during the restart
                pc.stop()
                return None
            fresh = ConsumerGroupClaim(pc, pc.next_offset)
            self._claims[tp] = fresh
            return fresh

    def _handler_failed(self, err: ConsumerError, detail: str) -> None:
        """``return_errors``: report, end the session and rejoin; otherwise end run() too."""
        if self._config.consumer.return_errors:
            self._report(err)
            self.end(EndCause.HANDLER_ERROR, detail)
        else:
            self.end(EndCause.HANDLER_ERROR, detail, fatal=err)

    def _report(self, err: ConsumerError) -> None:
        self.log.error("%s", err)
        self._on_error(err)

    # --------------------------------------------------------------- background

    async def _guard(self, task: Callable[[], Awaitable[None]]) -> None:
        """A background task's bug ends the session (and run()) instead of escaping raw."""
        try:
            await task()
        except Exception as exc:
            self.log.exception("internal error in %s", task.__name__)
            self.end(
                EndCause.LOST,
                f"internal error in {task.__name__}",
                fatal=ConsumerGroupError(f"internal error in {task.__name__}: {exc!r}"),
            )

    async def _heartbeat_loop(self) -> None:
        group = self._config.consumer.group
        last_ok = anyio.current_time()
        # Runs until the session's task group is cancelled: while handlers drain and the
        # final commit runs, heartbeats keep the membership alive.
        while True:
            await anyio.sleep(group.heartbeat_interval)
            self._sample_rates(anyio.current_time())
            if self._joining:
                # The JoinGroup/SyncGroup in flight keeps the membership alive meanwhile.
                last_ok = anyio.current_time()
                continue
            try:
                await self._classic.heartbeat()
            except RebalanceInProgressError as exc:
                self._notify("on_heartbeat", exc)
                last_ok = self.last_heartbeat = anyio.current_time()  # alive, told to rejoin
                self._rebalance("the group is rebalancing")
                continue
            except FencedInstanceIdError as exc:
                self._notify("on_heartbeat", exc)
                self.end(EndCause.FENCED, "another member took this group_instance_id", exc)
                return
            except (UnknownMemberIdError, IllegalGenerationError) as exc:
                self._notify("on_heartbeat", exc)
                if isinstance(exc, UnknownMemberIdError):
                    self._membership.reset()
                self.end(EndCause.FENCED, f"{type(exc).__name__}: this generation is over")
                return
            except ConsumerGroupError as exc:
                self._notify("on_heartbeat", exc)
                if not is_transient(exc):
                    self.end(EndCause.LOST, f"heartbeat failed: {exc}", fatal=exc)
                    return
                self._client.invalidate_coordinator(self.group_id)
                if anyio.current_time() - last_ok > group.session_timeout:
                    silent = f"no heartbeat got through for {group.session_timeout}s"
                    self.end(EndCause.LOST, silent)
                    return
                self.log.info("heartbeat failed (%s); retrying", exc)
                await anyio.sleep(self._config.metadata.retry.backoff)
                continue
            self._notify("on_heartbeat", None)
            last_ok = self.last_heartbeat = anyio.current_time()

    def _rebalance(self, detail: str) -> None:
        """The group rebalances: a cooperative member rejoins keeping its claims, an eager
        member ends the session."""
        if self.cooperative:
            if not self._joining:  # the join in flight is the answer to it already
                self._rejoin.set()
        else:
            self.end(EndCause.REBALANCE, detail)

    async def _cooperative_loop(self) -> None:
        """KIP-429: rejoin with the claims running; apply each assignment incrementally."""
        handler = self._handler
        assert handler is not None
        topics = list(self._partition_counts)
        while not self.done.is_set():
            await self._rejoin.wait()
            self._rejoin = anyio.Event()
            if self.done.is_set():
                return
            if self._rebalancing is not None:
                self._rebalancing(True)
            member_id = self._membership.member_id
            owned: dict[str, list[int]] = self.claims
            self._joins += 1
            self._joined = anyio.Event()
            try:
                generation = await self._classic.join(topics, owned)
            except ConsumerGroupError as exc:
                # Whoever owns the partitions now, it is not provably this member.
                fatal = None if is_transient(exc) else exc
                self.end(EndCause.LOST, f"cooperative rejoin failed: {exc}", fatal)
                return
            finally:
                self._joined.set()
            if generation.member_id != member_id:
                self.end(EndCause.FENCED, "the coordinator forgot this member during the rejoin")
                return
            if generation.generation_id == self.generation_id:
                # No rebalance happened: the coordinator answered with the stored assignment
                # (Tansu does this for a static member), so partitions withheld for the
                # second round stay unassigned until the next rebalance.
                self.log.warning(
                    "rejoined without a new generation (%d): the coordinator did not rebalance",
                    self.generation_id,
                )
            await self._apply(handler, generation)
            if self._rebalancing is not None:
                self._rebalancing(False)

    async def _apply(self, handler: ConsumerGroupHandler, generation: Generation) -> None:
        """Move to ``generation``: end the revoked claims, start the added ones."""
        assigned = {(t, p) for t, parts in generation.assignment.items() for p in parts}
        revoked = sorted(set(self._claims) - assigned)
        added = sorted(assigned - set(self._claims))
        self.generation_id = self.offsets.generation_id = generation.generation_id
        self.log.info(
            "generation %d (cooperative): keeps %d, revokes %s, adds %s",
            generation.generation_id,
            len(self._claims) - len(revoked),
            revoked,
            added,
        )
        if revoked:
            await self._revoke_claims(handler, revoked)
        if added and not self.done.is_set():
            await self._add_claims(handler, added)
        await self._user("on_assigned", handler, self, added)
        if revoked:
            self._rejoin.set()  # the second round hands the revoked partitions out

    async def _revoke_claims(
        self, handler: ConsumerGroupHandler, revoked: list[TopicPartition]
    ) -> None:
        """Drain, on_revoked, commit and release just these claims (the others run on)."""
        self._revoking.update(revoked)
        for tp in revoked:
            claim = self._claims.get(tp)
            if claim is not None:
                claim._pc.stop()
        with anyio.move_on_after(self._config.consumer.group.rebalance.timeout):
            for tp in revoked:
                task = self._claim_tasks.get(tp)
                if task is not None:
                    await task[1].wait()
        for tp in revoked:
            task = self._claim_tasks.pop(tp, None)
            if task is not None and not task[1].is_set():
                self.log.warning("handler for %s/%d did not return; cancelling it", *tp)
                task[0].cancel()
        await self._user("on_revoked", handler, self, revoked)
        try:
            await self.commit()  # a stale member epoch: again under the next one
        except ConsumerGroupError as exc:
            self.log.warning(
                "commit before revoking %s failed (%s): their new owners re-read from the "
                "last commit",
                revoked,
                exc,
            )
        self._revoke(revoked)
        self._revoking.difference_update(revoked)

    async def _add_claims(self, handler: ConsumerGroupHandler, added: list[TopicPartition]) -> None:
        """Start fetching and handling newly assigned partitions."""
        assert self._open_claims is not None
        try:
            claims, unknown = await self._open_claims(added)
        except ConsumerGroupError as exc:
            self.end(EndCause.LOST, f"could not start the claims {added}: {exc}")
            return
        if self.done.is_set():
            for claim in claims.values():
                claim._pc.stop()
            self.offsets.release(claims)
            return
        self._claims.update(claims)
        self._start_claims(handler, claims.values())
        if unknown:
            self.rejoin_fresh = True
            self.end(EndCause.PARTITIONS_CHANGED, f"assigned {unknown} are not in metadata yet")

    def _sample_rates(self, now: float) -> None:
        """Per-claim messages/s from position deltas since the previous heartbeat tick."""
        for tp, claim in self._claims.items():
            position = claim._pc.position
            previous = self._rate_sample.get(tp)
            if previous is not None and now > previous[0] and position >= previous[1] >= 0:
                self.rates[tp] = (position - previous[1]) / (now - previous[0])
            self._rate_sample[tp] = (now, position)

    async def _commit_loop(self) -> None:
        interval = self._config.consumer.offsets.auto_commit.interval
        while not self.done.is_set():
            with anyio.move_on_after(interval):
                await self.done.wait()
            if self.done.is_set():
                return  # the final commit follows in _finish()
            try:
                await self._commit()  # one that raced a cooperative rejoin goes again next tick
            except RebalanceInProgressError:
                self._rebalance("a commit found the group rebalancing")
            except FencedInstanceIdError as exc:
                self.end(EndCause.FENCED, "another member took this group_instance_id", exc)
            except FENCED as exc:
                self.end(EndCause.FENCED, f"commit refused: {type(exc).__name__}")
            except ConsumerGroupError as exc:
                self._report(ConsumerError(f"auto-commit failed: {exc}", cause=exc))

    async def _watch_partitions(self) -> None:
        interval = self._config.consumer.group.partition_watch_interval
        while not self.done.is_set():
            with anyio.move_on_after(interval):
                await self.done.wait()
            if self.done.is_set():
                return
            pattern = self._subscription if isinstance(self._subscription, re.Pattern) else None
            try:
                if pattern is not None:
                    matching = await self._client.matching_topics(pattern)
                else:
                    await self._client.refresh_metadata(*self._partition_counts)
            except ConsumerGroupError as exc:
                self.log.info("partition watch could not refresh metadata: %s", exc)
                continue
            if pattern is not None and set(matching) != set(self._partition_counts):
                self.rejoin_fresh = True
                self.end(
                    EndCause.PARTITIONS_CHANGED,
                    f"the topics matching {pattern.pattern!r} are now {matching}",
                )
                return
            for topic, count in self._partition_counts.items():
                now = len(self._client.cached_partitions(topic) or ())
                if now != count:
                    # A coordinator answers a follower that rejoins with unchanged metadata
                    # with the old assignment; leaving first forces the rebalance.
                    self.rejoin_fresh = True
                    self.end(
                        EndCause.PARTITIONS_CHANGED,
                        f"topic {topic!r} now has {now} partitions (was {count})",
                    )
                    return


def _claim_on_stack(stack: Sequence[FrameType]) -> str:
    """Name the claim whose handler holds the loop, from the loop thread's stack."""
    for frame in stack:
        if frame.f_code is ConsumerGroupSession._run_claim.__code__:
            claim = frame.f_locals.get("claim")
            return (
                f"in consume_claim for {claim.topic}/{claim.partition}" if claim else "in a claim"
            )
    return "outside any claim handler"
