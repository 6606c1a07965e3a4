"""``format("consumergroup")``: a Kafka source for PySpark, fetching on the executors.

Built on PySpark's Python Data Source API (pyspark >= 4.2)::

    import consumergroup.integrations.spark as cgspark

    cgspark.register(spark)          # also done on import when a session is active
    df = (spark.readStream.format("consumergroup")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "events").option("startingOffsets", "earliest").load())

Option names and the row schema are those of Spark's Kafka source
(``key, value, topic, partition, offset, timestamp, timestampType`` [+ ``headers``]),
so switching ``format("kafka")`` to ``format("consumergroup")`` is the migration.

Where things run: the driver-side stream reader lives in one long-lived Python
process per query and plans offsets with one client (:mod:`._spark_plan`);
Spark's checkpoint owns the offsets (exactly-once with an idempotent or
transactional sink such as the file sink). Each Spark task reads one offset range
on an executor (:mod:`._spark_read`) and hands Spark Arrow batches
(:mod:`._spark_arrow`). With ``kafka.group.id``, the offsets of each micro-batch
Spark has finished are also committed to that consumer group, for lag tooling
only: Spark asks for the next batch's end (``latestOffset(start, ...)``) only
once the batch ending at ``start`` is in its commit log, so ``start`` is
committed there, which also covers the last batch of an ``availableNow`` run
(Spark's own ``commit(end)`` comes one batch later and is kept as well).

The package must be importable on the executors (``pip install
'consumergroup[spark]'`` on the cluster image, or ship it with ``--py-files``).
"""

from __future__ import annotations

import json
import math
import time
import weakref
from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from ..errors import ConfigurationError, ConsumerGroupError
from ._spark_arrow import HEADERS_DDL, SCHEMA_DDL
from ._spark_options import (
    SourceOptions,
    TopicPartition,
    _bool,
    log,
    parse_options,
    warn_unused,
)
from ._spark_plan import OffsetRange, Offsets, Planner, from_json, rate_limit, to_json
from ._spark_read import read_range

__all__ = [
    "ConsumerGroupBatchReader",
    "ConsumerGroupDataSource",
    "ConsumerGroupStreamReader",
    "offsets_behind_latest",
    "register",
]

_registered: weakref.WeakSet[SparkSession] = weakref.WeakSet()

#: The short name for ``spark.readStream.format(...)`` / ``spark.read.format(...)``.
FORMAT = "consumergroup"


def register(spark: SparkSession) -> None:
    """Make ``format("consumergroup")`` available on ``spark`` (idempotent)."""
    if spark in _registered:
        return  # registering again would only make Spark log a "replaced" warning
    spark.dataSource.register(ConsumerGroupDataSource)
    _registered.add(spark)


