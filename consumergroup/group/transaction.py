"""Exactly-once owned by the runtime (KIP-98, KIP-447): a member's transaction.

``ConsumerGroup(..., producer=transactional_producer)`` gives each session one
:class:`GroupTransaction`. Handlers write with ``session.send()`` (the record joins the
member's open transaction, begun on the first send) and mark as usual; at each commit
point (the auto-commit interval, a revocation, the session's end, ``session.commit()``)
the runtime sends the marks with ``TxnOffsetCommit`` (the member id, generation or member
epoch and instance id: a zombie is fenced) and commits the transaction, so a record's
output and its offset become visible together or not at all.

**The delivery gate.** A commit must never fall between a handler's ``send`` and its
``mark``: the transaction is cut only while every claim's handler waits in its
``messages()``/``batches()`` iteration. Each gated iteration is *busy* from the moment
it hands out a record (or batch) until the handler asks for the next; a commit point
closes the gate (no iteration hands out anything more), waits until no claim is busy
(a handler's task that ended counts as idle, as does the task calling the commit), then
takes the marks and cuts the transaction there, and opens the gate again.

**The handlers go on while it ends.** After the cut
(:meth:`~consumergroup.producer.Producer.cut_transaction`) the handlers' records open
the next transaction, held in the producer's buffer until the cut one has ended, and
their marks wait for the next commit point; meanwhile the cut transaction's records
are flushed, its marks sent (TxnOffsetCommit) and it is committed (EndTxn). The gate is
thus closed only for the time a handler takes to finish its record, not for the
commit's round trips (Kafka Streams' shape). While it ends, a gated iteration yields to
the event loop more often (:data:`_YIELD_EVERY_ENDING`), so that the commit's requests
and answers are not queued behind long runs of the handlers. If the cut transaction
fails to end, the producer takes the next one's records back into it (one transaction
again, the marks taken meanwhile still unacknowledged): a refusal for a stale member
epoch leaves that open to be committed again; any other failure closes the gate again
(a mark made after the rewind would skip a record) and aborts it all.

**Aborts rewind.** When the transaction aborts (a handler raised, a send or the commit
failed, the offsets were refused), everything since the last commit is gone from the
output, so the input is read again from there: every position goes back to its last
commit (:meth:`OffsetManager.rewind`), ``epoch`` moves on (an iteration of an older epoch
ends instead of handing out a record it had pulled) and every claim's partition consumer
stops, so each ``consume_claim`` ends and the reconciler restarts it from the rewound
position. A session that ends without its partitions (LOST, FENCED) aborts whatever is
open: the partitions' next owner reads from their last commit, and KIP-447's stable
offset fetch makes it wait for this transaction's outcome.

**Aborts without progress back off.** A handler that fails on every attempt would abort,
rewind and fail again in a loop. :class:`AbortStreak` (one per group, outliving its
sessions) counts the aborts since the last commit; each one holds back every claim's
restart for a delay growing with the count (the retry policy's :class:`Backoff`), and
from :data:`STALLED_AFTER` in a row the group reports the error on ``errors()`` and
``/health/ready`` fails, until a transaction commits again.

Who touches what (one event loop): ``epoch``, the gate (``_closed``, ``_ending``,
``_opened``), ``_yield_every`` and the producer's transaction state (begin, cut, end)
are written under ``_lock`` by :meth:`commit` / :meth:`abort` / :meth:`close` only; the
handlers' sends append to the open transaction (the next one after a cut) meanwhile;
``_claims`` is written by the gated iterations (registering themselves and flipping
their own ``busy``), read by the commit's wait.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import ConsumerError, ConsumerGroupError, ProducerFencedError, StaleMemberEpochError
from ..retry import Backoff

if TYPE_CHECKING:
    from ..message import RecordHeader
    from ..producer.metadata import RecordMetadata
    from ..producer.producer import Producer
    from ..producer.transactions import GroupMetadata
    from .logs import GroupLogger
    from .offsets import OffsetManager

__all__ = ["STALLED_AFTER", "AbortStreak", "GroupTransaction"]

T = TypeVar("T")
#: A gated iteration yields to the event loop once per this many items handed out...
_YIELD_EVERY = 128
#: ... and once per this many while a transaction ends behind the handlers: each step of
#: the commit (the flush's requests and answers, TxnOffsetCommit, EndTxn) waits for a
#: turn of the event loop, which every running handler's step delays.
_YIELD_EVERY_ENDING = 16
#: Aborts in a row, without a commit between, from which the group reports the error and
#: is not ready (``/health/ready``).
STALLED_AFTER = 3


class AbortStreak:
    """The member's transaction aborts since its last commit, and the back-off they earn.

    Owned by the group (it outlives each session: a rebalance does not hide a handler
    failing on every attempt); written by the sessions' transactions under their lock
    (:meth:`aborted`, :meth:`committed`), read by every claim's restart (:meth:`holdoff`)
    and by ``stats()``.
    """

    def __init__(self, backoff: float) -> None:
        self.count = 0
        #: Why the last transaction aborted (None after a commit).
        self.reason: str | None = None
        self._backoff = Backoff(backoff)
        self._resume_at = 0.0

    @property
    def stalled(self) -> bool:
        """Whether the aborts in a row reached :data:`STALLED_AFTER`."""
        return self.count >= STALLED_AFTER

    def aborted(self, reason: str) -> float:
        """One more abort: the delay every claim's restart now waits."""
        self.count += 1
        self.reason = reason
        delay = self._backoff.next()
        self._resume_at = asyncio.get_running_loop().time() + delay
        return delay

    def committed(self) -> None:
        """A transaction committed: progress, the streak is over."""
        self.count = 0
        self.reason = None
        self._backoff.reset()
        self._resume_at = 0.0

    def holdoff(self) -> float:
        """Seconds a claim's restart still waits (0 once the back-off is over)."""
        if not self._resume_at:
            return 0.0
        return max(0.0, self._resume_at - asyncio.get_running_loop().time())


