"""Prometheus metrics for consumer groups (``pip install 'consumergroup[prometheus]'``).

``GroupMetrics`` exports a member's numbers through ``prometheus_client``::

    from consumergroup.metrics import GroupMetrics
    metrics = GroupMetrics.of()          # the one on prometheus_client's global REGISTRY
    metrics.track(group)                 # any number of groups, each once

Two sources, so the hot path pays nothing beyond a counter per record set:

* events (a :class:`~consumergroup.GroupObserver` the group calls): rebalances and
  their duration, commit latency and failures, heartbeat failures, fetch latency;
* a collector that reads ``group.stats()`` when Prometheus scrapes (no broker round
  trip): state, rebalances, claims, per-partition lag, position, committed offset,
  high watermark, records and bytes consumed, event-loop lag, last heartbeat age,
  errors dropped.

A :class:`~consumergroup.ShareGroup` is tracked the same way; it has no observer events,
and its scrape-time series (``consumergroup_share_*``) are the records in flight, those
delivered and redelivered, acknowledged by type, lock renewals, and handler errors, plus
the state, member epoch (protocol ``share``) and heartbeat age every member has.

Scrapes call ``group.stats()``, which reads the event loop's state: serve them from
the loop (the FastAPI and aiohttp integrations' ``GET /metrics`` do). Names follow
Prometheus conventions; every series has a ``group`` label (the group id), the
per-partition ones also ``topic`` and ``partition``.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

try:
    from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
    from prometheus_client.metrics_core import Metric
except ImportError as exc:
    raise ImportError(
        "consumergroup.metrics needs prometheus_client: pip install 'consumergroup[prometheus]'"
    ) from exc

from .group.state import GroupObserver, GroupState, GroupStats

if TYPE_CHECKING:
    from .group.consumer_group import ConsumerGroup
    from .share.group import ShareGroup, ShareGroupStats

__all__ = ["METRIC_NAMES", "GroupMetrics"]

#: Buckets of the rebalance duration (s): Tansu holds a JoinGroup for half the session
#: timeout, a real cluster for up to the rebalance timeout.
_REBALANCE_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
#: Buckets of round trips (s): commits and fetches (a fetch long-polls up to max_wait_time).
_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

_GROUP = ("group",)
_PARTITION = ("group", "topic", "partition")

#: Every metric family this module exports (without the ``_total``/``_bucket`` suffixes
#: Prometheus adds), with its help text: the reference list in README.md.
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

#: One GroupMetrics per registry (metric names are unique within a registry), by the
#: registry's id; the registry holds its GroupMetrics (through the collector), so an
#: entry lives as long as its registry, and ``of()`` checks the id was not reused.
_BY_REGISTRY: weakref.WeakValueDictionary[int, GroupMetrics] = weakref.WeakValueDictionary()


class GroupMetrics(GroupObserver):
    """Exports the tracked groups' metrics to one ``prometheus_client`` registry.

    ``GroupMetrics(registry)`` registers its metrics there (default: the global
    ``REGISTRY``); a second one on the same registry would clash, so use
    :meth:`of`, which returns the registry's existing instance. Groups are held
    weakly: a collected group simply stops being exported.
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = REGISTRY if registry is None else registry
        self._groups: dict[str, weakref.ref[ConsumerGroup | ShareGroup]] = {}
        r = self.registry
        self._rebalance_seconds = _histogram(
            "consumergroup_rebalance_duration_seconds", _REBALANCE_BUCKETS, r
        )
        self._commit_seconds = _histogram(
            "consumergroup_commit_latency_seconds", _LATENCY_BUCKETS, r
        )
        self._fetch_seconds = _histogram("consumergroup_fetch_latency_seconds", _LATENCY_BUCKETS, r)
        self._commit_failures = _counter("consumergroup_commit_failures", r)
        self._heartbeat_failures = _counter("consumergroup_heartbeat_failures", r)
        r.register(_StatsCollector(self))
        _BY_REGISTRY[id(r)] = self

    @classmethod
    def of(cls, registry: CollectorRegistry | None = None) -> GroupMetrics:
        """The GroupMetrics of ``registry`` (default: the global one), created on first use."""
        registry = REGISTRY if registry is None else registry
        existing = _BY_REGISTRY.get(id(registry))
        if existing is not None and existing.registry is registry:
            return existing
        return cls(registry)

    def track(self, group: ConsumerGroup | ShareGroup) -> None:
        """Export ``group``'s metrics from now on (idempotent for the same group); a
        consumer group's or a share group's member.

        Raises ValueError for a second member of the same group id: their series would
        carry the same labels (use a registry per member for that).
        """
        known = self._groups.get(group.group_id)
        current = known() if known is not None else None
        if current is group:
            return
        if current is not None:
            raise ValueError(
                f"a member of group {group.group_id!r} is already exported to this registry; "
                "give each member of the same group its own CollectorRegistry"
            )
        self._groups[group.group_id] = weakref.ref(group)
        if not hasattr(group, "add_observer"):
            return  # a share group: its series all come from stats() at scrape time
        for metric in (self._commit_failures, self._heartbeat_failures):
            metric.labels(group.group_id)  # the series exists (at 0) before the first event
        group.add_observer(self)

    def groups(self) -> list[ConsumerGroup | ShareGroup]:
        """The tracked groups that are still alive."""
        return [g for ref in self._groups.values() if (g := ref()) is not None]

    # ------------------------------------------------------------------ GroupObserver

    def on_rebalance(self, group_id: str, duration: float) -> None:
        """Observe a rebalance's duration."""
        self._rebalance_seconds.labels(group_id).observe(duration)

    def on_commit(self, group_id: str, latency: float, error: BaseException | None) -> None:
        """Observe a commit round trip; count it when it failed."""
        self._commit_seconds.labels(group_id).observe(latency)
        if error is not None:
            self._commit_failures.labels(group_id).inc()

    def on_heartbeat(self, group_id: str, error: BaseException | None) -> None:
        """Count a failed heartbeat."""
        if error is not None:
            self._heartbeat_failures.labels(group_id).inc()

    def on_fetch(self, group_id: str, latency: float, records: int, nbytes: int) -> None:
        """Observe a fetch round trip (records are counted where the handler takes them)."""
        self._fetch_seconds.labels(group_id).observe(latency)


