"""Driver side of the Spark source: which partitions, which offsets, which ranges.

Offsets travel through Spark's checkpoint as JSON objects in the shape of Spark's
Kafka source, ``{"topic": {"0": 42, "1": 17}}`` (next offset to read per
partition), built in sorted order so the same offsets always give the same text.

:class:`Planner` owns one :class:`~consumergroup.Client` and one event loop for the
whole life of a query's driver-side reader (Spark keeps that reader in one
long-lived Python process and calls it synchronously). End offsets are the Fetch
high watermark (last stable offset under read_committed), never ListOffsets
LATEST, which lags the log end on some brokers (Tansu).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Coroutine, Iterable, Mapping
from itertools import pairwise
from typing import Any, TypeVar

from .._dataclass import dataclass
from ..client import Client
from ..config import OFFSET_NEWEST, OFFSET_OLDEST
from ..consumer.positions import resolve_offsets
from ..errors import ConfigurationError, ConsumerError, UnknownTopicOrPartitionError
from ..group.offsets import OffsetManager
from ._spark_options import EARLIEST, LATEST, SourceOptions, TopicPartition, _fail, log

T = TypeVar("T")
Offsets = dict[TopicPartition, int]
#: The metadata of the offsets committed to ``kafka.group.id`` (marks them as a pipeline's).
COMMIT_METADATA = "consumergroup.integrations.spark"


@dataclass(frozen=True, slots=True)
class OffsetRange:
    """Records ``[start, end)`` of one partition: the unit of work of one Spark task."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        """Offsets in the range (an upper bound of the records: compaction, markers)."""
        return self.end - self.start


def to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """Spark offset object for ``offsets``, keys in a fixed order (text equality)."""
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = offset
    return out


def from_json(obj: Mapping[str, Mapping[str, int]]) -> Offsets:
    """Inverse of :func:`to_json` (keys come back from Spark as strings)."""
    return {(t, int(p)): int(o) for t, parts in obj.items() for p, o in parts.items()}


def rate_limit(start: Offsets, latest: Offsets, max_rows: int) -> Offsets:
    """Spread ``max_rows`` over the partitions in proportion to their backlog (Spark's rule:
    a share below one offset rounds up, others down, so every backlog moves)."""
    backlog = {tp: latest[tp] - start.get(tp, latest[tp]) for tp in latest}
    total = sum(size for size in backlog.values() if size > 0)
    if total <= max_rows:
        return dict(latest)
    out = {}
    for tp, end in latest.items():
        begin = start.get(tp, end)
        size = backlog[tp]
        if size <= 0:
            out[tp] = end
            continue
        share = max_rows * size / total
        out[tp] = min(end, begin + (math.ceil(share) if share < 1 else math.floor(share)))
    return out


def split_ranges(ranges: list[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """Split ranges so there are at least ``min_partitions`` of them (Spark's
    ``KafkaOffsetRangeCalculator``: parts in proportion to each range's size)."""
    ranges = [r for r in ranges if r.size > 0]
    if not min_partitions or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.size for r in ranges)
    out = []
    for r in ranges:
        parts = max(1, min(r.size, round(r.size / total * min_partitions)))
        step = r.size / parts
        bounds = [r.start + int(step * i) for i in range(parts)] + [r.end]
        out += [OffsetRange(r.topic, r.partition, a, b) for a, b in pairwise(bounds)]
    return out


def check_covers(
    option: str, spec: Mapping[TopicPartition, int], tps: list[TopicPartition]
) -> None:
    """Per-partition offsets must name every partition read, and only those (as Spark's
    Kafka source requires): a typo in a topic or partition number fails here, named."""
    topics = {t for t, _ in tps}
    unknown = sorted({t for t, _ in spec} - topics)
    if unknown:
        raise _fail(option, to_json(spec), f"names topics {unknown} that this query does not read")
    bad = sorted(set(spec) - set(tps))
    if bad:
        raise _fail(
            option,
            to_json(spec),
            "names partitions that do not exist: "
            + ", ".join(
                f"{t}/{p} ({t} has {sum(1 for x, _ in tps if x == t)} partitions)" for t, p in bad
            ),
        )
    missing = sorted(set(tps) - set(spec))
    if missing:
        raise _fail(
            option,
            to_json(spec),
            "leaves out partitions "
            + ", ".join(f"{t}/{p}" for t, p in missing)
            + ": give every partition read an offset (-2 earliest, -1 latest)",
        )


