"""ConsumerGroup: the user's entry point (sarama's ``consumer_group.go``).

``consume()`` runs one session: refresh metadata, join (JoinGroup -> assign ->
SyncGroup), fetch committed offsets, start a PartitionConsumer per claim, run
the session until it ends, final commit. ``run()`` loops ``consume()`` until
``close()`` or a fatal error, so users never write the re-join loop. ``close()``
ends the session, commits, sends LeaveGroup and stops every task, within a bound.

Owns, for its whole life: the :class:`~consumergroup.client.Client`, the fetch
:class:`~consumergroup.consumer.Consumer`, the :class:`~.membership.Membership`
(member id survives sessions) and the :class:`~consumergroup.offsets.OffsetManager`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterable, Sequence

import anyio

from .._lifecycle import AsyncResource
from ..client import Client
from ..config import Config
from ..consumer.consumer import Consumer
from ..errors import (
    ClosedError,
    ConfigurationError,
    ConsumerError,
    ConsumerGroupError,
)
from ..offsets import OffsetManager
from .claim import ConsumerGroupClaim
from .handler import ConsumerGroupHandler
from .membership import Membership
from .session import ConsumerGroupSession
from .state import GroupObserver, GroupState, GroupStats, PartitionStats

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]

#: Bound on how many errors errors() buffers before dropping the oldest.
_ERROR_BUFFER = 1024


class ConsumerGroup(AsyncResource):
    """A member of a Kafka consumer group.

    ``async with ConsumerGroup(addrs, "group", config) as group:
    await group.run(["topic"], handler)``.
    """

    def __init__(self, addrs: Sequence[str], group_id: str, config: Config | None = None) -> None:
        if not isinstance(group_id, str) or not group_id:
            raise ConfigurationError("group_id must be a non-empty string")
        self.config = config or Config()
        self.config.validate()
        self.group_id = group_id
        self._client = Client(addrs, self.config)
        self._consumer = Consumer(client=self._client)
        self._membership = Membership(self._client, group_id, self.config)
        self._offsets = OffsetManager(self._client, group_id, self.config)
        # --- event-loop state ---
        # Partitions the user paused; re-applied to every new session's claims.
        self._paused: set[TopicPartition] = set()
        self._session: ConsumerGroupSession | None = None
        # Held while a session runs, so two consume() calls never overlap.
        self._consume_lock = asyncio.Lock()
        self._errors: asyncio.Queue[ConsumerError] = asyncio.Queue(_ERROR_BUFFER)
        self._started = False
        self._closing = False
        self._closed = False
        self._closed_event = asyncio.Event()
        # The one state variable (see .state); only _set_state() writes it.
        self._state = GroupState.STARTING
        self._rebalances = 0
        self._error: str | None = None
        # Event receivers (metrics); called synchronously on the loop, see GroupObserver.
        self._observers: list[GroupObserver] = []
        self._consumer.on_fetch = lambda *fetched: self._notify("on_fetch", *fetched)

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
                log.exception("group %r: observer %r failed in %s", self.group_id, obs, event)

    def _set_state(self, state: GroupState) -> None:
        if self._state in (GroupState.CLOSED, GroupState.FAILED):
            return
        if self._state is GroupState.CLOSING and state is not GroupState.CLOSED:
            return
        if state is not self._state:
            old, self._state = self._state, state
            log.debug("group %r: %s -> %s", self.group_id, old.name, state.name)
            self._notify("on_state", old, state)

    def stats(self) -> GroupStats:
        """A snapshot of this member (no broker round trip: cheap enough for every probe)."""
        partitions: dict[TopicPartition, PartitionStats] = {}
        session = self._session
        if session is not None:
            for tp, claim in session._claims.items():
                pc = claim._pc
                position = pc.position
                hwm = pc.high_water_mark_offset
                partitions[tp] = PartitionStats(
                    position=position,
                    committed=self._offsets.committed(*tp),
                    high_water_mark=hwm,
                    lag=max(hwm - position, 0) if hwm >= 0 and position >= 0 else 0,
                    paused=pc.paused,
                    records_consumed=pc.consumed.records,
                    bytes_consumed=pc.consumed.bytes,
                )
        return GroupStats(
            group_id=self.group_id,
            state=self._state,
            member_id=self._membership.member_id,
            generation_id=session.generation_id if session is not None else -1,
            rebalances=self._rebalances,
            partitions=partitions,
            error=self._error,
        )

    @property
    def session(self) -> ConsumerGroupSession | None:
        """The running session, if any."""
        return self._session

    async def start(self) -> None:
        """Connect to the cluster (``consume``/``run`` call this when needed)."""
        if self._closed:
            raise ClosedError(f"consumer group {self.group_id!r} is closed")
        if not self._started:
            await self._client.start()
            self._started = True

    # ------------------------------------------------------------------ sessions

    async def run(self, topics: Sequence[str], handler: ConsumerGroupHandler) -> None:
        """Consume session after session until :meth:`close` (or a fatal error, raised here)."""
        if self._closing:
            raise ClosedError(f"consumer group {self.group_id!r} is closed")
        while not self._closing:
            try:
                await self.consume(topics, handler)
            except ClosedError:
                if self._closing:
                    return  # close() ended the loop: that is run()'s normal end
                raise

    async def consume(self, topics: Sequence[str], handler: ConsumerGroupHandler) -> None:
        """Join the group and run one session until it ends (sarama's ``Consume``).

        Returns when the session ends for a rebalance (call it again, or use
        :meth:`run`); raises for a handler error when ``return_errors`` is off,
        and for errors the group cannot recover from.
        """
        topics = self._check_topics(topics)
        if not isinstance(handler, ConsumerGroupHandler):
            raise ConfigurationError(
                "handler must be a consumergroup.ConsumerGroupHandler (subclass it and define "
                "async def consume_claim(self, session, claim))"
            )
        await self.start()
        async with self._consume_lock:
            if self._closing:
                raise ClosedError(f"consumer group {self.group_id!r} is closed")
            self._set_state(GroupState.JOINING)
            try:
                session = await self._new_session(topics)
            except BaseException as exc:
                self._fail(exc)
                raise
            self._session = session
            self._set_state(GroupState.STABLE)
            try:
                await session.run(handler)
            finally:
                self._session = None
                self._rebalances += 1
                self._set_state(GroupState.REBALANCING)
            if session.fatal is not None:
                self._fail(session.fatal)
                raise session.fatal
            if session.rejoin_fresh and not self._closing:
                await self._leave()

    def _fail(self, exc: BaseException) -> None:
        """A non-retriable error ends the member: FAILED, with the reason in stats()."""
        if isinstance(exc, Exception) and not self._closing:
            self._error = str(exc) or type(exc).__name__
            self._set_state(GroupState.FAILED)

    def _check_topics(self, topics: Sequence[str]) -> list[str]:
        if isinstance(topics, str):
            topics = [topics]
        if not topics or not all(isinstance(t, str) and t for t in topics):
            raise ConfigurationError("topics must be a non-empty list of topic names")
        return sorted(set(topics))

    async def _new_session(self, topics: list[str]) -> ConsumerGroupSession:
        for topic in topics:  # unknown topics fail here, with a message saying what to do
            await self._client.partitions(topic, refresh=True)
        counts = {t: len(self._client.cached_partitions(t) or ()) for t in topics}
        generation = await self._membership.join(topics, owned={})
        assigned = [(t, p) for t, parts in generation.assignment.items() for p in parts]
        log.info(
            "group %r generation %d: member %s claims %s",
            self.group_id,
            generation.generation_id,
            generation.member_id,
            generation.assignment,
        )
        self._offsets.member_id = generation.member_id
        self._offsets.generation_id = generation.generation_id
        committed = await self._offsets.fetch_committed(assigned)
        initial = self.config.consumer.offsets.initial
        wanted = {
            tp: committed[tp][0] if committed.get(tp, (-1, ""))[0] >= 0 else initial
            for tp in assigned
        }

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
        pcs = await self._consumer.consume_partitions(wanted)
        claims: dict[TopicPartition, ConsumerGroupClaim] = {}
        start: dict[TopicPartition, int] = {}
        for tp, pc in pcs.items():
            if tp in self._paused:
                pc.pause()
            claims[tp] = ConsumerGroupClaim(pc, pc.next_offset)
            start[tp] = pc.next_offset
        self._offsets.assign(committed, start)
        session = ConsumerGroupSession(
            group_id=self.group_id,
            generation=generation,
            claims=claims,
            partition_counts=counts,
            client=self._client,
            membership=self._membership,
            offsets=self._offsets,
            config=self.config,
            on_error=self._push_error,
        )
        if unknown:
            session.end(f"assigned partitions {unknown} are not in this member's metadata yet")
        return session

    # ------------------------------------------------------------------ errors

    def _push_error(self, err: ConsumerError) -> None:
        if not self.config.consumer.return_errors:
            return
        if self._errors.full():
            self._errors.get_nowait()  # bounded: the oldest error goes
        self._errors.put_nowait(err)

    async def errors(self) -> AsyncIterator[ConsumerError]:
        """Errors from handlers, commits and fetches (``consumer.return_errors`` must be on).

        Ends when the group is closed.
        """
        if not self.config.consumer.return_errors:
            raise ConfigurationError("errors() needs config.consumer.return_errors = True")
        while not (self._closed and self._errors.empty()):
            if self._closed:
                yield self._errors.get_nowait()
                continue
            getter = asyncio.ensure_future(self._errors.get())
            closed = asyncio.ensure_future(self._closed_event.wait())
            done, pending = await asyncio.wait(
                {getter, closed}, return_when=asyncio.FIRST_COMPLETED
            )
            for fut in pending:
                fut.cancel()
            if getter in done:
                yield getter.result()

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
        paused, self._paused = self._paused, set()
        for tp in paused:
            self._apply(tp, pause=False)

    def paused(self) -> set[TopicPartition]:
        """The partitions paused by the user."""
        return set(self._paused)

    def _apply(self, tp: TopicPartition, *, pause: bool) -> None:
        session = self._session
        claim = session._claims.get(tp) if session is not None else None
        if claim is not None:
            claim._pc.pause() if pause else claim._pc.resume()

    # ------------------------------------------------------------------ close

    async def _leave(self) -> None:
        """LeaveGroup, bounded; a failure only means the others wait for the session timeout."""
        with anyio.move_on_after(self.config.net.read_timeout):
            try:
                await self._membership.leave()
            except (ConsumerGroupError, OSError) as exc:
                log.info("group %r: LeaveGroup failed: %s", self.group_id, exc)

    async def close(self, timeout: float | None = None) -> None:
        """End the session (final commit), leave the group and stop every task. Idempotent.

        Bounded by ``timeout`` (default: ``rebalance.timeout`` + ``net.read_timeout``).
        """
        if self._closed:
            return
        self._closing = True
        self._set_state(GroupState.CLOSING)
        bound = (
            timeout
            if timeout is not None
            else (self.config.consumer.group.rebalance.timeout + self.config.net.read_timeout)
        )
        with anyio.move_on_after(bound):
            session = self._session
            if session is not None:
                session.end("close() was called")
            # Waits for the running consume() to finish its cleanup and final commit.
            async with self._consume_lock:
                pass
        if self._started:
            await self._leave()
        await self._consumer.close()
        await self._client.close()
        self._closed = True
        self._set_state(GroupState.CLOSED)
        self._closed_event.set()


def _pairs(partitions: dict[str, list[int]] | Iterable[TopicPartition]) -> list[TopicPartition]:
    if isinstance(partitions, dict):
        return [(t, p) for t, parts in partitions.items() for p in parts]
    return list(partitions)