def _histogram(name: str, buckets: tuple[float, ...], registry: CollectorRegistry) -> Histogram:
    return Histogram(name, METRIC_NAMES[name], _GROUP, registry=registry, buckets=buckets)


def _counter(name: str, registry: CollectorRegistry) -> Counter:
    return Counter(name, METRIC_NAMES[name], _GROUP, registry=registry)


class _StatsCollector:
    """The scrape-time half: reads every tracked group's ``stats()``."""

    def __init__(self, metrics: GroupMetrics) -> None:
        self._metrics = metrics

    def describe(self) -> Iterable[Metric]:
        """The families' names, so the registry can refuse duplicates."""
        return _families([])

    def collect(self) -> Iterable[Metric]:
        """One family per gauge/counter, a sample per tracked group (and partition)."""
        return _families([g.stats() for g in self._metrics.groups()])


def _families(snapshots: list[GroupStats | ShareGroupStats]) -> Iterator[Metric]:
    def gauge(name: str, labels: tuple[str, ...]) -> GaugeMetricFamily:
        return GaugeMetricFamily(name, METRIC_NAMES[name], labels=labels)

    def counter(name: str, labels: tuple[str, ...]) -> CounterMetricFamily:
        return CounterMetricFamily(name, METRIC_NAMES[name], labels=labels)

    state = gauge("consumergroup_state", ("group", "state"))
    rebalances = counter("consumergroup_rebalances", _GROUP)
    errors_dropped = counter("consumergroup_errors_dropped", _GROUP)
    runaways = gauge("consumergroup_runaway_handlers", _GROUP)
    assigned = gauge("consumergroup_assigned_partitions", _GROUP)
    epoch = gauge("consumergroup_member_epoch", ("group", "protocol"))
    loop_lag = gauge("consumergroup_event_loop_lag_seconds", _GROUP)
    heartbeat_age = gauge("consumergroup_last_heartbeat_age_seconds", _GROUP)
    lag = gauge("consumergroup_lag", _PARTITION)
    position = gauge("consumergroup_position", _PARTITION)
    committed = gauge("consumergroup_committed_offset", _PARTITION)
    high_watermark = gauge("consumergroup_high_watermark", _PARTITION)
    records = counter("consumergroup_records_consumed", _PARTITION)
    nbytes = counter("consumergroup_bytes_consumed", _PARTITION)
    share = _ShareFamilies(gauge, counter)
    for stats in snapshots:
        g = [stats.group_id]
        for s in GroupState:
            state.add_metric([*g, s.value], 1.0 if s is stats.state else 0.0)
        epoch.add_metric([*g, stats.protocol], stats.member_epoch)
        runaways.add_metric(g, stats.runaway_handlers)
        if stats.last_heartbeat_age is not None:
            heartbeat_age.add_metric(g, stats.last_heartbeat_age)
        if not isinstance(stats, GroupStats):
            share.add(stats)
            continue
        rebalances.add_metric(g, stats.rebalances)
        errors_dropped.add_metric(g, stats.errors_dropped)
        assigned.add_metric(g, len(stats.partitions))
        loop_lag.add_metric(g, stats.loop_lag)
        for (topic, partition), p in sorted(stats.partitions.items()):
            labels = [*g, topic, str(partition)]
            lag.add_metric(labels, p.lag)
            position.add_metric(labels, p.position)
            committed.add_metric(labels, p.committed)
            high_watermark.add_metric(labels, p.high_water_mark)
            records.add_metric(labels, p.records_consumed)
            nbytes.add_metric(labels, p.bytes_consumed)
    yield from (state, rebalances, errors_dropped, runaways, assigned, epoch, loop_lag)
    yield heartbeat_age
    yield from (lag, position, committed, high_watermark, records, nbytes)
    yield from share.families()


