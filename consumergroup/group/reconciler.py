"""The assignment reconciler: the one owner of a member's claims.

Every way a member receives partitions ends here. Given a target assignment
``{(topic, partition)}`` (+ optional epoch), :meth:`Reconciler.reconcile` applies the
difference:

* **revoke** what the target drops: end each claim's stream, let its handler return
  (cancel it past its budget, and wait until it has ended), ``on_revoked``, commit
  exactly those partitions' marks, release them;
* then **add** what it brings: start fetching from the committed offsets,
  ``on_assigned``, ``setup`` (the first time only), one ``consume_claim`` task each.

Eager members (one session per generation) add everything once and revoke
everything at the end (:meth:`Reconciler.finish`); cooperative members (KIP-429) and
KIP-848 members call :meth:`Reconciler.reconcile` with each new target and only the
difference moves. There is one revocation path (:meth:`Reconciler._revoke`) with one
time budget (:class:`RevokeBudget`), and it is idempotent: calls are serialised, and a
partition leaves the registry only once its revocation is complete, so no partition is
revoked twice however the session's end and a rebalance interleave.

Order on every path: ``on_assigned`` → ``setup`` (first time) → ``consume_claim``;
``on_revoked``/``on_lost`` only after the claim's handler returned or was cancelled
past its budget.

Ownership of the shared state (one event loop; "owner" = the only writer):

* ``_owned`` (partition -> the partition consumer of its current claim): written only
  under ``_lock`` (by :meth:`reconcile`, :meth:`start`, :meth:`finish`) and by a claim
  task replacing its own partition consumer after a restart; read by anyone through
  :attr:`owned` (stats, the rate sampler, ``session.claims``).
* A claim's start offset and first mark: fixed when its partition consumer is created
  (``PartitionConsumer.start_offset``, the resolved offset) and registered with the
  offset manager by ``open_claims`` before any fetch can move it; a restart keeps the
  marks. Never read from the fetch position.
* A claim's paused flag: not the reconciler's. The group's paused set owns it; a new
  partition consumer reads it when it is created (``paused`` below, read-only here).
* ``_tasks``: an entry is added by :meth:`_start` and removed by the task itself when it
  ends; the revocation path only sets ``stopping`` and cancels ``scope``.
* A revocation: runs under ``_lock`` in :meth:`_revoke`, which alone releases its
  partitions, and only once their hook has run; cancelled before that (a fenced
  consumer-protocol heartbeat cancels the reconciliation), they stay in ``_owned`` with
  their tasks, and the session's end (:meth:`finish`) takes them over.
* ``_budget``: the running revocation's budget, set and cleared by :meth:`_revoke`;
  :meth:`shorten` (close()) may move its deadline earlier.
* ``_set_up``: set once, under ``_lock``, when ``setup`` is called.

What it may ask of the session is :class:`~.roles.ClaimOwner` (end it, set the epoch);
errors go to ``report``; the session object is otherwise only handed to the user's
callbacks.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import math
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import field
from types import FrameType, MappingProxyType
from typing import TYPE_CHECKING, NamedTuple

import anyio
import anyio.abc

from .._dataclass import dataclass
from .._otel import ClaimTracing
from ..consumer.partition import PartitionConsumer
from ..errors import (
    ConsumerError,
    ConsumerGroupError,
    IllegalGenerationError,
    RebalanceInProgressError,
    StaleMemberEpochError,
)
from ..retry import FENCED, Backoff, is_transient
from .claim import ConsumerGroupClaim, end_span
from .ending import EndCause

if TYPE_CHECKING:
    from ..config import Config
    from ..consumer.consumer import Consumer
    from .offsets import OffsetManager
    from .roles import ClaimHandler, ClaimOwner
    from .transaction import GroupTransaction

_log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
#: A rebalance hook given to ``ConsumerGroup(..., on_assigned=...)``: sync or async.
HookFn = Callable[..., Awaitable[None] | None]
#: Starts fetching newly assigned partitions, each registered with the offset manager at
#: its resolved start: (their partition consumers, partitions not in metadata yet).
OpenClaims = Callable[
    [list[TopicPartition]],
    Awaitable[tuple[dict[TopicPartition, PartitionConsumer], list[TopicPartition]]],
]
#: Where the session's errors go (the log and ``errors()``).
Report = Callable[[ConsumerError], None]
#: Takes a handler's asyncio task that ignored its cancellation and was abandoned: keeps
#: it referenced (and counted) until it ends.
Runaway = Callable[["asyncio.Task[None]"], None]


class Change(NamedTuple):
    """What one :meth:`Reconciler.reconcile` did."""

    revoked: list[TopicPartition]
    added: list[TopicPartition]


class RevokeBudget:
    """The time of one revocation: ``window`` seconds from ``started`` (the coordinator's
    rejoin window, ``rebalance.timeout``), or less when ``close()`` set an earlier bound.

    Handlers drain until ``2r`` before its end, hooks (and ``cleanup``) run until ``r``
    before it, the commit gets the last ``r``, with ``r = min(read_timeout, window / 4)``.
    """

    def __init__(self, started: float, window: float, read_timeout: float, bound: float) -> None:
        self._started = started
        self._window = window
        self._read_timeout = read_timeout
        self._bound = bound
        # The running step's scope and its slack: shorten() moves it earlier.
        self._step: tuple[anyio.CancelScope, int] | None = None

    def deadline(self, slack: int) -> float:
        """End of a step that leaves ``slack`` reserves before the end (anyio clock)."""
        final = min(self._started + self._window, self._bound)
        reserve = min(self._read_timeout, max(final - self._started, 0.0) / 4)
        return final - slack * reserve

    def step(self, slack: int) -> anyio.CancelScope:
        """A cancel scope for the next step; the running one is what :meth:`shorten` moves."""
        scope = anyio.CancelScope(deadline=self.deadline(slack))
        self._step = (scope, slack)
        return scope

    def shorten(self, bound: float) -> None:
        """Everything must be done by ``bound`` (close()'s deadline)."""
        self._bound = min(self._bound, bound)
        if self._step is not None:
            scope, slack = self._step
            scope.deadline = min(scope.deadline, self.deadline(slack))


@dataclass(slots=True, eq=False)
class _ClaimTask:
    """One running ``consume_claim`` task (and its restarts)."""

    #: Cancels the task (its handler) once its drain budget is spent.
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    #: Set when the claim must end (revoked, or the session ends): wakes a restart backoff.
    stopping: anyio.Event = field(default_factory=anyio.Event)
    #: Set by the task itself when it has ended: the handler is no longer running (or,
    #: having ignored its cancellation, was abandoned).
    ended: anyio.Event = field(default_factory=anyio.Event)
    #: Per handler run: set when its asyncio task ends, or by the revocation that gives up
    #: waiting for a handler that ignores its cancellation (the task then abandons it).
    settled: anyio.Event = field(default_factory=anyio.Event)


class Reconciler:
    """Owns one session's claims and applies target assignments to them (see the module).

    ``consumers``: the partition consumers of the session's first claims, opened by the
    session factory; they are announced (``on_assigned``, ``setup``) and started by
    :meth:`start`.
    """

    def __init__(
        self,
        session: ClaimOwner,
        *,
        consumers: dict[TopicPartition, PartitionConsumer],
        consumer: Consumer,
        offsets: OffsetManager,
        config: Config,
        hooks: dict[str, HookFn],
        open_claims: OpenClaims | None,
        report: Report,
        paused: Collection[TopicPartition] = (),
        runaway: Runaway | None = None,
        transaction: GroupTransaction | None = None,
    ) -> None:
        self._session = session
        # Exactly-once: the member's transaction gates every claim's deliveries, aborts on
        # a handler's error, and rewinds the claims (they restart from the last commit).
        self._transaction = transaction
        self._report = report
        self._runaway = runaway
        self._consumer = consumer
        self._offsets = offsets
        self._config = config
        self._hooks = hooks
        self._open_claims = open_claims
        # OpenTelemetry spans of handled records and batches: each claim decides at its
        # creation whether a tracer provider is set.
        self._tracing = ClaimTracing(offsets.group, config.client_id)
        # The partitions the user paused (the group's, never written here): a restarted
        # claim's consumer reads it when it is created, not the old claim's flag before.
        self._paused = paused
        # The partitions this member owns, each with the partition consumer of its current
        # claim. Written under _lock only (and by a claim task swapping in its own restarted
        # consumer); a partition leaves only once its revocation's hook has run. Read by
        # anyone through `owned`.
        self._owned: dict[TopicPartition, PartitionConsumer] = dict(consumers)
        # Running claim tasks: _start adds an entry, the task removes its own when it
        # ends; the revocation path only sets `stopping` and cancels `scope`.
        self._tasks: dict[TopicPartition, _ClaimTask] = {}
        # Serialises reconcile/start/finish: one change of the claims at a time.
        self._lock = anyio.Lock()
        # Set once, under _lock, when setup is called.
        self._set_up = False
        # The running revocation's budget: set and cleared by _revoke, shortened by close().
        self._budget: RevokeBudget | None = None
        # close()'s bound on any revocation (anyio clock); only shorten() lowers it.
        self._bound = math.inf
        # Bound by bind() when the session runs: where claim tasks live, and whose hooks.
        self._group: anyio.abc.TaskGroup | None = None
        self._handler: ClaimHandler | None = None

    @property
    def owned(self) -> Mapping[TopicPartition, PartitionConsumer]:
        """The partitions owned right now and their claims' partition consumers (a
        read-only view)."""
        return MappingProxyType(self._owned)

    def bind(self, group: anyio.abc.TaskGroup, handler: ClaimHandler) -> None:
        """Where claim tasks run (the session's claims task group) and the user's handler."""
        self._group = group
        self._handler = handler

    # ------------------------------------------------------------------ the API

    async def start(self) -> None:
        """Announce and start the session's first claims: ``on_assigned`` → ``setup`` →
        ``consume_claim`` tasks."""
        async with self._lock:
            await self._announce(sorted(self._owned))

    async def reconcile(self, target: Iterable[TopicPartition], epoch: int | None = None) -> Change:
        """Apply a target assignment: given a target assignment {(topic, partition)}
        (+ optional epoch), apply the difference: revoke (drain handler, on_revoked,
        commit exactly those partitions' marks, release) then add (on_assigned, setup
        first time, start claims).

        ``epoch`` (a generation id, or a KIP-848 member epoch) becomes the session's
        ``generation_id`` and what commits carry, before anything is revoked: the revoked
        partitions' commit goes out under it. ``on_assigned`` is called even when nothing
        is added (as Java's ``onPartitionsAssigned``); ``on_revoked`` only when something is
        revoked. Calls are serialised; once the session is ending it does nothing (its
        end revokes, or loses, everything). Partitions that cannot be started yet end the session
        (PARTITIONS_CHANGED, or START_FAILED when their offsets cannot be fetched).
        """
        assigned = set(target)
        async with self._lock:
            if self._session.done.is_set():
                return Change([], [])  # the session's end revokes (or loses) everything
            if epoch is not None:
                self._session.set_epoch(epoch)
            revoked = sorted(set(self._owned) - assigned)
            added = sorted(assigned - set(self._owned))
            if revoked:
                await self._revoke(revoked, graceful=True, started=anyio.current_time())
            if not self._session.done.is_set():
                await self._add(added)
            return Change(revoked, added)

    async def finish(self, *, graceful: bool, started: float) -> None:
        """The session's end: revoke everything still owned (``on_revoked`` after a graceful
        end, else ``on_lost`` and no commit), with ``cleanup`` before the commit. Waits for
        a revocation in progress, which keeps its partitions: each is revoked once."""
        async with self._lock:
            await self._revoke(sorted(self._owned), graceful=graceful, started=started, end=True)

    def stop_all(self) -> None:
        """The session is ending: end every claim's stream and wake every restart backoff."""
        for pc in self._owned.values():
            pc.stop()
        for task in self._tasks.values():
            task.stopping.set()

    def stop_claims(self) -> None:
        """End every claim's stream, without ending the claims: each handler returns and
        its claim restarts from the partition's marked offset (a transaction's abort)."""
        for pc in self._owned.values():
            pc.stop()

    def shorten(self, bound: float) -> None:
        """close(): every revocation, the running one included, ends by ``bound``."""
        self._bound = min(self._bound, bound)
        if self._budget is not None:
            self._budget.shorten(bound)

    def abandon(self) -> None:
        """Release every claim without user code or commit (teardown after a failure)."""
        self._release(list(self._owned))

    # ------------------------------------------------------------------ revoke

    async def _revoke(
        self,
        partitions: Sequence[TopicPartition],
        *,
        graceful: bool,
        started: float,
        end: bool = False,
    ) -> None:
        """The one revocation path: drain → on_revoked/on_lost (→ cleanup at the end) →
        commit these partitions' marks (graceful only) → release. Caller holds ``_lock``.

        Cancelled before its hook (the consumer protocol's heartbeat ends on a fencing
        answer and cancels the reconciliation in progress), the partitions stay owned, their
        handlers still running: the session's end, which always follows, waits for those
        handlers and then loses (or revokes) the partitions with their hook. A revocation
        is completed or taken over, never dropped.
        """
        budget = self._budget = RevokeBudget(
            started,
            self._config.consumer.group.rebalance.timeout,
            self._config.net.read_timeout,
            self._bound,
        )
        hooked = False
        try:
            await self._drain(partitions, budget)
            with budget.step(1):
                hooked = True
                if graceful:
                    await self._user("on_revoked", self._session, list(partitions))
                else:
                    await self._user("on_lost", list(partitions))
                if end:
                    await self._user("cleanup", self._session)
            if graceful and partitions:
                with budget.step(0):
                    await self._commit(partitions, end)
        finally:
            self._budget = None
            if hooked:
                self._release(partitions)

    async def _drain(self, partitions: Sequence[TopicPartition], budget: RevokeBudget) -> None:
        """End these claims' streams, wait for their handlers until ``2r`` before the end of
        the budget, cancel those still running and wait until they have ended."""
        running: list[tuple[TopicPartition, _ClaimTask]] = []
        for tp in partitions:
            pc = self._owned.get(tp)
            if pc is not None:
                pc.stop()
            task = self._tasks.get(tp)
            if task is not None:
                task.stopping.set()
                running.append((tp, task))
        with budget.step(2):
            for _, task in running:
                await task.ended.wait()
        late = [(tp, task) for tp, task in running if not task.ended.is_set()]
        for tp, task in late:
            self._session.log.warning("handler for %s/%d did not return; cancelling it", *tp)
            task.scope.cancel()
        # A cancelled handler ends at its next await; the hooks follow only after that.
        with anyio.CancelScope(shield=True, deadline=budget.deadline(0)):
            for _, task in late:
                await task.ended.wait()
        # One that ignored its cancellation is let go: its task abandons it (it runs on,
        # detached, reported once) and ends at once, so the session can end.
        for _, task in late:
            task.settled.set()
        with anyio.CancelScope(shield=True):
            for _, task in late:
                await task.ended.wait()

    async def _commit(self, partitions: Sequence[TopicPartition], end: bool) -> None:
        """Commit exactly these partitions' marks; a failure is logged, not raised: the
        partitions' next owner re-reads from their last commit."""
        what = "final commit" if end else f"commit before revoking {list(partitions)}"
        try:
            try:
                await self._offsets.commit(partitions)
            except (StaleMemberEpochError, IllegalGenerationError, RebalanceInProgressError):
                # The group moved the member on: once more under the newer epoch. The
                # consumer protocol's next heartbeat brings it (at the end too: the
                # heartbeat runs until the final commit is done); a cooperative session
                # that ended with a join in flight learns it from that join's answer.
                next_epoch = self._offsets.next_epoch
                if next_epoch is None or not await next_epoch(final=end):
                    raise
                await self._offsets.commit(partitions)
        except RebalanceInProgressError:
            self._session.log.warning(
                "%s refused: the group is rebalancing; uncommitted messages will be read again",
                what,
            )
        except FENCED as exc:
            self._session.log.warning(
                "%s refused (%s): the partitions moved on; uncommitted messages will be read "
                "again by their new owner",
                what,
                type(exc).__name__,
            )
        except ConsumerGroupError as exc:
            if end:
                self._report(ConsumerError(f"{what} failed: {exc}", cause=exc))
            else:
                self._session.log.warning(
                    "%s failed (%s): their new owners re-read from the last commit", what, exc
                )

    def _release(self, partitions: Iterable[TopicPartition]) -> None:
        """Drop claims from the registry and forget their marks (after their commit)."""
        partitions = list(partitions)
        for tp in partitions:
            pc = self._owned.pop(tp, None)
            if pc is not None:
                pc.stop()
        self._offsets.release(partitions)

    # ------------------------------------------------------------------ add

    async def _add(self, added: list[TopicPartition]) -> None:
        """Start fetching ``added`` from their committed offsets, then announce them."""
        unknown: list[TopicPartition] = []
        if added:
            assert self._open_claims is not None, "this session cannot open claims"
            try:
                consumers, unknown = await self._open_claims(added)
            except ConsumerGroupError as exc:
                self._start_failed(added, exc)
                return
            self._owned.update(consumers)
            added = sorted(consumers)
        await self._announce(added)
        if unknown:
            # The assignment names partitions this member's metadata does not show yet.
            self._session.rejoin_fresh = True
            self._session.end(
                EndCause.PARTITIONS_CHANGED, f"assigned {list(unknown)} are not in metadata yet"
            )

    def _start_failed(self, partitions: Sequence[TopicPartition], exc: Exception) -> None:
        """Newly assigned partitions could not be started: rejoin (a transient error), or
        end run() (any other). Their OffsetFetch refused as a fencing answer (a KIP-848
        member's id or epoch the coordinator no longer knows): the partitions are lost."""
        what = f"could not start the claims {list(partitions)}: {exc}"
        if isinstance(exc, FENCED):
            self._session.end(EndCause.FENCED, what)
        else:
            self._session.end(EndCause.START_FAILED, what, None if is_transient(exc) else exc)

    async def _announce(self, added: list[TopicPartition]) -> None:
        """``on_assigned`` → ``setup`` (first time) → one ``consume_claim`` task each."""
        if not await self._user("on_assigned", self._session, added):
            return
        if not self._set_up:
            self._set_up = True
            if not await self._user("setup", self._session):
                return
        if self._session.done.is_set():
            return
        for tp in added:
            if tp in self._owned:
                self._start(tp)

    async def _user(self, name: str, *args: object) -> bool:
        """Call the handler's hook ``name``, then the group's ``name=`` callable, if any.

        An error in ``on_assigned``/``setup`` ends the session like a handler error;
        later hooks only report theirs. Returns False when the hook raised.
        """
        try:
            await getattr(self._handler, name)(*args)
            extra = self._hooks.get(name)
            if extra is not None:
                result = extra(*args)
                if inspect.isawaitable(result):
                    await result
        except Exception as exc:
            err = ConsumerError(f"{name} raised {exc!r}", cause=exc)
            if name not in ("on_assigned", "setup"):
                self._report(err)
            elif self._config.consumer.return_errors:  # report, end the session and rejoin
                self._report(err)
                self._session.end(EndCause.HANDLER_ERROR, f"{name} raised")
            else:  # end run() too
                self._session.end(EndCause.HANDLER_ERROR, f"{name} raised", fatal=err)
            return False
        return True

    # ------------------------------------------------------------------ claim tasks

    def _start(self, tp: TopicPartition) -> None:
        assert self._group is not None, "bind() before starting claims"
        task = self._tasks[tp] = _ClaimTask()
        self._group.start_soon(self._run_claim, tp, task, name=f"claim-{tp[0]}-{tp[1]}")

    async def _run_claim(self, tp: TopicPartition, task: _ClaimTask) -> None:
        """Run ``consume_claim`` for one claim until it is revoked or the session ends.

        A handler that returns, or raises with ``return_errors`` on, while the claim is
        still owned is restarted after a backoff with a fresh claim starting at the
        partition's last marked offset: a partition is never left owned but unread.
        """
        try:
            with task.scope:
                await self._claim_loop(tp, task)
        finally:
            if self._tasks.get(tp) is task:
                del self._tasks[tp]
            current = self._owned.get(tp)
            if current is not None:
                current.stop()
            task.ended.set()

    async def _claim_loop(self, tp: TopicPartition, task: _ClaimTask) -> None:
        """The body of :meth:`_run_claim`: handle, and restart while the claim is owned."""
        session = self._session
        backoff = Backoff(self._config.consumer.retry.backoff)
        handler = self._handler
        assert handler is not None
        pc = self._owned[tp]
        txn = self._transaction
        while True:
            claim = ConsumerGroupClaim(pc, pc.start_offset, self._tracing, txn)
            marked = self._offsets.marked(*tp)
            epoch = txn.epoch if txn is not None else 0
            try:
                await self._handle(handler, claim, task)
                what = "returned"
            except Exception as exc:
                err = ConsumerError(
                    "consume_claim raised; its unmarked messages will be read again",
                    topic=claim.topic,
                    partition=claim.partition,
                    cause=exc,
                )
                if txn is not None:
                    txn.fail(exc)  # its output so far is in the transaction: abort it
                if not self._config.consumer.return_errors:
                    session.end(EndCause.HANDLER_ERROR, f"handler failed on {tp}", fatal=err)
                    return
                self._report(err)
                what = "raised"
                if txn is not None:
                    await self._abort(txn, f"consume_claim for {tp[0]}/{tp[1]} raised")
            pc.stop()
            if task.stopping.is_set():
                return  # revoked, or the session is ending: not an early return
            if self._offsets.marked(*tp) != marked:
                backoff.reset()  # it made progress: not a handler failing in a loop
            rewound = what == "returned" and txn is not None and txn.epoch != epoch
            restarted = await self._reclaim(tp, what, backoff, task, rewound=rewound)
            if restarted is None:
                return
            pc = restarted

    async def _abort(self, txn: GroupTransaction, reason: str) -> None:
        """Abort the member's transaction after a handler's error (every claim rewinds);
        a failure is reported (a fenced producer ends the session)."""
        try:
            await txn.abort(reason)
        except ConsumerGroupError as exc:
            self._report(ConsumerError(f"could not abort the transaction: {exc}", cause=exc))

    async def _handle(
        self, handler: ClaimHandler, claim: ConsumerGroupClaim, task: _ClaimTask
    ) -> None:
        """Run ``consume_claim`` in an asyncio task of its own and wait for it.

        It is no task of the claims' task group: cancelling this task (the drain past its
        budget, or the session torn down) cancels the handler once, with asyncio's cancel,
        where anyio would cancel it again at each of its awaits (a handler that swallows
        its cancellation would spin the loop). Past the budget, a handler still running
        is abandoned (:meth:`_abandon`) instead of holding the session, and ``run()``,
        forever: asyncio cannot end a task that will not end.
        """
        runner = asyncio.ensure_future(_consume(handler, self._session, claim))
        settled = task.settled = anyio.Event()
        runner.add_done_callback(lambda _: settled.set())
        try:
            await asyncio.shield(runner)
        except BaseException:
            if runner.done():
                raise  # the handler's own outcome
            runner.cancel()  # this task is cancelled: the handler too, once
            with anyio.CancelScope(shield=True):
                await settled.wait()
            if not runner.done():
                self._abandon(runner, claim)
            elif not runner.cancelled():
                runner.exception()  # moot: the claim is being cancelled (retrieved)
            raise

    def _abandon(self, runner: asyncio.Task[None], claim: ConsumerGroupClaim) -> None:
        """A handler ignored its cancellation past its budget: say so once, hand its task
        to ``runaway`` (which keeps and counts it) and go on without it."""
        self._report(
            ConsumerError(
                "consume_claim ignored its cancellation: it was abandoned and runs on, "
                "detached (let CancelledError propagate out of the handler); /health/live "
                "fails while it runs",
                topic=claim.topic,
                partition=claim.partition,
            )
        )
        if self._runaway is not None:
            self._runaway(runner)

    async def _reclaim(
        self,
        tp: TopicPartition,
        what: str,
        backoff: Backoff,
        task: _ClaimTask,
        *,
        rewound: bool = False,
    ) -> PartitionConsumer | None:
        """A new partition consumer for the claim, from its marked offset, after a backoff
        (none when the member's transaction aborted and ``rewound`` it: its handler
        returned because its stream was ended; but at least the group's back-off after
        aborts without progress); None when the claim is revoked or the
        session ends first (either wakes it).

        The warning is logged only once the backoff is over and the claim is still owned:
        a handler that returned because a close() was on its way is not an early return.
        """
        while True:
            delay = 0.0 if rewound else backoff.next()
            if self._transaction is not None:  # aborts without progress hold back every claim
                delay = max(delay, self._transaction.streak.holdoff())
            self._session.log.debug("consume_claim for %s/%d %s", *tp, what)
            with anyio.move_on_after(delay):
                await task.stopping.wait()
            if task.stopping.is_set():
                return None
            if rewound:
                self._session.log.info(
                    "the transaction aborted: consume_claim for %s/%d restarts from offset %d",
                    *tp,
                    self._offsets.marked(*tp),
                )
                rewound = False
            else:
                self._session.log.warning(
                    "consume_claim for %s/%d %s while the session runs; restarting it after "
                    "%.1fs from offset %d",
                    *tp,
                    what,
                    delay,
                    self._offsets.marked(*tp),
                )
            # The leader epoch of the record before the mark (KIP-320): the first fetch
            # checks the log was not truncated below it meanwhile.
            mark = self._offsets.marked(*tp)
            old = self._owned.get(tp)
            epoch = old.leader_epoch_of(mark - 1) if old is not None else -1
            try:
                pcs = await self._consumer.consume_partitions(
                    {tp: mark}, paused=self._paused, epochs={tp: epoch}
                )
            except ConsumerGroupError as exc:
                what = f"could not be restarted ({exc})"
                continue
            pc = pcs[tp]
            if task.stopping.is_set() or tp not in self._owned:  # ended during the restart
                pc.stop()
                return None
            self._owned[tp] = pc
            self._offsets.track_epochs(tp, pc.leader_epoch_of)
            return pc


async def _consume(handler: ClaimHandler, session: object, claim: ConsumerGroupClaim) -> None:
    """The body of a handler's asyncio task (its frame names the claim for the watchdog)."""
    try:
        await handler.consume_claim(session, claim)
    finally:
        end_span(claim)


def claim_on_stack(stack: Sequence[FrameType]) -> str:
    """Name the claim whose handler holds the loop, from the loop thread's stack."""
    code = _consume.__code__
    for frame in stack:
        if frame.f_code is code:
            claim = frame.f_locals.get("claim")
            return (
                f"in consume_claim for {claim.topic}/{claim.partition}" if claim else "in a claim"
            )
    return "outside any claim handler"
