"""One ``ShareGroup.run()``: the member's tasks and the state they share.

A record is a task: ``concurrency`` worker tasks take records from one queue and run the
handler on each, so up to ``concurrency`` records are handled at once, across partitions
and within one. The queue is fed by the broker sessions (:mod:`.broker`), each asking its
broker for at most the room left (``concurrency`` plus the records acquired ahead, minus
the records held, minus what fetches in flight may still bring). Records ahead
(:meth:`ShareRun.paced`: a few fetch round trips of the handlers' work, at most
``config.share.max_poll_records``) keep the next records there when a handler frees up,
while the next fetch is under way; a waiting record's lock is renewed with the running
ones', or without renewal it is released when half its lock is spent.

Tasks, all in one task group that ends with ``run()``:

* the heartbeat task (:class:`~.membership.ShareMembership`): joins, keeps the member in
  the group, hands each new assignment to the router, rejoins after fencing;
* the router: fetches each assigned partition from its leader, one
  :class:`~.broker.BrokerSession` task per leader, and moves a partition whose leader
  changed;
* the workers: asyncio tasks of their own, so close() cancels them alone and once
  (anyio re-delivers a cancellation at every await: a handler that catches it and goes
  on would spin), and abandons a handler that will not end (``runaway_handlers``).

State and who touches it: ``inflight`` (see :mod:`.inflight`); ``_ready`` (records not
yet started) appended by broker sessions, popped by workers; ``_idle`` (futures of
workers waiting for records) appended by workers, woken by broker sessions and by
workers (one at a time: ``_waking``, see :meth:`ShareRun._wake_worker`);
``_reserved`` (records fetches in flight may still bring) and ``ahead`` by broker
sessions (``_ready``'s stale head too, :meth:`ShareRun.release_stale`); ``sessions``
and ``assigned`` by the router and the heartbeat task; ``closing`` by :meth:`stop`.

Closing (close(), or an error that ends the member): fetching stops; records not yet
started are released; running handlers have until the drain deadline, then are cancelled
(their records released); each broker session sends what was decided and closes (the
broker releases anything left); then the member leaves the group.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

import anyio
from anyio.abc import TaskGroup

from .._repeats import RepeatedWarning
from ..errors import ConsumerGroupError, FencedMemberEpochError, UnknownMemberIdError
from ..net.share import ACCEPT, GAP, RELEASE
from ..retry import COORDINATOR_LOST, Backoff, is_transient
from .acquired import Acquired
from .broker import BrokerSession
from .handler import ShareGroupHandler, ShareSession
from .inflight import InFlight, Lock, Partition
from .record import ShareRecord

if TYPE_CHECKING:
    from ..client import Client
    from ..config import Config
    from ..group.logs import GroupLogger
    from .membership import ShareMembership

__all__ = ["ShareRun"]

TopicPartition = tuple[str, int]

#: What the run reports to its group: ``joined``, ``fenced``, ``retrying`` (with why).
Report = Callable[[str, str | None], None]

_FENCED = (UnknownMemberIdError, FencedMemberEpochError)
#: Seconds cancelled workers get to end before a handler that will not is abandoned.
_ABANDON_AFTER = 1.0
#: Seconds between two looks at the handlers' pace (:meth:`ShareRun.paced`).
_PACE_EVERY = 0.05
#: Round trips of the handlers' work acquired ahead: the next fetch goes when a quarter
#: of the limit is free (``broker.fetch_threshold``), so that three are still waiting.
_AHEAD_ROUND_TRIPS = 4
#: Fetch round trips whose longest sizes ``ahead``: one may take several times the last
#: (record-limit acquisition costs the broker per record asked; a loaded machine), and a
#: window sized on a short one ran the handlers dry. The pace is the last look's alone:
#: handlers that slow down must not keep a window their records would go stale in.
_AHEAD_LOOKS = 8
#: Seconds of the handlers' work acquired ahead at least, whatever the round trips were:
#: one took 84-215 ms after a run of 12 ms ones (a loaded machine, the broker's pauses).
_AHEAD_FLOOR = 0.2
#: Records a worker handles in a row before it lets the event loop run: a handler that
#: never awaits would otherwise keep the loop (and the broker session whose fetch is due)
#: until every waiting record is handled, so no fetch would be in flight meanwhile.
_YIELD_EVERY = 64
#: A lock timeout to assume before the broker's first answer names one (Kafka's default).
_DEFAULT_LOCK_TIMEOUT = 30.0


class ShareRun:
    """The tasks and shared state of one ``run()`` of a share-group member."""

    def __init__(
        self,
        *,
        group_id: str,
        config: Config,
        client: Client,
        membership: ShareMembership,
        log: GroupLogger,
        topics: Sequence[str],
        handler: ShareGroupHandler,
        concurrency: int,
        report: Report,
    ) -> None:
        self.group_id = group_id
        self.config = config
        self.client = client
        self.log = log
        self.topics = list(topics)
        self.handler = handler
        self.concurrency = concurrency
        #: Records acquired ahead of the handlers (see :meth:`paced`), at most
        #: ``max_poll_records``; broker sessions read it, :meth:`paced` sets it.
        self.ahead = 0  # until the handlers' pace is known
        # The round trips of the last looks: ``ahead`` is sized on the longest.
        self._round_trips: deque[float] = deque(maxlen=_AHEAD_LOOKS)
        self._paced_at = time.monotonic()
        self._paced_finished = 0
        self._membership = membership
        self._report = report
        self.inflight = InFlight(self._decided)
        self.session = ShareSession(self)
        # --- shared state (module doc: who touches what) ---
        self.sessions: dict[int, BrokerSession] = {}
        self.assigned: set[TopicPartition] = set()
        self._unrouted: set[TopicPartition] = set()
        self._route_now = anyio.Event()
        self._ready: deque[ShareRecord] = deque()
        self._idle: deque[asyncio.Future[None]] = deque()
        self._waking = 0  # 1 while a worker was woken and has not run yet
        self._reserved = 0
        self._busy = 0
        self._drained = anyio.Event()
        self.renew = config.share.renew
        self.lock_timeout = _DEFAULT_LOCK_TIMEOUT
        self.closing = False
        self._stop = anyio.Event()
        self._tasks: TaskGroup | None = None
        self._drain_deadline = self._sessions_deadline = 0.0
        self.error: BaseException | None = None
        self.last_heartbeat: float | None = None
        self.handler_errors = 0
        #: Handlers abandoned because they ignored their cancellation (run on, detached).
        self.runaway_handlers = 0
        # Set by _end_workers: a worker whose abandoned handler ends at last stops there.
        self._workers_ended = False
        self._handler_warning = RepeatedWarning(log)
        self._heartbeat_warning = RepeatedWarning(log)

    # -------------------------------------------------------- what sessions ask (Member)

    @property
    def member_id(self) -> str:
        """This member's id."""
        return self._membership.member_id

    @property
    def limit(self) -> int:
        """The most records the member holds now: a handler's each, and those ahead."""
        return self.concurrency + self.ahead

    def room(self) -> int:
        """How many more records the member may hold: ``limit`` minus records held and
        records that fetches in flight may still bring."""
        return self.limit - self.inflight.count - self._reserved

    def paced(self, round_trip: float) -> None:
        """A ShareFetch that acquired records took ``round_trip`` seconds: from now on,
        acquire ahead what the handlers finish at their pace since the last look in
        :data:`_AHEAD_ROUND_TRIPS` round trips as long as the longest of the last
        :data:`_AHEAD_LOOKS` (:data:`_AHEAD_FLOOR` at least; at most ``max_poll_records``
        records). Enough that the next records are there when handlers free up, though
        round trips vary from one fetch to the next (sized on the last one alone, the
        window shrank after a quick one and the next, slower one ran the handlers dry);
        not more, since records waiting longer would be better off with another member
        (and their locks run meanwhile). Handlers idle for want of records finish fewer,
        so the window grows from a small one, by up to that factor per look."""
        now = time.monotonic()
        elapsed = now - self._paced_at
        if elapsed < _PACE_EVERY:
            return
        finished = self.inflight.finished
        rate = (finished - self._paced_finished) / elapsed
        self._paced_at, self._paced_finished = now, finished
        round_trips = self._round_trips
        round_trips.append(round_trip)
        ahead = math.ceil(rate * max(_AHEAD_ROUND_TRIPS * max(round_trips), _AHEAD_FLOOR))
        self.ahead = min(self.config.share.max_poll_records, ahead)

    def reserve(self, records: int) -> None:
        """A fetch may bring ``records`` more (negative: it came back)."""
        self._reserved += records

    def hand_out(self, part: Partition, acquired: Acquired, lock: Lock) -> None:
        """Records acquired for this member: queued for the workers (released at once
        while closing, or when the member no longer fetches their partition's leader)."""
        records, gaps, missing, redelivered = acquired
        if self.closing:
            part.decided[RELEASE].extend(r.offset for r in records)
            part.decided[RELEASE].extend(missing)
            part.decided[GAP].extend(gaps)
            self._decided(part)
            return
        self.inflight.deliver(part, [r.offset for r in records], gaps, lock, redelivered)
        if missing:
            part.decided[RELEASE].extend(missing)
        if records:
            self._ready.extend(records)
            self._wake_worker()

    def release_stale(self, now: float) -> float | None:
        """Without lock renewal: release the records waiting for a handler whose lock is
        half spent (the handlers are too slow for them: another member may take them,
        rather than one handling them after the broker handed them out again). When the
        next waiting record's lock is half spent (None: none waits)."""
        ready, partitions = self._ready, self.inflight.partitions
        while ready:
            record = ready[0]
            part = partitions.get((record.topic, record.partition))
            lock = None if part is None else part.held.get(record.offset)
            if lock is not None and lock.renew_at > now:
                return lock.renew_at
            ready.popleft()  # its lock is half spent, or it is not held any more
            if lock is not None:
                self.inflight.decide(record.topic, record.partition, record.offset, RELEASE)
        return None

    def moved(self, part: Partition) -> None:
        """``part``'s leader changed: its records are gone with the old leader's locks;
        the router finds the new leader."""
        dropped = self.inflight.drop(part)
        if dropped:
            self.log.info(
                "%s[%d]: leader changed; %d record(s) being handled will come again",
                part.topic,
                part.partition,
                dropped,
            )
        session = self.sessions.get(part.node)
        if session is not None:
            session.remove(part)
        if part.key in self.assigned:
            self._unrouted.add(part.key)
            self._route_now.set()

    def renew_refused(self, reason: str) -> None:
        """The broker refuses lock renewal: one warning, no more renewals."""
        if self.renew:
            self.renew = False
            self.log.warning(
                "lock renewal refused (%s): records whose handlers run longer than the lock "
                "duration (%.1fs) will be handed out again meanwhile; set the group config "
                "share.renew.acknowledge.enable=true (Kafka 4.2+) or raise "
                "share.record.lock.duration.ms",
                reason,
                self.lock_timeout,
            )

    def _wake_worker(self) -> None:
        """Wake one idle worker, unless one is woken already and has not run yet.

        Workers wake each other in a chain: a worker that takes a record while more wait
        wakes the next one before it runs the handler. A handler that awaits lets the
        next worker start the next record, so ``concurrency`` records start one task
        switch apart; a handler that never awaits lets its worker take record after
        record itself, and the one worker woken meanwhile finds the queue empty: a
        thousand records cost one wake-up, not a thousand."""
        if self._waking:
            return
        idle = self._idle
        while idle:
            waiter = idle.popleft()
            if not waiter.done():  # a cancelled worker's waiter is skipped
                waiter.set_result(None)
                self._waking = 1
                return

    def _decided(self, part: Partition) -> None:
        session = self.sessions.get(part.node)
        if session is not None:
            session.wake()
        if len(self.sessions) > 1:  # the room is shared: others may fetch now
            for other in self.sessions.values():
                other.wake()

    # ------------------------------------------------------------------------ run

    async def run(self) -> None:
        """The member's tasks until :meth:`stop` (or an error) and the close after it;
        raises the error that ended the member, if any."""
        async with anyio.create_task_group() as tasks:
            self._tasks = tasks
            tasks.start_soon(self._guarded, self._heartbeat_loop)
            tasks.start_soon(self._guarded, self._route_loop)
            workers = [
                asyncio.create_task(self._worker(), name=f"share-worker-{self.group_id}-{i}")
                for i in range(self.concurrency)
            ]
            try:
                await self._stop.wait()
                await self._drain()
            finally:
                await self._end_workers(workers)
            await self._close_sessions()
            tasks.cancel_scope.cancel()
        if self.error is not None:
            raise self.error

    async def _end_workers(self, workers: list[asyncio.Task[None]]) -> None:
        """Cancel the workers (asyncio's cancel: once; a busy one's record is released)
        and wait a moment for them. A handler that ignores its cancellation and runs on is
        abandoned, not waited for: it is counted (``runaway_handlers``, which fails
        liveness in a service), and every record still held is released so the share
        sessions can close."""
        self._workers_ended = True
        for worker in workers:
            worker.cancel()
        with anyio.CancelScope(shield=True):
            grace = min(_ABANDON_AFTER, max(0.0, self._sessions_deadline - anyio.current_time()))
            with anyio.move_on_after(grace):
                await asyncio.wait(workers)
        runaway = [w for w in workers if not w.done()]
        for worker in workers:
            error = None if not worker.done() or worker.cancelled() else worker.exception()
            if error is not None:
                raise error  # not a handler's (those are caught): one of ours
        if runaway:
            self.runaway_handlers += len(runaway)
            self.log.error(
                "%d handler(s) ignored their cancellation at the close deadline and run on, "
                "abandoned: their records are released (fix the handler: let "
                "CancelledError propagate)",
                len(runaway),
            )
        for part in self.inflight.partitions.values():
            for offset in list(part.held):
                self.inflight.decide(part.topic, part.partition, offset, RELEASE)

    def stop(self, drain_deadline: float, sessions_deadline: float) -> None:
        """Begin closing: handlers may run until ``drain_deadline``, broker sessions close
        by ``sessions_deadline`` (monotonic, ``anyio.current_time()``)."""
        self._drain_deadline = drain_deadline
        self._sessions_deadline = sessions_deadline
        if self.closing:
            return
        self.closing = True
        self._stop.set()
        for session in self.sessions.values():
            session.wake()

    async def _guarded(self, task: Callable[[], Awaitable[None]]) -> None:
        """A member task whose error ends the member (gracefully: the close runs)."""
        try:
            await task()
        except Exception as exc:
            if self.error is None and not self.closing:
                self.error = exc
                now = anyio.current_time()
                budget = self.config.share.close_timeout
                self.stop(now + budget * 0.75, now + budget)

    async def _drain(self) -> None:
        """Release the records not started; wait for running handlers until the drain
        deadline (the caller cancels the rest, which releases theirs)."""
        ready, decide = self._ready, self.inflight.decide
        while ready:
            record = ready.popleft()
            decide(record.topic, record.partition, record.offset, RELEASE)
        if self._busy:
            with anyio.move_on_after(max(0.0, self._drain_deadline - anyio.current_time())):
                await self._drained.wait()
            if self._busy:
                self.log.warning(
                    "%d handler(s) still running at the close deadline: cancelled, their "
                    "records released",
                    self._busy,
                )

    async def _close_sessions(self) -> None:
        """Each broker session sends what was decided and closes, by the deadline."""
        for session in self.sessions.values():
            session.wake()
        with anyio.move_on_after(max(0.0, self._sessions_deadline - anyio.current_time())):
            for session in list(self.sessions.values()):
                await session.done.wait()

    # --------------------------------------------------------------------- workers

    async def _worker(self) -> None:
        ready, idle = self._ready, self._idle
        decide = self.inflight.decide
        handler, session = self.handler, self.session
        loop = asyncio.get_running_loop()
        streak = 0  # records handled since this worker last let the loop run
        while True:
            if streak >= _YIELD_EVERY:
                streak = 0
                await asyncio.sleep(0)  # the broker sessions' turn: the next fetch goes
            if not ready:
                streak = 0
                waiter: asyncio.Future[None] = loop.create_future()
                idle.append(waiter)
                try:
                    await waiter
                finally:
                    if not waiter.done():  # cancelled while waiting: not a worker any more
                        waiter.cancel()
                    elif not waiter.cancelled():
                        self._waking = 0  # the woken one runs
                continue
            record = ready.popleft()
            streak += 1
            if ready:
                self._wake_worker()  # the next record's worker, should this handler await
            self._busy += 1
            try:
                await handler.consume(session, record)
            except Exception as exc:
                released = decide(record.topic, record.partition, record.offset, RELEASE)
                self._handler_failed(record, exc, released)
            except BaseException:  # cancelled (the close deadline): handed back
                decide(record.topic, record.partition, record.offset, RELEASE)
                raise
            else:
                decide(record.topic, record.partition, record.offset, ACCEPT)
            finally:
                self._busy -= 1
                if self.closing and not self._busy:
                    self._drained.set()
            if self._workers_ended:
                return  # an abandoned handler ended at last: its worker is gone

    def _handler_failed(self, record: ShareRecord, exc: Exception, released: bool) -> None:
        self.handler_errors += 1
        self._handler_warning.warning(
            "the handler raised %s: %s (%s[%d] offset %d %s)",
            type(exc).__name__,
            exc,
            record.topic,
            record.partition,
            record.offset,
            "released: it comes again" if released else "decided before it raised",
        )

    # ------------------------------------------------------------------ membership

    async def _heartbeat_loop(self) -> None:
        membership = self._membership
        backoff = Backoff(self.config.metadata.retry.backoff)
        full = True  # the join, and every heartbeat after an error, names the topics
        while True:
            try:
                assignment = await membership.heartbeat(self.topics if full else None)
            except _FENCED as exc:
                self._fenced(exc)
                full = True
                continue
            except ConsumerGroupError as exc:
                if not is_transient(exc):
                    raise
                full = True
                self._report("retrying", str(exc))
                if isinstance(exc, COORDINATOR_LOST):
                    self.client.invalidate_coordinator(self.group_id)
                if membership.joined or not isinstance(exc, COORDINATOR_LOST):
                    self._heartbeat_warning.warning("share-group heartbeat failed: %s", exc)
                else:  # a new group's coordinator is often still being set up
                    self.log.info("joining: %s; retrying", exc)
                await anyio.sleep(backoff.next())
                continue
            if full:
                self._heartbeat_warning.recovered("heartbeats go through again")
            full = False
            backoff.reset()
            self.last_heartbeat = anyio.current_time()
            self._report("joined", None)
            if assignment is not None:
                self._assign(assignment)
            await anyio.sleep(membership.heartbeat_interval)

    def _fenced(self, exc: ConsumerGroupError) -> None:
        """The coordinator dropped this member: every record it holds is the broker's
        again (handlers still running have their results thrown away); join again."""
        dropped = sum(self.inflight.drop(p) for p in self.inflight.partitions.values())
        self.log.warning(
            "fenced by the coordinator (%s): %d record(s) being handled will come again; rejoining",
            type(exc).__name__,
            dropped,
        )
        self._membership.reset()
        self._report("fenced", str(exc))
        self._assign({})

    def _assign(self, assignment: dict[str, list[int]]) -> None:
        wanted = {(topic, p) for topic, parts in assignment.items() for p in parts}
        if wanted != self.assigned:
            self.log.info("assignment: %s", {t: sorted(ps) for t, ps in assignment.items()})
            self.assigned = wanted
            self._route_now.set()

    # ---------------------------------------------------------------------- router

    async def _route_loop(self) -> None:
        backoff = self.config.consumer.retry.backoff
        while True:
            await self._route_now.wait()
            self._route_now = anyio.Event()
            if self._unrouted:  # a leader moved, or was unknown: not in a tight loop
                await anyio.sleep(backoff)
            try:
                await self._route()
            except ConsumerGroupError as exc:
                if not is_transient(exc):
                    raise
                self.log.info("routing partitions to their leaders failed: %s", exc)
                self._unrouted |= self.assigned
            if self._unrouted:
                self._route_now.set()

    async def _route(self) -> None:
        """Each assigned partition fetched by its leader's session; the others not."""
        wanted = set() if self.closing else set(self.assigned)
        for session in self.sessions.values():
            for key, part in list(session.parts.items()):
                if key not in wanted:
                    session.remove(part)
        client = self.client
        stale = {t for t, p in wanted | self._unrouted if (t, p) in self._unrouted}
        stale |= {t for t, p in wanted if client.leader_id(t, p) < 0}
        if stale:
            await client.refresh_metadata(*sorted(stale))
        self._unrouted.clear()
        for key in sorted(wanted):
            leader = client.leader_id(*key)
            if leader < 0:
                self._unrouted.add(key)
                continue
            part = self.inflight.partition(*key)
            current = self.sessions.get(part.node)
            fetched_here = current is not None and not current.ended and key in current.parts
            if part.node == leader and fetched_here:
                continue
            if part.node >= 0 and part.node != leader:
                self.moved(part)
                self._unrouted.discard(key)
            self._session(leader).add(part)

    def _session(self, node: int) -> BrokerSession:
        session = self.sessions.get(node)
        if session is None or session.ended:
            session = self.sessions[node] = BrokerSession(self, node)
            assert self._tasks is not None
            self._tasks.start_soon(self._guarded, session.run)
        return session