class _Claim:
    """One gated iteration: its handler's task, and whether that handler holds a record
    (handed out, not yet asked past)."""

    __slots__ = ("busy", "task")

    def __init__(self, task: asyncio.Task[Any] | None) -> None:
        self.task = task
        self.busy = False

    def holds(self, committing: set[asyncio.Task[Any] | None]) -> bool:
        task = self.task
        return self.busy and task not in committing and (task is None or not task.done())


class GroupTransaction:
    """The member's transaction: ``session.send()``, the commit points, aborts and the
    delivery gate (see the module)."""

    def __init__(
        self,
        producer: Producer,
        offsets: OffsetManager,
        metadata: Callable[[], GroupMetadata],
        *,
        stop_claims: Callable[[], None],
        fenced: Callable[[BaseException], None],
        log: GroupLogger,
        streak: AbortStreak,
        report: Callable[[ConsumerError], None],
    ) -> None:
        self._producer = producer
        self._offsets = offsets
        self._metadata = metadata
        # Ends every claim's partition consumer (their handlers' iterations end).
        self._stop_claims = stop_claims
        # The producer was replaced by another with its transactional id: ends the session.
        self._fenced = fenced
        self._log = log
        self.streak = streak
        # Reports a streak of aborts on errors().
        self._report = report
        # Bumped by every abort: an iteration begun before it ends.
        self.epoch = 0
        self._lock = asyncio.Lock()
        # _closed: deliveries are held back; _ending: from then on, once no handler holds
        # a record, the transaction is being ended (sends wait). _opened: neither.
        self._closed = self._ending = False
        self._opened = asyncio.Event()
        self._opened.set()
        # How many items a gated iteration hands out between two turns of the event loop
        # (fewer while a cut transaction ends, written by _commit).
        self._yield_every = _YIELD_EVERY
        # Set when the last busy claim goes idle while the gate is closed.
        self._idle = asyncio.Event()
        self._claims: set[_Claim] = set()
        # Tasks inside commit()/abort(), waiting for the lock or holding it: a handler
        # committing between two records is idle for every commit meanwhile (two handlers
        # committing at once must not wait for each other).
        self._committing: set[asyncio.Task[Any] | None] = set()
        # Set when a handler raised: the transaction can only abort.
        self._failed: BaseException | None = None
        # Transactions committed and aborted (observability, tests).
        self.commits = 0
        self.aborts = 0

    # ------------------------------------------------------------------ handlers

    def send(
        self,
        topic: str,
        value: bytes | None,
        *,
        key: bytes | None = None,
        partition: int | None = None,
        headers: Sequence[RecordHeader] | None = None,
        timestamp_ms: int | None = None,
    ) -> Awaitable[asyncio.Future[RecordMetadata]]:
        """``producer.send`` inside the member's transaction (begun if none is open); while
        the gate is closed for an abort (or the rare commit nothing but the gate closed),
        the record waits for it to open (a handler holding a record never meets that:
        the gate waits until it is idle). ``session.send`` is bound to this: one call
        per record written, it is a plain function handing back the producer's own
        coroutine (no coroutine of its own) when the transaction is open."""
        if self._ending or not self._producer.in_transaction:
            return self._send_later(topic, value, key, partition, headers, timestamp_ms)
        return self._producer.send(
            topic, value, key=key, partition=partition, headers=headers, timestamp_ms=timestamp_ms
        )

    async def _send_later(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None,
        partition: int | None,
        headers: Sequence[RecordHeader] | None,
        timestamp_ms: int | None,
    ) -> asyncio.Future[RecordMetadata]:
        while self._ending:
            await self._opened.wait()
        producer = self._producer
        if not producer.in_transaction:
            await producer.begin_transaction()
        return await producer.send(
            topic, value, key=key, partition=partition, headers=headers, timestamp_ms=timestamp_ms
        )

    async def gate(self, source: AsyncIterator[T]) -> AsyncIterator[T]:
        """``source`` (a claim's messages or batches) through the delivery gate."""
        claim = _Claim(asyncio.current_task())
        if claim.task is not None:
            claim.task.add_done_callback(lambda _: self._went_idle())
        self._claims.add(claim)
        epoch = self.epoch
        handed = 0
        try:
            async for item in source:
                handed += 1
                if handed >= self._yield_every:
                    handed = 0
                    # Records already fetched and sends that fit the producer's buffer never
                    # yield: let the producer's sender and the commit ticker run.
                    await asyncio.sleep(0)
                while self._closed:
                    await self._opened.wait()
                if epoch != self.epoch:
                    return  # an abort rewound this claim: its restart reads this again
                claim.busy = True
                yield item
                claim.busy = False
                if self._closed:
                    self._went_idle()
        finally:
            claim.busy = False
            self._claims.discard(claim)
            self._went_idle()

    def fail(self, exc: BaseException) -> None:
        """A handler raised: the open transaction holds its partial output, so it can only
        abort (at the next commit point, or :meth:`abort`)."""
        if self._failed is None:
            self._failed = exc

    # ------------------------------------------------------------------ commit points

    async def commit(self) -> None:
        """The commit point: send the marks in the transaction and commit it. A refusal for
        a stale member epoch raises with the transaction still open (sent again under the
        heartbeat's newer epoch); any other failure aborts and rewinds, then raises."""
        caller = asyncio.current_task()
        self._committing.add(caller)
        self._went_idle()  # a commit waiting for this handler: it is idle now
        try:
            async with self._lock:
                await self._commit_point()
        finally:
            self._committing.discard(caller)
            self._went_idle()

    async def _commit_point(self) -> None:
        try:
            await self._close_gate()
            if self._failed is not None:
                failed, self._failed = self._failed, None
                await self._abort("a handler raised")
                raise ConsumerGroupError(
                    f"the transaction was aborted: a handler raised {failed!r}; its "
                    "partitions are read again from their last commit"
                ) from failed
            await self._commit()
        finally:
            self._open_gate()

    async def abort(self, reason: str) -> None:
        """Abort the open transaction and rewind every claim to its last commit."""
        caller = asyncio.current_task()
        self._committing.add(caller)
        self._went_idle()  # a commit waiting for this handler: it is idle now
        try:
            async with self._lock:
                try:
                    await self._close_gate()
                    self._failed = None
                    await self._abort(reason)
                finally:
                    self._open_gate()
        finally:
            self._committing.discard(caller)
            self._went_idle()

    async def close(self) -> None:
        """The session ended: abort a transaction still open (the final commit failed or
        was skipped: the partitions were lost)."""
        async with self._lock:
            if self._producer.in_transaction:
                await self._abort("the session ended without committing it")

    async def _commit(self) -> None:
        producer = self._producer
        pending = self._offsets.pending()
        # Progress ends a streak of aborts: records written, or marks past the last commit
        # (not a start offset committed for the first time).
        progress = producer.in_transaction or self._offsets.advanced(pending)
        if not producer.in_transaction:
            if not pending:
                return
            await producer.begin_transaction()
        # No handler holds a record: the transaction is cut here, and the handlers go on
        # into the next one (held back in the producer) while this one ends.
        producer.cut_transaction()
        self._open_gate()
        self._yield_every = _YIELD_EVERY_ENDING
        try:
            if pending:
                await producer.send_offsets_to_transaction(
                    {tp: offset for tp, (offset, _) in pending.items()},
                    self._metadata(),
                    metadata={tp: md for tp, (_, md) in pending.items() if md},
                )
            await producer.commit_transaction()
        except StaleMemberEpochError:
            # The transaction stays open, the next one's records back in it: again under
            # the next heartbeat's epoch.
            raise
        except ConsumerGroupError as exc:
            # What the handlers did since the cut went back into this transaction: it
            # aborts once they hold no record (a mark after the rewind would skip one).
            await self._close_gate()
            await self._abort(f"its commit failed ({exc})")
            raise
        finally:
            self._yield_every = _YIELD_EVERY
        self._offsets.acknowledge(pending)
        self.commits += 1
        if progress:
            self.streak.committed()

    async def _abort(self, reason: str) -> None:
        """Abort (the lock held, the gate closed), then rewind every claim."""
        self._log.warning(
            "aborting the transaction: %s; the claims are read again from their last commit",
            reason,
        )
        try:
            if self._producer.in_transaction:
                await self._producer.abort_transaction()
        except ProducerFencedError as exc:
            self._fenced(exc)
            raise
        finally:
            self.aborts += 1
            self.epoch += 1
            self._offsets.rewind()
            self._stop_claims()
            self._backing_off(reason)

    def _backing_off(self, reason: str) -> None:
        """Count the abort; from :data:`STALLED_AFTER` in a row, report it on errors()."""
        streak = self.streak
        delay = streak.aborted(reason)
        if streak.stalled:
            self._report(
                ConsumerError(
                    f"the transaction aborted {streak.count} times in a row without a "
                    f"commit (the last: {reason}); every claim restarts after {delay:.1f}s "
                    "and /health/ready fails until a transaction commits: fix what makes "
                    "it abort (a handler raising on every attempt?)"
                )
            )

    # ------------------------------------------------------------------ the gate

    async def _close_gate(self) -> None:
        """Hold back every delivery and wait until no handler holds a record (those inside
        commit() or abort() aside: handlers committing between two records)."""
        self._closed = True
        self._opened.clear()
        while any(c.holds(self._committing) for c in self._claims):
            self._idle.clear()
            await self._idle.wait()
        self._ending = True

    def _open_gate(self) -> None:
        self._closed = self._ending = False
        self._opened.set()

    def _went_idle(self) -> None:
        if self._closed:
            self._idle.set()
