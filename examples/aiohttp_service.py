"""An order-processing aiohttp service: a consumer group in the app's cleanup context.

    python examples/aiohttp_service.py [BOOTSTRAP] [--topic T] [--group G] [--port P]

Consumes the ``orders`` topic, keeps running totals in memory and serves them at
``GET /stats``, next to ``GET /health/live``, ``GET /health/ready`` and
``GET /metrics`` (Prometheus). Listens on 127.0.0.1 until Ctrl-C or SIGTERM, then
closes the group: final commit, LeaveGroup, bounded.

BOOTSTRAP (``host:port``) comes from the argument or ``$KAFKA_BOOTSTRAP_SERVERS``;
with neither, an embedded broker starts with 60 orders in the topic. Needs aiohttp,
prometheus_client and the embedded broker: from a clone, ``make install
EXTRAS=aiohttp,prometheus``; from PyPI,
``pip install 'consumergroup[aiohttp,prometheus,embedded]'``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from _orders import OrderHandler, OrderTotals, order_config, run_order_service
from aiohttp import web

import consumergroup as cg
from consumergroup.integrations.aiohttp import setup_consumer_group

TOTALS = web.AppKey("totals", OrderTotals)


async def stats(request: web.Request) -> web.Response:
    """The running totals of the orders consumed so far."""
    return web.json_response(request.app[TOTALS].as_dict())


def create_app(
    bootstrap: str, topic: str = "orders", group_id: str = "order-service"
) -> web.Application:
    """The service: the group runs in a cleanup_ctx; the routes read what the handler writes."""
    totals = OrderTotals()
    app = web.Application()
    app[TOTALS] = totals  # the same object the handler was given
    group = cg.ConsumerGroup([bootstrap], group_id, order_config())
    # Adds the cleanup_ctx (start without waiting for the join; close on shutdown)
    # and GET /health/live, /health/ready, /metrics.
    setup_consumer_group(app, group, [topic], OrderHandler(totals), close_timeout=10.0)
    app.router.add_get("/stats", stats)
    return app


async def serve(bootstrap: str, args: argparse.Namespace) -> None:
    """Serve on 127.0.0.1 until Ctrl-C / SIGTERM, then shut the app down (closing the group)."""
    runner = web.AppRunner(create_app(bootstrap, args.topic, args.group))
    await runner.setup()  # runs the cleanup_ctx's start: the group starts joining
    try:
        await web.TCPSite(runner, "127.0.0.1", args.port).start()
        print(f"serving on http://127.0.0.1:{args.port}", flush=True)
        await asyncio.Event().wait()  # until cg.run() cancels us on Ctrl-C / SIGTERM
    finally:
        await runner.cleanup()  # the cleanup_ctx's end: final commit, LeaveGroup
    print("stopped", flush=True)


def main(argv: list[str] | None = None) -> int:
    return run_order_service(argv, framework="aiohttp", serve=serve, port=8080)


if __name__ == "__main__":
    sys.exit(main())
