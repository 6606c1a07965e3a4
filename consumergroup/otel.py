"""OpenTelemetry for consumer groups (``pip install 'consumergroup[otel]'``).

**Traces** need nothing from this module: once the program sets a tracer provider
(``opentelemetry.trace.set_tracer_provider``), every record a handler takes from
``claim.messages()``, and every list from ``claim.batches()``, gets a ``process <topic>``
span (messaging semantic conventions), current while the handler works on it and linked
to the producer's span from the record's ``traceparent`` header. Without a provider, or
without OpenTelemetry installed, nothing is traced and nothing is paid per message.
:func:`inject_trace_context` puts the current span's context in a record's headers, for
producers.

**Metrics**: :class:`OTelMetrics` exports the same numbers as the Prometheus exporter
(``consumergroup.metrics``) through an OpenTelemetry meter::

    from consumergroup.otel import OTelMetrics
    OTelMetrics().track(group)            # the global meter provider, or meter_provider=...

Instrument names are the Prometheus names with ``consumergroup.`` for ``consumergroup_``
and ``_seconds`` turned into the unit ``s`` (``consumergroup.commit_latency``); attributes
are ``messaging.consumer.group.name`` and, per partition, ``messaging.destination.name``
and ``messaging.destination.partition.id``. Histograms and failure counters are fed by the
group's events; the rest is read from ``group.stats()`` when the reader collects, on the
group's event loop (a periodic reader's thread waits for it up to a second).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
import weakref
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

try:
    from opentelemetry import metrics
    from opentelemetry.metrics import CallbackOptions, Observation
except ImportError as exc:
    raise ImportError(
        "consumergroup.otel needs opentelemetry-api: pip install 'consumergroup[otel]'"
    ) from exc

from . import __version__
from ._otel import CONSUMER_GROUP, DESTINATION, PARTITION, SCHEMA_URL, SCOPE, inject_trace_context
from ._telemetry import EVENT_METRICS, METRIC_NAMES, STATS_METRICS, samples
from .group.state import GroupObserver
from .group.stats import GroupStats

if TYPE_CHECKING:
    from .group.consumer_group import ConsumerGroup
    from .share.group import ShareGroup, ShareGroupStats

    Member = ConsumerGroup | ShareGroup
    Stats = GroupStats | ShareGroupStats

__all__ = ["OTelMetrics", "inject_trace_context", "instrument_name"]

#: How long a reader on another thread waits for the event loop to read ``stats()``.
_STATS_WAIT = 1.0
#: One collection calls every instrument's callback: they share the snapshots read by
#: the first one for this long.
_SNAPSHOT_REUSE = 0.2
#: Prometheus label -> OpenTelemetry attribute.
_ATTRIBUTES = {
    "group": CONSUMER_GROUP,
    "topic": DESTINATION,
    "partition": PARTITION,
    "state": "consumergroup.state",
    "protocol": "consumergroup.protocol",
    "type": "consumergroup.acknowledge.type",
}


def instrument_name(name: str) -> tuple[str, str]:
    """The OpenTelemetry instrument name and unit of the Prometheus metric ``name``."""
    base = name.replace("consumergroup_", "consumergroup.", 1)
    if base.endswith("_seconds"):
        return base.removesuffix("_seconds"), "s"
    return base, "1"


class OTelMetrics(GroupObserver):
    """Exports the tracked groups' metrics through one OpenTelemetry meter.

    Groups are held weakly: a collected group simply stops being exported. Track a group
    from its event loop (its ``stats()`` are read there).
    """

    def __init__(self, meter_provider: metrics.MeterProvider | None = None) -> None:
        provider = meter_provider if meter_provider is not None else metrics.get_meter_provider()
        meter = provider.get_meter(SCOPE, __version__, schema_url=SCHEMA_URL)
        # group -> the loop that runs it (None: tracked outside one, read directly).
        self._groups: weakref.WeakKeyDictionary[Member, asyncio.AbstractEventLoop | None] = (
            weakref.WeakKeyDictionary()
        )
        self._events: dict[str, Any] = {}
        # (when, the snapshots read then): shared by the callbacks of one collection.
        self._snapshot: tuple[float, list[Stats]] = (-_SNAPSHOT_REUSE, [])
        for name, kind in EVENT_METRICS.items():
            otel_name, unit = instrument_name(name)
            create = meter.create_histogram if kind == "histogram" else meter.create_counter
            self._events[name] = create(otel_name, unit=unit, description=METRIC_NAMES[name])
        for name, (kind, _) in STATS_METRICS.items():
            otel_name, unit = instrument_name(name)
            observe = (
                meter.create_observable_gauge
                if kind == "gauge"
                else meter.create_observable_counter
            )
            observe(
                otel_name,
                callbacks=[self._callback(name)],
                unit=unit,
                description=METRIC_NAMES[name],
            )

    def track(self, group: ConsumerGroup | ShareGroup) -> None:
        """Export ``group``'s metrics from now on (idempotent): a consumer group's or a
        share group's member (whose series all come from ``stats()``)."""
        if group in self._groups:
            return
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        self._groups[group] = loop
        if hasattr(group, "add_observer"):
            group.add_observer(self)

    # ------------------------------------------------------------------ GroupObserver

    def on_rebalance(self, group_id: str, duration: float) -> None:
        """Record a rebalance's duration."""
        self._events["consumergroup_rebalance_duration_seconds"].record(
            duration, {CONSUMER_GROUP: group_id}
        )

    def on_commit(self, group_id: str, latency: float, error: BaseException | None) -> None:
        """Record a commit round trip; count it when it failed."""
        attributes = {CONSUMER_GROUP: group_id}
        self._events["consumergroup_commit_latency_seconds"].record(latency, attributes)
        if error is not None:
            self._events["consumergroup_commit_failures"].add(1, attributes)

    def on_heartbeat(self, group_id: str, error: BaseException | None) -> None:
        """Count a failed heartbeat."""
        if error is not None:
            self._events["consumergroup_heartbeat_failures"].add(1, {CONSUMER_GROUP: group_id})

    def on_fetch(self, group_id: str, latency: float, records: int, nbytes: int) -> None:
        """Record a fetch round trip."""
        self._events["consumergroup_fetch_latency_seconds"].record(
            latency, {CONSUMER_GROUP: group_id}
        )

    # ------------------------------------------------------------------ collection

    def _callback(self, metric: str) -> Callable[[CallbackOptions], Iterable[Observation]]:
        labels = STATS_METRICS[metric][1]
        names = [_ATTRIBUTES[label] for label in labels]

        def observe(options: CallbackOptions) -> Iterable[Observation]:
            return [
                Observation(value, dict(zip(names, values, strict=True)))
                for stats in self._snapshots()
                for name, values, value in samples(stats)
                if name == metric
            ]

        return observe

    def _snapshots(self) -> list[Stats]:
        """Every tracked group's ``stats()``, each read on its own event loop (shared by the
        callbacks of one collection)."""
        now = time.monotonic()
        taken, snapshots = self._snapshot
        if now - taken >= _SNAPSHOT_REUSE:
            snapshots = [
                stats
                for group, loop in list(self._groups.items())
                if (stats := _stats_on(group, loop)) is not None
            ]
            self._snapshot = (now, snapshots)
        return snapshots


def _stats_on(group: Member, loop: asyncio.AbstractEventLoop | None) -> Stats | None:
    """``group.stats()`` read on ``loop`` when another thread runs it (it reads the loop's
    state); None when that loop does not answer within a second."""
    if loop is None or not loop.is_running() or _running_loop() is loop:
        return group.stats()
    future: concurrent.futures.Future[Stats] = concurrent.futures.Future()

    def read() -> None:
        try:
            future.set_result(group.stats())
        except Exception as exc:
            future.set_exception(exc)

    try:
        loop.call_soon_threadsafe(read)
        return future.result(_STATS_WAIT)
    except (RuntimeError, concurrent.futures.TimeoutError):  # closed meanwhile, or busy
        return None


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
