"""One share session with one broker: the ShareFetch / ShareAcknowledge loop of a member.

A member fetches each assigned partition from its leader, in a *share session* per
leader whose epoch moves by one with each request (0 opens it, -1 closes it). Requests
to one broker go one at a time (the epoch orders them), so each :class:`BrokerSession`
is one task that sends, in each round, the one request its state calls for:

1. **Renewal** (a held record's lock is half spent and renewing is on): ShareAcknowledge
   v2 with RENEW for the records of that lock still being handled.
2. **Fetch** (the member has room for at least :func:`fetch_threshold` records, or the
   session must open or forget partitions): ShareFetch asking for at most that room
   (MaxRecords, strict acquisition on v2 brokers), carrying the decided records of the
   partitions in the session; its wait is cut short when a renewal falls due sooner.
3. **Acknowledge** (records were decided and no fetch took them within
   :data:`ACK_LINGER`, or a decided record's lock ends sooner, or nothing is fetched here):
   ShareAcknowledge. Decisions wait that long for the next fetch to carry them, as in
   the Java and franz-go clients: a ShareAcknowledge of its own takes the session for a
   round trip, and a fetch that falls due meanwhile waits behind it.
4. **Close** (the member closes and holds nothing here any more): ShareAcknowledge with
   epoch -1, carrying the last decisions; the broker releases anything left. While
   handlers still run, what was decided (the records none had started, released when the
   close began) goes at once in a ShareAcknowledge, for other members to take.

State, all of it this task's but for what the worker tasks decide (through
:class:`~.inflight.InFlight`) and what the member's router changes between rounds
(:meth:`BrokerSession.add`, :meth:`BrokerSession.remove`): ``parts`` (the partitions to
fetch here), ``in_session`` (what the broker's session holds), ``forget``, ``epoch``.

Errors: a session the broker no longer knows (SHARE_SESSION_NOT_FOUND,
INVALID_SHARE_SESSION_EPOCH) or a dropped connection opens a new session, with what was
decided queued again (acquisitions belong to the member, not the session, so they stay
valid). A partition whose leader moved is handed to the member's router, which drops its
records (their locks stay with the old leader's state) and fetches it from the new
leader. Other errors end the member's ``run()``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from .._repeats import RepeatedWarning
from ..errors import (
    CorruptMessageError,
    FencedLeaderEpochError,
    InvalidShareSessionEpochError,
    KafkaConnectionError,
    KafkaStorageError,
    LeaderNotAvailableError,
    NotLeaderOrFollowerError,
    RequestTimedOutError,
    ShareSessionNotFoundError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
    error_for_code,
)
from ..net.share import (
    ACQUIRE_BATCHES,
    ACQUIRE_RECORD_LIMIT,
    CLOSE_SESSION,
    OPEN_SESSION,
    RENEW,
    ShareAcknowledgeRequest,
    ShareFetchRequest,
)
from .acks import AckRanges, ranges
from .acquired import Acquired, acquired_records
from .inflight import InFlight, Lock, Partition
from .membership import unsupported

if TYPE_CHECKING:
    from ..client import Client
    from ..config import Config
    from ..group.logs import GroupLogger
    from ..net.connection import BrokerConnection

__all__ = ["BrokerSession", "Member", "fetch_threshold"]

TopicPartition = tuple[str, int]

_FETCH_API = ShareFetchRequest.API_KEY
_ACK_API = ShareAcknowledgeRequest.API_KEY
#: Partition errors that mean "fetch it from another broker": the router looks again.
_MOVED = frozenset(
    cls.errno
    for cls in (
        NotLeaderOrFollowerError,
        FencedLeaderEpochError,
        UnknownTopicOrPartitionError,
        UnknownTopicIdError,
        LeaderNotAvailableError,
        KafkaStorageError,
    )
)
#: Top-level errors that mean "the broker lost this session": open a new one.
_SESSION_LOST = frozenset((ShareSessionNotFoundError.errno, InvalidShareSessionEpochError.errno))
_INT32_MAX = 2**31 - 1
#: Seconds decided records wait for a ShareFetch to carry their acknowledgements before
#: a ShareAcknowledge of their own goes (sooner when a lock would end before).
ACK_LINGER = 0.05


def fetch_threshold(limit: int) -> int:
    """The room a member waits for before it asks for records: a quarter of ``limit``
    (the records it may hold), at least 1. An answer brings whole record batches
    whatever was acquired of them (a producer's batch of thousands for an ask of a
    hundred): an ask for a few records costs nearly what an ask for thousands does."""
    return max(1, limit // 4)


class Member(Protocol):
    """What a broker session uses of its member (:class:`~.run.ShareRun`)."""

    group_id: str
    config: Config
    client: Client
    inflight: InFlight
    log: GroupLogger
    #: Renew locks of records still being handled (off once the broker refused).
    renew: bool
    #: The broker's record lock duration (s), from its last answer.
    lock_timeout: float
    #: The member stops fetching (close()); what it holds is decided, then sent.
    closing: bool

    @property
    def member_id(self) -> str:
        """The member id."""

    @property
    def limit(self) -> int:
        """The most records the member holds now (handler places, records ahead)."""

    def room(self) -> int:
        """How many more records the member may hold now (handler places and records ahead)."""

    def paced(self, round_trip: float) -> None:
        """A ShareFetch that acquired records took ``round_trip`` seconds."""

    def reserve(self, records: int) -> None:
        """A ShareFetch may acquire up to ``records`` (negative: its answer came)."""

    def hand_out(self, part: Partition, acquired: Acquired, lock: Lock) -> None:
        """Records acquired for the member: to the handlers (or released, when closing)."""

    def moved(self, part: Partition) -> None:
        """``part``'s leader is not this broker any more: drop its records, route again."""

    def renew_refused(self, reason: str) -> None:
        """The broker refuses lock renewal: warn once, renew no more."""

    def release_stale(self, now: float) -> float | None:
        """Release waiting records whose lock is half spent; when the next one's is."""


