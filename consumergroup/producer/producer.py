"""Producer: the public face of the producer package.

``send()`` checks the record, picks its partition, waits for room in
``buffer_memory`` if it must, and appends it to the partition's open batch in the
accumulator; it returns the record's future at once. The sender task (one per
producer) does the rest. Layers, each with one job: partitioner (where a record goes),
accumulator (batches and memory), sender (requests and answers), identity (producer
id and epoch), and this class (checks, topics, lifecycle).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

from .._lifecycle import AsyncResource, cancel_and_wait
from .._otel import Headers, header_injector
from ..client import Client
from ..config import Config
from ..errors import (
    ClosedError,
    ConfigurationError,
    DeliveryTimeoutError,
    MessageTooLargeError,
)
from ..message import RecordHeader
from .accumulator import Accumulator, PartitionQueue
from .batch import BATCH_OVERHEAD, FastSend, ProducerBatch, _untrack
from .batch import append_record as _append_record
from .idempotence import ProducerIdentity
from .metadata import RecordMetadata
from .partitioner import StickyPartitioner, murmur2
from .sender import Sender
from .transactions import GroupMetadata, TransactionManager

log = logging.getLogger(__name__)

__all__ = ["Producer"]

# How long (ms) a topic's partition count is trusted before the client's metadata cache
# (refreshed in the background) is read again: a topic that grows gets used in full.
_TOPIC_RECHECK_MS = 10_000
_NO_HEADERS: tuple[RecordHeader, ...] = ()
# The loop's create_future() is a Python method around this: one frame less per record.
_Future = asyncio.Future


class _Topic:
    """What ``send()`` keeps per topic: its partition count (and until when it is
    trusted), its sticky partitioner, its partitions' queues by partition."""

    __slots__ = ("count", "queues", "recheck_ms", "sticky")

    def __init__(self, batch_size: int) -> None:
        self.count = 0
        self.recheck_ms = 0
        self.sticky = StickyPartitioner(batch_size)
        self.queues: list[PartitionQueue] = []

    def resize(self, acc: Accumulator, topic: str, count: int) -> None:
        """``count`` partitions now (a topic only grows): their queues, by index."""
        self.count = count
        self.queues += [acc.queue_for(topic, p) for p in range(len(self.queues), count)]


def _no_fast(*_args: object) -> None:
    """send()'s per-record path where FastSend does not apply: always the Python one."""


def _as_bytes(value: object, what: str) -> bytes | None:
    if value is None or type(value) is bytes:
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    hint = " (encode it first, e.g. .encode())" if isinstance(value, str) else ""
    raise ConfigurationError(
        f"the record's {what} must be bytes or None, not {type(value).__name__}{hint}"
    )


def _check_headers(headers: Sequence[RecordHeader]) -> Sequence[RecordHeader]:
    for header in headers:
        if (
            not isinstance(header, tuple)
            or len(header) != 2
            or not isinstance(header[0], str)
            or not (header[1] is None or isinstance(header[1], bytes))
        ):
            raise ConfigurationError(
                f"header {header!r} is not a (str, bytes | None) pair: pass headers as "
                "[('name', b'value'), ...]"
            )
    return headers