def data_loss(opts: SourceOptions, message: str) -> None:
    """Fail with ``message`` under failOnDataLoss=true; log it and go on otherwise."""
    if opts.fail_on_data_loss:
        raise ConsumerError(
            f"{message}. Some data may have been lost (failOnDataLoss=true); set the option "
            "failOnDataLoss to false to skip it and go on"
        )
    log.warning("%s; skipping it (failOnDataLoss=false)", message)


class Planner:
    """A query's driver-side client: partitions, log bounds, group commits."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: Client | None = None

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on this planner's loop (created on first use)."""
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        return self._loop.run_until_complete(coro)

    async def client(self) -> Client:
        """The connected client (connected on first use)."""
        if self._client is None:
            client = Client(list(self.opts.bootstrap), self.opts.config())
            await client.start()
            self._client = client
        return self._client

    def close(self) -> None:
        """Close the client and the loop (idempotent)."""
        if self._loop is None:
            return
        if self._client is not None:
            self._loop.run_until_complete(self._client.close())
            self._client = None
        self._loop.close()
        self._loop = None

    # ------------------------------------------------------------------ partitions

    async def partitions(
        self, known: Iterable[TopicPartition] = (), *, resuming: bool = False
    ) -> list[TopicPartition]:
        """The partitions the options select, from fresh metadata.

        A subscribed or assigned topic that does not exist raises, unless it was
        read before (in ``known``, or any topic when ``resuming`` a query whose
        offsets are not known yet): then it was deleted, which follows failOnDataLoss.
        """
        client = await self.client()
        opts = self.opts
        had = {t for t, _ in known}
        if opts.pattern is not None:
            await client.refresh_metadata()
            topics = [t for t in await client.topics() if opts.matches(t)]
        else:
            topics = list(dict.fromkeys(opts.subscribe or [t for t, _ in opts.assign]))
            await client.refresh_metadata(*topics)
        out: list[TopicPartition] = []
        deleted = set(had) - set(topics)  # under subscribePattern: no longer listed
        for topic in topics:
            parts = client.cached_partitions(topic)
            if parts is None:
                if topic in had or resuming:
                    deleted.add(topic)
                    continue
                raise UnknownTopicOrPartitionError(
                    f"topic {topic!r} does not exist: create it, or fix the option "
                    f"{'subscribe' if opts.subscribe else 'assign'}"
                )
            if opts.assign:
                wanted = [p for t, p in opts.assign if t == topic]
                missing = sorted(set(wanted) - set(parts))
                if missing:
                    raise UnknownTopicOrPartitionError(
                        f"option assign names {topic}/{missing} but {topic!r} has partitions "
                        f"0..{len(parts) - 1}"
                    )
                parts = wanted
            out += [(topic, p) for p in parts]
        if deleted:
            data_loss(opts, f"topics {sorted(deleted)} were deleted")
        gone = sorted(tp for tp in set(known) - set(out) if tp[0] not in deleted)
        if gone:
            data_loss(opts, f"partitions {gone} disappeared")
        return sorted(out)

    async def earliest(self, tps: Iterable[TopicPartition]) -> Offsets:
        """Log start offsets (ListOffsets EARLIEST)."""
        client = await self.client()
        wanted = dict.fromkeys(tps, OFFSET_OLDEST)
        return await resolve_offsets(client, client.config, wanted) if wanted else {}

    async def latest(self, tps: Iterable[TopicPartition]) -> Offsets:
        """Log ends: the Fetch high watermark (last stable offset under read_committed)."""
        client = await self.client()
        wanted = dict.fromkeys(tps, OFFSET_NEWEST)
        return await resolve_offsets(client, client.config, wanted) if wanted else {}

    async def after_time(self, stamps: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """First offset with a timestamp >= the given one; -1 where no record is that recent.

        The client checks the broker's answer against the log (a broker may answer a time
        past the last record with an offset instead of "none")."""
        client = await self.client()
        found = await client.offsets_for_times(stamps, read_committed=self.opts.read_committed)
        return {tp: -1 if off is None else off for tp, off in found.items()}

    async def by_timestamp(self, stamps: Mapping[TopicPartition, int]) -> Offsets:
        """First offset with a timestamp >= the given one. Where there is none:
        startingOffsetsByTimestampStrategy "error" raises, "latest" takes the log end."""
        found = await self.after_time(stamps)
        none = sorted(tp for tp, off in found.items() if off < 0)
        if none and self.opts.timestamp_strategy == "error":
            named = ", ".join(f"{t}/{p} (timestamp {stamps[(t, p)]})" for t, p in none)
            raise ConfigurationError(
                f"no record at or after the starting timestamp in {named}: set the option "
                "startingOffsetsByTimestampStrategy to latest to start those partitions "
                "at their log end, or pick an earlier timestamp"
            )
        return {**found, **(await self.latest(none))}

    async def resolve(
        self, option: str, spec: Mapping[TopicPartition, int], tps: list[TopicPartition]
    ) -> Offsets:
        """Offsets for ``tps`` from the per-partition ``option`` (-2 earliest, -1 latest, else
        exact), which must name each of ``tps`` and nothing else."""
        check_covers(option, spec, tps)
        out = {tp: off for tp, off in spec.items() if off >= 0}
        out.update(await self.earliest([tp for tp, off in spec.items() if off == EARLIEST]))
        out.update(await self.latest([tp for tp, off in spec.items() if off == LATEST]))
        return out

    async def starting(self, tps: list[TopicPartition]) -> Offsets:
        """Where a new query starts: startingTimestamp > startingOffsetsByTimestamp >
        startingOffsets (Spark's precedence)."""
        opts = self.opts
        if opts.starting_timestamp is not None:
            return await self.by_timestamp(dict.fromkeys(tps, opts.starting_timestamp))
        if opts.starting_by_timestamp is not None:
            stamps = {tp: ts for tp, ts in opts.starting_by_timestamp.items() if tp in tps}
            return {
                **await self.earliest(set(tps) - set(stamps)),
                **await self.by_timestamp(stamps),
            }
        if opts.starting == "earliest":
            return await self.earliest(tps)
        if opts.starting == "latest":
            return await self.latest(tps)
        return await self.resolve("startingOffsets", opts.starting, tps)

    async def batch(self) -> tuple[Offsets, Offsets]:
        """A batch read's (start, end): startingOffsets to endingOffsets, checked against each
        other and the log end so a bad option fails here, named, not in a task."""
        tps = await self.partitions()
        start = await self.starting(tps)
        latest = await self.latest(tps)
        ending = self.opts.ending
        end = (
            await self.resolve("endingOffsets", ending, tps) if isinstance(ending, dict) else latest
        )
        past = sorted(tp for tp in end if end[tp] > latest[tp])
        if past:
            named = ", ".join(f"{t}/{p} ends at {latest[(t, p)]}" for t, p in past)
            raise _fail(
                "endingOffsets",
                to_json({tp: end[tp] for tp in past}),
                f"past the log end ({named}): use -1 (latest) or an offset up to the log end",
            )
        behind = sorted(tp for tp in end if start[tp] > end[tp])
        if behind:
            named = ", ".join(f"{t}/{p} starts at {start[(t, p)]}" for t, p in behind)
            ends = to_json({tp: end[tp] for tp in behind})
            raise ConfigurationError(
                f"startingOffsets is after endingOffsets ({named}, but ends at {ends}): "
                "the start of a batch read must not be after its end"
            )
        return start, end

    # ------------------------------------------------------------------ ranges

    async def ranges(self, start: Offsets, end: Offsets) -> list[OffsetRange]:
        """The offset ranges of a batch from ``start`` to ``end``, checked for data loss."""
        new = [tp for tp in end if tp not in start]
        log_start = await self.earliest(end)
        out = []
        for tp, stop in sorted(end.items()):
            topic, partition = tp
            begin = start.get(tp, log_start.get(tp, 0))
            if tp in new:
                log.info("new partition %s/%d: reading from offset %d", topic, partition, begin)
            if stop < begin:
                data_loss(
                    self.opts,
                    f"{topic}/{partition} shrank: the log now ends at {stop}, before offset "
                    f"{begin} where this batch starts (was the topic deleted and re-created?)",
                )
                continue
            first = log_start.get(tp, begin)
            if begin < first:
                data_loss(
                    self.opts,
                    f"{topic}/{partition}: offsets {begin}..{first - 1} were deleted before "
                    "they were read (retention or compaction)",
                )
                begin = first
            out.append(OffsetRange(topic, partition, begin, max(stop, begin)))
        return split_ranges(out, self.opts.min_partitions)

    # ------------------------------------------------------------------ group commits

    async def commit_group(self, offsets: Offsets) -> None:
        """Commit ``offsets`` to ``kafka.group.id`` as a simple (memberless) commit."""
        group = self.opts.group_id
        if group is None or not offsets:
            return
        client = await self.client()
        manager = OffsetManager(client, group, client.config)  # generation -1, member ""
        manager.assign(dict.fromkeys(offsets, (-1, COMMIT_METADATA)), dict(offsets))
        await manager.commit()
