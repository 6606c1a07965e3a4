"""Broker quirks: where a broker departs from Apache Kafka's protocol, and the work-arounds.

Everything that compensates one broker's behaviour lives here, so that the rest of the
package reads as Apache Kafka's protocol. Which work-arounds apply is decided from what
the broker answers, never from its address, name or a setting: :func:`detect_quirks`
reads the connection's ApiVersions answer.

The rule: every Apache Kafka broker since 1.0 answers OffsetForLeaderEpoch (API 23)
and CreatePartitions (API 37). A broker that lacks either is a re-implementation of
the protocol (Tansu, the embedded broker, lacks both), and its group coordinator is
treated as one with the quirks below. Each work-around is written to be harmless
where its quirk is absent, so a broker wrongly judged quirky is still served right;
on Apache Kafka none of them runs.

The quirks (each named after the behaviour it compensates):

``orphaned_leader``
    The coordinator keeps naming as leader a member that sent LeaveGroup while the
    group was forming: no member is told it leads, every SyncGroup is held and answered
    REBALANCE_IN_PROGRESS, and no generation completes. Work-around:
    :class:`OrphanedLeaderPoke`.
``replays_held_join``
    The coordinator keeps re-applying a JoinGroup it holds until the hold ends (half the
    session timeout), re-adding a member that left on another connection meanwhile,
    and it still processes a request posted behind that JoinGroup after the hold, even
    once the client closed the connection. Work-around: a member whose join was
    cancelled sends LeaveGroup a second time, posted behind the abandoned JoinGroup
    (:meth:`~consumergroup.group.membership.Membership.leave`).
``empty_past_log_end``
    A Fetch at an offset past the log end is answered with no records and no error,
    where Apache Kafka answers OFFSET_OUT_OF_RANGE. Work-around: a start offset above
    the high watermark counts as past the end
    (:func:`~consumergroup.consumer.positions.resolve_start_offsets`). On Apache Kafka an
    offset above the high watermark may be in the log: the high watermark of a new
    leader, or of a follower, lags behind the leader's.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

from .._dataclass import dataclass
from ..errors import ConsumerGroupError
from .protocol import VersionRanges

__all__ = ["NO_QUIRKS", "ORPHANED_ROUNDS", "BrokerQuirks", "OrphanedLeaderPoke", "detect_quirks"]

#: APIs every Apache Kafka broker since 1.0 answers: OffsetForLeaderEpoch, CreatePartitions.
KAFKA_CORE_APIS = frozenset({23, 37})

#: Consecutive join rounds that named the same absent leader in the same generation and
#: ended with SyncGroup answering REBALANCE_IN_PROGRESS, before a member pokes the
#: leader's id. A round lasts ~1.3 session timeouts on Tansu, so after two a leader that
#: is alive but silent has been evicted.
ORPHANED_ROUNDS = 2


@dataclass(frozen=True, slots=True)
class BrokerQuirks:
    """Which departures from Apache Kafka's protocol a broker has (all False: none)."""

    orphaned_leader: bool = False
    replays_held_join: bool = False
    empty_past_log_end: bool = False

    def __str__(self) -> str:
        names = [name for name in self.__slots__ if getattr(self, name)]
        return ", ".join(names) or "none"


#: Apache Kafka's protocol as it is specified.
NO_QUIRKS = BrokerQuirks()


def detect_quirks(versions: VersionRanges) -> BrokerQuirks:
    """The quirks of the broker whose ApiVersions answer was ``versions`` (see module doc)."""
    if not versions or versions.keys() >= KAFKA_CORE_APIS:
        return NO_QUIRKS
    return BrokerQuirks(orphaned_leader=True, replays_held_join=True, empty_past_log_end=True)


