"""PartitionConsumer: one consumed partition's position, buffer and iterators.

The fetch task of the partition's leader (:class:`~.broker.BrokerConsumer`)
pushes framed record sets (:class:`~.records.RecordSet`) in with
:meth:`PartitionConsumer._deliver`; the reader decodes them one record batch at
a time as it pulls with :meth:`batches` or :meth:`messages`, so messages are
created just before they are handed out and die young (cheap for the cyclic
GC, and the buffer holds compact bytes, not objects). The buffer is bounded by
``config.channel_buffer_size`` messages and ``config.consumer.fetch.buffer_bytes``
bytes: while it is full (or the partition is paused) the fetch task leaves this
partition out of its requests, so a slow reader never delays the other partitions on
its broker.

Ownership: ``_offset``, ``_fetch_size`` and the watermarks are written only by
the fetch task that currently leads the partition; ``_chunks``/``_queued`` are
appended by that task and popped by the reader; ``_decoding``/``_left`` (the
record set being decoded) and ``_chunk``/``_current`` (the decoded batch being
read, and an iterator over it) belong to the reader; ``_paused`` and ``_closed`` are set by
the user. All on one event loop, so no locks.
"""

from __future__ import annotations

import asyncio
import operator
import sys
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from typing import TYPE_CHECKING

from ..errors import ConsumerError, CorruptMessageError
from ._native import load_extension
from .inflate import DEFAULT_BOUNDS, Bounds

if TYPE_CHECKING:
    from ..message import ConsumerMessage
    from ._cstream import BatchStream, MessageStream
    from .records import RecordSet

_cstream = load_extension("_cstream")
#: The C ``messages()`` and ``batches()`` streams, or None (the async generators then):
#: see ``_native``.
_MessageStream: type[MessageStream] | None = getattr(_cstream, "MessageStream", None)
_BatchStream: type[BatchStream] | None = getattr(_cstream, "BatchStream", None)


class Consumed:
    """Records and bytes a partition's readers took, over its successive PartitionConsumers.

    The owning :class:`~.consumer.Consumer` keeps one per partition, so the counts
    survive rebalances (a Prometheus counter must not go back). Counted per record
    set when the reader starts on it: ``records`` is an upper bound on a compacted
    log, ``bytes`` the record set's size on the wire.
    """

    __slots__ = ("bytes", "records")

    def __init__(self) -> None:
        self.records = 0
        self.bytes = 0


#: How many leader-epoch changes a partition consumer remembers (they are rare: one per
#: leader election while it reads).
_EPOCH_CHANGES = 16


