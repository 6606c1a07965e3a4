"""The stats snapshot of a member: :class:`GroupStats` and its :class:`PartitionStats`.

``ConsumerGroup.stats()`` builds them from in-memory state only (no broker round trip),
so health endpoints and metrics scrapes can call it on every request. Both are also
exported by :mod:`.state` (and as ``cg.GroupStats``, ``cg.PartitionStats``); this module
loads with the first ``stats()``, not with every member's start.
"""

from __future__ import annotations

from dataclasses import field

from .._dataclass import dataclass
from ..consumer._native import c_extensions_in_use
from .state import GroupState, TopicPartition

__all__ = ["GroupStats", "PartitionStats"]


@dataclass(frozen=True, slots=True)
class PartitionStats:
    """One claimed partition, as of the last fetch and commit."""

    #: The next offset the member hands to its handler (-1 before the first fetch).
    position: int
    #: The last offset the broker acknowledged for the group (-1: none).
    committed: int
    #: The partition's high watermark as of the last fetch (-1 before the first).
    high_water_mark: int
    #: ``high_water_mark - position``; under ``read_committed`` the last stable offset
    #: takes the high watermark's place (0 when either is unknown).
    lag: int
    #: Paused by the user (``group.pause``).
    paused: bool
    #: Messages handed to the handler per second, over the last few seconds.
    messages_per_second: float = 0.0
    #: Records this member's readers took from the partition since the group started
    #: (over every session that claimed it; an upper bound on a compacted log).
    records_consumed: int = 0
    #: The bytes (record batches on the wire) those records came in.
    bytes_consumed: int = 0


@dataclass(frozen=True, slots=True)
class GroupStats:
    """A snapshot of a member: cheap (no I/O), immutable, JSON-friendly via ``as_dict()``."""

    group_id: str
    state: GroupState
    member_id: str
    generation_id: int
    #: Rebalances this member has been through (completed joins after the first).
    rebalances: int
    #: Per claimed partition.
    partitions: dict[TopicPartition, PartitionStats] = field(default_factory=dict)
    #: Seconds since the last successful heartbeat (None: no session yet).
    last_heartbeat_age: float | None = None
    #: How long the last rebalance took, session end to the next session's start (s).
    last_rebalance_duration: float | None = None
    #: Commits that failed (auto, manual or final) since the group started.
    commit_failures: int = 0
    #: The event loop's scheduling delay as last measured by the watchdog (s).
    loop_lag: float = 0.0
    #: Errors ``errors()`` dropped because nobody read them (the buffer holds 1,024).
    errors_dropped: int = 0
    #: ``consume_claim`` tasks that ignored their cancellation, were abandoned and still
    #: run, detached (a handler bug: ``/health/live`` fails while there is one).
    runaway_handlers: int = 0
    #: Why the member FAILED (or the last transient error while it retries; exactly-once:
    #: why its transaction aborted, while the aborts in a row stall it).
    error: str | None = None
    #: Exactly-once: the member's transaction aborts in a row, without a commit between;
    #: from 3 (``transaction.STALLED_AFTER``) the group backs off and is not ready.
    transaction_aborts: int = 0
    #: The group protocol: ``"classic"`` or ``"consumer"`` (KIP-848), not the assignor.
    protocol: str = "classic"
    #: Consumer protocol: the member epoch (0 before it joins); classic: the generation id.
    member_epoch: int = -1
    #: False when the C extensions are not in use (not built, or CONSUMERGROUP_PURE_PYTHON):
    #: records are decoded in pure Python, at about 10x the CPU per record.
    c_extensions: bool = field(default_factory=c_extensions_in_use)

    @property
    def claims(self) -> dict[str, list[int]]:
        """topic -> sorted claimed partitions."""
        out: dict[str, list[int]] = {}
        for topic, partition in sorted(self.partitions):
            out.setdefault(topic, []).append(partition)
        return out

    @property
    def lag(self) -> int:
        """Total lag over the claimed partitions."""
        return sum(p.lag for p in self.partitions.values())

    def as_dict(self) -> dict[str, object]:
        """A JSON-serialisable view (health endpoints, ``--json`` output)."""
        return {
            "group_id": self.group_id,
            "state": self.state.value,
            "member_id": self.member_id,
            "generation_id": self.generation_id,
            "protocol": self.protocol,
            "member_epoch": self.member_epoch,
            "rebalances": self.rebalances,
            "claims": self.claims,
            "lag": self.lag,
            "last_heartbeat_age": self.last_heartbeat_age,
            "last_rebalance_duration": self.last_rebalance_duration,
            "commit_failures": self.commit_failures,
            "loop_lag": self.loop_lag,
            "errors_dropped": self.errors_dropped,
            "runaway_handlers": self.runaway_handlers,
            "error": self.error,
            "transaction_aborts": self.transaction_aborts,
            "c_extensions": self.c_extensions,
            "partitions": [
                {
                    "topic": topic,
                    "partition": partition,
                    "position": p.position,
                    "committed": p.committed,
                    "high_water_mark": p.high_water_mark,
                    "lag": p.lag,
                    "paused": p.paused,
                    "messages_per_second": p.messages_per_second,
                    "records_consumed": p.records_consumed,
                    "bytes_consumed": p.bytes_consumed,
                }
                for (topic, partition), p in sorted(self.partitions.items())
            ],
        }