class OrphanedLeaderPoke:
    """Unblock a group that waits for a leader that left (the ``orphaned_leader`` quirk).

    The signature: join rounds with the same generation and the same leader (not this
    member), each ending with SyncGroup answering REBALANCE_IN_PROGRESS. It cannot
    happen on Apache Kafka, where every join round has a new generation. A broker with
    the quirk does clear a leader it evicts, so after :data:`ORPHANED_ROUNDS` such rounds
    this member sends one JoinGroup under the leader's id and drops the answer: the id
    is a member again, sends nothing more, and is evicted one session timeout later,
    which clears the leader; the next member to join leads. Harmless when the leader is
    in fact alive (its session is merely refreshed), and when several members do it at
    once.

    The eviction check runs only on a JoinGroup/SyncGroup/Heartbeat *without* a
    group_instance_id, or on any Heartbeat while the group forms. Dynamic members' own
    joins trigger it; static members never send one while joining, so a group of static
    members waited for ever (and a second poke, evicting the id and re-adding it in the
    same request, made it leader again). So once the poked id's session has expired, a
    Heartbeat under this member's own ids is sent each stalled round until a round names
    another leader.
    """

    def __init__(self, log: logging.LoggerAdapter, session_timeout: float) -> None:  # type: ignore[type-arg]
        self._log = log
        self._session_timeout = session_timeout
        # (generation, leader) named by the last JoinGroup; the same of the last round that
        # ended with SyncGroup answering REBALANCE_IN_PROGRESS, and how many rounds in a
        # row did so with that key.
        self._round: tuple[int, str] = (-1, "")
        self._stalled: tuple[int, str] | None = None
        self._stalled_rounds = 0
        # (leader id, loop time its poke was answered): the eviction check still to trigger.
        self._poked: tuple[str, float] | None = None

    def round_started(self) -> None:
        """A JoinGroup goes out: no leader named yet."""
        self._round = (-1, "")

    def round_named(self, generation: int, leader: str) -> None:
        """The JoinGroup answered with ``generation`` and ``leader``."""
        self._round = (generation, leader)

    def completed(self) -> None:
        """A SyncGroup succeeded: the group formed, nothing is stalled."""
        self._stalled, self._stalled_rounds, self._poked = None, 0, None

    async def after_stalled_sync(
        self,
        member_id: str,
        join_as: Callable[[str], Awaitable[None]],
        heartbeat: Callable[[], Awaitable[str]],
    ) -> None:
        """After a round ended with REBALANCE_IN_PROGRESS: poke or evict when it is time.

        ``join_as(leader)`` sends one dynamic JoinGroup under ``leader``'s id and drops
        the answer; ``heartbeat()`` sends one under this member's ids and returns the
        error name it was answered with. Either may raise; a failure is logged and the
        next stalled round tries again.
        """
        key = self._round
        if key[0] < 0 or key[1] in ("", member_id):
            self.completed()
            return
        if self._poked is not None and self._poked[0] == key[1]:
            await self._evict_poked(heartbeat)
            return
        self._poked = None
        self._stalled_rounds = self._stalled_rounds + 1 if key == self._stalled else 1
        self._stalled = key
        if self._stalled_rounds < ORPHANED_ROUNDS:
            if self._stalled_rounds == 1:
                # Said now, not only when the poke comes a round later: the member looks
                # idle for ~ORPHANED_ROUNDS x 1.3 session timeouts meanwhile.
                self._log.warning(
                    "generation %d: the coordinator named leader %s but no SyncGroup "
                    "completed: waiting for it; if the next join round (about %.0f s) "
                    "stalls the same way, the coordinator is waiting for a leader that left "
                    "(a member closed while the group formed; broker quirk orphaned_leader) "
                    "and this member will unblock the group",
                    key[0],
                    key[1],
                    1.3 * self._session_timeout,
                )
            return
        self._stalled, self._stalled_rounds = None, 0
        generation, leader = key
        self._log.warning(
            "generation %d: %d join rounds in a row named leader %s and no SyncGroup "
            "completed: the coordinator waits for a leader that left the group (a broker "
            "quirk: orphaned_leader); joining once under that id so that the coordinator "
            "evicts it",
            generation,
            ORPHANED_ROUNDS,
            leader,
        )
        try:
            await join_as(leader)
        except ConsumerGroupError as exc:
            self._log.info("JoinGroup under the absent leader's id failed: %s", exc)
            return
        # time.monotonic(), not the loop's time: uvloop's is read once per loop pass.
        self._poked = (leader, time.monotonic())

    async def _evict_poked(self, heartbeat: Callable[[], Awaitable[str]]) -> None:
        assert self._poked is not None
        leader, poked_at = self._poked
        if time.monotonic() - poked_at <= self._session_timeout:
            return  # not expired yet: the coordinator would keep it
        try:
            answer = await heartbeat()
        except ConsumerGroupError as exc:
            self._log.info("Heartbeat to evict the absent leader %s failed: %s", leader, exc)
            return
        self._log.info("Heartbeat to evict the absent leader %s answered %s", leader, answer)