class PartitionConsumer:
    """Reads one partition from a starting offset (sarama's ``PartitionConsumer``).

    Created by :meth:`consumergroup.Consumer.consume_partition` (or by a group
    session for each claim); not constructed directly by users.
    """

    def __init__(
        self,
        topic: str,
        partition: int,
        offset: int,
        *,
        buffer_size: int,
        fetch_size: int,
        on_close: Callable[[PartitionConsumer], None],
        consumed: Consumed | None = None,
        buffer_bytes: int = sys.maxsize,
        bounds: Bounds = DEFAULT_BOUNDS,
        refused: Callable[[ConsumerError], None] | None = None,
    ) -> None:
        self.topic = topic
        self.partition = partition
        #: The offset this consumer was created at (already resolved from OFFSET_OLDEST /
        #: OFFSET_NEWEST and range-checked): never changes, while ``next_offset`` moves as
        #: soon as a fetch task has the partition. A group claim starts (and marks) here.
        self.start_offset = offset
        # Next offset to fetch. Fetch task only.
        self._offset = offset
        # Per-partition fetch size; grows when a batch does not fit. Fetch task only.
        self._fetch_size = fetch_size
        # The replica the leader named to read from (KIP-392; -1: the leader itself) and
        # until when (time.monotonic()). Set and cleared by the fetch task leading the
        # partition; cleared by the Consumer when it routes the partition to its leader.
        self._read_replica = -1
        self._read_replica_until = 0.0
        # KIP-320. (fetch offset, leader epoch of the record batch that ends there): sent
        # as last_fetched_epoch while the fetch position is that offset, so the broker
        # checks our log agrees with its own up to it. Set from a committed epoch before
        # the first fetch, then by whichever fetch task has the partition: it survives a
        # move to another leader, whose first fetch validates the position.
        self.fetched_epoch: tuple[int, int] | None = None
        # (first offset, leader epoch) where the epoch of the batches fetched changed, in
        # the order learnt (at most _EPOCH_CHANGES): the epoch a commit of an offset
        # carries. Fetch task writes, the group's commits read; a seek drops those at and
        # past its offset.
        self._epoch_changes: list[tuple[int, int]] = []
        self.high_water_mark_offset = -1
        self.last_stable_offset = -1
        self.log_start_offset = -1
        self._buffer_size = buffer_size
        self._buffer_bytes = buffer_bytes
        # How far a compressed batch is decompressed at a time, and the largest record
        # read; a larger one is skipped and passed to _refused (see records.decode_batch).
        self._bounds = bounds
        self._refused = refused
        # Record sets not yet started by the reader, and the messages and bytes they hold.
        self._chunks: deque[RecordSet] = deque()
        self._queued = 0
        self._queued_bytes = 0
        # The record set the reader is decoding, batch by batch. It no longer counts
        # against the buffer: the next fetch overlaps with its decoding and handling.
        self._decoding: Iterator[list[ConsumerMessage]] | None = None
        # The chunk messages() is part-way through, and the index of its next message:
        # kept here, not in the generator, so a new iteration resumes where one left off.
        # The chunk messages() is part-way through and an iterator over it: kept here,
        # not in the generator, so a new iteration resumes where one left off. A list
        # iterator holds its own index, so messages() stores nothing per message.
        self._chunk: list[ConsumerMessage] = []
        self._current: Iterator[ConsumerMessage] | None = None
        # One past the last message of the last chunk taken from ``_decoding`` (position).
        self._handed = offset
        # The reader's wait for a record set (or the end): set by the reader, taken (and
        # resolved) by whoever wakes it. A cancelled wait may leave a done one here.
        self._waiter: asyncio.Future[None] | None = None
        # Taking the last record set made room and woke the fetch task: _wait then yields
        # once, so that task writes its next Fetch before the set is decoded. Set by
        # _pop_record_set, cleared by _wait; reader only. (_record_sets, which hands whole
        # sets out, leaves it set until its next wait: one more pass of the loop then.)
        self._room_made = False
        self._paused = False
        self._closed = False
        # Set by close() only (not by _fail): messages() stops mid-chunk.
        self._stopped = False
        self._error: BaseException | None = None
        # Wakes the leading fetch task when this partition becomes fetchable again;
        # set by the BrokerConsumer that subscribes it, reset when it lets go.
        self._wake_fetcher: Callable[[], None] = _noop
        # "oldest"/"newest" when an out-of-range position awaits a ListOffsets reset.
        self._reset_to: str | None = None
        self._on_close = on_close
        #: What the reader took so far (shared with earlier consumers of this partition).
        self.consumed = consumed if consumed is not None else Consumed()

    def __repr__(self) -> str:
        return (
            f"<PartitionConsumer {self.topic}/{self.partition} offset={self._offset} "
            f"queued={self._queued} paused={self._paused} closed={self._closed}>"
        )

    @property
    def next_offset(self) -> int:
        """The offset the next fetch asks for (one past the last buffered record)."""
        return self._offset

    @property
    def position(self) -> int:
        """The offset of the next message the reader gets (behind ``next_offset`` by
        what is buffered): lag is measured from here, not from what was fetched."""
        left = self._left()
        if left:  # messages() is part-way through a chunk
            return self._chunk[len(self._chunk) - left].offset
        if self._decoding is not None:
            return self._handed  # part-way through a record set
        if self._chunks:
            return self._chunks[0].start
        return self._offset  # all fetched was handed out (trailing control batches too)

    @property
    def queued(self) -> int:
        """Messages buffered and not yet handed to the reader."""
        return self._queued + self._left()

    def _left(self) -> int:
        """Messages of the chunk messages() is part-way through not yet yielded."""
        current = self._current
        return operator.length_hint(current) if current is not None else 0

    @property
    def paused(self) -> bool:
        """True while :meth:`pause` is in force."""
        return self._paused

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran or a fatal error ended the partition."""
        return self._closed

    def _full(self) -> bool:
        return self._queued >= self._buffer_size or self._queued_bytes >= self._buffer_bytes

    def blocked_by_buffer(self) -> bool:
        """Not fetchable only because the reader has not made room yet."""
        return not self._paused and not self._closed and self._full()

    def fetchable(self) -> bool:
        """Whether the fetch task should include this partition in its next request (its
        per-round scan, ``BrokerConsumer._round``, tests the same fields inline)."""
        return not self._paused and not self._closed and not self._full()

    # ------------------------------------------------------------------ producer side

    def _deliver(self, records: RecordSet) -> None:
        """Append a framed record set and advance the fetch position (fetch task only)."""
        self._offset = records.next_offset
        if self._closed or not records.batches:
            return
        self._chunks.append(records)
        self._queued += records.count
        self._queued_bytes += records.bytes_consumed
        waiter = self._waiter  # _wake_reader() inline: once per record set
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)

    def _fail(self, error: BaseException) -> None:
        """End the partition with ``error``: the reader gets what was buffered, then the error."""
        if self._closed:
            return
        self._error = error
        self._closed = True
        self._wake_reader()
        self._on_close(self)

    def _fail_with(self, message: str, cause: BaseException) -> None:
        """:meth:`_fail` with a :class:`ConsumerError` naming this partition."""
        self._fail(ConsumerError(message, topic=self.topic, partition=self.partition, cause=cause))

    def _wake_reader(self) -> None:
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)

    # ------------------------------------------------------------------ consumer side

    def _next_chunk(self) -> list[ConsumerMessage] | None:
        """Decode the next buffered record batch (None when nothing is buffered)."""
        while True:
            decoding = self._decoding
            if decoding is _DECODED:  # the last set was decoded whole: its chunk is out
                self._decoding = decoding = None
            try:
                if decoding is None:
                    if not self._chunks:  # a caught-up reader's every other call
                        return None
                    records = self._pop_record_set()
                    self._handed = records.start  # exact while nothing of it is decoded
                    room_made = self._room_made
                    chunk = None if room_made else records.decode_whole(self._buffer_size)
                    if chunk is None:
                        self._decoding = decoding = records.decode_batches(
                            self._buffer_size, self._bounds, self._refused
                        )
                        if room_made:
                            return None  # _wait() lets the fetch task write its request first
                        chunk = next(decoding, None)
                    elif chunk:
                        # Decoded whole: nothing is left of it, but until the reader asks
                        # again its position is past this chunk, as with decode_batches.
                        self._decoding = _DECODED
                else:
                    chunk = next(decoding, None)
            except CorruptMessageError as exc:
                # Refetching returns the same bytes: the partition cannot go on.
                self._drop_buffer()
                self._fail_with("cannot decode fetched records", exc)
                return None
            if chunk:  # decode_batches never yields an empty list; decode_whole may
                self._handed = chunk[-1].offset + 1  # for position, per chunk
                return chunk
            self._decoding = None

    def _next_record_set(self) -> RecordSet | None:
        """The next buffered record set, undecoded (None when nothing is buffered)."""
        return self._pop_record_set() if self._chunks else None

    def _pop_record_set(self) -> RecordSet:
        """Take the first buffered record set (there is one); its leaving the buffer wakes
        the fetch task if that made room."""
        records = self._chunks.popleft()
        was_full = self._full()
        self._queued -= records.count
        self._queued_bytes -= records.bytes_consumed
        if was_full and not self._full() and not self._paused:
            self._wake_fetcher()
            self._room_made = True
        consumed = self.consumed  # per record set: metrics cost nothing
        consumed.records += records.count
        consumed.bytes += records.bytes_consumed
        return records

    async def _record_sets(self) -> AsyncIterator[RecordSet]:
        """Yield the fetched record sets undecoded, for a caller of this package that
        decodes them itself (the Spark source builds Arrow columns from the batches).

        Not to be mixed with :meth:`batches` or :meth:`messages` on one partition
        consumer. Ends after :meth:`close`; raises the partition's fatal error, if
        any, once the buffered record sets are taken.
        """
        while True:
            records = self._next_record_set()
            if records is not None:
                yield records
                continue
            try:
                waiter = self._wait()
            except StopAsyncIteration:
                return
            await _wait_on(waiter)

    def _wait(self) -> asyncio.Future[None] | None:
        """What the reader awaits when nothing is buffered: a future resolved by the next
        record set (or the end), or None to yield once to the loop; raises
        StopAsyncIteration once closed and drained, or the partition's fatal error (once).
        """
        if self._room_made:
            # Taking a record set made room. The fetch task it woke runs only when this
            # task (and every reader woken with it) awaits, which a reader with records
            # does not do before its buffer is empty: yield once, so the next Fetch is
            # written now and its round trip overlaps with the decoding instead of
            # following it. Nothing of the set was handed out yet, so a cancellation
            # there loses nothing.
            self._room_made = False
            return None
        if self._closed:
            error, self._error = self._error, None
            if error is not None:
                raise error
            raise StopAsyncIteration
        # The future's class itself, not loop.create_future(): no Python frame per wait.
        waiter = self._waiter = asyncio.Future(loop=asyncio.get_running_loop())
        return waiter

    def _next_batch(self) -> list[ConsumerMessage] | asyncio.Future[None] | None:
        """One step of :meth:`batches`: the next list to hand out, or what to await first
        (see :meth:`_wait`, which also ends the stream)."""
        current = self._current
        if current is not None:  # the rest of the chunk messages() is part-way through
            self._current = None
            rest = list(current)
            if rest:
                return rest
        chunk = self._next_chunk()
        return chunk if chunk is not None else self._wait()

    def _next_messages(self) -> Iterator[ConsumerMessage] | asyncio.Future[None] | None:
        """One step of :meth:`messages` once the last chunk's iterator ran out: an
        iterator over the next messages (``_current``), or what to await first (see
        :meth:`_wait`); raises StopAsyncIteration after :meth:`close`."""
        current = self._current
        if current is not None:
            if operator.length_hint(current):  # left by an earlier iteration
                return current
            # Handed out whole: the reader owns it now. Kept here, it would stay alive
            # as long as the partition is idle (thousands of lists).
            self._current = None
            self._chunk = []
            if self._stopped:
                raise StopAsyncIteration
        chunk = self._next_chunk()
        if chunk is None:
            return self._wait()
        self._chunk = chunk
        self._current = current = iter(chunk)
        return current

    def batches(self) -> AsyncIterator[list[ConsumerMessage]]:
        """Yield decoded chunks as they arrive (the fast path: no copy, no per-message step).

        Ends after :meth:`close`; raises the partition's fatal error, if any,
        once the buffered messages are consumed. Resumes where an earlier
        :meth:`messages` iteration stopped (the rest of its chunk comes first).
        """
        if _BatchStream is not None:
            return _BatchStream(self)  # C: no async-generator round trip per list
        return self._batches()

    async def _batches(self) -> AsyncIterator[list[ConsumerMessage]]:
        """:meth:`batches` without the C extension."""
        while True:
            try:
                got = self._next_batch()
            except StopAsyncIteration:  # from _wait(): closed and drained
                return
            if isinstance(got, list):
                yield got
            else:
                await _wait_on(got)

    def messages(self) -> AsyncIterator[ConsumerMessage]:
        """Yield one :class:`~consumergroup.ConsumerMessage` at a time, in offset order.

        Stops between two messages once :meth:`close` is called, so a session
        ending does not wait for the rest of a large chunk. Leaving the loop early
        (``break``) loses nothing: the next iteration, by :meth:`messages` or
        :meth:`batches`, starts at the first message not yet yielded.
        """
        if _MessageStream is not None:
            return _MessageStream(self)  # C: no async-generator round trip per message
        return self._messages()

    async def _messages(self) -> AsyncIterator[ConsumerMessage]:
        """:meth:`messages` without the C extension."""
        while True:
            try:
                got = self._next_messages()
            except StopAsyncIteration:
                return
            if got is None or isinstance(got, asyncio.Future):
                await _wait_on(got)
                continue
            # stop() and seek() exhaust this iterator, which ends the loop.
            for message in got:
                yield message

    def pause(self) -> None:
        """Stop fetching this partition (buffered messages are still delivered)."""
        self._paused = True

    def resume(self) -> None:
        """Fetch this partition again after :meth:`pause`."""
        if self._paused:
            self._paused = False
            self._wake_fetcher()

    def seek(self, offset: int) -> None:
        """Move the fetch position and drop what is buffered (used on out-of-range resets)."""
        self._offset = offset
        self._epoch_changes = [c for c in self._epoch_changes if c[0] < offset]
        self._drop_buffer()
        self._wake_fetcher()

    def epoch_before_start(self, epoch: int) -> None:
        """The record before the start offset has leader ``epoch`` (a commit says so):
        the first fetch names it, and a commit of the start offset carries it."""
        self.fetched_epoch = (self.start_offset, epoch)
        self._note_epoch(self.start_offset - 1, epoch)

    def _note_epoch(self, first_offset: int, epoch: int) -> None:
        """A fetched batch from ``first_offset`` on has leader epoch ``epoch``."""
        changes = self._epoch_changes
        if not changes or changes[-1][1] != epoch:
            changes.append((first_offset, epoch))
            if len(changes) > _EPOCH_CHANGES:
                del changes[0]

    def leader_epoch_of(self, offset: int) -> int:
        """The leader epoch of the record at ``offset`` as fetched (-1: unknown), what a
        commit of ``offset + 1`` carries (KIP-320)."""
        for first, epoch in reversed(self._epoch_changes):
            if first <= offset:
                return epoch
        return -1

    def _drop_buffer(self) -> None:
        self._chunks.clear()
        self._queued = 0
        self._queued_bytes = 0
        self._decoding = None
        current, self._current = self._current, None
        if current is not None:
            # A messages() loop may be suspended inside this iterator: end it there.
            current.__setstate__(sys.maxsize)  # type: ignore[attr-defined]

    async def close(self) -> None:
        """Stop fetching, drop what is buffered and end the iterators (idempotent)."""
        self.stop()
        await asyncio.sleep(0)

    def stop(self) -> None:
        """Synchronous :meth:`close`, for code that cannot await (session teardown).

        Dropped messages were never handed out, so they were never marked: the
        next owner of the partition reads them again from the committed offset.
        """
        self._stopped = True
        self._drop_buffer()
        if not self._closed:
            self._closed = True
            self._wake_reader()
            self._on_close(self)


async def _wait_on(waiter: asyncio.Future[None] | None) -> None:
    """Await what :meth:`PartitionConsumer._wait` returned (None: yield once)."""
    if waiter is None:
        await asyncio.sleep(0)
    else:
        await waiter


#: ``_decoding`` of a record set decoded whole (RecordSet.decode_whole): already exhausted.
_DECODED: Iterator[list[ConsumerMessage]] = iter(())


def _noop() -> None:
    """No fetch task leads the partition right now."""
