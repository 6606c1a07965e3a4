"""ConsumerGroupSession: a member's session, from its first assignment to its end.

The session holds the lifetime: ``done``, why it ended (:class:`EndCause`), the
marking and commit API handed to handlers, and the deadline ``close()`` sets. The
pieces beside it do the work, each owning its own state:

* :class:`~.reconciler.Reconciler` owns the claims: it announces and starts them,
  applies new target assignments, and revokes them (one path, one budget);
* :mod:`.session_tasks`: heartbeats, the auto-commit ticker, the partition watcher and
  rate sampling, one background task each;
* :class:`~.rejoin.CooperativeRejoin` (cooperative members only): rejoins with the
  claims running and hands each assignment to the reconciler;
* the loop watchdog (:mod:`.watchdog`).

An eager member's session is one generation: the reconciler adds everything at the
start and revokes everything at the end. A cooperative member's session spans
generations: ``generation_id`` is the current one, ``claims`` the current claims.

Order of the user's callbacks: ``on_assigned`` → ``setup`` (once) → one
``consume_claim`` task per claim; at a cooperative rebalance ``on_revoked`` (after the
revoked claims' handlers ended) then ``on_assigned`` (the added ones, then their
tasks); at the end the claims drain → ``on_revoked`` (graceful end) or ``on_lost``
(lost / fenced) → ``cleanup`` → final commit (skipped when lost) → release.

Shared state (one event loop; "writer" = who may change it):

* ``done``/``end_cause``/``end_reason``/``fatal``/``_ended_at``: written once, by
  :meth:`end` (anyone may call it; the first cause wins);
* ``generation_id`` and ``offsets.generation_id``: written by :meth:`set_epoch`, called
  by the reconciler under its lock before it applies a new assignment;
* ``rejoin_fresh``: set by whoever ends the session for a partition change;
* ``last_heartbeat`` (when the coordinator last answered): the heartbeat task, and the
  cooperative rejoin when a join completes; ``rates``: the rate sampler;
* the claims: the reconciler only (``session.claims`` is a read-only view).

Each piece gets what it may read and ask, no more: the session itself typed as one of
the small protocols of :mod:`.roles` (its public members), and the explicit objects and
callables its constructor or function names (the config, the client, the observers'
``notify``, the error sink). None of them imports this module.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Awaitable, Callable, Collection
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio

from ..errors import (
    ConfigurationError,
    ConsumerError,
    ConsumerGroupError,
    RebalanceInProgressError,
    StaleMemberEpochError,
    UnknownMemberIdError,
)
from ..retry import REJOIN
from . import session_tasks
from .ending import EndCause
from .logs import GroupLogger
from .reconciler import HookFn, OpenClaims, Reconciler, Runaway, claim_on_stack
from .rejoin import CooperativeRejoin
from .session_tasks import Notify
from .transaction import AbortStreak, GroupTransaction
from .watchdog import LoopWatchdog

if TYPE_CHECKING:
    from typing_extensions import TypeIs

    from ..client import Client
    from ..config import Config
    from ..consumer.consumer import Consumer
    from ..consumer.partition import PartitionConsumer
    from ..message import ConsumerMessage
    from ..producer.metadata import RecordMetadata
    from ..producer.producer import Producer
    from ..producer.transactions import GroupMetadata
    from .consumer_heartbeat import ConsumerHeartbeat
    from .consumer_membership import ConsumerMembership, Subscription
    from .membership import Generation, Membership
    from .offsets import OffsetManager
    from .roles import ClaimHandler

__all__ = ["ConsumerGroupSession", "EndCause", "HookFn"]

_log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


def speaks_kip848(membership: object) -> TypeIs[ConsumerMembership]:
    """``isinstance(membership, ConsumerMembership)`` without importing its module: the
    consumer protocol's membership, heartbeat and codecs (KIP-848) load with the first
    member that speaks it, and until then nothing is one."""
    module = sys.modules.get(f"{__package__}.consumer_membership")
    return module is not None and isinstance(membership, module.ConsumerMembership)


ErrorSink = Callable[[ConsumerError], None]


class ConsumerGroupSession:
    """A member's claims, marks and lifecycle (sarama's ``ConsumerGroupSession``).

    Handed to every handler callback. ``done`` is set when the session is
    ending; ``claims`` maps topic -> claimed partitions; ``end_cause`` (an
    :class:`EndCause`) and ``end_reason`` (its text) say why it ended.
    """

    def __init__(
        self,
        *,
        group_id: str,
        generation: Generation,
        consumers: dict[TopicPartition, PartitionConsumer],
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
        paused: Collection[TopicPartition] = (),
        runaway: Runaway | None = None,
        producer: Producer | None = None,
        abort_streak: AbortStreak | None = None,
    ) -> None:
        self.group_id = group_id
        self.member_id = generation.member_id
        self.generation_id = generation.generation_id
        self.done = anyio.Event()
        # Subscribed topic -> its partition count when the session began.
        self._partition_counts = partition_counts
        self._client = client
        self._membership = membership
        self.offsets = offsets
        # mark_message runs once per consumed message: binding the manager's own method
        # here saves a Python call per message. It shadows the method below, which
        # documents it and does the same.
        self.mark_message = offsets.mark_message  # type: ignore[method-assign]
        self._config = config
        self._on_error = on_error
        self._notify = notify
        self._on_end = on_end
        self.log = GroupLogger(_log, group_id, lambda: self.member_id)
        # Why the session ended (None: still running); a fatal error ends run().
        self.end_cause: EndCause | None = None
        self.end_reason: str | None = None
        self.fatal: BaseException | None = None
        # Set when the next join must start as a new member (see session_tasks).
        self.rejoin_fresh = False
        # Exactly-once (the group was given a transactional producer): the member's
        # transaction, which the commits of `offsets` end.
        self.transaction: GroupTransaction | None = None
        if producer is not None:
            self.transaction = GroupTransaction(
                producer,
                offsets,
                self.group_metadata,
                stop_claims=lambda: self.reconciler.stop_claims(),
                fenced=lambda exc: self.end(
                    EndCause.FENCED, "another producer took this transactional_id", exc
                ),
                log=self.log,
                streak=abort_streak or AbortStreak(config.consumer.retry.backoff),
                report=self._report,
            )
            offsets.transaction = self.transaction.commit
            # One call per record written: the transaction's own send, shadowing the
            # method below (which documents it), saves two coroutines per record.
            self.send = self.transaction.send  # type: ignore[method-assign,assignment]
        self.reconciler = Reconciler(
            self,
            consumers=consumers,
            consumer=consumer,
            offsets=offsets,
            config=config,
            hooks=hooks,
            open_claims=open_claims,
            report=self._report,
            paused=paused,
            runaway=runaway,
            transaction=self.transaction,
        )
        self.cooperative = generation.cooperative
        # Told True when an incremental rebalance starts, False when it is applied.
        self._rebalancing = rebalancing
        # What the member subscribes to (a pattern: the partition watcher also looks for
        # new matching topics).
        self._subscription = subscription
        # The protocol driver that feeds the reconciler new assignments: the cooperative
        # rejoin (classic protocol), or the consumer protocol's heartbeat (KIP-848).
        self._rejoin: CooperativeRejoin | None = None
        self._consumer_heartbeat: ConsumerHeartbeat | None = None
        if speaks_kip848(membership):
            from .consumer_heartbeat import ConsumerHeartbeat

            assert subscription is not None
            self._consumer_heartbeat = ConsumerHeartbeat(
                self,
                membership,
                subscription,
                reconciler=self.reconciler,
                config=config,
                notify=notify,
                rebalancing=rebalancing,
            )
            offsets.next_epoch = self._next_epoch
        elif generation.cooperative:
            self._rejoin = CooperativeRejoin(
                self,
                membership,
                self.reconciler,
                list(partition_counts),
                rebalancing,
                retry=config.consumer.group.rebalance.retry,
                session_timeout=config.consumer.group.session_timeout,
            )
            offsets.next_epoch = self._next_epoch
        # anyio clock: when end() was called (the start of the end's revocation budget).
        self._ended_at: float | None = None
        # Observability: last_heartbeat by the heartbeat task (and a completed cooperative
        # join), rates by the rate sampler.
        self.started_at = anyio.current_time()
        self.last_heartbeat: float | None = None
        self.rates: dict[TopicPartition, float] = {}
        self.watchdog = LoopWatchdog(config.consumer.group.session_timeout / 3, claim_on_stack)

    def __repr__(self) -> str:
        return (
            f"<ConsumerGroupSession {self.group_id} member={self.member_id} "
            f"generation={self.generation_id} claims={self.claims}>"
        )

    @property
    def claims(self) -> dict[str, list[int]]:
        """topic -> sorted partitions this member owns now."""
        out: dict[str, list[int]] = {}
        for topic, partition in sorted(self.reconciler.owned):
            out.setdefault(topic, []).append(partition)
        return out

    def group_metadata(self) -> GroupMetadata:
        """This member as a transaction commits its offsets
        (``producer.send_offsets_to_transaction(offsets, session.group_metadata())``): the
        group, member id, generation (the member epoch on the consumer protocol) and
        instance id, so the coordinator fences a zombie member (KIP-447)."""
        from ..producer.transactions import GroupMetadata  # the producer loads on use

        return GroupMetadata(
            self.group_id,
            self.generation_id,
            self.member_id,
            self._membership.instance_id,
        )

    @property
    def rebalancing(self) -> bool:
        """A cooperative rebalance is requested, being joined or being applied."""
        return self._rejoin is not None and self._rejoin.active

    @property
    def _joining(self) -> bool:
        """A cooperative JoinGroup/SyncGroup is in flight (heartbeats pause meanwhile)."""
        return self._rejoin is not None and self._rejoin.joining

    async def send(
        self, topic: str, value: bytes | None, **kwargs: Any
    ) -> asyncio.Future[RecordMetadata]:
        """Write a record inside the member's transaction (exactly-once: the group was
        given ``producer=``): it becomes visible to ``read_committed`` readers together
        with the offsets marked in the same transaction, or never. Takes
        :meth:`Producer.send`'s arguments (``key``, ``partition``, ``headers``,
        ``timestamp_ms``) and returns its future. Call it from ``consume_claim``, between
        taking a record and marking it."""
        if self.transaction is None:
            raise ConfigurationError(
                "session.send() writes inside the member's transaction: pass a "
                "transactional producer, cg.ConsumerGroup(addrs, group, config, "
                "producer=producer)"
            )
        return await self.transaction.send(topic, value, **kwargs)

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

        During a cooperative rejoin it waits for the join to end and commits under the
        new generation (a commit sent meanwhile would only delay the join). Once the
        session is ending, a commit that raced a rejoin is left to the final commit.
        """
        rejoin = self._rejoin
        while True:
            if rejoin is None:
                if await self._commit() or self.done.is_set():
                    return
                continue
            await rejoin.joined.wait()
            rejoined = rejoin.rejoined
            if await self._commit() or self.done.is_set():
                return
            await rejoined.wait()  # the group moved on: commit after the next rejoin

    async def _commit(self) -> bool:
        """Commit the marks; False when the commit raced a cooperative rebalance.

        A cooperative member's commit answered ILLEGAL_GENERATION or REBALANCE_IN_PROGRESS
        only says that the group moved on (a member joining bumps the generation before
        the others hear of the rebalance): the marks stay and go out with the first commit
        after the rejoin, under the new generation and only for the partitions still
        owned; whether the member was fenced, the heartbeat and the rejoin tell.
        UNKNOWN_MEMBER_ID is fencing, unless the commit was sent while a rejoin was pending
        or answered after one (or after the session's end abandoned one): it carried a
        generation the coordinator may already have replaced. Other answers raise.
        """
        rejoin = self._rejoin
        if rejoin is None:
            try:
                await self.offsets.commit()
            except StaleMemberEpochError:
                # The coordinator moved the member to a newer epoch than this commit
                # carried: the marks of partitions still owned go again under the epoch the
                # next heartbeat brings (those of revoked partitions were released with them).
                if not await self._next_epoch():
                    raise
                return False
            return True
        joins, pending = rejoin.joins, rejoin.pending
        try:
            await self.offsets.commit()
        except REJOIN as exc:
            raced = pending or joins != rejoin.joins or rejoin.abandoned
            if not raced and isinstance(exc, UnknownMemberIdError):
                raise
            if isinstance(exc, RebalanceInProgressError):
                rejoin.request()
            self.log.info(
                "commit answered %s during a rebalance; its marks go out after the rejoin",
                type(exc).__name__,
            )
            return False
        return True

    # ------------------------------------------------------------------ lifecycle

    def end(self, cause: EndCause, detail: str = "", fatal: BaseException | None = None) -> None:
        """Start ending the session (idempotent): set ``done``, end every claim's stream
        and stop waiting for a cooperative rejoin (a join in flight goes on after a
        graceful end: the final commit may need the generation it forms)."""
        if fatal is not None and self.fatal is None:
            self.fatal = fatal
        if self.done.is_set():
            return
        self.end_cause = cause
        self.end_reason = f"{cause.value}: {detail}" if detail else cause.value
        self._ended_at = anyio.current_time()
        self.log.info("generation %d: session ending (%s)", self.generation_id, self.end_reason)
        self.done.set()
        self.reconciler.stop_all()
        if self._rejoin is not None:
            self._rejoin.cancel(graceful=cause.graceful)
        self._on_end(cause)

    def rebalance(self, detail: str) -> None:
        """The group rebalances: a cooperative member rejoins keeping its claims, an eager
        member ends the session."""
        if self._rejoin is not None:
            self._rejoin.request()
        else:
            self.end(EndCause.REBALANCE, detail)

    def close_by(self, deadline: float) -> None:
        """End for ``close()``, with every teardown step done by ``deadline`` (anyio clock)."""
        self.reconciler.shorten(deadline)
        self.end(EndCause.CLOSED, "close() was called")

    async def run(self, handler: ClaimHandler) -> EndCause:
        """Run the session to its end, then revoke/lose, cleanup, final commit and release.

        Returns why it ended. Never raises for a handler error (see ``fatal``).
        """
        if self.end_cause is EndCause.CLOSED:
            self.abandon()  # close() won the race with the join: no user code runs
            return EndCause.CLOSED
        try:
            async with anyio.create_task_group() as background:
                # Heartbeats first, before any user code (as sarama does).
                tasks = self._tasks()
                if self._rejoin is not None:
                    tasks.append(("cooperative rejoin", self._rejoin.run))
                for name, task in tasks:
                    background.start_soon(self._guard, name, task)
                async with anyio.create_task_group() as claims:
                    self.reconciler.bind(claims, handler)
                    try:
                        await self.reconciler.start()
                        await self.done.wait()
                    finally:
                        self.end(EndCause.CLOSED, "the session task was cancelled")
                        assert self.end_cause is not None and self._ended_at is not None
                        with anyio.CancelScope(shield=True):
                            await self.reconciler.finish(
                                graceful=self.end_cause.graceful, started=self._ended_at
                            )
                            if self.transaction is not None:
                                await self._close_transaction()
                background.cancel_scope.cancel()
        finally:
            self.abandon()
        assert self.end_cause is not None
        return self.end_cause

    def abandon(self) -> None:
        """Release every claim without user code or commit (teardown after failure)."""
        self.reconciler.abandon()

    def _tasks(self) -> list[tuple[str, Callable[[], Awaitable[None]]]]:
        """The background tasks but the cooperative rejoin, heartbeats first (as sarama
        does), each given what it may use."""
        config, tasks = self._config, session_tasks
        beats: Callable[[], Awaitable[None]]
        if self._consumer_heartbeat is not None:
            # The consumer protocol: the coordinator's assignments arrive by heartbeat
            # (and cover partition-count changes too).
            beats = self._consumer_heartbeat.run
        else:
            membership = self._membership
            assert not speaks_kip848(membership)
            beats = partial(
                tasks.heartbeat_loop,
                self,
                membership,
                self._client,
                config,
                self._notify,
                lambda: self._joining,
            )
        out: list[tuple[str, Callable[[], Awaitable[None]]]] = [
            ("heartbeat", beats),
            ("rate sampler", partial(tasks.sample_rates, self.rates, self.reconciler, config)),
            ("watchdog", self.watchdog.run),
        ]
        if self._consumer_heartbeat is None:
            watch = partial(
                tasks.watch_partitions,
                self,
                self._client,
                config,
                self._partition_counts,
                self._subscription,
            )
            out.append(("partition watcher", watch))
        if config.consumer.offsets.auto_commit.enable:
            ticks = partial(
                tasks.auto_commit_loop,
                self,
                config,
                self._commit,
                lambda: self.rebalancing,
                self._report,
            )
            out.append(("auto-commit", ticks))
        return out

    # ------------------------------------------------------------------ for the pieces

    def set_epoch(self, generation_id: int) -> None:
        """A new generation (or KIP-848 member epoch): what the session reports and commits
        carry from now on."""
        self.generation_id = self.offsets.generation_id = generation_id

    async def _next_epoch(self, *, final: bool = False) -> bool:
        """The group moved the member on while an offset request was on its way; True once
        the session carries the newer generation, False when there is none to wait for.

        The consumer protocol (STALE_MEMBER_EPOCH): the next heartbeat's epoch (not while
        ending, except for the ``final`` commit, which the heartbeat outlives, within the
        end's budget). A cooperative member (the ``final`` commit refused as the session
        ended with a join in flight): the generation the coordinator formed from that
        join, once its answer is in."""
        if self._rejoin is not None:
            formed = await self._rejoin.formed_at_end() if final else None
            if formed is None or formed == self.generation_id:
                return False
            self.log.info("the final commit goes again under generation %d", formed)
            self.set_epoch(formed)
            return True
        if self._consumer_heartbeat is None or (self.done.is_set() and not final):
            return False
        self.log.info("an offset request carried a stale member epoch; sending it again")
        return await self._consumer_heartbeat.next_epoch(ending=final)

    async def _close_transaction(self) -> None:
        """Abort a transaction the session's end left open (its partitions were lost, or
        the final commit failed); a failure is reported (the coordinator aborts it on
        ``producer.transaction_timeout``)."""
        assert self.transaction is not None
        try:
            await self.transaction.close()
        except ConsumerGroupError as exc:
            self._report(ConsumerError(f"could not abort the transaction: {exc}", cause=exc))

    def _report(self, err: ConsumerError) -> None:
        """An error for the log and ``errors()`` (the pieces get this as their sink)."""
        self.log.error("%s", err)
        self._on_error(err)

    async def _guard(self, name: str, task: Callable[[], Awaitable[None]]) -> None:
        """A background task's bug ends the session (and run()) instead of escaping raw."""
        try:
            await task()
        except Exception as exc:
            self.log.exception("internal error in the %s task", name)
            self.end(
                EndCause.INTERNAL_ERROR,
                f"internal error in the {name} task",
                fatal=ConsumerGroupError(f"internal error in the {name} task: {exc!r}"),
            )
