"""The member's records in flight: acquired, handed to a handler (or about to be), undecided.

One :class:`InFlight` per member (per ``run()``): a :class:`Partition` per partition the
member was assigned or still holds records of, each with

* ``held``: offset -> the :class:`Lock` it was acquired (or last renewed) under, for every
  record not yet decided. A decision (the handler returned, raised, or the record was
  acknowledged explicitly) pops the offset: the first decision wins, later ones find it
  gone. A record is keyed by offset alone: if a lock expired and the broker handed the
  same offset to this member again while the first handler still ran, both handlers share
  the one entry and the first to finish decides.
* ``decided``: ack type -> offsets decided and not yet sent, folded into ranges when a
  request carries them (:func:`~.acks.fold`). A decision joins it once every record of
  its lock is decided (till then it waits in the lock's ``pending``, the lock in
  ``unripe``), or after :data:`ACK_HOLD` at most, or at its lock's renewal time: the
  broker keeps an acquired batch as one entry, and acknowledging part of it splits the
  entry into one per record (several times the broker's CPU per record);
* ``locks``: the acquisitions that may still hold records, oldest first, for renewal:
  each has its deadline (the broker's lock timeout from when the ShareFetch went out),
  the time a renewal falls due (half the lock duration before the deadline) and how many
  of its records are still held. All locks come with the same timeout, so the queue is
  in renewal order; a lock is taken off it once renewed (its records move to a new lock
  at the back) or tried, and off its front once nothing it holds is left.

Who touches what (one event loop, no locks): the broker session task that fetched a
partition adds records (:meth:`InFlight.deliver`), takes decided offsets and renews
locks; handler tasks (the workers) and ``session.acknowledge`` decide
(:meth:`InFlight.decide`); the broker session moves held-back decisions on
(:meth:`Partition.ripen`); the group drops a partition's records when the member was
fenced or the partition's leader moved (:meth:`InFlight.drop`). ``count`` is the number
of records held over every partition: what bounds the next ShareFetch.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import field

from .._dataclass import dataclass
from ..net.share import ACCEPT, GAP, REJECT, RELEASE
from .acks import AckRanges, fold

__all__ = ["ACK_HOLD", "InFlight", "Lock", "Partition", "ShareCounters"]

TopicPartition = tuple[str, int]

#: Seconds the decisions of an acquisition wait for the rest of it to be decided (at most
#: until its renewal would fall due) before they go out on their own.
ACK_HOLD = 1.0


class Lock:
    """Records acquired together (one partition of one ShareFetch answer, or renewed
    together): locked by the broker until ``deadline``; renewal due at ``renew_at``;
    ``live`` of them still held (an upper bound: a record the broker handed out again
    under a newer lock is not taken off it). ``pending``: decisions of its records held
    back until the rest of it is decided (see :class:`Partition`), by ack type."""

    __slots__ = ("deadline", "live", "offsets", "pending", "renew_at", "ripe_by")

    def __init__(self, sent_at: float, lock_timeout: float, offsets: list[int]) -> None:
        self.deadline = sent_at + lock_timeout
        self.renew_at = sent_at + lock_timeout / 2
        self.offsets = offsets
        self.live = len(offsets)
        self.pending: dict[int, list[int]] | None = None
        #: When ``pending`` goes out even though records of the lock are still held.
        self.ripe_by = math.inf


@dataclass
class ShareCounters:
    """What happened to the records of one partition (counts since ``run()`` began)."""

    delivered: int = 0
    redelivered: int = 0
    accepted: int = 0
    released: int = 0
    rejected: int = 0
    #: Acquired offsets without a record (control records, compacted away): acknowledged
    #: as gaps.
    gaps: int = 0
    #: Records whose lock was renewed (each renewal counts).
    renewed: int = 0
    #: Decided after their lock expired (not renewed in time): not acknowledged, the
    #: broker hands them out again.
    expired: int = 0
    #: Acknowledgements the broker refused (INVALID_RECORD_STATE: the lock was gone).
    refused: int = 0


@dataclass(eq=False)
class Partition:
    """One partition's records in flight (see the module doc for who touches what)."""

    topic: str
    partition: int
    #: The node whose share session fetches it (-1: none yet).
    node: int = -1
    held: dict[int, Lock] = field(default_factory=dict)
    decided: dict[int, list[int]] = field(
        default_factory=lambda: {GAP: [], ACCEPT: [], RELEASE: [], REJECT: []}
    )
    locks: deque[Lock] = field(default_factory=deque)
    counters: ShareCounters = field(default_factory=ShareCounters)
    #: The earliest lock deadline of the decided offsets not yet sent (inf: none): their
    #: acknowledgements must reach the broker before it.
    ack_by: float = math.inf
    #: Locks whose ``pending`` decisions wait for the rest of the lock, oldest first.
    unripe: deque[Lock] = field(default_factory=deque)

    @property
    def key(self) -> TopicPartition:
        """``(topic, partition)``."""
        return (self.topic, self.partition)

    def has_acks(self) -> bool:
        """Whether decided offsets wait to be sent."""
        return any(self.decided.values())

    def ripen(self, now: float) -> float:
        """Move the held-back decisions of locks that are fully decided, or whose
        ``ripe_by`` came (``now=math.inf``: all of them), to ``decided``; when the next
        held-back ones fall due (inf: none wait)."""
        unripe = self.unripe
        soonest = math.inf
        for lock in list(unripe):
            if lock.pending is None:
                unripe.remove(lock)
            elif lock.live <= 0 or lock.ripe_by <= now:
                self.settle(lock)
            elif lock.ripe_by < soonest:
                soonest = lock.ripe_by
        return soonest

    def settle(self, lock: Lock) -> None:
        """``lock``'s held-back decisions join ``decided``, to go with the next request."""
        pending, lock.pending = lock.pending, None
        if pending is None:
            return
        self.unripe.remove(lock)
        decided = self.decided
        for ack_type, offsets in pending.items():
            decided[ack_type] += offsets
        if lock.deadline < self.ack_by:
            self.ack_by = lock.deadline

    def take_acks(self) -> AckRanges:
        """The decided offsets as ack ranges, and forget them (they are being sent)."""
        acks = fold(self.decided)
        for offsets in self.decided.values():
            offsets.clear()
        self.ack_by = math.inf
        return acks

    def acknowledged(self, acks: AckRanges) -> None:
        """The broker took ``acks``: count them by type."""
        counters = self.counters
        for first, last, types in acks:
            if len(types) == 1:
                n = last - first + 1
                counts = dict.fromkeys(types, n)
            else:
                counts = {t: types.count(t) for t in set(types)}
            counters.accepted += counts.get(ACCEPT, 0)
            counters.released += counts.get(RELEASE, 0)
            counters.rejected += counts.get(REJECT, 0)

    def requeue(self, acks: AckRanges) -> None:
        """Ack ranges that did not reach the broker (a dropped connection, a session the
        broker no longer knows): decided again, to go out with the next request."""
        self.ack_by = 0.0  # without waiting for a fetch to carry them
        for first, last, types in acks:
            if len(types) == 1:
                self.decided[types[0]].extend(range(first, last + 1))
            else:
                for offset, ack_type in zip(range(first, last + 1), types, strict=True):
                    self.decided[ack_type].append(offset)


