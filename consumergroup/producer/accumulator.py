"""The accumulator: per-partition queues of batches, and the ``buffer_memory`` bound.

Java's ``RecordAccumulator`` (franz-go: a ``recBuf`` per partition). Each partition
has one queue of :class:`~.batch.ProducerBatch` in send order; the last one is *open*
(``send()`` appends to it) until it holds ``batch_size`` bytes, and a batch is
*ready* once closed, once it waited ``linger``, or while ``flush()`` or ``close()``
waits. Batches taken by the sender stay at the front of their queue until answered,
so a retry goes out again before anything behind it (idempotence needs the sequence
order; without it this still keeps order whenever ``max_in_flight`` is 1).

**Held transactions.** A transactional producer's transaction can be *cut* while its
records are still on their way (:meth:`~.transactions.TransactionManager.cut`: the group's
exactly-once commit): each batch carries the ordinal of the transaction it belongs to
(``appending`` when it was started), and the sender takes only batches up to
``sending``; the batches of the transaction after the cut wait in their queues, behind
those of the one being ended, until it has ended.

Who touches what: ``send()`` appends (:meth:`Accumulator.append`); the sender takes and
answers batches (:class:`PartitionQueue` fields below ``queue``); ``appending`` and
``sending`` are moved by the transaction manager only (a cut, the end of a transaction).
Everything runs on the event loop, so no lock: a method that does not await is atomic.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Iterator

from ..errors import BufferExhaustedError, ClosedError
from .batch import ProducerBatch

__all__ = ["Accumulator", "PartitionQueue"]


class PartitionQueue:
    """One partition's batches and its delivery state."""

    __slots__ = (
        "in_flight",
        "next_sequence",
        "partition",
        "queue",
        "retry_at",
        "retrying",
        "topic",
    )

    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        # Batches in send (and sequence) order: ``queue[:in_flight]`` are with the
        # broker; the rest wait; the last may still be open to appends.
        self.queue: deque[ProducerBatch] = deque()
        self.in_flight = 0
        # The sequence the next batch taken gets (idempotence; reset by an epoch bump).
        self.next_sequence = 0
        # A batch came back with a retriable error: nothing more is sent until every
        # batch in flight is answered and ``retry_at`` passed, then the queue goes out
        # again from its front, in order.
        self.retrying = False
        self.retry_at = 0.0


class Accumulator:
    """Every partition's queue, the open batches, and the memory they hold."""

    # Slots: send()'s C fast path (``_cproduce.FastSend``) reads and writes ``accepting``,
    # ``batch_size``, ``buffer_memory``, ``ready`` and ``used`` at fixed offsets.
    __slots__ = (
        "_room",
        "accepting",
        "appending",
        "batch_size",
        "buffer_memory",
        "closed",
        "flushing",
        "linger",
        "partitions",
        "ready",
        "sending",
        "used",
    )

    def __init__(self, batch_size: int, buffer_memory: int, linger: float) -> None:
        self.batch_size = batch_size
        self.buffer_memory = buffer_memory
        self.linger = linger
        # (topic, partition) -> its queue; created on the first record for it.
        self.partitions: dict[tuple[str, int], PartitionQueue] = {}
        # Estimated bytes of every record not yet answered.
        self.used = 0
        # Set whenever memory is given back: send() waits on it when the buffer is full.
        self._room = asyncio.Event()
        # Set when a batch becomes ready (closed, or flushed): wakes the sender early.
        self.ready = asyncio.Event()
        # > 0 while flush() or close() wait: every batch is ready at once.
        self.flushing = 0
        self.closed = False
        # send() takes records: from the producer's start until its close, or until the
        # sender failed.
        self.accepting = False
        # The transaction new batches belong to, and the last one whose batches the sender
        # may take (see the module: equal but while a cut transaction ends).
        self.appending = self.sending = 0

    def queue_for(self, topic: str, partition: int) -> PartitionQueue:
        """The partition's queue, created on first use."""
        key = (topic, partition)
        q = self.partitions.get(key)
        if q is None:
            q = self.partitions[key] = PartitionQueue(topic, partition)
        return q

    async def reserve(self, size: int, max_block: float) -> None:
        """Count ``size`` bytes against ``buffer_memory``, waiting up to ``max_block``
        seconds for room; BufferExhaustedError when none came."""
        if self.used + size <= self.buffer_memory:
            self.used += size
            return
        if size > self.buffer_memory:
            raise BufferExhaustedError(
                f"a record of about {size} bytes can never fit producer.buffer_memory="
                f"{self.buffer_memory}: raise buffer_memory or send smaller records"
            )
        deadline = time.monotonic() + max_block
        while self.used + size > self.buffer_memory:
            if self.closed:
                raise ClosedError("the producer was closed while send() waited for room")
            left = deadline - time.monotonic()
            if left <= 0:
                raise BufferExhaustedError(
                    f"producer.buffer_memory={self.buffer_memory} bytes stayed full for "
                    f"producer.max_block={max_block}s: the brokers take records more slowly "
                    "than they are sent (or not at all); send less, raise buffer_memory or "
                    "max_block, or check the brokers"
                )
            self._room.clear()
            try:
                async with asyncio.timeout(left):
                    await self._room.wait()
            except TimeoutError:
                pass
        self.used += size

    def release(self, size: int) -> None:
        """Give back ``size`` bytes (a batch was answered)."""
        self.used -= size
        self._room.set()

    def wake_waiters(self) -> None:
        """Let every ``send()`` waiting for room look again (the producer closes)."""
        self._room.set()

    def is_ready(self, batch: ProducerBatch, q: PartitionQueue, now: float) -> bool:
        """Whether ``batch`` (the first unsent one of ``q``) may go now."""
        return (
            self.flushing > 0
            or batch is not q.queue[-1]  # closed: a newer batch was started behind it
            or batch.size >= self.batch_size
            or now - batch.created >= self.linger
        )

    def restart_sequences(self) -> None:
        """A new producer epoch between two transactions (nothing of the next one was
        sent yet): every partition's sequences start again at 0."""
        for q in self.partitions.values():
            q.next_sequence = 0

    def pending(self) -> Iterator[ProducerBatch]:
        """Every batch not yet answered (but those held back for a transaction after a cut,
        which are behind the others in each queue)."""
        sending = self.sending
        for q in self.partitions.values():
            for batch in q.queue:
                if batch.txn > sending:
                    break
                yield batch

    def release_held(self) -> None:
        """The cut transaction ended: the batches held back may go."""
        self.sending = self.appending
        self.ready.set()

    def empty(self) -> bool:
        """No batch anywhere is waiting or in flight."""
        return all(not q.queue for q in self.partitions.values())
