"""ConsumerGroup: the user's entry point (sarama's ``consumer_group.go``).

All of a member's control flow is ONE rebalance loop (:meth:`ConsumerGroup._loop`,
franz-go's ``manage()`` is the model)::

    JOINING  --session ready-->  STABLE  --session ends-->  REBALANCING --+
       ^  |                                                               |
       |  +--transient error--> REBALANCING (backoff, jittered, capped) --+
       +------------------------------------------------------------------+
    any state --close()--> CLOSING --> CLOSED      non-retriable error --> FAILED

``_state`` is written only by :meth:`_set_state`, and the loop re-checks
``_closing`` after every await that can race :meth:`close`. Session setup is one
async factory (:meth:`_open_session`) that releases what it took if it fails or
is cancelled. Which errors are retried is decided in one place,
:func:`consumergroup.retry.is_transient`.

Owns, for its whole life: the :class:`~consumergroup.client.Client`, the fetch
:class:`~consumergroup.consumer.Consumer` and the :class:`~.membership.Membership`
(the member id survives sessions). Each session has its own
:class:`~.offsets.OffsetManager`.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import copy
import functools
import inspect
import logging
import math
import re
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import TYPE_CHECKING

import anyio

from .._lifecycle import AsyncResource
from .._lifecycle import single_error as _single_error
from ..client import Client
from ..config import Config
from ..consumer.consumer import Consumer
from ..consumer.partition import PartitionConsumer
from ..errors import (
    ClosedError,
    ConfigurationError,
    ConsumerError,
    ConsumerGroupError,
    UnknownTopicOrPartitionError,
)
from ..retry import COORDINATOR_LOST, Backoff, is_transient
from .handler import ConsumerGroupHandler
from .logs import GroupLogger
from .membership import Membership
from .offsets import OffsetManager
from .session import ConsumerGroupSession, EndCause, HookFn, speaks_kip848
from .state import GroupObserver, GroupState
from .transaction import AbortStreak

if TYPE_CHECKING:
    from ..producer.producer import Producer
    from .consumer_membership import ConsumerMembership, Subscription
    from .stats import GroupStats

_log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]

#: Seconds between the warnings of a member waiting for a subscribed topic to exist.
MISSING_TOPIC_WARN_INTERVAL = 60.0

#: Bound on how many errors errors() buffers; beyond it the oldest are dropped (counted).
_ERROR_BUFFER = 1024

#: The group whose rebalance loop runs the current task (handlers, hooks, their tasks).
_INSIDE: contextvars.ContextVar[ConsumerGroup | None] = contextvars.ContextVar(
    "consumergroup_inside_loop", default=None
)


class ConsumerGroup(AsyncResource):
    """A member of a Kafka consumer group.

    ``async with ConsumerGroup(addrs, "group", config) as group:
    await group.run(["topic"], handler)``.

    ``addrs``: the bootstrap brokers, as a list of ``"host:port"`` strings, one
    comma-separated string (``"h1:9092,h2:9092"``) or a list holding such strings.

    ``on_assigned(session, partitions)``, ``on_revoked(session, partitions)`` and
    ``on_lost(partitions)`` (sync or async callables) are called after the
    handler's methods of the same name; see :class:`ConsumerGroupHandler` for when.

    ``producer`` (a started :class:`~consumergroup.Producer` with
    ``producer.transactional_id``, unique to this member; the caller owns and closes it):
    exactly-once. Handlers write with ``session.send()``; the runtime commits their
    output and the marked offsets in one transaction per commit point, and input is
    read ``read_committed``. See the guide, ``docs/guides/exactly-once.md``.
    """

    def __init__(
        self,
        addrs: str | Sequence[str],
        group_id: str,
        config: Config | None = None,
        *,
        on_assigned: HookFn | None = None,
        on_revoked: HookFn | None = None,
        on_lost: HookFn | None = None,
        producer: Producer | None = None,
    ) -> None:
        if not isinstance(group_id, str) or not group_id:
            raise ConfigurationError("group_id must be a non-empty string")
        hooks = {"on_assigned": on_assigned, "on_revoked": on_revoked, "on_lost": on_lost}
        for name, fn in hooks.items():
            if fn is not None and not callable(fn):
                raise ConfigurationError(f"{name} must be a callable (sync or async), not {fn!r}")
        self._hooks: dict[str, HookFn] = {k: v for k, v in hooks.items() if v is not None}
        self.config = config or Config()
        self.config.validate()
        # Exactly-once: the member's transactions go through this producer (the user's).
        self._producer = producer
        # Exactly-once: the transaction's aborts since its last commit, across sessions.
        self._abort_streak: AbortStreak | None = None
        if producer is not None:
            self.config = _exactly_once_config(self.config, producer)
            self._abort_streak = AbortStreak(self.config.consumer.retry.backoff)
        self.group_id = group_id
        self._client = Client(addrs, self.config)
        self._consumer = Consumer(client=self._client)
        self._membership: Membership | ConsumerMembership
        if self.config.consumer.group.protocol == "consumer":
            # The consumer protocol's membership, heartbeat and codecs (KIP-848) load with
            # the first member that speaks it (~3 M instructions a classic member skips).
            from .consumer_membership import ConsumerMembership

            self._membership = ConsumerMembership(self._client, group_id, self.config)
        else:
            self._membership = Membership(self._client, group_id, self.config)
        self.log = GroupLogger(_log, group_id, lambda: self._membership.member_id)
        # --- event-loop state ---
        # Partitions the user paused: the one owner of every claim's paused flag. Written
        # only by pause()/resume()/resume_all() (in place: consume_partitions() and claim
        # restarts hold this very set across their awaits); each new PartitionConsumer of a
        # claim reads it the moment it is created, and those calls reach the one open now.
        self._paused: set[TopicPartition] = set()
        self._session: ConsumerGroupSession | None = None
        # Held while the rebalance loop runs, so two consume()/run() never overlap.
        # close() never takes it (it may be called from inside the loop).
        self._loop_lock = asyncio.Lock()
        self._loop_idle = asyncio.Event()
        self._loop_idle.set()
        # Cancelled by close(): the loop's whole body, and the join/backoff phase alone.
        self._loop_scope: anyio.CancelScope | None = None
        self._join_scope: anyio.CancelScope | None = None
        # consume_claim tasks that ignored their cancellation and were abandoned, kept
        # (asyncio holds tasks weakly) until they end: added by the session's reconciler,
        # removed by their own end. Counted in stats(); /health/live fails meanwhile.
        self._runaways: set[asyncio.Task[None]] = set()
        self._errors: collections.deque[ConsumerError] = collections.deque()
        self._errors_ready = asyncio.Event()
        self._errors_dropped = 0
        self._started = False
        self._closing = False
        self._close_deadline = math.inf
        self._leave_on_close = True  # decided by close(), see its leave_group
        self._closed = False
        self._closed_event = asyncio.Event()
        self._shutting_down = False
        # The one state variable (see .state); only _set_state() writes it.
        self._state = GroupState.STARTING
        self._rebalances = 0
        self._error: str | None = None
        self._commit_failures = 0
        # anyio clock: when the last session ended (or the first join began).
        self._rebalance_started: float | None = None
        self._last_rebalance: float | None = None
        # Event receivers (metrics); called synchronously on the loop, see GroupObserver.
        self._observers: list[GroupObserver] = []
        self._consumer.on_fetch = lambda *fetched: self._notify("on_fetch", *fetched)
        # A claim's partition that reads on after an error (a record over
        # consumer.fetch.max_record_bytes skipped): to errors(), the consumer logged it.
        self._consumer.on_error = self._push_error

    def __repr__(self) -> str:
        return f"<ConsumerGroup {self.group_id} member={self._membership.member_id!r}>"

    @property
    def member_id(self) -> str:
        """This member's id in the current (or last) generation; "" before the first join."""
        return self._membership.member_id

    @property
    def state(self) -> GroupState:
        """Where the member is: STARTING, JOINING, STABLE, REBALANCING, CLOSING, CLOSED, FAILED."""
        return self._state

    def add_observer(self, observer: GroupObserver) -> None:
        """Send this member's events (state changes, rebalances, commits, ...) to ``observer``."""
        self._observers.append(observer)

    def _notify(self, event: str, *args: object) -> None:
        for obs in self._observers:
            try:
                getattr(obs, event)(self.group_id, *args)
            except Exception:
                self.log.exception("observer %r failed in %s", obs, event)

    def _set_state(self, state: GroupState) -> None:
        if self._state in (GroupState.CLOSED, GroupState.FAILED):
            return
        if self._state is GroupState.CLOSING and state is not GroupState.CLOSED:
            return
        if state is not self._state:
            old, self._state = self._state, state
            self.log.debug("%s -> %s", old.name, state.name)
            self._notify("on_state", old, state)

    def stats(self) -> GroupStats:
        """A snapshot of this member (no broker round trip: cheap enough for every probe)."""
        from .stats import GroupStats, PartitionStats  # the first call loads them

        partitions: dict[TopicPartition, PartitionStats] = {}
        session = self._session
        streak = self._abort_streak
        heartbeat_age: float | None = None
        loop_lag = 0.0
        # read_committed reads up to the last stable offset only: an open transaction's
        # records between it and the high watermark are not lag (Java measures the same).
        read_committed = self.config.consumer.isolation_level == "read_committed"
        if session is not None:
            now = anyio.current_time()
            heartbeat_age = now - (session.last_heartbeat or session.started_at)
            loop_lag = session.watchdog.lag
            for tp, pc in session.reconciler.owned.items():
                position = pc.position
                hwm = pc.high_water_mark_offset
                end = (
                    pc.last_stable_offset if read_committed and pc.last_stable_offset >= 0 else hwm
                )
                partitions[tp] = PartitionStats(
                    position=position,
                    committed=session.offsets.committed(*tp),
                    high_water_mark=hwm,
                    lag=max(end - position, 0) if end >= 0 and position >= 0 else 0,
                    paused=pc.paused,
                    messages_per_second=session.rates.get(tp, 0.0),
                    records_consumed=pc.consumed.records,
                    bytes_consumed=pc.consumed.bytes,
                )
        return GroupStats(
            group_id=self.group_id,
            state=self._state,
            member_id=self._membership.member_id,
            generation_id=session.generation_id if session is not None else -1,
            protocol=self._membership.protocol,
            member_epoch=(
                self._membership.member_epoch
                if speaks_kip848(self._membership)
                else session.generation_id
                if session is not None
                else -1
            ),
            rebalances=self._rebalances,
            partitions=partitions,
            last_heartbeat_age=heartbeat_age,
            last_rebalance_duration=self._last_rebalance,
            commit_failures=self._commit_failures,
            loop_lag=loop_lag,
            errors_dropped=self._errors_dropped,
            runaway_handlers=len(self._runaways),
            error=self._error if streak is None or not streak.stalled else streak.reason,
            transaction_aborts=streak.count if streak is not None else 0,
        )

    @property
    def session(self) -> ConsumerGroupSession | None:
        """The running session, if any."""
        return self._session

    async def start(self) -> None:
        """Connect to the cluster (``consume``/``run`` call this when needed)."""
        if self._closing:
            raise ClosedError(f"consumer group {self.group_id!r} is closed")
        if not self._started:
            await self._client.start()
            self._started = True

    # ------------------------------------------------------------------ sessions

    async def run(self, topics: Subscription, handler: ConsumerGroupHandler) -> None:
        """Consume session after session until :meth:`close` (or a non-retriable error).

        ``topics``: topic names, or a compiled pattern (``re.compile("orders-.*")``)
        that subscribes to every topic whose whole name matches it, now and later: the
        classic protocol matches it against the cluster's metadata (as Java's client
        does), the consumer protocol sends it to the broker, which resolves it.

        Transient errors (broker restarts, network faults, coordinator moves) never
        end it: each goes to the log and to :meth:`errors`, the state is REBALANCING
        while it backs off (exponentially, with jitter, capped), and it joins again.
        It raises — state FAILED, the reason in ``stats().error`` — only for errors
        retrying cannot cure: authorization, invalid configuration, a fenced static
        member, a handler error when ``return_errors`` is off (and a subscribed topic
        that does not exist under ``consumer.group.missing_topic = "fail"``; by default
        it is waited for, in JOINING). Returns when :meth:`close` is called.
        """
        await self._loop(topics, handler, once=False)

    async def consume(self, topics: Subscription, handler: ConsumerGroupHandler) -> None:
        """Join the group and run one session until it ends (sarama's ``Consume``).

        Transient errors while joining are retried as in :meth:`run`. Returns when
        the session ends (call it again, or use :meth:`run`); raises what
        :meth:`run` raises, and :class:`~consumergroup.ClosedError` after :meth:`close`.
        """
        await self._loop(topics, handler, once=True)

    def _check_handler(self, handler: ConsumerGroupHandler) -> None:
        if not isinstance(handler, ConsumerGroupHandler):
            raise ConfigurationError(
                "handler must be a consumergroup.ConsumerGroupHandler (subclass it and define "
                "async def consume_claim(self, session, claim))"
            )
        for name in ("consume_claim", "setup", "cleanup", "on_assigned", "on_revoked", "on_lost"):
            method = getattr(handler, name)
            if not inspect.iscoroutinefunction(method):
                raise ConfigurationError(
                    f"{type(handler).__name__}.{name} must be a coroutine function: write "
                    f"'async def {name}(...)' (a plain 'def' cannot be awaited)"
                )

    def _check_topics(self, topics: Subscription) -> list[str] | re.Pattern[str]:
        if isinstance(topics, re.Pattern):
            if not isinstance(topics.pattern, str) or not topics.pattern:
                raise ConfigurationError(
                    'a topic pattern must be a non-empty str pattern, e.g. re.compile("orders-.*")'
                )
            return topics
        if isinstance(topics, str):
            topics = [topics]
        if not topics or not all(isinstance(t, str) and t for t in topics):
            raise ConfigurationError("topics must be a non-empty list of topic names")
        return sorted(set(topics))

    async def _loop(
        self, topics: Subscription, handler: ConsumerGroupHandler, *, once: bool
    ) -> None:
        """The rebalance loop: join -> session -> end -> (backoff) -> join ...; see the module."""
        wanted = self._check_topics(topics)
        self._check_handler(handler)
        if self._closing:
            raise ClosedError(f"consumer group {self.group_id!r} is closed")
        async with self._loop_lock:
            if self._closing:
                raise ClosedError(f"consumer group {self.group_id!r} is closed")
            token = _INSIDE.set(self)
            self._loop_idle.clear()
            try:
                with anyio.CancelScope() as self._loop_scope:
                    await self._rebalance_loop(wanted, handler, once)
            except BaseExceptionGroup as group:
                err = _single_error(group)
                raise err from err.__cause__
            finally:
                self._loop_scope = None
                self._session = None
                _INSIDE.reset(token)
                self._loop_idle.set()
                if self._closing:  # close() came from inside, or gave up waiting: finish it
                    with anyio.CancelScope(shield=True):
                        await self._shutdown()

    async def _rebalance_loop(
        self, topics: list[str] | re.Pattern[str], handler: ConsumerGroupHandler, once: bool
    ) -> None:
        backoff = Backoff(self.config.consumer.group.rebalance.retry.backoff)
        if self._rebalance_started is None:
            self._rebalance_started = anyio.current_time()
        while not self._closing:
            self._set_state(GroupState.JOINING)
            session: ConsumerGroupSession | None = None
            with anyio.CancelScope() as self._join_scope:
                try:
                    session = await self._open_session(topics)
                except Exception as exc:
                    if self._closing:
                        break
                    if not is_transient(exc):
                        self._fail(exc)
                        raise
                    if isinstance(exc, COORDINATOR_LOST):
                        self._client.invalidate_coordinator(self.group_id)
                    delay = backoff.next()
                    self._transient(exc, f"joining failed; joining again in {delay:.1f}s")
                    self._set_state(GroupState.REBALANCING)
                    await anyio.sleep(delay)
            self._join_scope = None
            if session is None:
                continue  # retried after backoff, or close() cancelled the join
            if self._closing:  # close() raced the end of the join: no handler runs
                session.abandon()
                break
            backoff.reset()
            cause = await self._run_session(session, handler)
            if cause is EndCause.FENCED and speaks_kip848(self._membership):
                self._membership.reset()  # fenced by a commit: join again with epoch 0
            if once or self._closing:
                return
            with anyio.CancelScope() as self._join_scope:
                if session.rejoin_fresh:
                    await self._leave(anyio.current_time() + self.config.net.read_timeout)
                if cause in (EndCause.HANDLER_ERROR, EndCause.LOST, EndCause.START_FAILED):
                    # Do not spin: a setup that keeps failing, or a coordinator that cannot
                    # be reached, gets the same backoff as a failed join.
                    await anyio.sleep(backoff.next())
            self._join_scope = None

    async def _run_session(
        self, session: ConsumerGroupSession, handler: ConsumerGroupHandler
    ) -> EndCause:
        """STABLE for the session's life, then REBALANCING; raises its fatal error."""
        self._session = session
        self._error = None  # joined: the last transient error is over
        self._set_state(GroupState.STABLE)
        if self._rebalance_started is not None:
            self._last_rebalance = anyio.current_time() - self._rebalance_started
            self._notify("on_rebalance", self._last_rebalance)
        try:
            cause = await session.run(handler)
        finally:
            self._session = None
            self._rebalances += 1
            self._rebalance_started = anyio.current_time()
            self._set_state(GroupState.REBALANCING)
        self.log.info("session ended: %s", session.end_reason)
        if session.fatal is not None:
            self._fail(session.fatal)
            raise session.fatal
        return cause

    def _fail(self, exc: BaseException) -> None:
        """A non-retriable error ends the member: FAILED, with the reason in stats()."""
        if not self._closing:
            self._error = str(exc) or type(exc).__name__
            self.log.error("giving up: %s", self._error)
            self._set_state(GroupState.FAILED)

    def _transient(self, exc: Exception, what: str) -> None:
        """A retried error: to the log, ``errors()`` and ``stats().error``."""
        self._error = str(exc) or type(exc).__name__
        self.log.warning("%s: %s", what, self._error)
        cause = exc if isinstance(exc, ConsumerGroupError) else None
        self._push_error(ConsumerError(what, cause=cause or ConsumerGroupError(repr(exc))))

    async def _open_session(
        self, subscription: list[str] | re.Pattern[str]
    ) -> ConsumerGroupSession:
        """Session setup as one factory: join, offsets, partition consumers, session.

        On failure or cancellation it releases every PartitionConsumer it registered,
        so the next attempt never finds a partition "already being consumed".
        """
        await self.start()
        if isinstance(subscription, re.Pattern):
            topics = await self._client.matching_topics(subscription)
        else:
            topics = subscription
            await self._await_topics(topics)
        counts = {t: len(self._client.cached_partitions(t) or ()) for t in topics}
        if speaks_kip848(self._membership):
            generation = await self._membership.join(subscription, owned={})
        else:
            generation = await self._membership.join(topics, owned={})
        if self._closing:
            raise ClosedError("close() was called during the join")
        assigned = [(t, p) for t, parts in generation.assignment.items() for p in parts]
        self.log.info("generation %d: claims %s", generation.generation_id, generation.assignment)
        offsets = OffsetManager(
            self._client,
            self.group_id,
            self.config,
            member_id=generation.member_id,
            generation_id=generation.generation_id,
            instance_id=self._membership.instance_id,
            on_commit=self._on_commit,
            member_fetch=speaks_kip848(self._membership),
        )
        consumers, unknown = await self._open_claims(offsets, topics, assigned)
        session = ConsumerGroupSession(
            group_id=self.group_id,
            generation=generation,
            consumers=consumers,
            partition_counts=counts,
            client=self._client,
            consumer=self._consumer,
            membership=self._membership,
            offsets=offsets,
            config=self.config,
            on_error=self._push_error,
            notify=self._notify,
            hooks=self._hooks,
            on_end=lambda cause: self._set_state(GroupState.REBALANCING),
            open_claims=functools.partial(self._open_claims, offsets, topics),
            paused=self._paused,
            runaway=self._adopt_runaway,
            rebalancing=self._cooperative_rebalance,
            subscription=subscription,
            producer=self._producer,
            abort_streak=self._abort_streak,
        )
        if unknown:
            session.end(
                EndCause.PARTITIONS_CHANGED,
                f"assigned partitions {unknown} are not in this member's metadata yet",
            )
        return session

    async def _await_topics(self, topics: list[str]) -> None:
        """Return once every subscribed topic exists; until then, per
        ``consumer.group.missing_topic``: wait (what is missing in ``stats().error``, a
        warning every minute) or raise UnknownTopicOrPartitionError, not retried."""
        group = self.config.consumer.group
        warned: float | None = None
        while True:
            missing: list[str] = []
            for topic in topics:
                try:
                    await self._client.partitions(topic, refresh=True)
                except UnknownTopicOrPartitionError as exc:
                    if group.missing_topic == "fail":
                        exc.retriable = False
                        raise
                    missing.append(topic)
            if not missing:
                if warned is not None:
                    self.log.info("subscribed topics %s exist now: joining", topics)
                return
            names = ", ".join(map(repr, missing))
            self._error = (
                f"subscribed topic {names} does not exist: waiting for it to be created"
                if len(missing) == 1
                else f"subscribed topics {names} do not exist: waiting for them to be created"
            ) + " (consumer.group.missing_topic = 'wait')"
            now = anyio.current_time()
            if warned is None or now - warned >= MISSING_TOPIC_WARN_INTERVAL:
                warned = now
                self.log.warning("%s", self._error)
            await anyio.sleep(group.rebalance.retry.backoff)

    async def _open_claims(
        self, offsets: OffsetManager, topics: list[str], assigned: list[TopicPartition]
    ) -> tuple[dict[TopicPartition, PartitionConsumer], list[TopicPartition]]:
        """Partition consumers for the claims on ``assigned``, from their committed offsets
        (``offsets.initial`` where none), each registered with ``offsets`` at its resolved
        start; also the partitions left out because this member's metadata does not show
        them yet."""
        fetched = await offsets.fetch_committed_epochs(assigned)
        committed = {tp: (offset, metadata) for tp, (offset, metadata, _) in fetched.items()}
        initial = self.config.consumer.offsets.initial
        wanted = {
            tp: committed[tp][0] if committed.get(tp, (-1, ""))[0] >= 0 else initial
            for tp in assigned
        }
        # KIP-320: a committed offset's leader epoch has its first fetch check the log
        # was not truncated below it meanwhile (an unclean leader election).
        epochs = {tp: fetched[tp][2] for tp in wanted if tp in fetched}

        # The leader may have seen newer metadata than this member: catch up, and leave
        # out (then rejoin for) any partition this member still cannot see.
        def unseen() -> list[TopicPartition]:
            return [t for t in wanted if t[1] not in (self._client.cached_partitions(t[0]) or ())]

        unknown = unseen()
        if unknown:
            await self._client.refresh_metadata(*topics)
            unknown = unseen()
            for tp in unknown:
                del wanted[tp]
        try:
            pcs = await self._consumer.consume_partitions(
                wanted, paused=self._paused, epochs=epochs
            )
        except BaseException:
            for pc in self._consumer.consuming():
                if (pc.topic, pc.partition) in wanted:
                    pc.stop()
            raise
        # Each claim starts (and first marks) where its partition was resolved to start,
        # not at its fetch position: routing the others may have waited (a leaderless
        # partition) while this one was fetched, and a first mark past what the handler
        # saw would skip records.
        offsets.assign(
            committed,
            {tp: pc.start_offset for tp, pc in pcs.items()},
            {tp: pc.leader_epoch_of for tp, pc in pcs.items()},
        )
        return pcs, unknown

    def _adopt_runaway(self, task: asyncio.Task[None]) -> None:
        """Keep an abandoned handler's task until it ends (it cannot be killed)."""
        self._runaways.add(task)
        task.add_done_callback(self._runaway_ended)

    def _runaway_ended(self, task: asyncio.Task[None]) -> None:
        self._runaways.discard(task)
        error = None if task.cancelled() else task.exception()
        self.log.warning("an abandoned consume_claim ended at last (%r)", error)

    def _cooperative_rebalance(self, started: bool) -> None:
        """A cooperative session rejoins (REBALANCING) or applied the new generation (STABLE);
        its claims run throughout."""
        if started:
            self._rebalance_started = anyio.current_time()
            self._set_state(GroupState.REBALANCING)
            return
        self._rebalances += 1
        self._set_state(GroupState.STABLE)
        if self._rebalance_started is not None:
            self._last_rebalance = anyio.current_time() - self._rebalance_started
            self._notify("on_rebalance", self._last_rebalance)

    def _on_commit(self, latency: float, error: BaseException | None) -> None:
        if error is not None:
            self._commit_failures += 1
        self._notify("on_commit", latency, error)

    # ------------------------------------------------------------------ errors

    def _push_error(self, err: ConsumerError) -> None:
        if not self.config.consumer.return_errors:
            return
        if len(self._errors) >= _ERROR_BUFFER:
            self._errors.popleft()  # bounded: the oldest error goes, counted and logged
            self._errors_dropped += 1
            if self._errors_dropped & (self._errors_dropped - 1) == 0:  # 1, 2, 4, 8, ...
                self.log.warning(
                    "errors() is not read fast enough: %d errors dropped so far "
                    "(buffer %d; see stats().errors_dropped)",
                    self._errors_dropped,
                    _ERROR_BUFFER,
                )
        self._errors.append(err)
        self._errors_ready.set()

    async def errors(self) -> AsyncIterator[ConsumerError]:
        """Errors from handlers, commits, fetches and retried joins (``consumer.return_errors``
        must be on). Ends when the group is closed and every buffered error was read.

        Cancelling the task that iterates loses nothing: an error is taken from the
        buffer only when it is yielded. Beyond 1,024 unread errors the oldest are
        dropped, counted in ``stats().errors_dropped`` and logged.
        """
        if not self.config.consumer.return_errors:
            raise ConfigurationError("errors() needs config.consumer.return_errors = True")
        while True:
            if self._errors:
                yield self._errors.popleft()
                continue
            if self._closed:
                return
            self._errors_ready.clear()
            closed = asyncio.ensure_future(self._closed_event.wait())
            ready = asyncio.ensure_future(self._errors_ready.wait())
            try:
                await asyncio.wait({closed, ready}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                closed.cancel()
                ready.cancel()

    # ------------------------------------------------------------------ pause

    def pause(self, partitions: dict[str, list[int]]) -> None:
        """Stop fetching these partitions (kept across rebalances) until :meth:`resume`."""
        for tp in _pairs(partitions):
            self._paused.add(tp)
            self._apply(tp, pause=True)

    def resume(self, partitions: dict[str, list[int]]) -> None:
        """Fetch these partitions again."""
        for tp in _pairs(partitions):
            self._paused.discard(tp)
            self._apply(tp, pause=False)

    def pause_all(self) -> None:
        """Pause every partition the member owns now (and keep them paused across rebalances)."""
        session = self._session
        if session is not None:
            self.pause(session.claims)

    def resume_all(self) -> None:
        """Resume every paused partition."""
        paused = list(self._paused)
        self._paused.clear()
        for tp in paused:
            self._apply(tp, pause=False)

    def paused(self) -> set[TopicPartition]:
        """The partitions paused by the user."""
        return set(self._paused)

    def _apply(self, tp: TopicPartition, *, pause: bool) -> None:
        """Pause or resume the partition's open consumer, whichever claim it belongs to:
        one a session is still starting or restarting is registered from its creation."""
        pc = self._consumer.partition_consumer(*tp)
        if pc is not None:
            pc.pause() if pause else pc.resume()

    # ------------------------------------------------------------------ close

    async def _leave(self, deadline: float, permanent: bool = True) -> None:
        """Leave by ``deadline``; a failure only means the others wait for the session
        timeout. Not ``permanent``: a static member that will come back (consumer
        protocol: epoch -2, which keeps its partitions for it; classic: nothing sent)."""
        with anyio.CancelScope(deadline=deadline):
            try:
                await self._membership.leave(permanent)
            except ConsumerGroupError as exc:
                self.log.info("LeaveGroup failed: %s", exc)

    def _default_close_timeout(self) -> float:
        return self.config.consumer.group.rebalance.timeout + self.config.net.read_timeout

    async def close(self, timeout: float | None = None, *, leave_group: bool | None = None) -> None:
        """End the session (final commit), leave the group and stop every task. Idempotent.

        ``leave_group``: send LeaveGroup so the others rebalance at once. By default a
        dynamic member does and a static member (``consumer.group.instance_id``) does not
        (sarama's rule, KIP-345): restarted within the session timeout it gets its
        partitions back and nobody else rebalances. ``close(leave_group=True)`` makes a
        static member leave for good.

        Returns within ``timeout`` seconds (default ``rebalance.timeout +
        net.read_timeout``), even against a broker that does not answer: the drain,
        hooks, cleanup, final commit and LeaveGroup share that budget, each step
        cut short when its share runs out. It wins at any point of a join: no handler
        runs after it, and ``run()`` returns; a JoinGroup the coordinator holds is
        abandoned, so close() returns about as soon as the LeaveGroup is answered.

        Called from inside the group (a handler, a hook, a task they started), it
        starts the close and returns at once, so the handler can return; the rebalance
        loop finishes the close before ``run()``/``consume()`` return.
        """
        if self._closed:
            return
        bound = self._default_close_timeout() if timeout is None else max(0.0, timeout)
        deadline = anyio.current_time() + bound
        if not self._closing:
            self._closing = True
            self._leave_on_close = (
                leave_group if leave_group is not None else self._membership.instance_id is None
            )
            self._close_deadline = deadline
            self._set_state(GroupState.CLOSING)
            self._interrupt()
        if _INSIDE.get() is self:
            return
        # The rebalance loop ends the session within the budget (minus LeaveGroup's share).
        with anyio.CancelScope(deadline=self._session_deadline()):
            await self._loop_idle.wait()
        if not self._loop_idle.is_set() and self._loop_scope is not None:
            self._loop_scope.cancel()
            with anyio.CancelScope(deadline=self._close_deadline):
                await self._loop_idle.wait()
        await self._shutdown()

    def _session_deadline(self) -> float:
        """Teardown of the session ends this early, leaving time for LeaveGroup."""
        remaining = self._close_deadline - anyio.current_time()
        return self._close_deadline - min(self.config.net.read_timeout, max(remaining, 0) / 5)

    def _interrupt(self) -> None:
        """close(): end the session, or cancel the join or backoff in progress."""
        session = self._session
        if session is not None:
            session.close_by(self._session_deadline())
        if self._join_scope is not None:
            self._join_scope.cancel()

    async def _shutdown(self) -> None:
        """LeaveGroup, stop the fetch tasks and the client: once, by the close deadline."""
        if self._shutting_down:
            with anyio.CancelScope(deadline=self._close_deadline):
                await self._closed_event.wait()
            return
        self._shutting_down = True
        try:
            if self._started:
                await self._leave(self._close_deadline, permanent=self._leave_on_close)
        finally:
            await self._consumer.close()
            await self._client.close()
            self._closed = True
            self._set_state(GroupState.CLOSED)
            self._closed_event.set()


def _exactly_once_config(config: Config, producer: Producer) -> Config:
    """Check that ``producer`` is transactional; the group's config, read_committed (a
    copy: the caller's is left alone)."""
    from ..producer.producer import Producer  # the producer loads on use

    if not isinstance(producer, Producer) or producer.config.producer.transactional_id is None:
        raise ConfigurationError(
            "ConsumerGroup(producer=...) needs a transactional cg.Producer: set "
            "config.producer.transactional_id to a name unique to this member (e.g. "
            "derived from its group_instance_id) and pass the started producer"
        )
    if config.consumer.isolation_level == "read_committed":
        return config
    config = copy.copy(config)
    config.consumer = copy.copy(config.consumer)
    config.consumer.isolation_level = "read_committed"
    return config


def _pairs(partitions: dict[str, list[int]] | Iterable[TopicPartition]) -> list[TopicPartition]:
    if isinstance(partitions, dict):
        return [(t, p) for t, parts in partitions.items() for p in parts]
    return list(partitions)