class ConsumerGroupDataSource(DataSource):
    """The data source Spark instantiates for ``format("consumergroup")``."""

    @classmethod
    def name(cls) -> str:
        """The format name."""
        return FORMAT

    def schema(self) -> str:
        """Spark's Kafka source schema (with ``headers`` under includeHeaders=true).

        Spark asks for it in ``.load()``: the options are checked here, so a bad one
        fails there in one line (not after ``.start()``, in the stream's thread).
        """
        warn_unused(self.options)
        try:
            parse_options(self.options, streaming=None)
        except ConfigurationError as exc:
            # Spark shows the traceback under its own header: only the message matters here.
            raise exc.with_traceback(None) from None
        headers = _bool({k.lower(): v for k, v in self.options.items()}, "includeHeaders", False)
        return f"{SCHEMA_DDL}, {HEADERS_DDL}" if headers else SCHEMA_DDL

    def reader(self, schema: StructType) -> DataSourceReader:
        """The batch reader (``spark.read``)."""
        return ConsumerGroupBatchReader(self._options(schema, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """The micro-batch reader (``spark.readStream``)."""
        return ConsumerGroupStreamReader(self._options(schema, streaming=True))

    def _options(self, schema: StructType, *, streaming: bool) -> SourceOptions:
        opts = parse_options(self.options, streaming=streaming)
        expected = 8 if opts.include_headers else 7
        if len(schema.fields) != expected:
            raise ConfigurationError(
                f"format('{FORMAT}') has a fixed schema ({self.schema()}): "
                "drop the .schema(...) call"
            )
        return opts


def _read(opts: SourceOptions, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    rng = partition.value
    if not isinstance(rng, OffsetRange):  # Spark's placeholder when a batch read is empty
        return iter(())
    return read_range(opts, rng)


class ConsumerGroupBatchReader(DataSourceReader):
    """``spark.read.format("consumergroup")``: startingOffsets to endingOffsets, once."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts

    def partitions(self) -> list[InputPartition]:
        """Plan the ranges with a short-lived client (in Spark's planning worker)."""
        planner = Planner(self.opts)
        try:
            ranges = planner.run(self._plan(planner))
        finally:
            planner.close()
        return [InputPartition(r) for r in ranges]

    @staticmethod
    async def _plan(planner: Planner) -> list[OffsetRange]:
        return await planner.ranges(*await planner.batch())

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Read one range (on an executor)."""
        return _read(self.opts, partition)


class ConsumerGroupStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("consumergroup")``: micro-batches of offset ranges."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        # Driver-only state, dropped when Spark pickles the reader for the executors.
        self._planner: Planner | None = None
        self._target: Offsets | None = None  # availableNow: read no further than this
        # minOffsetsPerTrigger's maxTriggerDelay runs from the last batch; the first
        # trigger fires at once (as Spark's Kafka source).
        self._last_batch = -math.inf
        self._latest: Offsets | None = None  # the log ends last seen, for reportLatestOffset
        self._mirrored: Offsets | None = None  # last offsets committed to kafka.group.id

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_planner"] = None
        return state

    @property
    def _plan(self) -> Planner:
        if self._planner is None:
            self._planner = Planner(self.opts)
        return self._planner

    def initialOffset(self) -> dict[str, Any]:
        """Where a new query starts (startingOffsets / startingTimestamp...)."""

        async def initial() -> Offsets:
            return await self._plan.starting(await self._plan.partitions())

        return to_json(self._plan.run(initial()))

    def prepareForTriggerAvailableNow(self) -> None:
        """Fix the log ends of now as the end of an ``availableNow`` run."""

        async def target() -> Offsets:
            # A restart does not know yet which topics the checkpoint read: a missing
            # one may have been deleted, which failOnDataLoss=false skips.
            tps = await self._plan.partitions(resuming=not self.opts.fail_on_data_loss)
            return await self._plan.latest(tps)

        self._target = self._plan.run(target())

    def getDefaultReadLimit(self) -> ReadLimit:
        """maxOffsetsPerTrigger / minOffsetsPerTrigger as Spark read limits."""
        if self.opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        if self.opts.min_offsets_per_trigger is not None:
            return ReadMinRows(self.opts.min_offsets_per_trigger)
        return ReadAllAvailable()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        """The end of the next micro-batch: log ends (high watermarks), capped by ``limit``.

        Spark calls it once the batch ending at ``start`` is in its commit log (or with
        the initial offsets): ``start`` is what the query has finished, mirrored to
        ``kafka.group.id``.
        """
        begin = from_json(start)
        self._mirror(begin)
        end = self._plan.run(self._next_end(begin, limit))
        if end != begin:
            self._last_batch = time.monotonic()
        return to_json(end)

    def reportLatestOffset(self) -> dict[str, Any] | None:
        """The log ends seen by the last ``latestOffset`` (the progress' ``latestOffset``)."""
        return None if self._latest is None else to_json(self._latest)

    async def _next_end(self, begin: Offsets, limit: ReadLimit) -> Offsets:
        plan = self._plan
        tps = await plan.partitions(known=begin)
        latest = self._latest = await plan.latest(tps)
        if self._target is not None:
            # Partitions born after the run started are left to the next run.
            latest = {
                tp: min(off, self._target[tp]) for tp, off in latest.items() if tp in self._target
            }
        base: dict[TopicPartition, int] = {
            **begin,
            **await plan.earliest([tp for tp in latest if tp not in begin]),
        }
        if isinstance(limit, ReadAllAvailable):
            return latest
        min_rows = (
            limit.min_rows
            if isinstance(limit, ReadMinRows)
            else (self.opts.min_offsets_per_trigger)
        )
        if min_rows is not None and self._target is None:
            available = sum(max(0, off - base.get(tp, off)) for tp, off in latest.items())
            waited = time.monotonic() - self._last_batch
            if available < min_rows and waited < self.opts.max_trigger_delay:
                return begin
        if isinstance(limit, ReadMaxRows):
            return rate_limit(base, latest, limit.max_rows)
        return latest

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        """One task per offset range (more with minPartitions)."""
        ranges = self._plan.run(self._plan.ranges(from_json(start), from_json(end)))
        return [InputPartition(r) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Read one range (on an executor)."""
        return _read(self.opts, partition)

    def commit(self, end: dict[str, Any]) -> None:
        """Spark finished the batch ending at ``end``: commit it to ``kafka.group.id``."""
        self._mirror(from_json(end))

    def _mirror(self, done: Offsets) -> None:
        """Commit ``done`` to ``kafka.group.id`` unless it is already there.

        The group only mirrors Spark's checkpoint for lag tooling: a failed commit is
        logged and the query goes on (the next batch's commit catches up).
        """
        if self.opts.group_id is None or done == self._mirrored:
            return
        try:
            self._plan.run(self._plan.commit_group(done))
            self._mirrored = done
        except ConsumerGroupError as exc:
            log.warning(
                "could not commit the processed offsets to group %r (the query goes on; "
                "its checkpoint holds them): %s",
                self.opts.group_id,
                exc,
            )

    def stop(self) -> None:
        """Close the driver-side client."""
        if self._planner is not None:
            self._planner.close()
            self._planner = None


def offsets_behind_latest(source_progress: Mapping[str, Any]) -> dict[str, float]:
    """``minOffsetsBehindLatest`` / ``maxOffsetsBehindLatest`` / ``avgOffsetsBehindLatest``
    of one source's progress (``query.lastProgress["sources"][0]``), as Spark's Kafka
    source reports in its ``metrics``: the Python Data Source API has no source metrics,
    so they are computed from the progress' ``endOffset`` and ``latestOffset``.
    """
    end, latest = source_progress.get("endOffset"), source_progress.get("latestOffset")
    if not end or not latest:
        return {}
    done = from_json(json.loads(end) if isinstance(end, str) else end)
    ends = from_json(json.loads(latest) if isinstance(latest, str) else latest)
    behind = [max(0, off - done.get(tp, off)) for tp, off in ends.items()]
    if not behind:
        return {}
    return {
        "minOffsetsBehindLatest": float(min(behind)),
        "maxOffsetsBehindLatest": float(max(behind)),
        "avgOffsetsBehindLatest": sum(behind) / len(behind),
    }


def _register_active() -> None:
    """Register on import when a session is active (``import ...spark`` is enough)."""
    session = SparkSession.getActiveSession()
    if session is not None:
        register(session)


_register_active()
