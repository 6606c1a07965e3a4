"""aiohttp: run consumer groups with a ``web.Application``, and serve health and metrics.

``pip install 'consumergroup[aiohttp]'`` (and ``[prometheus]`` for ``/metrics``)::

    app = web.Application()
    setup_consumer_group(app, group, ["orders"], OrderHandler(totals))
    web.run_app(app)

:func:`setup_consumer_group` adds a ``cleanup_ctx`` that starts the groups'
``run()`` in background tasks when the app starts (startup does not wait for
the join) and closes them on shutdown (final commit, LeaveGroup, bounded by
``close_timeout``), plus the routes ``GET /health/live``, ``GET /health/ready``
and ``GET /metrics`` with the same meaning as the FastAPI integration's. Call
it again on the same app to run more groups with other topics or handlers: they
join the same routes. A group that fails for good shows in readiness; the
server keeps serving. ``app[CONSUMER_GROUPS]`` lists the groups (no globals).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING

try:
    from aiohttp import web
except ImportError as exc:
    raise ImportError(
        "consumergroup.integrations.aiohttp needs aiohttp: pip install 'consumergroup[aiohttp]'"
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

__all__ = ["CONSUMER_GROUPS", "setup_consumer_group"]


class _Service:
    """What one application runs and reports: its groups' runner and health."""

    def __init__(self, runner: GroupRunner, health: ServiceHealth) -> None:
        self.runner = runner
        self.health = health

    async def lifecycle(self, app: web.Application) -> AsyncIterator[None]:
        """The cleanup_ctx: start the monitor and the groups, then close them."""
        async with self.health.monitor.running():
            self.runner.start()
            try:
                yield
            finally:
                await self.runner.stop()

    async def live(self, request: web.Request) -> web.Response:
        """GET /health/live."""
        status, body = self.health.live()
        return web.json_response(body, status=status)

    async def ready(self, request: web.Request) -> web.Response:
        """GET /health/ready."""
        status, body = self.health.ready()
        return web.json_response(body, status=status)

    async def metrics(self, request: web.Request) -> web.Response:
        """GET /metrics."""
        payload, content_type = self.health.metrics()
        # aiohttp wants the charset apart from the media type.
        media_type, _, charset = content_type.partition("; charset=")
        return web.Response(body=payload, content_type=media_type, charset=charset or None)


_SERVICE = web.AppKey("consumergroup_service", _Service)
#: ``app[CONSUMER_GROUPS]``: the groups :func:`setup_consumer_group` runs on this app.
CONSUMER_GROUPS = web.AppKey("consumer_groups", list[AnyGroup])


def setup_consumer_group(
    app: web.Application,
    group_or_groups: Groups,
    topics: Sequence[str],
    handler: Handler,
    *,
    concurrency: int | None = None,
    close_timeout: float = CLOSE_TIMEOUT,
    stall_threshold: float = STALL_THRESHOLD,
    registry: CollectorRegistry | None = None,
    metrics: bool = True,
    prefix: str = "",
) -> None:
    """Run the groups with ``app`` and add the health and metrics routes (under ``prefix``).

    A share group's handler is a ShareGroupHandler, run ``concurrency`` calls at once
    (default: its config's). The first call on an app fixes ``stall_threshold``,
    ``registry``, ``metrics``, ``close_timeout`` and ``prefix``; later calls only add
    groups.
    """
    service = app.get(_SERVICE)
    if service is None:
        service = _Service(
            GroupRunner(close_timeout),
            ServiceHealth(stall_threshold=stall_threshold, registry=registry, metrics=metrics),
        )
        app[_SERVICE] = service
        app.cleanup_ctx.append(service.lifecycle)
        app.router.add_get(f"{prefix}/health/live", service.live)
        app.router.add_get(f"{prefix}/health/ready", service.ready)
        if service.health.exporter is not None:
            app.router.add_get(f"{prefix}/metrics", service.metrics)
    service.runner.add(group_or_groups, topics, handler, concurrency=concurrency)
    service.health.add(as_groups(group_or_groups))
    app[CONSUMER_GROUPS] = service.runner.groups
