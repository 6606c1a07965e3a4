"""Consumer: partition consumers and the fetch tasks that feed them (sarama's ``consumer.go``).

Owns one :class:`~.broker.BrokerConsumer` per broker that serves a consumed
partition (its leader, or the replica its leader named for ``client_rack``), and
the re-routing task that moves partitions between them when leadership changes.
Used directly (``cg.Consumer``) or by a group session for its claims.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence

from .._lifecycle import AsyncResource, cancel_and_wait
from .._repeats import RepeatedWarning
from ..client import Client
from ..config import Config
from ..errors import (
    ClosedError,
    ConfigurationError,
    ConsumerError,
    OffsetOutOfRangeError,
    UnknownTopicOrPartitionError,
)
from ..retry import is_transient
from ._native import warn_if_pure_python
from .broker import BrokerConsumer
from .inflate import Bounds
from .partition import Consumed, PartitionConsumer
from .positions import TopicPartition, resolve_offsets, resolve_start_offsets

log = logging.getLogger(__name__)


class Consumer(AsyncResource):
    """Consumes individual partitions from explicit offsets (no group).

    ``async with Consumer(["127.0.0.1:9092"], config) as consumer:`` then
    ``pc = await consumer.consume_partition("t", 0, OFFSET_OLDEST)`` and
    ``async for msg in pc.messages(): ...``.
    """

    def __init__(
        self,
        addrs: str | Sequence[str] = (),
        config: Config | None = None,
        *,
        client: Client | None = None,
    ) -> None:
        self.config = config or (client.config if client else Config())
        self.config.validate()
        self._own_client = client is None
        self._client = client or Client(addrs, self.config)
        # --- event-loop state, touched by Consumer methods and the fetch tasks' callbacks ---
        # (topic, partition) -> its consumer while open; removed by PartitionConsumer.close().
        self._partitions: dict[TopicPartition, PartitionConsumer] = {}
        # node id -> running fetch task; an ended one removes itself (on_exit).
        self._brokers: dict[int, BrokerConsumer] = {}
        # Partitions that lost their leader, waiting to be re-routed by _reroute_loop.
        self._orphans: asyncio.Queue[PartitionConsumer] = asyncio.Queue()
        self._reroute_task: asyncio.Task[None] | None = None
        # During an outage every re-routing round fails alike: log the first, then summaries.
        self._refresh_failures = RepeatedWarning(log)
        self._closed = False
        # What readers took per partition, over every PartitionConsumer it had (metrics).
        self._consumed: dict[TopicPartition, Consumed] = {}
        #: Called after every Fetch round trip with (seconds, records, bytes): metrics.
        self.on_fetch: Callable[[float, int, int], None] | None = None
        #: Called with each error a partition reads on after (a record skipped for
        #: exceeding ``consumer.fetch.max_record_bytes``), after it is logged.
        self.on_error: Callable[[ConsumerError], None] | None = None
        self._bounds = Bounds.of(self.config.consumer.fetch)

    @property
    def client(self) -> Client:
        """The cluster client (shared with a group when the group created this consumer)."""
        return self._client

    async def start(self) -> None:
        """Connect (when this consumer owns its client)."""
        if self._own_client:
            await self._client.start()

    async def topics(self) -> list[str]:
        """Every topic in the cluster."""
        return await self._client.topics()

    async def partitions(self, topic: str) -> list[int]:
        """Partition ids of ``topic`` (UnknownTopicOrPartitionError if it does not exist)."""
        return await self._client.partitions(topic)

    async def consume_partition(self, topic: str, partition: int, offset: int) -> PartitionConsumer:
        """Start reading ``topic/partition`` at ``offset`` (or OFFSET_OLDEST / OFFSET_NEWEST)."""
        consumers = await self.consume_partitions({(topic, partition): offset})
        return consumers[(topic, partition)]

    async def consume_partitions(
        self,
        wanted: Mapping[TopicPartition, int],
        paused: Collection[TopicPartition] = (),
        epochs: Mapping[TopicPartition, int] | None = None,
    ) -> dict[TopicPartition, PartitionConsumer]:
        """Start many partitions at once (offsets resolved in one request per leader).

        An explicit offset outside the log follows ``consumer.offsets.reset``; under
        ``"error"`` its PartitionConsumer is returned already failed, so its
        iterators raise :class:`~consumergroup.ConsumerError`. Partitions in
        ``paused`` start paused: not one fetch is sent for them before ``resume()``.
        ``paused`` is read when the consumers are created (after the offsets are
        resolved), and from then on each is reachable by :meth:`partition_consumer`.
        ``epochs`` gives the leader epoch of the record before an explicit offset (a
        committed one's, KIP-320): the first fetch has the broker check the log still
        agrees up to there, and a truncated log is handled as any fetch finds one (the
        divergence point, or the partition fails under ``"error"``); the broker also
        answers such an offset out of range, so it is not range-checked beforehand.
        """
        self._check_new(wanted)
        warn_if_pure_python()
        for topic in {topic for topic, _ in wanted}:
            parts = await self._client.partitions(topic)
            for t, partition in wanted:
                if t == topic and partition not in parts:
                    raise UnknownTopicOrPartitionError(
                        f"topic {topic!r} has no partition {partition}: it has "
                        f"{len(parts)} (0..{len(parts) - 1})"
                    )
        epochs = {tp: e for tp, e in (epochs or {}).items() if e >= 0 and wanted.get(tp, -1) >= 0}
        offsets, failed = await resolve_start_offsets(
            self._client, self.config, wanted, validated=epochs
        )
        self._check_new(wanted)  # a concurrent call may have taken one meanwhile
        out: dict[TopicPartition, PartitionConsumer] = {}
        for (topic, partition), offset in {**offsets, **{tp: wanted[tp] for tp in failed}}.items():
            pc = PartitionConsumer(
                topic,
                partition,
                offset,
                buffer_size=self.config.channel_buffer_size,
                buffer_bytes=self.config.consumer.fetch.buffer_bytes,
                fetch_size=self.config.consumer.fetch.default,
                on_close=self._forget,
                consumed=self._consumed.setdefault((topic, partition), Consumed()),
                bounds=self._bounds,
                refused=self._report,
            )
            if (epoch := epochs.get((topic, partition), -1)) >= 0:
                pc.epoch_before_start(epoch)
            self._partitions[(topic, partition)] = pc
            out[(topic, partition)] = pc
        for tp, error in failed.items():
            out[tp]._fail(error)
        for tp in paused:
            if tp in out:
                out[tp].pause()  # before routing: a fetch task may run as soon as we yield
        self._ensure_rerouter()
        # Whatever cannot be routed now goes to the re-routing task, never back to the
        # caller half-registered; cancelled meanwhile, the partitions are let go.
        try:
            await self._route_all([pc for pc in out.values() if not pc.closed])
        except BaseException:
            for pc in out.values():
                pc.stop()
            raise
        return out

    def _check_new(self, wanted: Mapping[TopicPartition, int]) -> None:
        if self._closed:
            raise ClosedError("the consumer is closed")
        for topic, partition in wanted:
            if (topic, partition) in self._partitions:
                raise ConfigurationError(
                    f"{topic}/{partition} is already being consumed: close its "
                    "PartitionConsumer before consuming it again"
                )

    def _forget(self, pc: PartitionConsumer) -> None:
        if self._partitions.get((pc.topic, pc.partition)) is pc:
            del self._partitions[(pc.topic, pc.partition)]
        pc._wake_fetcher()  # lets its fetch task notice and drop it

    async def _route(self, pc: PartitionConsumer) -> None:
        """Subscribe ``pc`` to the fetch task of its current leader."""
        await self._client.leader(pc.topic, pc.partition, "fetch")
        # Whatever replica it read from before, the leader decides again (KIP-392).
        pc._read_replica = -1
        self._fetcher(self._client.leader_id(pc.topic, pc.partition)).subscribe(pc)

    def _relocate(self, pc: PartitionConsumer, node: int) -> None:
        """Move ``pc`` to node ``node``'s fetch task now (a preferred read replica, or
        back to its leader): the fetch task dials it, and orphans ``pc`` if it cannot."""
        if not pc.closed and not self._closed:
            self._fetcher(node).subscribe(pc)

    def _fetcher(self, node: int) -> BrokerConsumer:
        """The running fetch task of node ``node`` (started if there is none)."""
        bc = self._brokers.get(node)
        if bc is None or not bc.running:
            bc = BrokerConsumer(
                node,
                self._client,
                self.config,
                self._orphaned,
                self._broker_exited,
                self._fetched,
                relocate=self._relocate,
            )
            self._brokers[node] = bc
            bc.start()
        return bc

    def _report(self, error: ConsumerError) -> None:
        """A partition's error that it reads on after: logged, then to :attr:`on_error`."""
        log.error("%s", error)
        if self.on_error is not None:
            self.on_error(error)

    def _fetched(self, latency: float, records: int, nbytes: int) -> None:
        if self.on_fetch is not None:
            self.on_fetch(latency, records, nbytes)

    def _orphaned(self, pc: PartitionConsumer, error: BaseException) -> None:
        self._orphans.put_nowait(pc)
        if not self._closed:
            self._ensure_rerouter()

    def _broker_exited(self, bc: BrokerConsumer) -> None:
        if self._brokers.get(bc.node_id) is bc:
            del self._brokers[bc.node_id]
        # Subscriptions that arrived after its last look go elsewhere.
        while not bc.new.empty():
            self._orphans.put_nowait(bc.new.get_nowait())

    def _ensure_rerouter(self) -> None:
        if self._reroute_task is None or self._reroute_task.done():
            self._reroute_task = asyncio.create_task(self._reroute_loop(), name="fetch-reroute")

    async def _reroute_loop(self) -> None:
        """Move orphaned partitions to their leaders, every ``consumer.retry.backoff``.

        Never ends on an error: what cannot be routed yet (no broker answers, the
        leader is unreachable or unknown) waits for the next round.
        """
        while True:
            batch = [await self._orphans.get()]
            await asyncio.sleep(self.config.consumer.retry.backoff)
            while not self._orphans.empty():
                batch.append(self._orphans.get_nowait())
            live = [pc for pc in batch if not pc.closed]
            if not live:
                continue
            try:
                await self._client.refresh_metadata(*{pc.topic for pc in live})
            except Exception as exc:
                if not is_transient(exc):
                    self._fail_all(live, "cannot find the partition's leader", exc)
                    continue
                self._refresh_failures.warning(
                    "re-routing %d partitions: metadata refresh failed (%s); retrying every %.1fs",
                    len(live),
                    exc,
                    self.config.consumer.retry.backoff,
                )
                self._requeue(live)
                continue
            self._refresh_failures.recovered(f"re-routing {len(live)} partitions: metadata read")
            await self._route_all(live)

    async def _route_all(self, pcs: list[PartitionConsumer]) -> None:
        """Route ``pcs`` to their leaders' fetch tasks.

        The partitions a broker leads share its fate: it is dialed once for all of
        them, so an unreachable broker costs one ``net.dial_timeout`` per round
        however many partitions it leads. Every dial happens before the first
        subscription: with the connections open, subscribing does not suspend, so a
        caller (the group applying its pauses) acts on the partitions before any
        fetch task sees them.
        """
        by_node: dict[int, list[PartitionConsumer]] = {}
        for pc in pcs:
            by_node.setdefault(self._client.leader_id(pc.topic, pc.partition), []).append(pc)
        for node in [n for n in by_node if n >= 0]:
            try:
                await self._client.connection(node, "fetch")
            except Exception as exc:
                stranded = by_node.pop(node)
                if not is_transient(exc):
                    self._fail_all(stranded, f"cannot fetch from broker {node}", exc)
                    continue
                log.info(
                    "broker %d unreachable (%s); %d partitions wait for the next round",
                    node,
                    exc,
                    len(stranded),
                )
                self._requeue(stranded)
        for group in by_node.values():
            for pc in group:
                await self._reroute_one(pc)

    async def _reroute_one(self, pc: PartitionConsumer) -> None:
        try:
            if pc._reset_to is not None:
                from ..config import OFFSET_NEWEST, OFFSET_OLDEST

                wanted = OFFSET_OLDEST if pc._reset_to == "oldest" else OFFSET_NEWEST
                target = await resolve_offsets(
                    self._client, self.config, {(pc.topic, pc.partition): wanted}
                )
                pc._reset_to = None
                pc.seek(target[(pc.topic, pc.partition)])
            await self._route(pc)
        except UnknownTopicOrPartitionError as exc:
            pc._fail_with("the partition no longer exists", exc)
        except OffsetOutOfRangeError as exc:
            pc._fail_with(str(exc), exc)
        except Exception as exc:
            if not is_transient(exc):
                pc._fail_with("cannot route the partition to its leader", exc)
                return
            # The cluster is moving: try again after backoff.
            log.info("routing %s/%d failed (%s); retrying", pc.topic, pc.partition, exc)
            self._requeue([pc])

    def _requeue(self, pcs: list[PartitionConsumer]) -> None:
        for pc in pcs:
            if not pc.closed:
                self._orphans.put_nowait(pc)

    @staticmethod
    def _fail_all(pcs: list[PartitionConsumer], message: str, cause: BaseException) -> None:
        for pc in pcs:
            pc._fail_with(message, cause)

    def consuming(self) -> Iterable[PartitionConsumer]:
        """The open partition consumers."""
        return list(self._partitions.values())

    def partition_consumer(self, topic: str, partition: int) -> PartitionConsumer | None:
        """The open consumer of ``topic/partition`` (None when there is none): registered as
        soon as it is created, while :meth:`consume_partitions` still routes it."""
        return self._partitions.get((topic, partition))

    async def close(self) -> None:
        """Close every partition consumer, stop the fetch tasks (and the owned client)."""
        if self._closed:
            return
        self._closed = True
        for pc in list(self._partitions.values()):
            pc.stop()
        tasks = [bc.task for bc in self._brokers.values() if bc.task is not None]
        if self._reroute_task is not None:
            tasks.append(self._reroute_task)
        await cancel_and_wait(*tasks)
        self._brokers.clear()
        if self._own_client:
            await self._client.close()
