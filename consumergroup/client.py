"""Client: the cluster as the rest of the package sees it (sarama's ``client.go``).

Four roles: ``any()`` (a live broker, rotating past dead seeds), ``leader()``
(a partition's leader), ``coordinator()`` (a group's coordinator) and
``controller()``. Behind them: a metadata cache refreshed on demand, on errors
and every ``metadata.refresh_frequency``, and a registry of connections that
reuses live ones and drops dead ones.

Connections are keyed by broker address *and purpose*: Kafka serves one request
per connection at a time, so a long-polling Fetch would otherwise hold up a
Heartbeat or a Metadata request queued behind it. ``"fetch"`` connections carry
Fetch only, ``"group"`` connections carry the group protocol (a JoinGroup the
coordinator holds for seconds included), ``"offsets"`` connections OffsetCommit and
OffsetFetch, ``"default"`` everything else.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from ._dataclass import dataclass
from ._lifecycle import AsyncResource, cancel_and_wait
from .config import Config
from .errors import (
    ClosedError,
    ConfigurationError,
    CoordinatorNotAvailableError,
    CorruptMessageError,
    KafkaConnectionError,
    KafkaError,
    LeaderNotAvailableError,
    ListenerMismatchError,
    NoBrokersAvailableError,
    RequestTimedOutError,
    SilentListenerError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
    error_for_code,
    raise_for_code,
)
from .net.connection import BrokerConnection
from .net.flexible import NULL_TOPIC_ID
from .net.protocol import Features, FindCoordinatorRequest, MetadataRequest
from .retry import retrying

log = logging.getLogger(__name__)

T = TypeVar("T")

# FindCoordinator key types.
_GROUP, _TRANSACTION = 0, 1


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """A broker as metadata describes it."""

    node_id: int
    host: str
    port: int
    rack: str | None = None

    @property
    def address(self) -> str:
        """``host:port``."""
        return f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class PartitionMetadata:
    """One partition's leader and replicas (leader -1: no leader right now)."""

    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    error_code: int = 0


# A host name or IPv4 address, an IPv6 address (bare or in brackets, with a zone): no
# separators (",", ";", spaces), which belong to lists of addresses, not to one.
_HOST = re.compile(r"[A-Za-z0-9._-]+|[0-9A-Fa-f:.]+|\[[0-9A-Fa-f:.]+(%[\w.-]+)?\]")


def parse_address(addr: str) -> tuple[str, int]:
    """``"host:port"`` (or ``"[v6]:port"``) -> (host, port); raises ConfigurationError."""
    host, sep, port = addr.strip().rpartition(":")
    # isascii: str.isdigit() accepts "²" (int() then fails) and "٣" (int() reads 3).
    if (
        not sep
        or not _HOST.fullmatch(host)
        or not (port.isascii() and port.isdigit())
        or not 0 < int(port) < 65536
    ):
        raise ConfigurationError(
            f"broker address {addr!r} is not HOST:PORT (for example '127.0.0.1:9092')"
        )
    return host.strip("[]"), int(port)


def bootstrap_addresses(addrs: str | Sequence[str]) -> list[str]:
    """Bootstrap addresses as given anywhere -> a list of ``"host:port"`` strings.

    Accepts a list (``["h1:9092", "h2:9092"]``), a comma-separated string
    (``"h1:9092,h2:9092"``, the convention of librdkafka, aiokafka and Kafka's own tools)
    or a list holding such strings (``[cluster.bootstrap]``). Every public constructor
    that connects (``ConsumerGroup``, ``Consumer``, ``ClusterAdmin``, ...) reaches this
    through ``Client``; an empty or malformed one is a ``ConfigurationError`` at once,
    before any connection is tried.
    """
    if isinstance(addrs, str):
        addrs = [addrs]
    out: list[str] = []
    for item in addrs:
        if not isinstance(item, str):
            raise ConfigurationError(
                f"bootstrap address {item!r} is not a string: give 'host:port' strings, "
                "a list of them, or one comma-separated string"
            )
        out.extend(part.strip() for part in item.split(",") if part.strip())
    if not out:
        raise ConfigurationError("no bootstrap brokers given: pass at least one 'host:port'")
    for addr in out:
        parse_address(addr)
    return out


