"""The runtime's metrics, named once for both exporters: Prometheus (``metrics.py``) and
OpenTelemetry (``otel.py``).

Two sources: events a :class:`~consumergroup.GroupObserver` receives (histograms and
counters) and a group's ``stats()``, read when the exporter collects (:func:`samples`).
Names are Prometheus's (``otel.py`` derives its own from them); labels are ``group``
(the group id) and, per partition, ``topic`` and ``partition``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Literal

from .group.state import GroupState, GroupStats

if TYPE_CHECKING:
    from .share.group import ShareGroupStats

__all__ = ["EVENT_METRICS", "METRIC_NAMES", "STATS_METRICS", "samples"]

GROUP = ("group",)
PARTITION = ("group", "topic", "partition")

#: Every metric family (without the ``_total``/``_bucket`` suffixes Prometheus adds), with
#: its help text: the reference list in README.md.
METRIC_NAMES: dict[str, str] = {
    "consumergroup_rebalance_duration_seconds": (
        "From a session's end (or the first join) until the next session consumes"
    ),
    "consumergroup_commit_latency_seconds": "OffsetCommit round trips",
    "consumergroup_commit_failures": "OffsetCommit requests that failed",
    "consumergroup_heartbeat_failures": "Heartbeats that failed",
    "consumergroup_fetch_latency_seconds": "Fetch round trips (long polls included)",
    "consumergroup_state": "The member's state (1 for the current one)",
    "consumergroup_rebalances": "Rebalances this member went through",
    "consumergroup_errors_dropped": "Errors errors() dropped because nobody read them",
    "consumergroup_runaway_handlers": (
        "consume_claim tasks that ignored their cancellation and run on, abandoned"
    ),
    "consumergroup_assigned_partitions": "Partitions the member claims now",
    "consumergroup_member_epoch": (
        "The member epoch (consumer protocol) or generation id (classic), by protocol"
    ),
    "consumergroup_event_loop_lag_seconds": "Event-loop scheduling delay seen by the member",
    "consumergroup_last_heartbeat_age_seconds": "Seconds since the last successful heartbeat",
    "consumergroup_lag": (
        "Records between the position and the high watermark (read_committed: the LSO)"
    ),
    "consumergroup_position": "Next offset the member hands to its handler",
    "consumergroup_committed_offset": "Last offset the broker acknowledged for the group",
    "consumergroup_high_watermark": "High watermark as of the last fetch",
    "consumergroup_records_consumed": "Records the member's handlers took from the partition",
    "consumergroup_bytes_consumed": "Bytes of the record batches those records came in",
    "consumergroup_share_in_flight": (
        "Share group: records the member holds (acquired, being handled or about to be)"
    ),
    "consumergroup_share_delivered": "Share group: records handed to the handler",
    "consumergroup_share_redelivered": (
        "Share group: of those, records delivered before (delivery count above 1)"
    ),
    "consumergroup_share_acknowledged": (
        "Share group: records acknowledged, by type (accept, release, reject)"
    ),
    "consumergroup_share_renewals": "Share group: record lock renewals",
    "consumergroup_share_handler_errors": "Share group: handler calls that raised",
}

Kind = Literal["histogram", "counter", "gauge"]

#: The event-fed metrics (by the group's observer calls): name -> kind.
EVENT_METRICS: dict[str, Kind] = {
    "consumergroup_rebalance_duration_seconds": "histogram",
    "consumergroup_commit_latency_seconds": "histogram",
    "consumergroup_fetch_latency_seconds": "histogram",
    "consumergroup_commit_failures": "counter",
    "consumergroup_heartbeat_failures": "counter",
}

#: The metrics read from ``stats()``: name -> (kind, label names), in exposition order.
STATS_METRICS: dict[str, tuple[Kind, tuple[str, ...]]] = {
    "consumergroup_state": ("gauge", ("group", "state")),
    "consumergroup_rebalances": ("counter", GROUP),
    "consumergroup_errors_dropped": ("counter", GROUP),
    "consumergroup_runaway_handlers": ("gauge", GROUP),
    "consumergroup_assigned_partitions": ("gauge", GROUP),
    "consumergroup_member_epoch": ("gauge", ("group", "protocol")),
    "consumergroup_event_loop_lag_seconds": ("gauge", GROUP),
    "consumergroup_last_heartbeat_age_seconds": ("gauge", GROUP),
    "consumergroup_lag": ("gauge", PARTITION),
    "consumergroup_position": ("gauge", PARTITION),
    "consumergroup_committed_offset": ("gauge", PARTITION),
    "consumergroup_high_watermark": ("gauge", PARTITION),
    "consumergroup_records_consumed": ("counter", PARTITION),
    "consumergroup_bytes_consumed": ("counter", PARTITION),
    "consumergroup_share_in_flight": ("gauge", PARTITION),
    "consumergroup_share_delivered": ("counter", PARTITION),
    "consumergroup_share_redelivered": ("counter", PARTITION),
    "consumergroup_share_acknowledged": ("counter", (*PARTITION, "type")),
    "consumergroup_share_renewals": ("counter", PARTITION),
    "consumergroup_share_handler_errors": ("counter", GROUP),
}


def samples(
    stats: GroupStats | ShareGroupStats,
) -> Iterator[tuple[str, tuple[str, ...], float]]:
    """(metric name, label values in its label order, value) of every series one member's
    snapshot gives (a consumer group's or a share group's), partitions in order."""
    g = stats.group_id
    for s in GroupState:
        yield "consumergroup_state", (g, s.value), 1.0 if s is stats.state else 0.0
    yield "consumergroup_runaway_handlers", (g,), stats.runaway_handlers
    yield "consumergroup_member_epoch", (g, stats.protocol), stats.member_epoch
    if stats.last_heartbeat_age is not None:
        yield "consumergroup_last_heartbeat_age_seconds", (g,), stats.last_heartbeat_age
    if not isinstance(stats, GroupStats):
        yield from _share_samples(stats)
        return
    yield "consumergroup_rebalances", (g,), stats.rebalances
    yield "consumergroup_errors_dropped", (g,), stats.errors_dropped
    yield "consumergroup_assigned_partitions", (g,), len(stats.partitions)
    yield "consumergroup_event_loop_lag_seconds", (g,), stats.loop_lag
    for (topic, partition), p in sorted(stats.partitions.items()):
        labels = (g, topic, str(partition))
        yield "consumergroup_lag", labels, p.lag
        yield "consumergroup_position", labels, p.position
        yield "consumergroup_committed_offset", labels, p.committed
        yield "consumergroup_high_watermark", labels, p.high_water_mark
        yield "consumergroup_records_consumed", labels, p.records_consumed
        yield "consumergroup_bytes_consumed", labels, p.bytes_consumed


def _share_samples(stats: ShareGroupStats) -> Iterator[tuple[str, tuple[str, ...], float]]:
    """The ``consumergroup_share_*`` series of a share-group member's snapshot."""
    yield "consumergroup_share_handler_errors", (stats.group_id,), stats.handler_errors
    for (topic, partition), p in sorted(stats.partitions.items()):
        labels = (stats.group_id, topic, str(partition))
        yield "consumergroup_share_in_flight", labels, p.in_flight
        yield "consumergroup_share_delivered", labels, p.delivered
        yield "consumergroup_share_redelivered", labels, p.redelivered
        yield "consumergroup_share_renewals", labels, p.renewed
        acks = (("accept", p.accepted), ("release", p.released), ("reject", p.rejected))
        for kind, count in acks:
            yield "consumergroup_share_acknowledged", (*labels, kind), count