class _ShareFamilies:
    """The share-group series of one scrape (``consumergroup_share_*``)."""

    def __init__(
        self,
        gauge: Callable[[str, tuple[str, ...]], GaugeMetricFamily],
        counter: Callable[[str, tuple[str, ...]], CounterMetricFamily],
    ) -> None:
        self.in_flight = gauge("consumergroup_share_in_flight", _PARTITION)
        self.delivered = counter("consumergroup_share_delivered", _PARTITION)
        self.redelivered = counter("consumergroup_share_redelivered", _PARTITION)
        self.acknowledged = counter("consumergroup_share_acknowledged", (*_PARTITION, "type"))
        self.renewals = counter("consumergroup_share_renewals", _PARTITION)
        self.handler_errors = counter("consumergroup_share_handler_errors", _GROUP)

    def add(self, stats: ShareGroupStats) -> None:
        """One share-group member's snapshot."""
        self.handler_errors.add_metric([stats.group_id], stats.handler_errors)
        for (topic, partition), p in sorted(stats.partitions.items()):
            labels = [stats.group_id, topic, str(partition)]
            self.in_flight.add_metric(labels, p.in_flight)
            self.delivered.add_metric(labels, p.delivered)
            self.redelivered.add_metric(labels, p.redelivered)
            self.renewals.add_metric(labels, p.renewed)
            for kind, count in (
                ("accept", p.accepted),
                ("release", p.released),
                ("reject", p.rejected),
            ):
                self.acknowledged.add_metric([*labels, kind], count)

    def families(self) -> tuple[Metric, ...]:
        """The families, each with the samples added."""
        return (
            self.in_flight,
            self.delivered,
            self.redelivered,
            self.acknowledged,
            self.renewals,
            self.handler_errors,
        )
