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
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

try:
    from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
    from prometheus_client.metrics_core import Metric
except ImportError as exc:
    raise ImportError(
        "consumergroup.metrics needs prometheus_client: pip install 'consumergroup[prometheus]'"
    ) from exc

from ._telemetry import GROUP, METRIC_NAMES, STATS_METRICS, samples
from .group.state import GroupObserver
from .group.stats import GroupStats

if TYPE_CHECKING:
    from .group.consumer_group import ConsumerGroup
    from .share.group import ShareGroup, ShareGroupStats

__all__ = ["METRIC_NAMES", "GroupMetrics"]

#: Buckets of the rebalance duration (s): Tansu holds a JoinGroup for half the session
#: timeout, a real cluster for up to the rebalance timeout.
_REBALANCE_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
#: Buckets of round trips (s): commits and fetches (a fetch long-polls up to max_wait_time).
_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

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
    return Histogram(name, METRIC_NAMES[name], GROUP, registry=registry, buckets=buckets)


def _counter(name: str, registry: CollectorRegistry) -> Counter:
    return Counter(name, METRIC_NAMES[name], GROUP, registry=registry)


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
    families: dict[str, GaugeMetricFamily | CounterMetricFamily] = {
        name: (GaugeMetricFamily if kind == "gauge" else CounterMetricFamily)(
            name, METRIC_NAMES[name], labels=labels
        )
        for name, (kind, labels) in STATS_METRICS.items()
    }
    for stats in snapshots:
        for name, labels, value in samples(stats):
            families[name].add_metric(labels, value)
    yield from families.values()