class Client(AsyncResource):
    """Seed brokers, metadata cache, connection registry.

    Use as ``async with Client(addrs, config) as client:``. Every method must
    run on the event loop that started the client.
    """

    def __init__(self, addrs: str | Sequence[str], config: Config | None = None) -> None:
        self.config = config or Config()
        self.config.validate()
        self._seeds: list[tuple[str, int]] = [parse_address(a) for a in bootstrap_addresses(addrs)]
        # --- state below is touched only from the event loop, by Client methods ---
        # Latest metadata; replaced wholesale (per topic) by _apply_metadata().
        self._brokers: dict[int, BrokerInfo] = {}
        self._topics: dict[str, dict[int, PartitionMetadata]] = {}
        # topic id (Kafka's base64 form) <-> name, from Metadata v10+ (KIP-848 assignments).
        self._topic_names: dict[str, str] = {}
        self._topic_ids: dict[str, str] = {}
        self._internal: set[str] = set()  # __consumer_offsets and the like
        self._controller_id = -1
        # group -> coordinator; dropped by invalidate_coordinator() on NOT_COORDINATOR.
        self._coordinators: dict[tuple[int, str], BrokerInfo] = {}
        # (host, port, purpose) -> live connection; a dead one is replaced on next use.
        self._conns: dict[tuple[str, int, str], BrokerConnection] = {}
        self._dial_locks: dict[tuple[str, int, str], asyncio.Lock] = {}
        # The cluster's finalized features, as the broker that told the newest epoch of
        # them said (ApiVersions v3+); replaced by _connect() when a newer epoch comes.
        self._features = Features()
        self._metadata_lock = asyncio.Lock()
        self._refresher: asyncio.Task[None] | None = None
        self._closed = False

    async def start(self) -> None:
        """Fetch the cluster's metadata once and start the background refresher."""
        await self.refresh_metadata()
        if self.config.metadata.refresh_frequency > 0 and self._refresher is None:
            self._refresher = asyncio.create_task(self._refresh_loop(), name="metadata-refresh")

    async def close(self) -> None:
        """Stop the refresher and close every connection (idempotent)."""
        self._closed = True
        if self._refresher is not None:
            await cancel_and_wait(self._refresher)
            self._refresher = None
        conns, self._conns = list(self._conns.values()), {}
        for conn in conns:
            await conn.close()

    @property
    def closed(self) -> bool:
        """True after :meth:`close`."""
        return self._closed

    # ------------------------------------------------------------------ connections

    async def _connect(
        self, host: str, port: int, purpose: str, node_id: int | None
    ) -> BrokerConnection:
        if self._closed:
            raise ClosedError("the client is closed")
        key = (host, port, purpose)
        conn = self._conns.get(key)
        if conn is None or conn.closed:
            lock = self._dial_locks.setdefault(key, asyncio.Lock())
            async with lock:
                conn = self._conns.get(key)
                if conn is None or conn.closed:
                    conn = await BrokerConnection.open(host, port, self.config, node_id)
                    self._conns[key] = conn
                    if conn.features.epoch > self._features.epoch:
                        self._features = conn.features
        if conn.node_id is None and node_id is not None:
            # Dialed as a seed (id unknown then); metadata has since named this broker.
            conn.node_id = node_id
        return conn

    async def connection(self, node_id: int, purpose: str = "default") -> BrokerConnection:
        """A live connection to broker ``node_id`` (metadata is refreshed if it is unknown)."""
        broker = self._brokers.get(node_id)
        if broker is None:
            await self.refresh_metadata()
            broker = self._brokers.get(node_id)
            if broker is None:
                raise KafkaConnectionError(f"broker {node_id} is not in the cluster's metadata")
        return await self._connect(broker.host, broker.port, purpose, node_id)

    def feature_level(self, name: str) -> int:
        """The version level the cluster finalized for feature ``name`` (KIP-584; e.g.
        ``"transaction.version"``), as the newest answer of any broker connected so far
        says; 0 when none was finalized (or the brokers predate ApiVersions v3)."""
        return self._features.levels.get(name, 0)

    def brokers(self) -> list[BrokerInfo]:
        """Brokers in the latest metadata."""
        return list(self._brokers.values())

    def broker(self, node_id: int) -> BrokerInfo | None:
        """Broker ``node_id`` as the latest metadata describes it (None: not listed)."""
        return self._brokers.get(node_id)

    async def any(self) -> BrokerConnection:
        """A live connection to some broker: known ones first, then the seeds, rotating."""
        candidates: list[tuple[str, int, int | None]] = [
            (b.host, b.port, b.node_id) for b in self._brokers.values()
        ]
        candidates += [(h, p, None) for h, p in self._seeds]
        random.shuffle(candidates)
        # A live connection wins outright; otherwise dial in turn.
        for host, port, _ in candidates:
            conn = self._conns.get((host, port, "default"))
            if conn is not None and not conn.closed:
                return conn
        errors: list[str] = []
        mismatched = silent = 0
        for host, port, node_id in candidates:
            try:
                return await self._connect(host, port, "default", node_id)
            except ListenerMismatchError as exc:
                mismatched += 1
                errors.append(str(exc))  # it names the address already
            except (
                KafkaConnectionError,
                RequestTimedOutError,
                CorruptMessageError,
                OSError,
            ) as exc:
                silent += isinstance(exc, SilentListenerError)
                where = f"{host}:{port}"
                # Our errors name the address already; an OSError does not.
                errors.append(str(exc) if where in str(exc) else f"{where}: {exc}")
        details = "; ".join(dict.fromkeys(errors))
        if mismatched == len(candidates):
            # Every address answered, none as a Kafka listener: retrying cannot help.
            raise ListenerMismatchError(details)
        if silent == len(candidates):
            raise SilentListenerError(details)  # each says what was seen and asks
        # The details name every address once, what to check, and net.dial_timeout where
        # a dial ran out of it (not for a connection refused at once).
        raise NoBrokersAvailableError(f"none of the brokers answered: {details}")

    # --------------------------------------------------------------------- metadata

    async def _retrying(self, what: str, attempt: Callable[[], Awaitable[T]]) -> T:
        return await retrying(what, attempt, self.config.metadata.retry)

    async def refresh_metadata(self, *topics: str) -> None:
        """Fetch metadata for ``topics`` (all topics when none are named)."""

        async def attempt() -> None:
            conn = await self.any()
            req = MetadataRequest(
                list(topics) if topics else None,
                self.config.metadata.allow_auto_topic_creation,
            )
            resp = await conn.send(req)
            self._apply_metadata(resp.to_object(), topics)

        async with self._metadata_lock:
            await self._retrying("metadata", attempt)

    def _apply_metadata(self, meta: dict[str, Any], requested: Iterable[str]) -> None:
        requested = tuple(requested)
        brokers = {
            b["node_id"]: BrokerInfo(b["node_id"], b["host"], b["port"], b.get("rack"))
            for b in meta["brokers"]
        }
        if brokers:
            self._brokers = brokers
        self._controller_id = meta.get("controller_id", -1)
        if not requested:
            # A full refresh lists every topic: forget the ones that are gone.
            self._topics = {}
            self._topic_names, self._topic_ids, self._internal = {}, {}, set()
        errors: dict[str, int] = {}
        for t in meta["topics"]:
            name, code = t["topic"], t["error_code"]
            if code and not t["partitions"]:
                errors[name] = code
                self._topics.pop(name, None)
                continue
            if t.get("is_internal"):
                self._internal.add(name)
            topic_id = t.get("topic_id")
            if topic_id is not None and topic_id != NULL_TOPIC_ID:
                stale = self._topic_ids.get(name)
                if stale is not None:  # the topic was deleted and created again
                    self._topic_names.pop(stale, None)
                self._topic_names[topic_id] = name
                self._topic_ids[name] = topic_id
            self._topics[name] = {
                p["partition"]: PartitionMetadata(
                    p["partition"],
                    p["leader"],
                    tuple(p["replicas"]),
                    tuple(p["isr"]),
                    p["error_code"],
                )
                for p in t["partitions"]
            }
        for name in requested:
            code = errors.get(name, 0)
            if (
                code
                and error_for_code(code).retriable
                and code != UnknownTopicOrPartitionError.errno
            ):
                # e.g. LEADER_NOT_AVAILABLE while a new topic is being created.
                raise_for_code(code, f"metadata for topic {name!r}")

    async def _refresh_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.metadata.refresh_frequency)
            try:
                # Full refresh, like sarama's default (Metadata.Full): new topics show up too.
                await self.refresh_metadata()
            except Exception as exc:  # keep the loop alive; the next use refreshes again
                log.warning("background metadata refresh failed: %s", exc)

    async def topics(self) -> list[str]:
        """Every topic in the cluster (fresh metadata)."""
        await self.refresh_metadata()
        return sorted(self._topics)

    async def matching_topics(self, pattern: re.Pattern[str]) -> list[str]:
        """The topics (fresh metadata, internal ones left out) whose whole name matches
        ``pattern``: a regex subscription on the classic protocol (Java's rule)."""
        await self.refresh_metadata()
        return sorted(t for t in self._topics if t not in self._internal and pattern.fullmatch(t))

    def topic_name(self, topic_id: str) -> str | None:
        """The name of the topic with id ``topic_id`` in the cached metadata, if any."""
        return self._topic_names.get(topic_id)

    def topic_id(self, topic: str) -> str | None:
        """The id of ``topic`` in the cached metadata (None: unknown, or an old broker)."""
        return self._topic_ids.get(topic)

    def partition_metadata(self, topic: str) -> list[PartitionMetadata]:
        """The cached metadata of ``topic``'s partitions, by partition id ([] if not cached)."""
        return [meta for _, meta in sorted(self._topics.get(topic, {}).items())]

    def cached_partitions(self, topic: str) -> list[int] | None:
        """Partition ids from the cache, or None if the topic is not cached."""
        parts = self._topics.get(topic)
        return sorted(parts) if parts is not None else None

    async def partitions(self, topic: str, refresh: bool = False) -> list[int]:
        """Partition ids of ``topic``; raises UnknownTopicOrPartitionError if it does not exist."""
        if refresh or topic not in self._topics:
            await self.refresh_metadata(topic)
        parts = self.cached_partitions(topic)
        if parts is None:
            raise UnknownTopicOrPartitionError(
                f"topic {topic!r} does not exist: create it first (or enable "
                "metadata.allow_auto_topic_creation where the broker allows it)"
            )
        return parts

    def replica_racks(self, topics: Iterable[str]) -> dict[tuple[str, int], frozenset[str]]:
        """(topic, partition) -> the racks of its replicas, from the cached metadata
        (brokers without ``broker.rack`` add none; KIP-881 assignment)."""
        racks = {b.node_id: b.rack for b in self._brokers.values() if b.rack}
        return {
            (topic, p): frozenset(racks[r] for r in meta.replicas if r in racks)
            for topic in topics
            for p, meta in self._topics.get(topic, {}).items()
        }

    def leader_id(self, topic: str, partition: int) -> int:
        """The cached leader's node id (-1 when unknown or leaderless)."""
        meta = self._topics.get(topic, {}).get(partition)
        return meta.leader if meta is not None else -1

    async def leader(
        self, topic: str, partition: int, purpose: str = "default"
    ) -> BrokerConnection:
        """A connection to the leader of ``topic/partition`` (refreshing metadata if needed).

        A cached leader that cannot be reached is not dialed again and again: metadata
        is refreshed once and a newly named leader dialed once; if the cluster still
        names the unreachable broker, the error is raised for the caller to back off
        (a dead broker costs one ``net.dial_timeout`` per call, not one per retry).
        """
        node = await self._retrying(
            f"leader of {topic}/{partition}", lambda: self._leader_node(topic, partition)
        )
        try:
            return await self.connection(node, purpose)
        except (KafkaConnectionError, RequestTimedOutError):
            await self.refresh_metadata(topic)
            elected = self.leader_id(topic, partition)
            if elected < 0 or elected == node:
                raise
            log.info("%s/%d: leader %d unreachable; now led by %d", topic, partition, node, elected)
            return await self.connection(elected, purpose)

    async def _leader_node(self, topic: str, partition: int) -> int:
        """The leader's node id, from the cache or fresh metadata (raises while there is none)."""
        node = self.leader_id(topic, partition)
        if node >= 0 and node in self._brokers:
            return node
        await self.refresh_metadata(topic)
        if partition not in self._topics.get(topic, {}):
            await self.partitions(topic)  # raises for an unknown topic
            raise UnknownTopicOrPartitionError(
                f"{topic!r} has no partition {partition}: it has "
                f"{len(self._topics[topic])} partitions"
            )
        node = self.leader_id(topic, partition)
        if node < 0:
            raise LeaderNotAvailableError(f"{topic}/{partition} has no leader right now")
        return node

    async def controller(self) -> BrokerConnection:
        """A connection to the controller (or any broker where no controller is reported)."""
        if self._controller_id < 0:
            await self.refresh_metadata()
        if self._controller_id in self._brokers:
            return await self.connection(self._controller_id)
        return await self.any()

    # ----------------------------------------------------------------- coordinators

    async def coordinator(
        self, group: str, purpose: str = "group", *, transaction: bool = False
    ) -> BrokerConnection:
        """A connection to ``group``'s coordinator (cached), ``"group"``-purpose unless
        told otherwise (offsets use their own: see :class:`~.group.offsets.OffsetManager`);
        with ``transaction``, ``group`` is a transactional id and this its transaction
        coordinator."""
        key_type = _TRANSACTION if transaction else _GROUP
        what = "transactional id" if transaction else "group"

        async def attempt() -> BrokerConnection:
            broker = self._coordinators.get((key_type, group))
            if broker is None:
                conn = await self.any()
                resp = (await conn.send(FindCoordinatorRequest(group, key_type))).to_object()
                code = resp["error_code"]
                if code:
                    raise error_for_code(code)(
                        f"FindCoordinator for {what} {group!r}: {resp.get('error_message') or ''}"
                    )
                broker = BrokerInfo(resp["coordinator_id"], resp["host"], resp["port"])
                self._coordinators[(key_type, group)] = broker
            try:
                return await self._connect(broker.host, broker.port, purpose, broker.node_id)
            except (KafkaConnectionError, RequestTimedOutError):
                self.invalidate_coordinator(group, transaction=transaction)
                raise

        try:
            return await self._retrying(f"coordinator of {group!r}", attempt)
        except CoordinatorNotAvailableError as exc:
            topic = "__transaction_state" if transaction else "__consumer_offsets"
            raise CoordinatorNotAvailableError(
                f"no coordinator for {what} {group!r} after {self.config.metadata.retry.max + 1} "
                f"tries: is the broker's {topic} topic healthy? ({exc})"
            ) from exc

    def invalidate_coordinator(self, group: str, *, transaction: bool = False) -> None:
        """Forget ``group``'s coordinator (after NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE);
        ``transaction``: the transaction coordinator of the transactional id ``group``."""
        self._coordinators.pop((_TRANSACTION if transaction else _GROUP, group), None)

    # ---------------------------------------------------------------------- offsets

    async def offsets_for_times(
        self, stamps: Mapping[tuple[str, int], int], *, read_committed: bool = False
    ) -> dict[tuple[str, int], int | None]:
        """``{(topic, partition): ms since the epoch}`` -> the first offset whose record's
        timestamp is at or after it, or None when no record is that recent (the caller
        decides: Kafka's tools move to the log end).

        The broker's ListOffsets answer is checked against the log, so "none" is reliable
        on brokers that answer it wrongly (Tansu answers offset 0).
        """
        # Imported here: the fetch path (consumergroup.consumer) imports this module.
        from .consumer.positions import offsets_for_times

        return await offsets_for_times(self, stamps, read_committed=read_committed)

    # ------------------------------------------------------------------------ admin

    async def delete_topic(self, name: str, timeout: float = 30.0) -> None:
        """DeleteTopics (at the controller); raises UnknownTopicOrPartitionError when
        ``name`` does not exist."""
        from .net.protocol import DeleteTopicsRequest  # admin codecs: loaded on first use

        conn = await self.controller()
        req = DeleteTopicsRequest([name], int(timeout * 1000))
        resp = (await conn.send(req, timeout=timeout + self.config.net.read_timeout)).to_object()
        for err in resp["topic_error_codes"]:
            raise_for_code(err["error_code"], f"DeleteTopics {name!r}")
        self._topics.pop(name, None)

    async def create_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int = 1,
        timeout: float = 30.0,
        configs: Mapping[str, str] | None = None,
    ) -> None:
        """Create a topic (with the topic ``configs`` given, e.g. ``max.message.bytes``)
        and wait until its metadata shows every partition with a leader."""
        from .net.protocol import CreateTopicsRequest  # admin codecs: loaded on first use

        conn = await self.controller()
        settings = list((configs or {}).items())
        req = CreateTopicsRequest(
            [(name, partitions, replication_factor, [], settings)], int(timeout * 1000), False
        )
        resp = (await conn.send(req, timeout=timeout + self.config.net.read_timeout)).to_object()
        for err in resp["topic_errors"]:
            code = err["error_code"]
            if code == TopicAlreadyExistsError.errno:
                raise TopicAlreadyExistsError(f"topic {name!r} already exists")
            raise_for_code(code, f"CreateTopics {name!r}: {err.get('error_message') or ''}")
        async with asyncio.timeout(timeout):
            while True:
                with contextlib.suppress(KafkaError):
                    await self.refresh_metadata(name)
                parts = self._topics.get(name, {})
                if len(parts) == partitions and all(p.leader >= 0 for p in parts.values()):
                    return
                await asyncio.sleep(0.05)
