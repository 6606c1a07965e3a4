"""OffsetManager: a group's positions — fetched, marked, committed (sarama's ``offset_manager.go``).

One manager per session (sarama's ``newOffsetManagerFromClient`` per session):
it is created with the generation's member id and generation id, which never
change, *assigns* the session's claimed partitions (their committed offsets are
fetched with OffsetFetch) and *releases* them when the session ends, after a final
commit. In between, the user marks offsets (``mark_message``: offset + 1, sarama's
semantics) and the manager commits whatever changed, every
``auto_commit.interval`` and on demand.

Commits carry the session's member id and generation, and only ever name
partitions that session owns: a late mark or commit from an old session goes to
the old session's manager, whose partitions are released, so it can never move
a partition the next generation re-assigned.

State ownership: ``_positions`` is mutated by the session's tasks (mark/reset
from handlers, commit results from the commit path) on one event loop; commits
are serialised by ``_commit_lock`` so two never interleave.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Protocol, TypeVar

from .._dataclass import dataclass
from ..consumer._native import load_extension
from ..errors import (
    ConsumerGroupError,
    KafkaError,
    StaleMemberEpochError,
    UnstableOffsetCommitError,
    error_for_code,
)
from ..message import ConsumerMessage
from ..net.protocol import OffsetCommitRequest, OffsetFetchRequest, offset_fetch_topics
from ..retry import COORDINATOR_LOST, retrying

if TYPE_CHECKING:
    from ..client import Client
    from ..config import Config
    from ..consumer._cstream import Marks

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
T = TypeVar("T")
#: The coordinator connection offsets use: not the group protocol's, where a JoinGroup the
#: coordinator holds would delay a commit queued behind it, and a commit that timed out
#: (retiring its connection) would fail the held join.
_PURPOSE = "offsets"
#: Receives every OffsetCommit round trip: (latency in seconds, error or None).
CommitObserver = Callable[[float, BaseException | None], None]


class NextEpoch(Protocol):
    """Waits for the member's next epoch (a heartbeat's answer); False when there is none.
    ``final``: for the session's final commit (the heartbeat outlives the session's end)."""

    def __call__(self, *, final: bool = False) -> Awaitable[bool]:
        """Heartbeat now and wait for its answer."""


@dataclass(slots=True)
class _Position:
    topic: str
    partition: int
    committed: int  # last offset the broker acknowledged (-1: none)
    # The offset to commit next (the next message to consume) minus one: what
    # mark_message compares and stores is the message's own offset, with no addition.
    last: int
    metadata: str = ""


class _PyMarks:
    """``session.mark_message`` without the C extension (``_cstream.Marks``, its twin).

    Keeps a one-entry cache: the position marked last. A claim's messages come in runs of
    one partition, so most marks skip building a (topic, partition) key and the dict
    lookup. The manager calls :meth:`forget` whenever its positions change, so a position
    assigned again is a fresh one and a released one is never marked.
    """

    __slots__ = ("_hot", "_idle", "_positions")

    def __init__(
        self,
        positions: dict[TopicPartition, _Position],
        position_type: type[_Position],
        message_type: type[ConsumerMessage],
    ) -> None:
        self._positions = positions
        self._idle = position_type("", -1, -1, -2)  # matches no message
        self._hot = self._idle

    def forget(self) -> None:
        """Drop the cached position (the positions changed)."""
        self._hot = self._idle

    def mark_message(self, msg: ConsumerMessage, metadata: str = "") -> None:
        """Move the position of ``msg``'s partition to ``msg.offset`` if that is forward
        (the next offset to commit is one past it); ignored for a partition not owned."""
        pos = self._hot
        offset = msg.offset
        if msg.partition != pos.partition or msg.topic != pos.topic:
            found = self._positions.get((msg.topic, msg.partition))
            if found is None:
                return
            self._hot = pos = found
        if offset > pos.last:
            pos.last = offset
            pos.metadata = metadata


#: ``mark_message`` in C (one call per message of a messages() loop), or its Python twin.
_Marks: type[Marks | _PyMarks] = getattr(load_extension("_cstream"), "Marks", _PyMarks)


class OffsetManager:
    """Marked and committed offsets of the partitions one session owns.

    ``member_id``/``generation_id`` are the session's and are sent with every commit
    (the defaults suit a read-only use such as ``fetch_committed``). ``on_commit``
    sees every OffsetCommit round trip. ``member_fetch`` (a member of a consumer-protocol
    group): OffsetFetch carries the member id and epoch too, which the coordinator
    checks; a fetch refused as STALE_MEMBER_EPOCH goes again once ``next_epoch`` (set by
    the session that owns this manager) has brought the member's current epoch.
    """

    def __init__(
        self,
        client: Client,
        group: str,
        config: Config,
        *,
        member_id: str = "",
        generation_id: int = -1,
        instance_id: str | None = None,
        on_commit: CommitObserver | None = None,
        member_fetch: bool = False,
    ) -> None:
        self._client = client
        self.group = group
        self._config = config
        self._positions: dict[TopicPartition, _Position] = {}
        # The marks of mark_message, with a cache of the position marked last: told to
        # forget it whenever _positions changes.
        self._marks = _Marks(self._positions, _Position, ConsumerMessage)
        # One call per consumed message: the marks' own method, shadowing the one below
        # (which documents it and does the same) saves a Python call per message.
        self.mark_message = self._marks.mark_message  # type: ignore[method-assign]
        self._commit_lock = asyncio.Lock()
        self.member_id = member_id
        self.generation_id = generation_id
        self.instance_id = instance_id
        self._on_commit = on_commit
        self._member_fetch = member_fetch
        self.next_epoch: NextEpoch | None = None
        # Exactly-once (the session's GroupTransaction.commit): commit() ends the member's
        # transaction, which carries the marks, instead of an OffsetCommit.
        self.transaction: Callable[[], Awaitable[None]] | None = None
        # Where each owned partition is read again from after a transaction aborts: its
        # start, then each offset committed (assign/acknowledge/release write it).
        self._rewind_to: dict[TopicPartition, int] = {}
        # Per owned partition: the leader epoch of the record at an offset, as fetched
        # (-1: unknown), what a commit of the offset after it carries (KIP-320). Written
        # with the positions (assign, release); a partition without one commits none.
        self._epoch_of: dict[TopicPartition, Callable[[int], int]] = {}

    # -------------------------------------------------------------- fetch / assign

    async def fetch_committed(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, tuple[int, str]]:
        """OffsetFetch: ``{tp: (offset, metadata)}``; offset -1 where nothing is committed."""
        fetched = await self.fetch_committed_epochs(partitions)
        return {tp: (offset, metadata) for tp, (offset, metadata, _) in fetched.items()}

    async def fetch_committed_epochs(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, tuple[int, str, int]]:
        """OffsetFetch: ``{tp: (offset, metadata, leader epoch)}``; offset -1 where nothing
        is committed, epoch -1 where none was (or the broker's version has none)."""
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(partition)
        if not by_topic:
            return {}

        async def attempt() -> dict[TopicPartition, tuple[int, str, int]]:
            conn = await self._client.coordinator(self.group, _PURPOSE)
            member = self._member_fetch
            resp = await conn.send(
                OffsetFetchRequest(
                    self.group,
                    list(by_topic.items()),
                    member_id=self.member_id if member else None,
                    member_epoch=self.generation_id if member else -1,
                    require_stable=True,
                )
            )
            top, topics = offset_fetch_topics(resp)
            if top:
                raise error_for_code(top)(f"OffsetFetch for group {self.group!r}")
            out: dict[TopicPartition, tuple[int, str, int]] = {}
            for topic, parts in topics:
                for partition, offset, metadata, code, epoch in parts:
                    if code:
                        raise error_for_code(code)(f"OffsetFetch {topic}/{partition}")
                    out[(topic, partition)] = (offset, metadata or "", epoch)
            return out

        # Stable offsets (KIP-447; Java's consumer always asks for them): Kafka's
        # coordinator answers from its whole state, once it is replicated, not from a
        # snapshot at its partition's high watermark. A coordinator elected a moment ago
        # has a high watermark behind the commits its predecessor acknowledged, and the
        # snapshot would start the claim at an older commit (records read twice, the
        # older offset committed again). And it answers UNSTABLE_OFFSET_COMMIT while a
        # transaction has committed offsets it has not decided: the fetch goes again (up
        # to rebalance.timeout, which a transaction's own timeout normally ends first).
        unstable_until = time.monotonic() + self._config.consumer.group.rebalance.timeout
        retries = self._config.consumer.offsets.retry.max
        while True:
            try:
                return await self._with_coordinator("OffsetFetch", attempt)
            except UnstableOffsetCommitError:
                if time.monotonic() >= unstable_until:
                    raise
                await asyncio.sleep(self._config.consumer.offsets.retry.backoff)
            except StaleMemberEpochError:
                # A heartbeat moved the member to a newer epoch while this fetch was on
                # its way: again under the epoch the next heartbeat brings.
                if retries == 0 or self.next_epoch is None or not await self.next_epoch():
                    raise
                retries -= 1

    def assign(
        self,
        committed: dict[TopicPartition, tuple[int, str]],
        start: dict[TopicPartition, int],
        epoch_of: Mapping[TopicPartition, Callable[[int], int]] | None = None,
    ) -> None:
        """Own these partitions from now on; ``start`` is where consumption begins.
        ``epoch_of``: per partition, the leader epoch of the record at an offset (its
        partition consumer's), which commits carry."""
        self._marks.forget()
        for tp, offset in start.items():
            done, metadata = committed.get(tp, (-1, ""))
            self._positions[tp] = _Position(*tp, done, offset - 1, metadata)
            self._rewind_to[tp] = offset
        self._epoch_of.update(epoch_of or {})

    def track_epochs(self, tp: TopicPartition, epoch_of: Callable[[int], int]) -> None:
        """From now on commits of ``tp`` carry the leader epochs ``epoch_of`` gives (a
        restarted claim's new partition consumer); ignored for a partition not owned."""
        if tp in self._positions:
            self._epoch_of[tp] = epoch_of

    def release(self, partitions: Iterable[TopicPartition]) -> None:
        """Forget partitions the member no longer owns (after the final commit)."""
        self._marks.forget()
        for tp in partitions:
            self._positions.pop(tp, None)
            self._rewind_to.pop(tp, None)
            self._epoch_of.pop(tp, None)

    def owned(self) -> list[TopicPartition]:
        """Partitions currently tracked."""
        return list(self._positions)

    # --------------------------------------------------------------------- marking

    def mark(self, topic: str, partition: int, offset: int, metadata: str = "") -> None:
        """Mark ``offset`` as the next to consume; only moves forward (sarama MarkOffset).

        Ignored for a partition not owned (never assigned, or released)."""
        pos = self._positions.get((topic, partition))
        if pos is not None and offset > pos.last + 1:
            pos.last = offset - 1
            pos.metadata = metadata

    def mark_message(self, msg: ConsumerMessage, metadata: str = "") -> None:
        """Mark ``msg`` processed: its offset + 1 is committed next (sarama semantics).

        What ``session.mark_message`` is bound to, one call per consumed message: each
        instance shadows this method with its marks' own (in C when the extension is
        built), which does the same."""
        self._marks.mark_message(msg, metadata)

    def reset(self, topic: str, partition: int, offset: int, metadata: str = "") -> None:
        """Set the next offset to commit, backwards too (sarama ResetOffset)."""
        pos = self._positions.get((topic, partition))
        if pos is not None:
            pos.last = offset - 1
            pos.metadata = metadata
            # Force a commit even if it equals the last acknowledged one.
            pos.committed = -2 if offset == pos.committed else pos.committed

    def marked(self, topic: str, partition: int) -> int:
        """The marked offset of a partition (-1 if not owned)."""
        pos = self._positions.get((topic, partition))
        return pos.last + 1 if pos is not None else -1

    def committed(self, topic: str, partition: int) -> int:
        """The last offset the broker acknowledged for a partition (-1 if none / not owned)."""
        pos = self._positions.get((topic, partition))
        return pos.committed if pos is not None else -1

    def pending(
        self, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, tuple[int, str]]:
        """``{tp: (offset, metadata)}`` of the owned partitions (of ``partitions`` when
        given) whose marked offset moved since their last commit."""
        wanted = self._positions if partitions is None else set(partitions)
        return {
            tp: (pos.last + 1, pos.metadata)
            for tp, pos in self._positions.items()
            if tp in wanted and pos.last >= -1 and pos.last + 1 != pos.committed
        }

    def advanced(self, pending: dict[TopicPartition, tuple[int, str]]) -> bool:
        """Whether any of these offsets is past where an abort would rewind to (records
        were handled since the last commit, not only a start offset found)."""
        return any(offset != self._rewind_to.get(tp) for tp, (offset, _) in pending.items())

    def acknowledge(self, done: dict[TopicPartition, tuple[int, str]]) -> None:
        """These offsets were committed (by the member's transaction)."""
        for tp, (offset, _) in done.items():
            pos = self._positions.get(tp)
            if pos is not None:
                pos.committed = self._rewind_to[tp] = offset

    def rewind(self) -> None:
        """The member's transaction aborted: every position goes back to its last commit
        (or to where it started), dropping the marks the transaction carried."""
        self._marks.forget()
        for tp, pos in self._positions.items():
            pos.last = self._rewind_to[tp] - 1

    # -------------------------------------------------------------------- commit

    async def commit(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        """Commit every owned partition whose marked offset moved since its last commit
        (only those of ``partitions`` when given: a revocation commits what it revokes).
        Exactly-once (``transaction`` set): commit the member's transaction, which
        carries every owned partition's marks (``partitions`` aside: it spans them all).

        Raises :class:`RebalanceInProgressError` / :class:`IllegalGenerationError` /
        :class:`UnknownMemberIdError` when the member lost its partitions (nothing
        was committed for them), other errors after ``offsets.retry`` is spent.
        """
        if self.transaction is not None:
            started = time.monotonic()
            try:
                await self.transaction()
            except Exception as exc:
                self._observe(started, exc)
                raise
            self._observe(started, None)
            return
        async with self._commit_lock:
            dirty = self.pending(partitions)
            if not dirty:
                return
            by_topic: dict[str, list[tuple[int, int, str]]] = {}
            for (topic, partition), (offset, metadata) in dirty.items():
                by_topic.setdefault(topic, []).append((partition, offset, metadata))
            retention = self._config.consumer.offsets.retention
            epoch_of = self._epoch_of
            request = OffsetCommitRequest(
                self.group,
                self.generation_id,
                self.member_id,
                int(retention * 1000) if retention > 0 else -1,
                list(by_topic.items()),
                self.instance_id,
                leader_epochs={
                    tp: epoch_of[tp](offset - 1)
                    for tp, (offset, _) in dirty.items()
                    if tp in epoch_of
                },
            )

            async def attempt() -> None:
                conn = await self._client.coordinator(self.group, _PURPOSE)
                resp = await conn.send(request)
                first_error: KafkaError | None = None
                for topic, parts, *_ in resp.topics:  # flexible versions: tagged fields last
                    for partition, code, *_ in parts:
                        tp = (topic, partition)
                        if code == 0:
                            pos = self._positions.get(tp)
                            if pos is not None:
                                pos.committed = dirty[tp][0]
                        elif first_error is None:
                            first_error = error_for_code(code)(f"OffsetCommit {topic}/{partition}")
                if first_error is not None:
                    raise first_error

            started = time.monotonic()
            try:
                await self._with_coordinator("OffsetCommit", attempt)
            except Exception as exc:  # a cancelled commit is no failure of the broker's
                self._observe(started, exc)
                raise
            self._observe(started, None)

    def _observe(self, started: float, error: Exception | None) -> None:
        if self._on_commit is not None:
            self._on_commit(time.monotonic() - started, error)

    async def _with_coordinator(self, what: str, attempt: Callable[[], Awaitable[T]]) -> T:
        """Run ``attempt``, retrying coordinator moves and transient errors (``offsets.retry``);
        the fencing errors are not retriable and raise at once."""

        def lost_coordinator(exc: ConsumerGroupError) -> None:
            if isinstance(exc, COORDINATOR_LOST):
                self._client.invalidate_coordinator(self.group)

        return await retrying(
            f"{what} for group {self.group!r}",
            attempt,
            self._config.consumer.offsets.retry,
            lost_coordinator,
        )