class Producer(AsyncResource):
    """An idempotent, batching, compressing Kafka producer on this package's client.

    ``async with cg.Producer(addrs, config) as producer:`` then ``await
    producer.send(topic, value)`` (a future of the record's
    :class:`~consumergroup.RecordMetadata`) or ``await producer.send_and_wait(...)``.
    Settings are ``config.producer``. Every method must run on the event loop that
    started the producer.
    """

    def __init__(self, addrs: Sequence[str] | str, config: Config | None = None) -> None:
        self.config = config or Config()
        self.config.validate()
        pc = self.config.producer
        self._client = Client(addrs, self.config)
        self._acc = Accumulator(pc.batch_size, pc.buffer_memory, pc.linger)
        self._identity = ProducerIdentity(self._client, int(pc.transaction_timeout * 1000))
        self._txn = (
            None
            if pc.transactional_id is None
            else TransactionManager(self._client, pc, self._identity, self._acc)
        )
        self._sender = Sender(self._client, pc, self._acc, self._identity, self._txn)
        self._task: asyncio.Task[None] | None = None
        self._topics: dict[str, _Topic] = {}
        # A record this large (with a batch's header) cannot go in one request.
        self._max_record = pc.max_request_size - BATCH_OVERHEAD
        self._loop: asyncio.AbstractEventLoop  # the loop start() ran on
        # Adds the current span's context to a record's headers (OpenTelemetry), set by
        # start() when a tracer provider is set; None: nothing to add.
        self._inject: Callable[[Headers | None], Headers | None] | None = None
        # True from start() until close(): send() takes records.
        self._open = False
        self._closed = False
        # send()'s per-record path in C (set by start() when it applies): queues a record
        # and returns its future, or returns None and send() takes the Python path.
        self._fast: Callable[..., asyncio.Future[RecordMetadata] | None] = _no_fast
        # send() lets the sender run (_let_the_sender_run) at a batch's start once the
        # loop's clock passed _pass_at; then at most every _pass_every seconds.
        self._pass_at = 0.0
        self._pass_every = max(pc.linger, 0.001)

    async def start(self) -> None:
        """Connect, obtain a producer id (idempotence) and start the sender."""
        if self._closed:
            raise ClosedError("the producer is closed: make a new one")
        if self._open:
            return
        self._loop = asyncio.get_running_loop()
        await self._client.start()
        try:
            if self._txn is not None:
                await self._txn.init()
            elif self.config.producer.idempotent:
                await self._identity.init()
        except BaseException:
            await self._client.close()
            raise
        self._task = asyncio.create_task(self._sender.run(), name="producer-sender")
        # Decided here, once: send() pays one check when nothing is traced.
        self._inject = header_injector()
        self._fast = self._fast_path()
        self._open = self._acc.accepting = True

    def _fast_path(self) -> Callable[..., asyncio.Future[RecordMetadata] | None]:
        """The C per-record path, when the extension is there and nothing per record
        needs Python (tracing headers). A transaction's records take it too: it appends
        only to a batch of the transaction records go to (the accumulator's
        ``appending``), which the Python path started, joining its partition."""
        if FastSend is None or self._inject is not None:
            return _no_fast
        fast: Callable[..., asyncio.Future[RecordMetadata] | None] = FastSend(
            self._acc,
            self._topics,
            self._loop,
            _Future,
            self._max_record,
            _Topic,
            StickyPartitioner,
            PartitionQueue,
            ProducerBatch,
        )
        return fast

    async def send(
        self,
        topic: str,
        value: bytes | None,
        *,
        key: bytes | None = None,
        partition: int | None = None,
        headers: Sequence[RecordHeader] | None = None,
        timestamp_ms: int | None = None,
    ) -> asyncio.Future[RecordMetadata]:
        """Queue one record; return its future (its :class:`RecordMetadata` once the
        broker acknowledged it, or the error that ended its delivery).

        Waits only for the topic's metadata (the first record to a topic) and for room
        in ``producer.buffer_memory`` (up to ``producer.max_block``; then
        BufferExhaustedError). ``partition`` wins; else a key picks the partition Java's
        partitioner picks; else the uniform sticky partitioner. Bad input raises here
        (ConfigurationError, MessageTooLargeError, UnknownTopicOrPartitionError) and
        queues nothing.
        """
        fut = self._fast(topic, value, key, partition, headers, timestamp_ms)
        if fut is None:
            fut = await self._send(topic, value, key, partition, headers, timestamp_ms)
        return fut

    async def _send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None,
        partition: int | None,
        headers: Sequence[RecordHeader] | None,
        timestamp_ms: int | None,
    ) -> asyncio.Future[RecordMetadata]:
        """send()'s Python path: every record when the C extension is absent, else the
        records FastSend leaves to it (a batch to start, a partition to switch to,
        metadata to fetch, room to wait for, bad input to refuse, a transaction, headers
        to inject)."""
        acc = self._acc
        if not acc.accepting:
            raise self._not_open()
        txn = self._txn
        if txn is not None:
            txn.require_open("send()")
        if type(value) is not bytes and value is not None:
            value = _as_bytes(value, "value")
        if type(key) is not bytes and key is not None:
            key = _as_bytes(key, "key")
        size = 21 + (len(value) if value is not None else 0) + (len(key) if key is not None else 0)
        if self._inject is not None:
            headers = self._inject(headers)
        if headers:
            headers = _check_headers(headers)
            for hkey, hvalue in headers:
                size += 10 + 3 * len(hkey) + (len(hvalue) if hvalue is not None else 0)
        else:
            headers = _NO_HEADERS
        if size > self._max_record:
            raise MessageTooLargeError(
                f"a record of about {size} bytes does not fit producer.max_request_size="
                f"{self.config.producer.max_request_size} (nor, likely, the broker's "
                "message.max.bytes): send smaller records or raise both"
            )
        now_ms = int(time.time() * 1000)
        info = self._topics.get(topic)
        if info is None or now_ms > info.recheck_ms:
            info = await self._topic(topic)
        if partition is None:
            if key is not None:
                partition = (murmur2(key) & 0x7FFFFFFF) % info.count
            else:
                sticky = info.sticky
                if sticky.left > 0:
                    partition = sticky.current
                    sticky.left -= size
                else:
                    available = self._available(topic, info.count)
                    partition = sticky.switch(available, info.count, size)
        elif type(partition) is not int or not 0 <= partition < info.count:
            raise ConfigurationError(
                f"topic {topic!r} has no partition {partition!r}: it has {info.count} "
                f"(0..{info.count - 1})"
            )
        if acc.used + size <= acc.buffer_memory:
            acc.used += size
        else:
            await acc.reserve(size, self.config.producer.max_block)
            if not acc.accepting:
                acc.release(size)
                raise ClosedError("the producer was closed while send() waited for room")
        if txn is not None and (topic, partition) not in txn.joined:
            txn.join(topic, partition)
        if timestamp_ms is None:
            timestamp_ms = now_ms
        queue = info.queues[partition].queue
        last = queue[-1] if queue else None
        started = (
            last is None
            or last.attempts > 0
            or last.size + size > acc.batch_size
            or last.txn != acc.appending  # the transaction it belongs to was cut
        )
        if last is not None and not started:
            batch = last
        else:
            # Wake the sender: the batch before (if any) is closed, so ready, and this
            # one is due after linger (the sender sleeps for good while nothing is queued).
            acc.ready.set()
            batch = ProducerBatch(topic, partition, self._loop, timestamp_ms, acc.appending)
            queue.append(batch)
        futures = batch.futures
        # ProducerBatch.append, inlined: the record is encoded into the batch here.
        _append_record(
            batch.buffer, len(futures), timestamp_ms - batch.base_timestamp, key, value, headers
        )
        batch.timestamps.append(timestamp_ms)
        # Out of the garbage collector's lists while queued, as FastSend's futures.
        fut: asyncio.Future[RecordMetadata] = _untrack(_Future(loop=self._loop))
        futures.append(fut)
        batch.size += size
        if batch.size >= acc.batch_size:
            acc.ready.set()
        if started and self._loop.time() >= self._pass_at:
            await self._let_the_sender_run()
        return fut

    async def _let_the_sender_run(self) -> None:
        """Yield to the event loop twice: the sender takes the closed batches into
        requests, then their tasks write them, and answers that came are read.

        A caller that never awaits anything that suspends (``await send()`` suspends
        only for metadata or room) would otherwise keep the sender from running until
        ``buffer_memory`` is full: nothing would overlap the broker's work with the
        caller's. Done at a batch's start at most every ``linger`` (one request then
        carries the batches closed meanwhile, as the sender's own linger would)."""
        self._pass_at = self._loop.time() + self._pass_every
        await asyncio.sleep(0)
        await asyncio.sleep(0)

    async def send_and_wait(self, topic: str, value: bytes | None, **kwargs: Any) -> RecordMetadata:
        """:meth:`send` and wait for the record's acknowledgement."""
        return await (await self.send(topic, value, **kwargs))

    # ------------------------------------------------------------------ transactions

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        """``async with producer.transaction():`` a transaction: committed when the block
        ends, aborted (and the error re-raised) when it raises. Needs
        ``producer.transactional_id``."""
        await self.begin_transaction()
        try:
            yield
        except BaseException:
            await self.abort_transaction()
            raise
        await self.commit_transaction()

    async def begin_transaction(self) -> None:
        """Open a transaction: records sent until its commit or abort belong to it."""
        self._transactions().begin()

    @property
    def in_transaction(self) -> bool:
        """A transaction is open (begun, not yet committed or aborted)."""
        return self._txn is not None and self._txn.in_transaction

    def cut_transaction(self) -> None:
        """Seal the open transaction here, for a runtime that owns it (the group's
        exactly-once commit): records sent from now on open the next transaction and wait
        in the buffer until this one has ended, so they may be sent while it commits.
        :meth:`send_offsets_to_transaction` and :meth:`commit_transaction` then apply to
        the sealed transaction; if either fails (or :meth:`abort_transaction` is called),
        the next transaction's records are taken back into it, as if it had not been cut."""
        self._transactions().cut()

    async def commit_transaction(self) -> None:
        """Send what is queued, then commit: the records and the offsets sent to the
        transaction become visible to ``read_committed`` readers together. When a record
        of the transaction failed, or the coordinator ended the transaction (it ran past
        ``producer.transaction_timeout``), this raises and the transaction must be
        aborted. ``send()`` is refused while it runs."""
        await self._transactions().end(True, self.flush)

    async def abort_transaction(self) -> None:
        """Send what is queued, then abort: none of it is ever visible to
        ``read_committed`` readers, nor are the offsets sent to the transaction. After the
        coordinator aborted the transaction itself (a timeout), the producer takes a new
        epoch (InitProducerId) and goes on; a producer another one with the same
        transactional id replaced raises ProducerFencedError."""
        await self._transactions().end(False, self.flush)

    async def send_offsets_to_transaction(
        self,
        offsets: Mapping[tuple[str, int], int],
        group_metadata: GroupMetadata,
        *,
        metadata: Mapping[tuple[str, int], str] | None = None,
    ) -> None:
        """Commit ``offsets`` (``{(topic, partition): next offset to read}``, with their
        ``metadata`` strings if given) for the consumer group member ``group_metadata``
        (``session.group_metadata()``) as part of the open transaction: they commit if,
        and only if, the transaction does."""
        await self._transactions().send_offsets(offsets, group_metadata, metadata)

    def _transactions(self) -> TransactionManager:
        if self._txn is None:
            raise ConfigurationError(
                "transactions need producer.transactional_id: set it to a name unique to "
                "this producer instance"
            )
        if not self._acc.accepting:
            raise self._not_open()
        return self._txn

    async def partitions(self, topic: str) -> list[int]:
        """The partition ids of ``topic`` from fresh metadata (Java's ``partitionsFor``);
        UnknownTopicOrPartitionError when it does not exist."""
        if not self._open:
            raise self._not_open()
        parts = await self._client.partitions(topic, refresh=True)
        await self._topic(topic)
        return parts

    async def flush(self) -> None:
        """Send every queued record at once (``linger`` aside) and wait until each was
        acknowledged or failed (their futures say which)."""
        waiting = [batch.done_future() for batch in self._acc.pending()]
        if not waiting:
            return
        self._acc.flushing += 1
        self._acc.ready.set()
        try:
            await asyncio.wait(waiting)
        finally:
            self._acc.flushing -= 1

    async def close(self, timeout: float | None = None) -> None:
        """Send what is queued and stop; ``timeout`` bounds the wait (None: until every
        record is acknowledged or its ``delivery_timeout`` passed). Records still
        unanswered then fail with DeliveryTimeoutError. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._open = self._acc.accepting = False
        self._acc.closed = True
        self._acc.wake_waiters()
        try:
            if self._task is not None:
                try:
                    async with asyncio.timeout(timeout):
                        await self.flush()
                except TimeoutError:
                    log.warning("producer closed after %ss with records unanswered", timeout)
                await self._sender.stop()
                await cancel_and_wait(self._task)
        finally:
            self._sender.fail_all(
                DeliveryTimeoutError(
                    "the producer was closed before this record was acknowledged: close() "
                    "with a longer timeout, or flush() first"
                )
            )
            await self._client.close()

    def _not_open(self) -> ClosedError:
        if self._closed:
            return ClosedError("the producer is closed")
        if self._sender.error is not None:
            return ClosedError(f"the producer's sender failed: {self._sender.error!r}")
        return ClosedError("start the producer first (async with cg.Producer(...) as producer)")

    async def _topic(self, topic: str) -> _Topic:
        """The topic's partition count (metadata fetched when not cached)."""
        count = len(await self._client.partitions(topic))
        info = self._topics.get(topic)
        if info is None:
            info = self._topics[topic] = _Topic(self._acc.batch_size)
        info.resize(self._acc, topic, count)
        info.recheck_ms = int(time.time() * 1000) + _TOPIC_RECHECK_MS
        return info

    def _available(self, topic: str, count: int) -> list[int]:
        leader_id = self._client.leader_id
        return [p for p in range(count) if leader_id(topic, p) >= 0]