class InFlight:
    """Every record the member holds, by partition; ``count`` over all of them.

    ``on_decided(partition)`` is called after each decision (the partition's broker
    session wakes: an acknowledgement is due, and there is room for more records).
    """

    def __init__(self, on_decided: Callable[[Partition], None]) -> None:
        self.partitions: dict[TopicPartition, Partition] = {}
        self.count = 0
        #: Records decided since the start (the handlers' pace, ``ShareRun.paced``).
        self.finished = 0
        self._on_decided = on_decided

    def partition(self, topic: str, partition: int) -> Partition:
        """The state of ``topic/partition`` (created on first use)."""
        key = (topic, partition)
        part = self.partitions.get(key)
        if part is None:
            part = self.partitions[key] = Partition(topic, partition)
        return part

    def deliver(
        self,
        part: Partition,
        offsets: list[int],
        gaps: Sequence[int],
        lock: Lock,
        redelivered: int,
    ) -> None:
        """Records at ``offsets`` were acquired under ``lock`` and are about to be handed
        out; ``gaps``: acquired offsets without a record (acknowledged as such)."""
        held = part.held
        before = len(held)
        held.update(dict.fromkeys(offsets, lock))
        self.count += len(held) - before
        if offsets:
            part.locks.append(lock)
        counters = part.counters
        counters.delivered += len(offsets)
        counters.redelivered += redelivered
        if gaps:
            part.decided[GAP].extend(gaps)
            counters.gaps += len(gaps)

    def decide(self, topic: str, partition: int, offset: int, ack_type: int) -> bool:
        """The record at ``offset`` ends as ``ack_type``: True when this decided it (it was
        held, undecided, and its lock has not expired)."""
        part = self.partitions.get((topic, partition))
        if part is None:
            return False
        lock = part.held.pop(offset, None)
        if lock is None:
            return False  # decided already (first decision wins), or dropped
        self.count -= 1
        self.finished += 1
        lock.live -= 1
        now = time.monotonic()
        if now >= lock.deadline:
            part.counters.expired += 1  # the broker took it back: it will come again
            decided = False
            if lock.live <= 0 and lock.pending is not None:
                part.settle(lock)
        elif lock.live > 0:
            # Held back until the rest of its acquisition is decided: the broker keeps
            # an acquired batch as one entry, which a partial acknowledgement splits
            # into one per record (measured: several times the broker's work per record).
            pending = lock.pending
            if pending is None:
                pending = lock.pending = {ack_type: [offset]}
                lock.ripe_by = min(now + ACK_HOLD, lock.renew_at)
                part.unripe.append(lock)
            elif ack_type in pending:
                pending[ack_type].append(offset)
            else:
                pending[ack_type] = [offset]
            decided = True
        else:
            part.decided[ack_type].append(offset)
            if lock.deadline < part.ack_by:
                part.ack_by = lock.deadline
            if lock.pending is not None:
                part.settle(lock)
            decided = True
        self._on_decided(part)
        return decided

    def drop(self, part: Partition) -> int:
        """Forget every record ``part`` holds, decided ones not yet sent included (the
        member was fenced, or the partition's leader changed: the broker takes them back
        and hands them out again). The number of held records dropped."""
        dropped = len(part.held)
        self.count -= dropped
        part.held.clear()
        part.locks.clear()
        for offsets in part.decided.values():
            offsets.clear()
        for lock in part.unripe:
            lock.pending = None
        part.unripe.clear()
        part.ack_by = math.inf
        return dropped

    def renewals_due(self, parts: Iterable[Partition], now: float) -> dict[Partition, list[int]]:
        """The held offsets of ``parts`` whose lock's renewal is due at ``now``; those
        locks leave the queue (tried once: a refused renewal is not sent again)."""
        due: dict[Partition, list[int]] = {}
        for part in parts:
            locks, held = part.locks, part.held
            while locks and locks[0].renew_at <= now:
                lock = locks.popleft()
                if lock.live > 0 and now < lock.deadline:
                    live = [o for o in lock.offsets if held.get(o) is lock]
                    if live:
                        due.setdefault(part, []).extend(live)
        return due

    def renewed(self, part: Partition, offsets: Iterable[int], lock: Lock) -> None:
        """``offsets`` of ``part`` were renewed: those still held now belong to ``lock``."""
        held = part.held
        still = [o for o in offsets if o in held]
        if not still:
            return
        lock.offsets = still
        lock.live = len(still)
        for offset in still:
            old = held[offset]
            old.live -= 1  # moved to the new lock: the old one may be all decided now
            if old.live <= 0 and old.pending is not None:
                part.settle(old)
            held[offset] = lock
        part.locks.append(lock)
        part.counters.renewed += len(still)

    def next_renewal(self, parts: Iterable[Partition]) -> float | None:
        """When the earliest renewal of ``parts`` falls due (None: nothing held)."""
        soonest: float | None = None
        for part in parts:
            locks = part.locks
            while locks and locks[0].live <= 0:
                locks.popleft()
            if locks and (soonest is None or locks[0].renew_at < soonest):
                soonest = locks[0].renew_at
        return soonest
