"""BrokerConsumer: one fetch task per broker, one Fetch request per round.

Every partition whose leader is this broker is *subscribed* here. Each round
sends a single Fetch covering the subscribed partitions that are fetchable
(not paused, room in their buffer), decodes each partition's records once and
hands the chunk to its :class:`~.partition.PartitionConsumer`. A partition
whose reader is slow is simply left out of the next request: unlike sarama,
nothing waits for it, so it never delays its broker-mates.

Partitions that this broker no longer leads (NOT_LEADER_OR_FOLLOWER and
friends) or whose connection dropped are *orphaned*: handed back to the owning
:class:`~.consumer.Consumer`, which refreshes metadata, backs off and
subscribes them to the new leader's BrokerConsumer. The position travels with
the PartitionConsumer, so nothing is lost or repeated.

Fetching from the closest replica (KIP-392): each request carries
``config.client_rack``; a leader whose ``replica.selector.class`` picks another
replica for this rack answers with its id (``preferred_read_replica``, Fetch
v11+) and no records, and the partition is *relocated* at once to that
replica's BrokerConsumer. It reads there for a lease of
``metadata.refresh_frequency`` (Java: ``metadata.max.age.ms``), then goes back
to its leader, which may name a replica again. An error from the replica
orphans the partition (re-routed to the leader), and OFFSET_OUT_OF_RANGE from
it (the replica is behind or ahead of us) sends it back to the leader without
applying the reset policy, as Java's fetcher does.

Against a broker that keeps fetch sessions (KIP-227, Fetch v7+) each request
names only the partitions whose position or fetch size changed, or that joined
or left this round (:mod:`.fetch_session`); a response leaves out the partitions
with nothing new, which then simply keep their position. A broker that keeps no
session (Tansu) gets full requests, as without sessions.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import struct
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..config import MetadataConfig
from ..errors import (
    CorruptMessageError,
    KafkaConnectionError,
    KafkaError,
    LeaderNotAvailableError,
    MessageTooLargeError,
    OffsetOutOfRangeError,
    error_for_code,
)
from ..net.fetch import FetchRequest
from .fetch_session import INVALID_SESSION_EPOCH, SESSION_ID_NOT_FOUND, FetchPlan, FetchSession
from .partition import _noop as _noop_wake
from .positions import reset_policy
from .records import scan_records

if TYPE_CHECKING:
    from ..client import Client
    from ..config import Config
    from ..net.connection import BrokerConnection
    from .partition import PartitionConsumer

log = logging.getLogger(__name__)

#: Partition errors that mean "ask metadata who leads this partition now".
_MOVED = frozenset({3, 5, 6, 9, 56, 74, 75, 100})
_OUT_OF_RANGE = OffsetOutOfRangeError.errno
#: Top-level errors that only mean "the fetch session is gone": refetch in full.
_SESSION_ERRORS = frozenset({SESSION_ID_NOT_FOUND, INVALID_SESSION_EPOCH})
_INT32_MAX = 2**31 - 1
_BATCH_LENGTH = struct.Struct(">i")
# A v2 record batch's header up to lastOffsetDelta: base offset, length, partition leader
# epoch, magic, crc, attributes, last offset delta.
_BATCH_HEAD = struct.Struct(">qiibihi")
#: Fetch v11+ partition field: preferred_read_replica (KIP-392; -1: read from this broker).
_REPLICA_AT = 6
#: Fetch v12 partition fields: diverging_epoch (KIP-320), always present (None if absent).
_DIVERGING_AT = 7
#: The wait of a "short" poll. Not 0: Tansu answers a zero-wait Fetch with no partitions.
_SHORT_POLL_MS = 1
#: Bounds of the number of backlogged partitions named in one Fetch (see _select).
_MIN_BACKLOG = 16
_MAX_BACKLOG = 1 << 20
#: While backlogged partitions are named in windows, each caught-up partition is still
#: named about every this many rounds (see _select).
_CAUGHT_UP_ROUNDS = 4
#: How long a BrokerConsumer with no subscription waits for one before it ends.
IDLE_TIMEOUT = 5.0

Orphan = Callable[["PartitionConsumer", BaseException], None]
#: Hands a partition to the fetch task of another node (a preferred replica, or back to
#: its leader), at once: no metadata refresh, no backoff.
Relocate = Callable[["PartitionConsumer", int], None]


class BrokerConsumer:
    """The fetch loop for one broker (sarama's ``brokerConsumer``, minus its head-of-line wait)."""

    def __init__(
        self,
        node_id: int,
        client: Client,
        config: Config,
        orphan: Orphan,
        on_exit: Callable[[BrokerConsumer], None],
        on_fetch: Callable[[float, int, int], None] | None = None,
        *,
        relocate: Relocate,
    ) -> None:
        self.node_id = node_id
        self._client = client
        self._config = config
        # New subscriptions, put by Consumer (any task), taken by run() each round.
        self.new: asyncio.Queue[PartitionConsumer] = asyncio.Queue()
        # "run() only" below: the fetch task, or the connection's callback that handles
        # the answer to its request while it awaits that (see _answer): never both.
        # (topic, partition) -> consumer. run() only.
        self._subs: dict[tuple[str, int], PartitionConsumer] = {}
        # Set by anyone who may have made a partition fetchable; cleared by run().
        self._wake = asyncio.Event()
        self._orphan = orphan
        self._relocate = relocate
        self._on_exit = on_exit
        # Told each Fetch round trip's seconds, records and bytes (metrics).
        self._on_fetch = on_fetch
        # The last response's records and bytes, summed by _handle for _on_fetch.
        self._fetched = (0, 0)
        # Whether every partition the last response named is now read to its end (high
        # watermark; read_committed: last stable offset) and the response was well under
        # its size cap. Set by _handle, read by _round right after. run() only.
        self._caught_up = False
        c = config.consumer
        self._max_wait_ms = int(c.max_wait_time * 1000)
        self._isolation = 1 if c.isolation_level == "read_committed" else 0
        self._rack = config.client_rack
        # How long a partition reads from a preferred replica before asking its leader
        # again (Java: metadata.max.age.ms, the metadata refresh interval).
        self._lease = config.metadata.refresh_frequency or MetadataConfig.refresh_frequency
        # When the earliest lease of a partition read here as a preferred replica ends
        # (inf: none is). run() only.
        self._lease_end = math.inf
        self.task: asyncio.Task[None] | None = None
        # Backlogged partitions per request, and where the rotation starts. run() only.
        self._backlog_limit = _MAX_BACKLOG
        self._cursor = 0
        self._caught_up_cursor = 0
        # The fetch session with this broker and the connection it was opened on.
        # run() only: one request at a time, so plan and outcome never interleave.
        self._session = FetchSession()
        self._session_conn: BrokerConnection | None = None
        # Whether that connection speaks Fetch v12+ (requests carry last fetched epochs).
        self._send_epochs = False
        # partition -> (fetch offset, leader epoch of the batch just before it): sent as
        # last_fetched_epoch (Fetch v12+) while the partition's position is still that
        # offset (a seek or a reset makes it unknown). Seeded from the partition's own
        # ``fetched_epoch`` when it is subscribed here (a committed epoch, or what the
        # last broker it was fetched from learnt) and kept equal to it. run() only.
        self._epochs: dict[PartitionConsumer, tuple[int, int]] = {}

    def __repr__(self) -> str:
        return f"<BrokerConsumer node={self.node_id} partitions={len(self._subs)}>"

    @property
    def running(self) -> bool:
        """True while the fetch task runs (an ended one takes no new subscriptions)."""
        return self.task is not None and not self.task.done()

    def start(self) -> None:
        """Start the fetch task."""
        self.task = asyncio.create_task(self.run(), name=f"fetch-broker-{self.node_id}")

    def subscribe(self, pc: PartitionConsumer) -> None:
        """Queue ``pc`` to be fetched from this broker from the next round on."""
        pc._wake_fetcher = self.wake
        self.new.put_nowait(pc)
        self._wake.set()

    def wake(self) -> None:
        """A subscribed partition became fetchable (room freed, resumed, seeked)."""
        self._wake.set()

    def _take_new(self) -> None:
        while not self.new.empty():
            pc = self.new.get_nowait()
            if not pc.closed:
                old = self._subs.get((pc.topic, pc.partition))
                if old is not None:  # closed: a new consumer of the partition replaces it
                    self._drop(old, None)
                self._subs[(pc.topic, pc.partition)] = pc
                if pc.fetched_epoch is not None:
                    self._epochs[pc] = pc.fetched_epoch
                if pc._read_replica == self.node_id:
                    self._lease_end = min(self._lease_end, pc._read_replica_until)

    def _give_up(self, pc: PartitionConsumer, message: str, cause: BaseException) -> None:
        """End ``pc`` for good with ``message`` (its reader gets the error) and let it go."""
        pc._fail_with(message, cause)
        self._drop(pc, None)

    def _drop(self, pc: PartitionConsumer, error: BaseException | None) -> None:
        self._subs.pop((pc.topic, pc.partition), None)
        self._epochs.pop(pc, None)
        pc._wake_fetcher = _noop_wake
        if error is not None and not pc.closed:
            self._orphan(pc, error)

    async def run(self) -> None:
        """Fetch until no partition is left for :data:`IDLE_TIMEOUT` seconds, or cancelled."""
        try:
            await self._loop()
        except Exception as exc:  # a bug or an unsupported broker: fail loudly, never hang
            log.exception("fetch task for broker %d crashed", self.node_id)
            self._take_new()
            for pc in list(self._subs.values()):
                self._give_up(pc, f"fetch task for broker {self.node_id} crashed: {exc!r}", exc)
        finally:
            self._on_exit(self)

    async def _loop(self) -> None:
        while True:
            self._take_new()
            if not self._subs:
                self._wake.clear()
                try:
                    async with asyncio.timeout(IDLE_TIMEOUT):
                        await self._wake.wait()
                except TimeoutError:
                    self._take_new()
                    if not self._subs:
                        return
                continue
            # A round of its own: its locals (the partitions it named) die with it, so a
            # stopped partition is not kept alive while this task idles.
            if not await self._round():
                return

    async def _round(self) -> bool:
        """One Fetch round over the subscribed partitions; False once the broker failed
        (every partition was handed back to be re-routed)."""
        # While some partition waits only for its reader to make room, a long poll on
        # the others would hold the connection for max_wait_time and keep that
        # partition from being fetched when room frees: poll without waiting, and
        # wait here instead (woken by the room, bounded by max_wait_time).
        if self._lease_end != math.inf and self._lease_end <= time.monotonic():
            self._end_leases()
        ready: list[PartitionConsumer] = []
        short = False
        closed: list[PartitionConsumer] | None = None
        # One pass, every round (each answer when caught up): PartitionConsumer.fetchable()
        # and blocked_by_buffer() inlined around the one call of _full().
        for pc in self._subs.values():
            if pc._closed:
                closed = [pc] if closed is None else [*closed, pc]
            elif pc._paused:
                continue
            elif pc._full():
                short = True
            else:
                ready.append(pc)
        if closed is not None:
            for pc in closed:
                self._drop(pc, None)  # its epoch entry too, or it is kept alive
            if not self._subs:
                return True  # the loop waits for a subscription
        if not ready:
            self._wake.clear()
            await self._wake.wait()
            return True
        self._wake.clear()
        session = self._session
        # In a session the broker rotates the partitions it serves (Kafka moves the
        # served ones to the back) and naming them is free: no backlog window.
        chosen, behind = (ready, None) if session.incremental else self._select(ready)
        # Caught up at the last answer, so likely this one too: its answer is handled in
        # the connection's callback that reads it, and the readers it wakes run before
        # this task resumes to send the next Fetch (see the end of this round).
        at_frame = self._caught_up and not short and len(chosen) == len(ready)
        try:
            conn = self._session_conn
            if conn is None or conn.closed or not self._still_at(conn):
                conn = await self._client.connection(self.node_id, "fetch")
            if conn is not self._session_conn:  # a dropped connection ends the session
                session.reset()
                self._session_conn = conn
                # last_fetched_epoch exists from Fetch v12 on (KIP-320 divergence checks).
                self._send_epochs = (conn.version(1) or 0) >= 12
            epochs = self._epochs if self._send_epochs else None
            plan = session.plan(chosen, epochs)
            sent = time.monotonic()

            def answered(resp: Any) -> tuple[int | None, int]:
                return self._answer(resp, plan, sent, behind)

            delivered, error_code = await conn.exchange(
                self._request(plan, _SHORT_POLL_MS if short else self._max_wait_ms),
                self._config.net.read_timeout + self._config.consumer.max_wait_time,
                answered,
                at_frame=at_frame,
            )
        except (KafkaConnectionError, KafkaError) as exc:  # incl. request timeouts
            # The broker is gone or unreachable: every partition finds its leader anew.
            log.info(
                "fetch from broker %d failed (%s); re-routing %d partitions",
                self.node_id,
                exc,
                len(self._subs),
            )
            self._take_new()
            for pc in list(self._subs.values()):
                self._drop(pc, exc)
            return False
        if delivered is None and not plan.full and error_code in _SESSION_ERRORS:
            return True  # the session is gone: the next request is a full one, at once
        if delivered is None:
            # A whole-request error: do not hammer the broker with the same request.
            await asyncio.sleep(self._config.consumer.retry.backoff)
        elif delivered and self._caught_up and len(chosen) == len(ready):
            # Caught up: the next Fetch would wait at the broker for new records, so the
            # readers woken by this answer run first rather than after the next request
            # is planned, encoded and written (handled in the frame's callback, they
            # already did: this task's wake-up came after theirs; else one pass of the
            # loop); behind (or with backlogged partitions left out of this request's
            # window), the next request goes first, its round trip overlapping with
            # their work. (An answer handled in the callback that leaves us behind, the
            # first after a quiet spell, lets its readers run first this once.)
            if not at_frame:
                await asyncio.sleep(0)
        elif short and not delivered and not self._wake.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._config.consumer.max_wait_time):
                    await self._wake.wait()
        return True

    def _still_at(self, conn: BrokerConnection) -> bool:
        """Whether the metadata still lists this broker at ``conn``'s address (else the
        client dials the new one)."""
        broker = self._client.broker(self.node_id)
        return broker is not None and broker.host == conn.host and broker.port == conn.port

    def _answer(
        self, resp: Any, plan: FetchPlan, sent: float, behind: int | None
    ) -> tuple[int | None, int]:
        """Take the answer to ``plan``'s request, sent at ``sent``: the session's outcome,
        the delivery (:meth:`_handle`), the metrics. Runs in the connection's callback
        that read it (while :meth:`_round` awaits it) or in :meth:`_round`. Returns how
        many partitions got records (None: the request failed) and the top-level error."""
        self._session.on_response(resp.session_id, resp.error_code, plan.full)
        delivered = self._handle(resp)
        if self._on_fetch is not None:
            self._on_fetch(time.monotonic() - sent, *self._fetched)
        if delivered is not None and behind is not None:
            self._adapt(behind, delivered)
        return delivered, resp.error_code

    def _select(self, ready: list[PartitionConsumer]) -> tuple[list[PartitionConsumer], int]:
        """The partitions for this round's request, and how many of them have a backlog.

        A broker fills a response in request order and stops at its size budget, so
        naming every backlogged partition when it will serve a few costs both sides a
        scan of all of them each round (measured: 1,000 partitions, ~20 served per
        round). Backlogged partitions are asked for in rotating order, at most
        ``_backlog_limit`` at a time. Caught-up ones long-poll for new data; while
        the window is on, the answer carries backlog and comes back at once, so they
        are named in rotation too, at least ``_backlog_limit`` and about a
        1/``_CAUGHT_UP_ROUNDS`` of them per round: new data on one waits a few short
        rounds (measured at 1,000 partitions: naming ~500 caught-up partitions every
        round cost the client more CPU than the records it fetched).
        """
        if self._isolation:  # read_committed stops at the last stable offset: caught up there
            caught_up = [pc for pc in ready if _stable_end(pc) == pc._offset]
        else:
            caught_up = [pc for pc in ready if pc.high_water_mark_offset == pc._offset]
        backlog = len(ready) - len(caught_up)
        if backlog <= self._backlog_limit:
            return ready, backlog
        idle = set(caught_up)
        behind = [pc for pc in ready if pc not in idle]
        chosen = _rotate(behind, self._cursor, self._backlog_limit)
        window = max(self._backlog_limit, -(-len(caught_up) // _CAUGHT_UP_ROUNDS))
        if len(caught_up) > window:
            caught_up = _rotate(caught_up, self._caught_up_cursor, window)
            self._caught_up_cursor += window
        return chosen + caught_up, len(chosen)

    def _adapt(self, asked: int, served: int) -> None:
        """Size the next round's backlog to what the broker served this round."""
        self._cursor += served
        if served >= asked:
            self._backlog_limit = min(self._backlog_limit * 2, _MAX_BACKLOG)
        else:
            self._backlog_limit = max(_MIN_BACKLOG, 2 * served)

    def _request(self, plan: FetchPlan, max_wait_ms: int) -> FetchRequest:
        fetch = self._config.consumer.fetch
        return FetchRequest(
            max_wait_ms,
            fetch.min,
            fetch.max_bytes,
            self._isolation,
            plan.topics,
            session_id=plan.session_id,
            epoch=plan.epoch,
            forgotten=plan.forgotten,
            rack_id=self._rack,
        )

    def _prefer(self, pc: PartitionConsumer, node: int) -> None:
        """The leader named ``node`` as the replica to read ``pc`` from (KIP-392): move there.

        The answer carries no records (the leader skips the read), so the position is
        unchanged and the replica serves from it. A node missing from the metadata is
        dialed only once a refresh lists it: the partition is orphaned meanwhile (the
        re-routing task refreshes, and the leader names the replica again).
        """
        self._drop(pc, None)
        if self._client.broker(node) is None:
            self._orphan(
                pc,
                KafkaConnectionError(f"preferred read replica {node} is not in the metadata"),
            )
            return
        log.debug(
            "%s/%d: the leader names replica %d to read from (rack %r)",
            pc.topic,
            pc.partition,
            node,
            self._rack,
        )
        pc._read_replica = node
        pc._read_replica_until = time.monotonic() + self._lease
        self._relocate(pc, node)

    def _to_leader(self, pc: PartitionConsumer) -> None:
        """``pc``, read here as a preferred replica, goes back to its leader."""
        self._drop(pc, None)
        pc._read_replica = -1
        leader = self._client.leader_id(pc.topic, pc.partition)
        if leader < 0:
            self._orphan(pc, LeaderNotAvailableError(f"{pc.topic}/{pc.partition}"))
        else:
            self._relocate(pc, leader)

    def _end_leases(self) -> None:
        """Partitions whose preferred-replica lease ended go back to their leaders."""
        now = time.monotonic()
        self._lease_end = math.inf
        for pc in list(self._subs.values()):
            if pc._read_replica != self.node_id:
                continue
            if pc._read_replica_until <= now:
                self._to_leader(pc)
            else:
                self._lease_end = min(self._lease_end, pc._read_replica_until)

    def _handle(self, resp: Any) -> int | None:
        """Deliver one Fetch response: how many partitions got records (None: request failed)."""
        version = resp.API_VERSION
        # Field positions per Fetch version: log_start_offset from v5, preferred replica v11.
        aborted_at = 5 if version >= 5 else 4
        node = self.node_id
        read_committed = self._isolation == 1
        if getattr(resp, "error_code", 0):
            log.log(
                logging.INFO if resp.error_code in _SESSION_ERRORS else logging.WARNING,
                "fetch from broker %d: top-level error %s",
                self.node_id,
                error_for_code(resp.error_code).__name__,
            )
            self._fetched = (0, 0)
            return None
        subs = self._subs
        fetch = self._config.consumer.fetch
        check_crcs = fetch.check_crcs
        delivered = fetched_records = fetched_bytes = 0
        caught_up = True
        v5, v11, v12 = version >= 5, version >= 11, version >= 12
        for topic, partitions in resp.topics:
            for p in partitions:
                pc = subs.get((topic, p[0]))
                if pc is None or pc._closed:
                    continue
                code = p[1]
                if code:
                    self._partition_error(pc, code, p, version)
                    continue
                pc.high_water_mark_offset = p[2]
                pc.last_stable_offset = p[3]
                # Where this member's reading of the log ends for now.
                end = p[3] if read_committed and p[3] >= 0 else p[2]
                if v5:
                    pc.log_start_offset = p[4]
                if v11 and p[_REPLICA_AT] >= 0 and p[_REPLICA_AT] != node:
                    self._prefer(pc, p[_REPLICA_AT])
                    continue
                if v12 and p[_DIVERGING_AT] is not None:
                    self._diverged(pc, p, version)
                    continue
                records = p[-1]
                if not records:
                    # Named and served nothing: still behind if the log goes on (the
                    # broker filled the answer from other partitions first).
                    caught_up = caught_up and pc._offset >= end
                    continue
                fetch_offset = pc._offset
                try:
                    scanned = scan_records(
                        topic,
                        p[0],
                        records,
                        fetch_offset,
                        read_committed=read_committed,
                        aborted_transactions=p[aborted_at] if read_committed else None,
                        check_crcs=check_crcs,
                    )
                except CorruptMessageError as exc:
                    # Refetching returns the same bytes: end this partition, not its mates.
                    self._give_up(pc, f"cannot decode the records at offset {fetch_offset}", exc)
                    continue
                if scanned.next_offset == fetch_offset and scanned.partial:
                    self._grow(pc, records)
                    caught_up = False
                    continue
                pc._fetch_size = fetch.default
                self._learn(pc, scanned.next_offset, _note_epochs(pc, records, scanned.next_offset))
                pc._deliver(scanned)
                delivered += 1
                fetched_records += scanned.count
                fetched_bytes += scanned.bytes_consumed
                caught_up = caught_up and scanned.next_offset >= end
        self._fetched = (fetched_records, fetched_bytes)
        # An answer near the response cap may have left partitions with records out.
        self._caught_up = caught_up and 2 * fetched_bytes < fetch.max_bytes
        return delivered

    def _grow(self, pc: PartitionConsumer, records: Any) -> None:
        """A batch did not fit in the partition's fetch size: double it, or fail at the cap.

        At ``consumer.fetch.max`` the partition fails (its reader gets the error):
        skipping the batch would lose its records, and nothing after it can be read.
        """
        limit = self._config.consumer.fetch.max
        if limit and pc._fetch_size >= limit:
            size = f"more than {len(records)} bytes"
            if len(records) >= 12:
                # A batch starts with its base offset (int64) and length (int32, bytes after it).
                size = f"{12 + _BATCH_LENGTH.unpack_from(records, 8)[0]} bytes"
            self._give_up(
                pc,
                f"the record batch at offset {pc._offset} is {size}, larger than "
                f"consumer.fetch.max={limit}: raise consumer.fetch.max to at least its size "
                "(or to 0, no cap); the partition stops here, nothing after it is skipped",
                MessageTooLargeError(f"record batch at offset {pc._offset}"),
            )
            return
        # Fetch sizes travel as int32: never double past it (sarama caps at MaxInt32 too).
        pc._fetch_size = min(pc._fetch_size * 2, limit or _INT32_MAX)

    def _partition_error(self, pc: PartitionConsumer, code: int, p: Any, version: int) -> None:
        if code in _MOVED:
            log.info(
                "%s/%d: %s from broker %d; finding the new leader",
                pc.topic,
                pc.partition,
                error_for_code(code).__name__,
                self.node_id,
            )
            self._drop(pc, error_for_code(code)())
            return
        if code == _OUT_OF_RANGE:
            if pc._read_replica == self.node_id:
                # The replica's log does not hold our position (it lags, or it is being
                # rebuilt): not a reason to reset; the leader decides (Java's fetcher).
                log.info(
                    "%s/%d: offset %d out of range on replica %d; fetching from the leader",
                    pc.topic,
                    pc.partition,
                    pc._offset,
                    self.node_id,
                )
                self._to_leader(pc)
                return
            self._out_of_range(pc, p, version)
            return
        error = error_for_code(code)()
        if error.retriable:
            log.warning("%s/%d: fetch failed (%s); retrying", pc.topic, pc.partition, error)
            self._drop(pc, error)
        else:
            self._give_up(pc, "fetch failed", error)

    def _diverged(self, pc: PartitionConsumer, p: Any, version: int) -> None:
        """KIP-320: the leader's log diverged from what this partition fetched.

        ``diverging_epoch`` = (the largest epoch the leader has at or below our last
        fetched one, the offset where it ends). Below our position, the log was
        truncated there (an unclean leader election, or a follower that lost data):
        as Java's consumer does, resume at that end offset, unless
        ``consumer.offsets.reset`` is ``'error'`` (then the partition fails). Records
        at and after it that the reader already got were truncated away: the leader's
        records at those offsets are delivered, and a warning says which offsets.
        An unknown end offset (-1) is handled like an out-of-range offset.
        """
        epoch, end = p[_DIVERGING_AT]
        self._epochs.pop(pc, None)
        pc.fetched_epoch = None
        fetched = pc._offset
        if end < 0 or epoch < 0:
            log.warning(
                "%s/%d: the leader's log diverged at an unknown point (diverging epoch %d, "
                "end offset %d) from position %d: applying consumer.offsets.reset",
                pc.topic,
                pc.partition,
                epoch,
                end,
                fetched,
            )
            self._out_of_range(pc, p, version)
            return
        if end >= fetched:  # not truncated below what we fetched: carry on from here
            self._learn(pc, fetched, epoch)
            return
        handed = pc.position
        if reset_policy(self._config) == "error":
            self._give_up(
                pc,
                f"log truncated: the leader's epoch {epoch} ends at offset {end}, below the "
                f"fetch position {fetched} (records from {end} on were replaced); set "
                "consumer.offsets.reset to 'oldest' or 'newest' to resume at the truncation "
                "point automatically",
                OffsetOutOfRangeError(f"log truncated at offset {end}"),
            )
            return
        target = min(end, handed)  # buffered records below the truncation point stay valid
        log.warning(
            "%s/%d: log truncated: the leader's epoch %d ends at offset %d, below the fetch "
            "position %d; resuming at %d%s",
            pc.topic,
            pc.partition,
            epoch,
            end,
            fetched,
            target,
            f" (offsets {end}..{handed - 1} were already delivered and are delivered again "
            "with the leader's records)"
            if handed > end
            else "",
        )
        pc.seek(target)
        if target == end:
            self._learn(pc, end, epoch)

    def _learn(self, pc: PartitionConsumer, offset: int, epoch: int) -> None:
        """The batch that ends at ``offset`` has leader ``epoch`` (-1: unknown): the next
        fetch from ``offset`` names it, here or from the next broker that has ``pc``."""
        known = pc.fetched_epoch = (offset, epoch) if epoch >= 0 else None
        if known is None:
            self._epochs.pop(pc, None)
        else:
            self._epochs[pc] = known

    def _out_of_range(self, pc: PartitionConsumer, p: Any, version: int) -> None:
        """OFFSET_OUT_OF_RANGE: apply ``consumer.offsets.reset`` (sarama's ResetInvalidOffsets)."""
        policy = reset_policy(self._config)
        bad = pc._offset
        if policy == "error":
            self._give_up(
                pc,
                f"offset {bad} is out of range (log {pc.log_start_offset}.."
                f"{pc.high_water_mark_offset}); set consumer.offsets.reset to 'oldest' or "
                "'newest' to reset automatically",
                OffsetOutOfRangeError(),
            )
            return
        # The response carries both ends of the log (log start from v5 on).
        if policy == "newest" and p[2] >= 0:
            target = p[2]
        elif policy == "oldest" and version >= 5 and p[4] >= 0:
            target = p[4]
        else:
            pc._reset_to = policy
            self._drop(pc, OffsetOutOfRangeError(f"reset to {policy}"))
            return
        log.warning(
            "%s/%d: offset %d out of range; reset to %s offset %d",
            pc.topic,
            pc.partition,
            bad,
            policy,
            target,
        )
        pc.seek(target)


def _stable_end(pc: PartitionConsumer) -> int:
    """Where a read_committed reader catches up: the last stable offset (an open
    transaction's records above it cannot be read yet), else the high watermark."""
    lso = pc.last_stable_offset
    return lso if lso >= 0 else pc.high_water_mark_offset


def _rotate(items: list[PartitionConsumer], cursor: int, n: int) -> list[PartitionConsumer]:
    """``n`` of ``items`` from position ``cursor`` (modulo their number), wrapping around."""
    start = cursor % len(items)
    return (items[start:] + items[:start])[:n]


def _note_epochs(pc: PartitionConsumer, records: Any, next_offset: int) -> int:
    """Note the leader epochs of the record batches in ``records`` on ``pc`` (what its
    commits carry), and return the epoch of the batch that ends at ``next_offset``
    (-1: unknown).

    That is the ``last_fetched_epoch`` of the next Fetch (v12+): with it the leader
    checks that our log and its own agree up to ``next_offset`` (KIP-320). Batch
    headers only: one unpack per batch.
    """
    pos, end = 0, len(records)
    last = -1
    while end - pos >= _BATCH_HEAD.size:
        base, length, epoch, magic, _, _, last_delta = _BATCH_HEAD.unpack_from(records, pos)
        if magic == 2 and base + last_delta < next_offset:
            pc._note_epoch(base, epoch)
            if base + last_delta + 1 == next_offset:
                last = int(epoch)
        if length <= 0:
            break
        pos += 12 + length
    return last
