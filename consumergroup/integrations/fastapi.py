"""FastAPI: run consumer groups with the app, and serve health and metrics.

``pip install 'consumergroup[fastapi]'`` (and ``[prometheus]`` for ``/metrics``)::

    group = cg.ConsumerGroup(["127.0.0.1:9092"], "orders", config)   # or a cg.ShareGroup
    app = FastAPI(lifespan=ConsumerGroupLifespan(group, ["orders"], OrderHandler(totals)))
    app.include_router(health_router(group))

* :class:`ConsumerGroupLifespan` starts each group's ``run()`` in a background task
  when the app starts (startup does not wait for the join) and closes the groups
  when it stops (final commit, LeaveGroup), bounded by ``close_timeout``. A group
  that fails for good is logged and shows in readiness; the server keeps serving.
* :func:`health_router`: ``GET /health/live`` (200 unless the event loop stalls),
  ``GET /health/ready`` (200 only while every group is STABLE with claims, else
  503; JSON from ``group.stats()``), and ``GET /metrics`` when ``prometheus_client``
  is installed.

No globals: the handler gets what it needs through its constructor (the same
objects the routes read, e.g. stored on ``app.state``), and the lifespan's state
carries the groups (``request.state.consumer_groups``).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any, Self

try:
    from fastapi import APIRouter
    from fastapi.responses import JSONResponse, Response
except ImportError as exc:
    raise ImportError(
        "consumergroup.integrations.fastapi needs FastAPI: pip install 'consumergroup[fastapi]'"
    ) from exc

from ._service import (
    CLOSE_TIMEOUT,
    STALL_THRESHOLD,
    AnyGroup,
    GroupRunner,
    Groups,
    Handler,
    ServiceHealth,
    as_groups,
)

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry


__all__ = ["ConsumerGroupLifespan", "health_router"]


class ConsumerGroupLifespan:
    """A FastAPI/Starlette ``lifespan`` that runs consumer groups alongside the app.

    ``FastAPI(lifespan=ConsumerGroupLifespan(group, ["topic"], Handler()))``; more
    groups with other topics or handlers: ``.add(group2, ["other"], Other())``.
    Inside an app's own lifespan: ``async with cg_lifespan(app) as state: yield state``.
    The lifespan state is ``{"consumer_groups": [...]}``.
    """

    def __init__(
        self,
        group_or_groups: Groups,
        topics: Sequence[str],
        handler: Handler,
        *,
        close_timeout: float = CLOSE_TIMEOUT,
        concurrency: int | None = None,
    ) -> None:
        self._runner = GroupRunner(close_timeout)
        self._runner.add(group_or_groups, topics, handler, concurrency=concurrency)

    def add(
        self,
        group_or_groups: Groups,
        topics: Sequence[str],
        handler: Handler,
        *,
        concurrency: int | None = None,
    ) -> Self:
        """Also run these groups, on ``topics`` with ``handler`` (a share group with
        ``concurrency`` handler calls at once)."""
        self._runner.add(group_or_groups, topics, handler, concurrency=concurrency)
        return self

    @property
    def groups(self) -> list[AnyGroup]:
        """The groups this lifespan runs."""
        return self._runner.groups

    @contextlib.asynccontextmanager
    async def __call__(self, app: object) -> AsyncIterator[dict[str, Any]]:
        """Start the groups in the background, yield to the app, close them on shutdown."""
        self._runner.start()
        try:
            yield {"consumer_groups": self._runner.groups}
        finally:
            await self._runner.stop()


def health_router(
    group_or_groups: Groups,
    *,
    stall_threshold: float = STALL_THRESHOLD,
    registry: CollectorRegistry | None = None,
    metrics: bool = True,
) -> APIRouter:
    """``GET /health/live``, ``GET /health/ready`` and (with prometheus_client) ``GET /metrics``.

    * live: 200 ``{"status": "alive", "loop_lag": s}`` unless the event loop's lag
      exceeds ``stall_threshold`` seconds (then 503 ``"stalled"``);
    * ready: 200 while every group is STABLE with at least one claimed partition,
      else 503; the body lists each group's ``stats().as_dict()`` (state, claims,
      lag, ``error`` when it failed) with a ``ready`` flag;
    * metrics: the Prometheus exposition of ``registry`` (default: the global
      REGISTRY), where the groups are exported; ``metrics=False`` leaves it out.

    Include it with a prefix to move the paths: ``app.include_router(r, prefix="/ops")``.
    The router's own lifespan runs the loop-lag monitor (FastAPI merges it into the app's).
    """
    health = ServiceHealth(
        as_groups(group_or_groups),
        stall_threshold=stall_threshold,
        registry=registry,
        metrics=metrics,
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: object) -> AsyncIterator[None]:
        async with health.monitor.running():
            yield

    router = APIRouter(lifespan=lifespan)

    @router.get("/health/live")
    async def live() -> JSONResponse:
        """Liveness: the process and its event loop are responsive."""
        status, body = health.live()
        return JSONResponse(body, status_code=status)

    @router.get("/health/ready")
    async def ready() -> JSONResponse:
        """Readiness: every consumer group is STABLE and claims partitions."""
        status, body = health.ready()
        return JSONResponse(body, status_code=status)

    if health.exporter is not None:

        @router.get("/metrics", include_in_schema=False)
        async def metrics_route() -> Response:
            """Prometheus metrics (text exposition format)."""
            payload, content_type = health.metrics()
            return Response(payload, media_type=content_type)

    return router
