"""Executor side of the Spark source: one offset range in, Arrow record batches out.

Each Spark task runs :func:`read_range`. A fetch thread runs one asyncio loop for
the task: a :class:`~consumergroup.Consumer` fetches the range's partition and its
record sets, undecoded, become Arrow batches in that thread
(:class:`~._spark_arrow.BatchBuilder`), handed over through a queue
of :data:`PREFETCH` batches, so fetching the next batch overlaps with Spark
consuming the previous one, and memory stays bounded (the queue, plus the
partition consumer's own buffer). Nothing is created before the task runs: loops,
sockets and threads do not pickle.

A range ends at its end offset even when the last offsets hold no record (a
compacted log, transaction markers): once the fetch position passes the end
with nothing buffered, the partition consumer is stopped rather than awaited.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Callable, Iterator

import pyarrow as pa

from ..consumer import Consumer, PartitionConsumer
from ..consumer.inflate import Bounds
from ..consumer.records import RecordSet
from ..errors import ConsumerError, OffsetOutOfRangeError
from ._spark_arrow import BatchBuilder
from ._spark_options import SourceOptions
from ._spark_plan import OffsetRange, data_loss

#: Arrow batches built ahead of Spark's consumption.
PREFETCH = 2
#: How often a reader waiting for records checks whether its range is done.
STALL_CHECK = 0.1
#: Bytes asked per partition and fetch (large: a task reads one partition in bulk).
FETCH_BYTES = 8 << 20
#: The partition consumer's buffer, in messages.
BUFFER_MESSAGES = 8192

_DONE = object()


def read_range(opts: SourceOptions, rng: OffsetRange) -> Iterator[pa.RecordBatch]:
    """Yield ``rng``'s records as Arrow batches (Spark's Kafka row layout)."""
    if rng.size <= 0:
        return
    handoff: queue.Queue[object] = queue.Queue(maxsize=PREFETCH)
    stop = threading.Event()

    def put(item: object) -> bool:
        # Blocks while Spark is busy with earlier batches; gives up once the task ends.
        while not stop.is_set():
            try:
                handoff.put(item, timeout=STALL_CHECK)
                return True
            except queue.Full:
                continue
        return False

    def fetch() -> None:
        try:
            asyncio.run(_fetch(opts, rng, put, stop))
        except BaseException as exc:  # handed to the task's thread, raised there
            put(exc)
        else:
            put(_DONE)

    thread = threading.Thread(
        target=fetch, name=f"cg-fetch-{rng.topic}-{rng.partition}", daemon=True
    )
    thread.start()
    try:
        while True:
            item = handoff.get()
            if item is _DONE:
                return
            if isinstance(item, BaseException):
                raise item
            assert isinstance(item, pa.RecordBatch)
            yield item
    finally:
        stop.set()  # Spark stopped early (a limit, a failure): end the fetch thread
        with contextlib.suppress(queue.Empty):
            while True:
                handoff.get_nowait()
        thread.join()


async def _fetch(
    opts: SourceOptions, rng: OffsetRange, put: Callable[[object], bool], stop: threading.Event
) -> None:
    config = opts.config()
    config.channel_buffer_size = BUFFER_MESSAGES
    config.consumer.fetch.default = FETCH_BYTES
    config.consumer.fetch.max_bytes = max(config.consumer.fetch.max_bytes, FETCH_BYTES)
    # Out of range at the start: an error to report, or a skip to the log start.
    config.consumer.offsets.reset = "error" if opts.fail_on_data_loss else "oldest"
    loop = asyncio.get_running_loop()
    builder = BatchBuilder(
        rng.topic, rng.partition, opts.include_headers, bounds=Bounds.of(config.consumer.fetch)
    )
    async with Consumer(list(opts.bootstrap), config) as consumer:
        pc = await consumer.consume_partition(rng.topic, rng.partition, rng.start)
        # Record sets undecoded: the builder decodes their batches into Arrow columns.
        record_sets = pc._record_sets()
        waiting: asyncio.Future[RecordSet | None] | None = None
        while True:
            if waiting is None:
                waiting = asyncio.ensure_future(anext(record_sets, None))
            done, _ = await asyncio.wait({waiting}, timeout=STALL_CHECK)
            if not done:
                if stop.is_set():
                    return  # the task ended while records were awaited
                _end_if_done(opts, rng, pc)
                continue
            try:
                record_set = waiting.result()
            except ConsumerError as exc:
                raise _explain(opts, rng, exc) from exc
            waiting = None
            if record_set is None:
                break
            for batch, magic, _ in record_set.batches:
                for full in builder.add(batch, magic, record_set.start, rng.end):
                    if not await loop.run_in_executor(None, put, full):
                        return  # the task ended
            if record_set.next_offset >= rng.end:
                break
        last = builder.flush()
        if last is not None:
            await loop.run_in_executor(None, put, last)


def _end_if_done(opts: SourceOptions, rng: OffsetRange, pc: PartitionConsumer) -> None:
    """Stop ``pc`` (ending its iterator) when nothing of the range is left to come."""
    if pc.queued:
        return
    if pc.next_offset >= rng.end:
        pc.stop()  # the tail of the range holds no record
        return
    mark = pc.last_stable_offset if opts.read_committed else pc.high_water_mark_offset
    if 0 <= mark < rng.end and pc.next_offset >= mark:
        pc.stop()
        data_loss(
            opts,
            f"{rng.topic}/{rng.partition}: the log ends at {mark}, before the end {rng.end} "
            "of this batch (was the topic deleted and re-created?)",
        )


def _explain(opts: SourceOptions, rng: OffsetRange, exc: ConsumerError) -> Exception:
    if isinstance(exc.cause, OffsetOutOfRangeError) and opts.fail_on_data_loss:
        return ConsumerError(
            f"offsets {rng.start}..{rng.end - 1} are no longer all in the log ({exc.message}). "
            "Some data may have been lost (failOnDataLoss=true); set the option "
            "failOnDataLoss to false to skip it and go on",
            topic=rng.topic,
            partition=rng.partition,
        )
    return exc
