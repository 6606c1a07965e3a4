"""The sender: takes ready batches off the accumulator, sends them, and answers them.

Java's ``Sender`` (franz-go's ``sink``). One task drains: each round it takes, for each
broker with room (fewer than ``max_in_flight`` requests out), the next ready batch of
every partition that broker leads, up to ``max_request_size`` per request, and hands the
request to a task of its own that awaits the answer. Requests to one broker go out on
one ``"produce"`` connection in the order they were made (the tasks start in creation
order and write before their first wait), and Kafka answers a connection's requests in
order, so a partition's batches are written in the order they were sent.

Answers (``_answer``), the Java client's rules:

* success, or DUPLICATE_SEQUENCE_NUMBER (already written: a retry of a batch whose
  answer was lost): the records' futures get their offsets.
* a retriable error, a dropped connection, a timeout: the partition stops sending,
  waits until every batch of it in flight is answered and ``retry_backoff`` passed
  (doubling up to ``retry_backoff_max``), then sends its queue again from the front,
  with the same sequence numbers, so the broker writes each batch once and in order.
  Metadata is refreshed first when the leader may have moved.
* OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID or INVALID_PRODUCER_EPOCH on the
  oldest unanswered batch of a partition (the broker lost the producer's state, or a
  batch before it failed): the epoch is bumped (KIP-360) once nothing is in flight, and
  every queue's sequences start again at 0. On a later batch they only mean that an
  earlier one failed: retried as above.
* MESSAGE_TOO_LARGE (the topic's ``max.message.bytes`` is below the batch): the batch is
  split in two halves that take its place and its sequence range, and go again as a
  retry does (Java splits too); a batch of one record fails with it.
* any other error fails the batch's futures with it (a gap in the sequence, so the
  epoch is bumped before the partition's next batch).
* a batch that was neither acknowledged nor refused within ``delivery_timeout`` of its
  creation fails with DeliveryTimeoutError.

Who touches what: the drain task owns ``_bump_needed``, ``_refresh`` and the node
counts; request tasks update the queues they answer and the node counts. All on the
event loop, never across an await in the middle of an update.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterable

from .._lifecycle import cancel_and_wait
from ..client import Client
from ..config import ProducerConfig
from ..errors import (
    ConsumerGroupError,
    CorruptMessageError,
    DeliveryTimeoutError,
    DuplicateSequenceNumberError,
    InvalidProducerEpochError,
    MessageTooLargeError,
    NotLeaderOrFollowerError,
    OutOfOrderSequenceNumberError,
    UnknownProducerIdError,
    UnknownTopicOrPartitionError,
    error_for_code,
)
from ..net.produce import PartitionResponse, ProduceRequest
from .accumulator import Accumulator, PartitionQueue
from .batch import CODECS, ProducerBatch
from .idempotence import ProducerIdentity
from .transactions import TransactionManager

log = logging.getLogger(__name__)

__all__ = ["Sender"]

_SEQUENCE_MASK = 0x7FFFFFFF  # sequences wrap to 0 after Int32.MAX_VALUE
# Refused on the oldest batch: the broker's state for this producer must be reset.
_EPOCH_ERRORS = (
    OutOfOrderSequenceNumberError.errno,
    UnknownProducerIdError.errno,
    InvalidProducerEpochError.errno,
)
# Answers after which the partition's leader may have moved: refresh metadata.
_MOVED = (NotLeaderOrFollowerError.errno, UnknownTopicOrPartitionError.errno)
# Beyond request_timeout (which the broker waits for its replicas), what the answer
# may take on the way back before the connection is presumed dead.
_ANSWER_MARGIN = 5.0

_Taken = list[tuple[PartitionQueue, ProducerBatch]]


class Sender:
    """Drains the accumulator into Produce requests and answers the batches."""

    def __init__(
        self,
        client: Client,
        config: ProducerConfig,
        accumulator: Accumulator,
        identity: ProducerIdentity,
        transactions: TransactionManager | None = None,
    ) -> None:
        self._client = client
        self._txn = transactions
        self._txn_id = None if transactions is None else transactions.transactional_id
        self._config = config
        self._acc = accumulator
        self._identity = identity
        self._acks = config.required_acks
        self._compression = CODECS[config.compression]
        self._idempotent = config.idempotent
        self._timeout_ms = int(config.request_timeout * 1000)
        # node id -> Produce requests out to it.
        self._nodes: dict[int, int] = {}
        self._requests: set[asyncio.Task[None]] = set()
        # Topics whose metadata is refreshed before the next round.
        self._refresh: set[str] = set()
        # An epoch bump waits until nothing is in flight; nothing new goes out meanwhile.
        self._bump_needed = False
        self._next_bump = 0.0
        # What stopped run() when it failed (send() then refuses records).
        self.error: BaseException | None = None

    # ------------------------------------------------------------------ the drain task

    async def run(self) -> None:
        """Drain until the accumulator is closed and empty; fail what is left on error."""
        acc = self._acc
        try:
            while True:
                if self._refresh:
                    topics, self._refresh = sorted(self._refresh), set()
                    try:
                        await self._client.refresh_metadata(*topics)
                    except ConsumerGroupError as exc:
                        log.warning("producer metadata refresh for %s failed: %s", topics, exc)
                if self._txn is not None and self._txn.pending:
                    await self._add_partitions(self._txn)
                now = time.monotonic()
                if self._bump_needed and not self._requests and now >= self._next_bump:
                    await self._bump()
                    now = time.monotonic()
                self._expire(now)
                wake_at = self._drain(now)
                if acc.closed and acc.empty() and not self._requests:
                    return
                acc.ready.clear()
                timeout = None if wake_at is None else max(wake_at - time.monotonic(), 0.0)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(timeout):
                        await acc.ready.wait()
        except Exception as exc:  # never leave futures waiting on a dead sender
            log.exception("the producer's sender failed")
            self.error = exc
            acc.accepting = False
            self.fail_all(exc)

    async def stop(self) -> None:
        """Cancel the requests in flight (their batches stay queued)."""
        await cancel_and_wait(*self._requests)

    def fail_all(self, error: BaseException) -> None:
        """Fail every batch not yet answered with ``error``."""
        for q in self._acc.partitions.values():
            while q.queue:
                self._settle(q, q.queue[0], error=error, in_flight=False)
            q.in_flight = 0

    def _drain(self, now: float) -> float | None:
        """Send what is ready; return when the next batch gets ready (None: on a wake-up).

        Request after request while batches are ready and their broker has room: a
        partition with many batches queued (a burst, a flush) gets up to ``max_in_flight``
        of them out at once, each in its own request, rather than one per wake-up."""
        wake_at: float | None = None
        while True:
            by_node, ready_at = self._ready_batches(now)
            if ready_at is not None:
                wake_at = ready_at if wake_at is None else min(wake_at, ready_at)
            sent = False
            for node, ready in by_node.items():
                if self._nodes.get(node, 0) < self._config.max_in_flight:
                    self._send(node, ready)
                    sent = True
            if not sent:
                return wake_at

    def _ready_batches(self, now: float) -> tuple[dict[int, _Taken], float | None]:
        """The next unsent batch of each partition that may go now, by leader; and when
        the next one that may not gets ready (None: on a wake-up)."""
        acc, client = self._acc, self._client
        max_in_flight = self._config.max_in_flight
        wake_at: float | None = None
        by_node: dict[int, _Taken] = {}
        for q in acc.partitions.values():
            if len(q.queue) <= q.in_flight or q.in_flight >= max_in_flight:
                continue
            if q.in_flight and q.queue[0].sequence == 0:
                # The first batch of this producer id here goes alone: a broker takes any
                # first sequence from a producer id it does not know, so were it refused
                # (too large), a batch behind it would be written first.
                continue
            if q.retrying:
                if q.in_flight:
                    continue
                if now < q.retry_at:
                    wake_at = q.retry_at if wake_at is None else min(wake_at, q.retry_at)
                    continue
                q.retrying = False
            if self._bump_needed:
                continue
            batch = q.queue[q.in_flight]
            if batch.txn > acc.sending:
                continue  # the next transaction's: held until the cut one has ended
            if self._txn is not None and (q.topic, q.partition) not in self._txn.partitions:
                continue  # AddPartitionsToTxn first (the next round)
            if not acc.is_ready(batch, q, now):
                ready_at = batch.created + acc.linger
                wake_at = ready_at if wake_at is None else min(wake_at, ready_at)
                continue
            node = client.leader_id(q.topic, q.partition)
            if node < 0:
                self._refresh.add(q.topic)
                retry_at = now + self._config.retry_backoff
                wake_at = retry_at if wake_at is None else min(wake_at, retry_at)
                continue
            by_node.setdefault(node, []).append((q, batch))
        return by_node, wake_at

    def _send(self, node: int, ready: _Taken) -> None:
        """Take ``ready`` batches (up to ``max_request_size``) into one request to ``node``."""
        identity, idempotent = self._identity, self._idempotent
        budget = self._config.max_request_size
        taken: _Taken = []
        topics: dict[str, list[tuple[int, bytearray]]] = {}
        for q, batch in ready:
            # Sized before it is encoded (its records' bytes: compression only shrinks
            # them): a batch left for the next request takes no sequence and no header
            # yet, so one still open (ready by linger) may take more records meanwhile.
            payload = batch.payload
            if taken and len(batch.buffer if payload is None else payload) > budget:
                continue  # the next request takes it
            if batch.sequence < 0 and idempotent:
                batch.sequence = q.next_sequence
                q.next_sequence = (q.next_sequence + len(batch)) & _SEQUENCE_MASK
            payload = batch.encode(
                self._compression,
                identity.producer_id,
                identity.epoch,
                batch.sequence,
                self._txn is not None,
            )
            budget -= len(payload)
            batch.attempts += 1
            q.in_flight += 1
            taken.append((q, batch))
            topics.setdefault(q.topic, []).append((q.partition, payload))
        # A transaction's Produce version is its protocol's (v12: KIP-890's v2).
        top = 11 if self._txn is None else self._txn.produce_version
        request = ProduceRequest(
            self._txn_id, self._acks, self._timeout_ms, list(topics.items()), max_version=top
        )
        self._nodes[node] = self._nodes.get(node, 0) + 1
        task = asyncio.create_task(self._request(node, request, taken), name=f"produce-{node}")
        self._requests.add(task)
        task.add_done_callback(self._request_done)

    def _request_done(self, task: asyncio.Task[None]) -> None:
        # Wake the drain task once the request is off the set: an epoch bump waits for
        # an empty set (it slept for good when the last request failed a batch).
        self._requests.discard(task)
        self._acc.ready.set()

    # ---------------------------------------------------------------- request tasks

    async def _request(self, node: int, request: ProduceRequest, taken: _Taken) -> None:
        try:
            try:
                conn = await self._client.connection(node, "produce")
                if self._acks == 0:
                    conn.post(request)  # no answer comes
                    for q, batch in taken:
                        self._settle(q, batch, base_offset=-1)
                    return
                timeout = self._config.request_timeout + _ANSWER_MARGIN
                answers, _throttle = await conn.send(request, timeout=timeout)
            except (ConsumerGroupError, OSError) as exc:
                if not getattr(exc, "retriable", True):
                    raise
                # The answer is lost: each batch may or may not be written. Sent again
                # with the same sequence, the broker writes it once.
                self._refresh.update(q.topic for q, _ in taken)
                for q, batch in taken:
                    self._retry(q, batch, exc)
                return
            for q, batch in taken:
                self._answer(q, batch, _find(answers.get(q.topic, ()), q.partition))
        except ConsumerGroupError as exc:  # not retriable (e.g. no version in common)
            for q, batch in taken:
                self._settle(q, batch, error=exc)
        finally:
            self._nodes[node] -= 1
            self._acc.ready.set()

    def _answer(
        self, q: PartitionQueue, batch: ProducerBatch, answer: PartitionResponse | None
    ) -> None:
        where = f"Produce to {q.topic}/{q.partition}"
        if answer is None:
            self._retry(q, batch, CorruptMessageError(f"{where}: the answer left it out"))
            return
        _partition, code, base_offset, append_time, _log_start, message = answer
        if code == 0 or code == DuplicateSequenceNumberError.errno:
            self._settle(q, batch, base_offset=base_offset, append_time=append_time)
            return
        if code == MessageTooLargeError.errno:
            if len(batch) > 1:
                self._split(q, batch)
                return
            message = (
                f"a batch of this one record ({len(batch.payload or b'')} bytes) is larger "
                "than the topic's max.message.bytes (or the broker's message.max.bytes): "
                "send smaller records, or raise that limit"
            )
        error = error_for_code(code)(f"{where}: {message}" if message else where)
        if self._idempotent and code in _EPOCH_ERRORS and self._txn is None:
            if batch is q.queue[0]:
                log.warning("%s; the producer epoch is bumped and the batch sent again", error)
                self._bump_needed = True
            self._retry(q, batch, error, count=False)
            return
        if error.retriable:
            if code in _MOVED:
                self._refresh.add(q.topic)
            self._retry(q, batch, error)
            return
        self._settle(q, batch, error=error)

    def _split(self, q: PartitionQueue, batch: ProducerBatch) -> None:
        """The broker refused ``batch`` as too large: its two halves take its place in
        the queue, with its sequence range, and go out as a retry does (after the
        partition's batches in flight are answered), without a backoff."""
        q.in_flight -= 1
        first, second = batch.split(asyncio.get_running_loop())
        at = q.queue.index(batch)
        q.queue[at] = first
        q.queue.insert(at + 1, second)
        log.info(
            "%s/%d: a batch of %d records was too large for the broker; split in two",
            q.topic,
            q.partition,
            len(first) + len(second),
        )
        q.retrying = True
        q.retry_at = max(q.retry_at, time.monotonic())

    def _retry(
        self, q: PartitionQueue, batch: ProducerBatch, error: BaseException, *, count: bool = True
    ) -> None:
        """The batch goes again after the partition's batches in flight are answered."""
        q.in_flight -= 1
        now = time.monotonic()
        if now - batch.created >= self._config.delivery_timeout:
            self._settle(q, batch, error=self._expired(batch, error), in_flight=False)
            return
        log.debug("%s/%d: batch of %d retried: %s", q.topic, q.partition, len(batch), error)
        backoff = self._config.retry_backoff * 2 ** min(batch.attempts - 1, 16) if count else 0.0
        q.retrying = True
        q.retry_at = max(q.retry_at, now + min(backoff, self._config.retry_backoff_max))

    def _expire(self, now: float) -> None:
        """Fail the waiting batches older than ``delivery_timeout``."""
        limit = self._config.delivery_timeout
        for q in self._acc.partitions.values():
            queue = q.queue
            # Sent and unanswered batches expire when their answer comes (or not).
            while len(queue) > q.in_flight and now - queue[q.in_flight].created >= limit:
                batch = queue[q.in_flight]
                self._settle(q, batch, error=self._expired(batch, None), in_flight=False)

    def _expired(self, batch: ProducerBatch, cause: BaseException | None) -> DeliveryTimeoutError:
        error = DeliveryTimeoutError(
            f"{len(batch)} record(s) for {batch.topic}/{batch.partition} were not "
            f"acknowledged within producer.delivery_timeout={self._config.delivery_timeout}s"
            + (f" (last error: {cause})" if cause is not None else "")
        )
        error.__cause__ = cause
        return error

    def _settle(
        self,
        q: PartitionQueue,
        batch: ProducerBatch,
        *,
        base_offset: int = -1,
        append_time: int = -1,
        error: BaseException | None = None,
        in_flight: bool = True,
    ) -> None:
        """The batch is done: off its queue, its memory back, its futures set;
        ``in_flight``: it was with the broker until now."""
        if in_flight:
            q.in_flight -= 1
        if q.queue and q.queue[0] is batch:
            q.queue.popleft()
        else:
            q.queue.remove(batch)
        self._acc.release(batch.size)
        if error is None:
            batch.complete(base_offset, append_time)
            return
        if self._txn is not None:
            self._txn.fail(error)  # the transaction can only abort now
        elif self._idempotent and batch.sequence >= 0 and q.queue:
            # A gap in the partition's sequence: only a new epoch lets the rest through.
            self._bump_needed = True
        batch.fail(error)

    async def _add_partitions(self, txn: TransactionManager) -> None:
        """AddPartitionsToTxn for the partitions new to the transaction; when that fails,
        their batches fail (the transaction can then only abort)."""
        try:
            await txn.add_pending()
        except ConsumerGroupError as exc:
            log.warning("AddPartitionsToTxn failed: %s", exc)
            failed, txn.pending = txn.pending, set()
            for key in failed:
                q = self._acc.partitions.get(key)
                while q is not None and len(q.queue) > q.in_flight:
                    self._settle(q, q.queue[q.in_flight], error=exc, in_flight=False)

    async def _bump(self) -> None:
        """A new epoch; every queue's sequences start again at 0 (nothing is in flight)."""
        try:
            await self._identity.bump()
        except ConsumerGroupError as exc:
            if not exc.retriable:
                raise
            log.warning("producer epoch bump failed, retrying: %s", exc)
            self._next_bump = time.monotonic() + self._config.retry_backoff_max
            return
        for q in self._acc.partitions.values():
            sequence = 0
            for batch in q.queue:
                if batch.sequence >= 0:
                    batch.sequence = sequence
                    sequence += len(batch)
            q.next_sequence = sequence
        self._bump_needed = False


def _find(answers: Iterable[PartitionResponse], partition: int) -> PartitionResponse | None:
    for answer in answers:
        if answer[0] == partition:
            return answer
    return None
