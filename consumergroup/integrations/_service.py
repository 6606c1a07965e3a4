"""What the FastAPI and aiohttp integrations share, free of either framework.

* :class:`GroupRunner`: runs groups as background tasks of a web service and
  stops them within a bound; a group that fails for good is logged and reported,
  never raised into the server. A group is a :class:`~consumergroup.ConsumerGroup`
  or a :class:`~consumergroup.ShareGroup` (its handler a ShareGroupHandler, run with
  its ``concurrency``); both report through ``stats()`` (state, partitions, error).
* :class:`LoopLagMonitor`: the event loop's scheduling delay, for liveness.
* :class:`ServiceHealth`: the three endpoints' answers (status code + JSON body,
  or the Prometheus exposition), for the adapters to wrap in their responses.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import logging
import time
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING

from .._dataclass import dataclass
from .._lifecycle import cancel_and_wait
from ..errors import ConfigurationError
from ..group.consumer_group import ConsumerGroup
from ..group.handler import ConsumerGroupHandler
from ..group.state import GroupState
from ..group.stats import GroupStats
from ..group.transaction import STALLED_AFTER
from ..share.group import ShareGroup
from ..share.handler import ShareGroupHandler

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from ..metrics import GroupMetrics

log = logging.getLogger(__name__)

#: Default bound on closing the groups when the service stops (s): final commit + LeaveGroup.
CLOSE_TIMEOUT = 10.0
#: Default loop lag past which /health/live answers 503 (s).
STALL_THRESHOLD = 5.0
#: How long a group's task may take to end once its close() returned or gave up (s).
_GRACE = 2.0

#: A member a service runs: of a consumer group or of a share group.
AnyGroup = ConsumerGroup | ShareGroup
Groups = AnyGroup | Sequence[AnyGroup]
Handler = ConsumerGroupHandler | ShareGroupHandler
JSON = dict[str, object]


def as_groups(group_or_groups: Groups) -> list[AnyGroup]:
    """One group or several, as a non-empty list (a clear error for anything else)."""
    groups: list[AnyGroup]
    if isinstance(group_or_groups, ConsumerGroup | ShareGroup):
        groups = [group_or_groups]
    else:
        groups = list(group_or_groups)
    if not groups or not all(isinstance(g, ConsumerGroup | ShareGroup) for g in groups):
        raise ConfigurationError(
            "expected a consumergroup.ConsumerGroup or a non-empty list of them (ShareGroups "
            f"too), got {group_or_groups!r}"
        )
    return groups


@dataclass
class _Member:
    group: AnyGroup
    topics: list[str]
    handler: Handler
    concurrency: int | None = None
    task: asyncio.Task[None] | None = None


class GroupRunner:
    """Runs ``group.run(topics, handler)`` for each group in a background task.

    :meth:`start` returns at once (the join happens in the background, so a web
    server's startup does not wait for it); :meth:`stop` closes every group
    (final commit, LeaveGroup) bounded by ``close_timeout``. A group whose
    ``run()`` raises has failed for good: the error is logged and its state is
    FAILED with the reason in ``stats().error``, which readiness reports.
    """

    def __init__(self, close_timeout: float = CLOSE_TIMEOUT) -> None:
        if not close_timeout > 0:
            raise ConfigurationError(f"close_timeout must be > 0 seconds, got {close_timeout!r}")
        self.close_timeout = close_timeout
        self._members: list[_Member] = []
        self._stopping = False

    def add(
        self,
        group_or_groups: Groups,
        topics: Sequence[str],
        handler: object,
        *,
        concurrency: int | None = None,
    ) -> None:
        """Run these groups (each on ``topics`` with ``handler``) once started; a share
        group with ``concurrency`` handler calls at once (default: its config's)."""
        if isinstance(topics, str) or not topics or not all(isinstance(t, str) for t in topics):
            raise ConfigurationError(
                f"topics must be a non-empty list of topic names, got {topics!r}"
            )
        for group in as_groups(group_or_groups):
            checked: Handler
            if isinstance(group, ShareGroup):
                if not isinstance(handler, ShareGroupHandler):
                    raise ConfigurationError(
                        f"share group {group.group_id!r}: the handler must be a "
                        "consumergroup.ShareGroupHandler instance (subclass it and define "
                        f"async consume(session, record)), got {handler!r}"
                    )
                checked = handler
            elif isinstance(handler, ConsumerGroupHandler):
                checked = handler
            else:
                raise ConfigurationError(
                    "handler must be a consumergroup.ConsumerGroupHandler instance "
                    f"(subclass it and define consume_claim), got {handler!r}"
                )
            if any(m.group is group for m in self._members):
                raise ConfigurationError(f"{group!r} is already run by this service")
            self._members.append(_Member(group, list(topics), checked, concurrency))

    @property
    def groups(self) -> list[AnyGroup]:
        """Every group this runner runs."""
        return [m.group for m in self._members]

    def start(self) -> None:
        """Start one background task per group (returns at once)."""
        for m in self._members:
            if m.task is None:
                m.task = asyncio.create_task(self._run(m), name=f"consumergroup-{m.group.group_id}")

    async def _run(self, m: _Member) -> None:
        try:
            if isinstance(m.group, ShareGroup):
                assert isinstance(m.handler, ShareGroupHandler)
                await m.group.run(m.topics, m.handler, concurrency=m.concurrency)
            else:
                assert isinstance(m.handler, ConsumerGroupHandler)
                await m.group.run(m.topics, m.handler)
        except Exception:
            if self._stopping:  # e.g. ClosedError: stop() closed it before run() began
                return
            # The web server goes on: readiness reports the group FAILED, with the reason.
            log.exception("consumer group %r stopped for good", m.group.group_id)

    async def stop(self) -> None:
        """Close every group (concurrently), bounded: the server never hangs on a group."""
        self._stopping = True
        if not self._members:
            return
        tasks = [m.task for m in self._members if m.task is not None]
        closing = [
            asyncio.create_task(m.group.close(timeout=self.close_timeout)) for m in self._members
        ]
        # close() honours its timeout; the grace is a backstop, then the tasks are cancelled.
        _, late = await asyncio.wait([*closing, *tasks], timeout=self.close_timeout + _GRACE)
        for task in late:
            log.warning(
                "consumer group task %s did not end in time; cancelling it", task.get_name()
            )
            task.cancel()
        if late:
            await asyncio.wait(late, timeout=_GRACE)
        for task in closing:
            if task.done() and not task.cancelled() and task.exception() is not None:
                log.error("closing a consumer group failed", exc_info=task.exception())


class LoopLagMonitor:
    """Measures how late the event loop runs a task that sleeps ``interval`` seconds.

    ``lag()`` is the larger of the last measured delay and how overdue the next
    measurement is, so a probe served right after the loop was blocked sees the
    stall even before the monitor's own task has run again.
    """

    def __init__(self, interval: float = 0.25) -> None:
        self.interval = interval
        self._last_tick: float | None = None
        self._last_lag = 0.0

    async def run(self) -> None:
        """Measure until cancelled."""
        if self._last_tick is None:  # else running() started the clock already
            self._last_tick = time.monotonic()
        try:
            while True:
                await asyncio.sleep(self.interval)
                now = time.monotonic()
                self._last_lag = max(now - self._last_tick - self.interval, 0.0)
                self._last_tick = now
        finally:
            self._last_tick = None

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Run the monitor in a background task for the duration of the block."""
        # The clock starts now: a loop blocked before the task first runs is a stall too.
        self._last_tick = time.monotonic()
        task = asyncio.create_task(self.run(), name="consumergroup-loop-lag")
        try:
            yield
        finally:
            await cancel_and_wait(task)

    def lag(self) -> float | None:
        """The loop's scheduling delay (s); None while the monitor is not running."""
        if self._last_tick is None:
            return None
        overdue = time.monotonic() - self._last_tick - self.interval
        return max(self._last_lag, overdue, 0.0)


def prometheus_available() -> bool:
    """Whether ``prometheus_client`` is installed (the ``[prometheus]`` extra)."""
    return importlib.util.find_spec("prometheus_client") is not None


class ServiceHealth:
    """The answers of ``GET /health/live``, ``/health/ready`` and ``/metrics``.

    With ``metrics`` on and ``prometheus_client`` installed, every group added is
    exported to ``registry`` (default: prometheus_client's global REGISTRY) from
    the moment it is added, so no event before the first scrape is missed.
    """

    def __init__(
        self,
        groups: Sequence[AnyGroup] = (),
        *,
        stall_threshold: float = STALL_THRESHOLD,
        registry: CollectorRegistry | None = None,
        metrics: bool = True,
    ) -> None:
        if not stall_threshold > 0:
            raise ConfigurationError(
                f"stall_threshold must be > 0 seconds, got {stall_threshold!r}"
            )
        self.stall_threshold = stall_threshold
        self.monitor = LoopLagMonitor()
        self.groups: list[AnyGroup] = []
        self.exporter: GroupMetrics | None = None
        if metrics and prometheus_available():
            from ..metrics import GroupMetrics

            self.exporter = GroupMetrics.of(registry)
        self.add(groups)

    def add(self, groups: Sequence[AnyGroup]) -> None:
        """Report (and export) these groups too."""
        for group in groups:
            if group not in self.groups:
                self.groups.append(group)
                if self.exporter is not None:
                    self.exporter.track(group)

    def live(self) -> tuple[int, JSON]:
        """200 while the loop's lag is under the threshold, no group has FAILED and no
        abandoned handler runs on; else 503 (``stalled``, ``failed`` with each failed
        group's reason, or ``runaway`` with each group's count of handlers that ignored
        their cancellation), so that an orchestrator restarts a process whose group gave
        up for good or that carries a task nothing can end."""
        lag = self.monitor.lag()
        stalled = lag is not None and lag > self.stall_threshold
        snapshots = [g.stats() for g in self.groups]
        failed = [
            {"group_id": s.group_id, "error": s.error}
            for s in snapshots
            if s.state is GroupState.FAILED
        ]
        runaway = [
            {"group_id": s.group_id, "runaway_handlers": s.runaway_handlers}
            for s in snapshots
            if s.runaway_handlers
        ]
        status = "stalled" if stalled else "failed" if failed else "runaway" if runaway else "alive"
        body: JSON = {"status": status, "loop_lag": lag, "stall_threshold": self.stall_threshold}
        if failed:
            body["failed"] = failed
        if runaway:
            body["runaway"] = runaway
        return (200 if status == "alive" else 503), body

    def ready(self) -> tuple[int, JSON]:
        """200 only while every group is STABLE with claims and (exactly-once) its
        transaction is not aborting in a row without progress; 503 with the reasons else."""
        groups = []
        for group in self.groups:
            stats = group.stats()
            stalled = isinstance(stats, GroupStats) and stats.transaction_aborts >= STALLED_AFTER
            ready = stats.state is GroupState.STABLE and bool(stats.partitions) and not stalled
            groups.append({"ready": ready, **stats.as_dict()})
        all_ready = bool(groups) and all(g["ready"] for g in groups)
        body: JSON = {"status": "ready" if all_ready else "unavailable", "groups": groups}
        return (200 if all_ready else 503), body

    def metrics(self) -> tuple[bytes, str]:
        """The Prometheus text exposition of the registry, and its content type."""
        from prometheus_client import generate_latest
        from prometheus_client.exposition import CONTENT_TYPE_LATEST

        if self.exporter is None:
            raise RuntimeError("metrics are off (metrics=False, or prometheus_client missing)")
        return generate_latest(self.exporter.registry), CONTENT_TYPE_LATEST
