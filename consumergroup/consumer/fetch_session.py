"""KIP-227 fetch sessions: which partitions each Fetch request names, per broker.

A broker that holds a session remembers every partition of it with its fetch
offset, max bytes and (Fetch v12+) last fetched epoch, so later (incremental)
requests name only the partitions whose position, size or epoch changed or that
joined, and list the ones that left in ``forgotten_topics_data``; its responses
leave out partitions with nothing new.
With 1,000 partitions and a few served per round that is the difference
between encoding (and the broker decoding) 1,000 entries per request and a few.

The rules follow Kafka's ``FetchSessionHandler``:

* no session: a full request with session id 0 and epoch 0 asks for one;
* a full response with a session id opens it; the next request is incremental
  at epoch 1, and every successful response moves the epoch on (after
  2**31-1 it wraps to 1: 0 would mean "new session");
* a response with session id 0 means the broker keeps no session (Tansu does
  this): requests stay full, each asking again;
* FETCH_SESSION_ID_NOT_FOUND forgets the session; any other top-level error,
  or a new connection, ends it with a full request at epoch 0 under the old id
  (the broker drops that session and may open a new one).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from .._dataclass import dataclass
from ..errors import FetchSessionIdNotFoundError, InvalidFetchSessionEpochError

if TYPE_CHECKING:
    from .partition import PartitionConsumer

__all__ = ["FetchPlan", "FetchSession", "next_epoch"]

#: Session id meaning "no session".
NO_SESSION = 0
#: The epoch of a full request that opens (or reopens) a session.
INITIAL_EPOCH = 0
_INT32_MAX = 2**31 - 1
#: FETCH_SESSION_ID_NOT_FOUND (70): the broker evicted the session (or never had it).
SESSION_ID_NOT_FOUND = FetchSessionIdNotFoundError.errno
#: INVALID_FETCH_SESSION_EPOCH (71): the broker's epoch and ours disagree.
INVALID_SESSION_EPOCH = InvalidFetchSessionEpochError.errno

Key = tuple[str, int]
#: A partition's fetch offset, max bytes and last fetched epoch (-1: unknown or not
#: sent) as last named to the broker: a change of any of them is sent.
Params = tuple[int, int, int]


def _epoch_at(known: tuple[int, int] | None, offset: int) -> int:
    """The last fetched epoch ``known`` holds for ``offset`` (-1: unknown)."""
    return known[1] if known is not None and known[0] == offset else -1


def next_epoch(epoch: int) -> int:
    """The epoch after ``epoch`` (KIP-227: wraps from 2**31-1 to 1, never back to 0)."""
    return 1 if epoch >= _INT32_MAX else epoch + 1


# init=True: the standard library's compiled __init__, not _dataclass's shared one
# (~1.2 us more a call): a plan is made every round, one per answer when caught up.
@dataclass(slots=True, init=True)
class FetchPlan:
    """What one Fetch request carries: its session fields and the partitions it names."""

    session_id: int
    epoch: int
    #: ``[(topic, [(partition, fetch offset, max bytes[, last fetched epoch])])]``
    topics: list[tuple[str, list[tuple[int, ...]]]]
    #: ``[(topic, [partition])]`` leaving the session (always empty in a full request).
    forgotten: list[tuple[str, list[int]]]
    #: True when every wanted partition is named (no session, or one being opened).
    full: bool


class FetchSession:
    """The fetch session with one broker.

    Owned by that broker's fetch task (:class:`~.broker.BrokerConsumer`): only
    that task reads or writes it, one request at a time, so a request's plan and
    its response's outcome are never interleaved with another's.
    """

    __slots__ = ("_full", "_named", "_sent", "epoch", "session_id")

    def __init__(self) -> None:
        self.session_id = NO_SESSION
        self.epoch = INITIAL_EPOCH
        # What the broker's session holds, as named by the last request planned; after a
        # full request only its topics (``_full``) are kept, and turned into this mapping
        # if that request opens a session: a broker without sessions (Tansu) gets full
        # requests every round, and building it then would be wasted.
        self._sent: dict[Key, Params] | None = {}
        self._full: dict[str, list[tuple[int, ...]]] = {}
        # partition -> what ``_sent`` holds for it, by the consumer object (a lookup
        # without the (topic, partition) key built and hashed, for the unchanged ones):
        # entries written with ``_sent``'s, all dropped whenever ``_sent`` is rebuilt or
        # loses a partition, so an entry here is always ``_sent``'s value for it.
        self._named: dict[PartitionConsumer, Params] = {}

    def __repr__(self) -> str:
        return f"<FetchSession id={self.session_id} epoch={self.epoch}>"

    @property
    def incremental(self) -> bool:
        """True when the next request may name only what changed (a session is open)."""
        return self.session_id != NO_SESSION and self.epoch != INITIAL_EPOCH

    def plan(
        self,
        partitions: list[PartitionConsumer],
        epochs: Mapping[PartitionConsumer, tuple[int, int]] | None = None,
    ) -> FetchPlan:
        """The next request for ``partitions`` (the ones to fetch this round).

        ``epochs``: partition -> (fetch offset, last fetched epoch); a partition whose
        fetch offset is that offset is named with that epoch (Fetch v12+), every entry
        then has that fourth field. Records them as the session's content: the caller
        sends the plan, then reports the outcome with :meth:`on_response` (or
        :meth:`reset`).
        """
        by_topic: dict[str, list[tuple[int, ...]]] = {}
        # Runs every round over every partition (1,000+): the topic's list is looked up
        # only when the topic changes (partitions come grouped by topic).
        topic: str | None = None
        entries: list[tuple[int, ...]] = []
        if not self.incremental:
            for pc in partitions:
                if pc.topic is not topic:
                    topic = pc.topic
                    entries = by_topic.setdefault(topic, [])
                offset = pc._offset
                if epochs is None:
                    entries.append((pc.partition, offset, pc._fetch_size))
                else:
                    epoch = _epoch_at(epochs.get(pc), offset)
                    entries.append((pc.partition, offset, pc._fetch_size, epoch))
            self._sent, self._full = None, by_topic
            return FetchPlan(self.session_id, INITIAL_EPOCH, list(by_topic.items()), [], True)
        # Runs every round (one per answer when caught up) over every partition, most of
        # them unchanged: the session's content is updated in place, the epoch lookup is
        # inlined, and the partitions that left are only looked for when some of the
        # session's were not named again.
        sent = self._content()
        get_epoch = epochs.get if epochs is not None else None
        named = self._named
        for pc in partitions:
            offset = pc._offset
            # The epoch is part of what the broker holds: after a diverging-epoch answer
            # only it changes, and an unsent change would be answered "diverging" forever.
            epoch = -1
            if get_epoch is not None:
                known = get_epoch(pc)
                if known is not None and known[0] == offset:
                    epoch = known[1]
            params = (offset, pc._fetch_size, epoch)
            if named.get(pc) == params:
                continue
            key = (pc.topic, pc.partition)
            named[pc] = params
            if sent.get(key) == params:
                continue
            sent[key] = params
            entry = (pc.partition, *params) if epochs is not None else (pc.partition, *params[:2])
            by_topic.setdefault(pc.topic, []).append(entry)
        if len(named) > len(partitions):  # one replaced another (same partition): let go
            named.clear()
        gone: dict[str, list[int]] = {}
        if len(sent) > len(partitions):  # some were not named again
            keys = {(pc.topic, pc.partition) for pc in partitions}
            for key in [key for key in sent if key not in keys]:
                del sent[key]
                gone.setdefault(key[0], []).append(key[1])
            named.clear()
        return FetchPlan(
            self.session_id, self.epoch, list(by_topic.items()), list(gone.items()), False
        )

    def _content(self) -> dict[Key, Params]:
        """What the broker's session holds (built from the last full request if needed)."""
        if self._sent is None:
            self._named.clear()
            full = self._full.items()
            self._sent = {
                (topic, e[0]): (e[1], e[2], e[3] if len(e) > 3 else -1)
                for topic, entries in full
                for e in entries
            }
        return self._sent

    def on_response(self, session_id: int, error_code: int, full: bool) -> None:
        """Take the outcome of the request planned last (``full``: was it a full one)."""
        if error_code == SESSION_ID_NOT_FOUND:
            self.session_id, self.epoch = NO_SESSION, INITIAL_EPOCH
        elif error_code:
            self.reset()
        elif session_id == NO_SESSION:  # the broker keeps no session: stay full
            self.session_id, self.epoch = NO_SESSION, INITIAL_EPOCH
        elif full:
            self.session_id, self.epoch = session_id, 1
        elif session_id != self.session_id:  # not ours: start over rather than guess
            self.reset()
        else:
            self.epoch = next_epoch(self.epoch)

    def reset(self) -> None:
        """Send a full request next (closing the current session, if any, on the broker)."""
        self.epoch = INITIAL_EPOCH