class BrokerSession:
    """The share session of one member with broker ``node`` (one task: :meth:`run`)."""

    def __init__(self, member: Member, node: int) -> None:
        self.member = member
        self.node = node
        # --- this task's state (add/remove come from the router, between rounds) ---
        self.parts: dict[TopicPartition, Partition] = {}
        self.in_session: set[TopicPartition] = set()
        self.forget: set[TopicPartition] = set()
        self.epoch = OPEN_SESSION
        self._conn: BrokerConnection | None = None
        self._wake = anyio.Event()
        self._woken = False  # _wake is set (a decision per record checks only this)
        # When the decisions waiting here are sent on their own (None: none waiting).
        self._ack_at: float | None = None
        # Offsets whose lock renewal is due, found by the step that chose to renew.
        self._due: dict[Partition, list[int]] = {}
        batches = member.config.share.acquire_mode == "batch_optimized"
        self._acquire_mode = ACQUIRE_BATCHES if batches else ACQUIRE_RECORD_LIMIT
        self._warn = RepeatedWarning(member.log)
        self._refused = RepeatedWarning(member.log)
        #: Set once the task ended (the router then starts a new session for the node).
        self.ended = False
        self.done = anyio.Event()

    def __repr__(self) -> str:
        return f"<BrokerSession node {self.node} epoch {self.epoch} {sorted(self.parts)}>"

    # ------------------------------------------------------------ router and workers

    def add(self, part: Partition) -> None:
        """Fetch ``part`` here from the next round."""
        part.node = self.node
        self.parts[part.key] = part
        self.forget.discard(part.key)
        self.wake()

    def remove(self, part: Partition) -> None:
        """Stop fetching ``part`` here; its held records are still acknowledged here."""
        if self.parts.pop(part.key, None) is not None and part.key in self.in_session:
            self.forget.add(part.key)
        self.wake()

    def wake(self) -> None:
        """Something changed (a decision, room, the assignment, close): look again."""
        if not self._woken:
            self._woken = True
            self._wake.set()

    def _acked_here(self) -> list[Partition]:
        return [p for p in self.member.inflight.partitions.values() if p.node == self.node]

    # ------------------------------------------------------------------------- loop

    async def run(self) -> None:
        """Rounds until this session holds nothing and has nothing to fetch (or the member
        closed): then its broker session is closed and the task ends."""
        backoff = self.member.config.consumer.retry.backoff
        try:
            while True:
                step = await self._next_step()
                if step == "end":
                    return
                try:
                    await self._round(step)
                except (KafkaConnectionError, RequestTimedOutError) as exc:
                    self._warn.warning(
                        "share session with broker %d failed (%s); opening a new one",
                        self.node,
                        exc,
                    )
                    self._reset()
                    for part in list(self.parts.values()):
                        self.member.moved(part)  # the leader may have changed: route again
                    await anyio.sleep(backoff)
        finally:
            self.ended = True
            self.done.set()

    async def _next_step(self) -> str:
        """Wait until a request is due, and say which: ``renew``, ``fetch`` (records, or
        none: to open the session or forget partitions), ``ack``, ``close``; or ``end``."""
        member = self.member
        threshold = fetch_threshold(member.limit)
        while True:
            # Without renewal, records no handler took in half their lock go back first.
            stale_at = None if member.renew else member.release_stale(time.monotonic())
            self._wake = anyio.Event()
            self._woken = False
            here = self._acked_here()
            holding = any(p.held for p in here)
            now = time.monotonic()
            # Decisions held back for the rest of their acquisition go once it is all
            # decided, or when they waited long enough (closing: all of them, now).
            ripe_at = min(
                (p.ripen(math.inf if member.closing else now) for p in here), default=math.inf
            )
            pending = any(p.has_acks() for p in here)
            ack_at = None
            if pending:
                if self._ack_at is None:
                    self._ack_at = now + ACK_LINGER
                # A lock ending within the linger: acknowledge now (a round trip ahead).
                ack_at = min(self._ack_at, min(p.ack_by for p in here) - ACK_LINGER)
            else:
                self._ack_at = None
            if member.renew:
                self._due = member.inflight.renewals_due(here, now)
                if self._due:
                    return "renew"
            opened = self.epoch > OPEN_SESSION
            if member.closing:
                if not holding:  # every record decided: the last acks close the session
                    if opened:
                        return "close"
                    return "fetch" if pending else "end"
                if pending and opened:
                    # No fetch will carry them: the records no handler started were
                    # released when the close began, and other members may take them
                    # while the handlers still running finish (up to the drain deadline).
                    return "ack"
            else:
                # Decisions a fetch cannot carry (their partition left the session) must
                # not wait for ever behind fetches: once due, they go first.
                if opened and ack_at is not None and ack_at <= now:
                    return "ack"
                if self.parts and (not opened or self.forget or member.room() >= threshold):
                    return "fetch"
                if self.forget and opened:
                    return "fetch"
                if pending and not opened:
                    return "fetch"
                if ack_at is not None and not self.parts:
                    return "ack"
                if not self.parts and not holding:
                    return "close" if opened else "end"
            due = member.inflight.next_renewal(here) if member.renew else stale_at
            if ack_at is not None and not member.closing:
                due = ack_at if due is None else min(due, ack_at)
            if ripe_at < math.inf:
                due = ripe_at if due is None else min(due, ripe_at)
            if due is None:
                await self._wake.wait()
            else:
                with anyio.move_on_after(max(0.0, due - now)):
                    await self._wake.wait()

    async def _round(self, step: str) -> None:
        if step == "renew":
            await self._renew()
        elif step == "fetch":
            await self._fetch()
        elif step == "ack":
            await self._acknowledge(self.epoch)
        else:
            await self._acknowledge(CLOSE_SESSION)

    async def _connection(self) -> BrokerConnection:
        conn = self._conn
        if conn is None or conn.closed:
            conn = self._conn = await self.member.client.connection(self.node, "share")
            if conn.version(_FETCH_API) is None or conn.version(_ACK_API) is None:
                raise unsupported(self.member.group_id, conn.address, "ShareFetch")
        return conn

    def _reset(self) -> None:
        """The broker's session is gone (or unknown): the next request opens a new one."""
        self.epoch = OPEN_SESSION
        self.in_session.clear()
        self.forget.clear()

    def _next_epoch(self) -> None:
        self.epoch = 1 if self.epoch >= _INT32_MAX else self.epoch + 1

    async def _topic_ids(self, keys: Iterable[TopicPartition]) -> dict[TopicPartition, str]:
        """Each partition's topic id (metadata refreshed for a topic not known yet)."""
        client = self.member.client
        ids: dict[TopicPartition, str] = {}
        for key in keys:
            topic_id = client.topic_id(key[0])
            if topic_id is None:
                await client.refresh_metadata(key[0])
                topic_id = client.topic_id(key[0])
            if topic_id is not None:
                ids[key] = topic_id
        return ids

    # --------------------------------------------------------------------- requests

    async def _fetch(self) -> None:
        """ShareFetch: records for the room the member has (none while it closes, or below
        the threshold: then it only opens the session, forgets, or acknowledges)."""
        member = self.member
        share = member.config.share
        conn = await self._connection()
        opening = self.epoch == OPEN_SESSION
        room = member.room()
        acquire = not member.closing and room >= fetch_threshold(member.limit)
        max_records = min(room, _INT32_MAX) if acquire and self.parts else 0
        ids = await self._topic_ids([*self.parts, *self.forget])
        add = [k for k in self.parts if k in ids and (opening or k not in self.in_session)]
        forget = [] if opening else [k for k in self.forget if k in ids]
        # Acknowledgements ride along only for partitions the session holds and keeps:
        # naming another partition in the request would add it to the session.
        riding: dict[Partition, AckRanges] = {}
        if not opening:
            for part in self._acked_here():
                key = part.key
                if key in self.in_session and key not in self.forget and part.has_acks():
                    riding[part] = part.take_acks()
            if not any(p.has_acks() for p in self._acked_here()):
                self._ack_at = None  # else (a partition left the session) their linger runs on
        max_wait = share.max_wait if max_records else 0.0
        due = member.inflight.next_renewal(self._acked_here()) if member.renew else None
        if due is not None:
            max_wait = max(0.0, min(max_wait, due - time.monotonic()))
        request = ShareFetchRequest(
            member.group_id,
            member.member_id,
            self.epoch,
            max_wait_ms=int(max_wait * 1000),
            min_bytes=share.min_bytes,
            max_bytes=share.max_bytes,
            max_records=max_records,
            batch_size=max(max_records, 1),
            acquire_mode=self._acquire_mode,
            fetch=[(ids[k], k[1]) for k in add],
            acks=self._wire_acks(riding),
            forget=[(ids[k], k[1]) for k in forget],
        )
        sent_at = time.monotonic()
        member.reserve(max_records)
        try:
            resp = await conn.send(request, timeout=max_wait + member.config.net.read_timeout)
        except BaseException:
            self._requeue(riding)
            raise
        finally:
            member.reserve(-max_records)
        if self._session_error(resp, riding):
            return
        self._next_epoch()
        self._counted(riding, set())
        self.in_session.update(add)
        self.in_session.difference_update(forget)
        self.forget.difference_update(forget)
        if resp.acquisition_lock_timeout_ms > 0:
            member.lock_timeout = resp.acquisition_lock_timeout_ms / 1000
        held = member.inflight.count
        for topic_id, partitions, *_ in resp.responses:
            topic = member.client.topic_name(topic_id)
            if topic is None:
                continue
            for entry in partitions:
                self._fetched(topic, entry, riding, sent_at)
        if member.inflight.count > held:
            member.paced(time.monotonic() - sent_at)

    def _fetched(
        self, topic: str, entry: Any, riding: dict[Partition, AckRanges], sent_at: float
    ) -> None:
        """One partition of a ShareFetch answer."""
        (index, code, message, ack_code, ack_message, _leader, records, acquired, *_) = entry
        member = self.member
        part = member.inflight.partitions.get((topic, index))
        if part is None:
            return
        if ack_code:
            self._refused_acks(part, riding.get(part, []), ack_code, ack_message)
        if code:
            if code in _MOVED:
                member.moved(part)
            else:
                self._warn.warning(
                    "%s[%d]: ShareFetch answered %s (%s)",
                    topic,
                    index,
                    error_for_code(code).__name__,
                    message or "no detail",
                )
        if not acquired:
            return
        spans = [(first, last, count) for first, last, count, *_ in acquired]
        try:
            got = acquired_records(topic, index, records, spans)
        except CorruptMessageError as exc:
            self._warn.warning("%s[%d]: %s; releasing its records", topic, index, exc)
            offsets = [o for first, last, _ in spans for o in range(first, last + 1)]
            got = Acquired([], [], offsets, 0)
        lock = Lock(sent_at, member.lock_timeout, [r.offset for r in got.records])
        member.hand_out(part, got, lock)

    def _take_acks(self) -> dict[Partition, AckRanges]:
        """Every decision of the partitions acknowledged here, taken to be sent."""
        return {p: p.take_acks() for p in self._acked_here() if p.has_acks()}

    def _wire_acks(self, sending: dict[Partition, AckRanges]) -> dict[tuple[str, int], AckRanges]:
        client = self.member.client
        out: dict[tuple[str, int], AckRanges] = {}
        for part, acks in sending.items():
            topic_id = client.topic_id(part.topic)
            if topic_id is not None and acks:
                out[(topic_id, part.partition)] = acks
        return out

    async def _acknowledge(self, epoch: int) -> None:
        """ShareAcknowledge of everything decided here (epoch -1: and close the session)."""
        member = self.member
        conn = await self._connection()
        sending = self._take_acks()
        self._ack_at = None
        request = ShareAcknowledgeRequest(
            member.group_id, member.member_id, epoch, self._wire_acks(sending)
        )
        try:
            resp = await conn.send(request, timeout=member.config.net.read_timeout)
        except BaseException:
            self._requeue(sending)
            raise
        if self._session_error(resp, sending):
            return
        if epoch == CLOSE_SESSION:
            self._reset()
        else:
            self._next_epoch()
        self._counted(sending, self._acknowledged(resp, sending))

    async def _renew(self) -> None:
        """ShareAcknowledge v2 renewing the locks found due (of records still being
        handled). Nothing else rides along: a broker that refuses renewal refuses the
        partition's whole entry."""
        member = self.member
        conn = await self._connection()
        due, self._due = self._due, {}
        if (conn.version(_ACK_API) or 0) < 2:
            member.renew_refused(f"broker {conn.address} speaks ShareAcknowledge below v2")
            return
        if self.epoch == OPEN_SESSION:
            return  # nothing can be renewed before the session opens (the next fetch does)
        wire = {p: [(f, last, [RENEW]) for f, last in ranges(o)] for p, o in due.items()}
        request = ShareAcknowledgeRequest(
            member.group_id, member.member_id, self.epoch, self._wire_acks(wire), is_renew_ack=True
        )
        sent_at = time.monotonic()
        resp = await conn.send(request, timeout=member.config.net.read_timeout)
        if self._session_error(resp, {}):
            return
        self._next_epoch()
        if getattr(resp, "acquisition_lock_timeout_ms", 0) > 0:
            member.lock_timeout = resp.acquisition_lock_timeout_ms / 1000
        refused = self._acknowledged(resp, wire)
        for part, offsets in due.items():
            if part not in refused:
                member.inflight.renewed(part, offsets, Lock(sent_at, member.lock_timeout, []))

    # ---------------------------------------------------------------------- answers

    def _session_error(self, resp: Any, sent: dict[Partition, AckRanges]) -> bool:
        """True when the answer is a session-level error (handled here): the decisions
        sent go again with a later request. Raises what cannot be retried."""
        code = resp.error_code
        if not code:
            return False
        self._requeue(sent)
        error = error_for_code(code)(
            f"share session with broker {self.node}: {resp.error_message or 'no detail'}"
        )
        if code in _SESSION_LOST or error.retriable:
            if code not in _SESSION_LOST:
                self._warn.warning("%s; opening a new one", error)
            self._reset()
            return True
        raise error

    def _acknowledged(self, resp: Any, sent: dict[Partition, AckRanges]) -> set[Partition]:
        """Handle a ShareAcknowledge answer's partition errors; the partitions with one."""
        refused: set[Partition] = set()
        client = self.member.client
        by_key = {(client.topic_id(p.topic), p.partition): p for p in sent}
        for topic_id, partitions, *_ in resp.responses:
            for index, code, message, *_ in partitions:
                part = by_key.get((topic_id, index))
                if part is None or not code:
                    continue
                refused.add(part)
                if code in _MOVED:
                    self.member.moved(part)
                elif message and "not enabled" in message:
                    self.member.renew_refused(message)
                else:
                    self._refused_acks(part, sent.get(part, []), code, message)
        return refused

    def _refused_acks(
        self, part: Partition, acks: AckRanges, code: int, message: str | None
    ) -> None:
        count = sum(last - first + 1 for first, last, types in acks if types != [RENEW])
        part.counters.refused += count
        self._refused.warning(
            "%s[%d]: the broker refused acknowledgements (%d records): %s (%s); records "
            "whose lock had expired come again",
            part.topic,
            part.partition,
            count,
            error_for_code(code).__name__,
            message or "no detail",
        )

    @staticmethod
    def _counted(sent: dict[Partition, AckRanges], refused: set[Partition]) -> None:
        for part, acks in sent.items():
            if part not in refused:
                part.acknowledged(acks)

    @staticmethod
    def _requeue(sent: dict[Partition, AckRanges]) -> None:
        for part, acks in sent.items():
            part.requeue([a for a in acks if a[2] != [RENEW]])
