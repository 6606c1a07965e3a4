"""An order-processing FastAPI service: a consumer group in the app's lifespan.

    python examples/fastapi_service.py [BOOTSTRAP] [--topic T] [--group G] [--port P]

Consumes the ``orders`` topic, keeps running totals in memory and serves them at
``GET /stats``, next to ``GET /health/live``, ``GET /health/ready`` and
``GET /metrics`` (Prometheus). Listens on 127.0.0.1 (uvicorn) until Ctrl-C or
SIGTERM, then closes the group: final commit, LeaveGroup, bounded.

BOOTSTRAP (``host:port``) comes from the argument or ``$KAFKA_BOOTSTRAP_SERVERS``;
with neither, an embedded broker starts with 60 orders in the topic. Needs FastAPI,
prometheus_client, the embedded broker and uvicorn: from a clone, ``make install
EXTRAS=fastapi,prometheus && .venv/bin/python -m pip install uvicorn``; from PyPI,
``pip install 'consumergroup[fastapi,prometheus,embedded]' uvicorn``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys

import uvicorn
from _orders import OrderHandler, OrderTotals, order_config, run_order_service
from fastapi import FastAPI, Request

import consumergroup as cg
from consumergroup.integrations.fastapi import ConsumerGroupLifespan, health_router


def create_app(bootstrap: str, topic: str = "orders", group_id: str = "order-service") -> FastAPI:
    """The service: the group runs in the lifespan; the routes read what the handler writes."""
    totals = OrderTotals()
    group = cg.ConsumerGroup([bootstrap], group_id, order_config())
    # Startup does not wait for the join: /health/ready says when the group is STABLE.
    app = FastAPI(
        title="orders",
        lifespan=ConsumerGroupLifespan(group, [topic], OrderHandler(totals), close_timeout=10.0),
    )
    app.state.totals = totals  # the same object the handler was given
    app.include_router(health_router(group))

    @app.get("/stats")
    async def stats(request: Request) -> dict[str, object]:
        """The running totals of the orders consumed so far."""
        totals: OrderTotals = request.app.state.totals
        return totals.as_dict()

    return app


async def serve(bootstrap: str, args: argparse.Namespace) -> None:
    """Run the app under uvicorn on 127.0.0.1 until Ctrl-C / SIGTERM."""
    app = create_app(bootstrap, args.topic, args.group)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=args.port))
    # The signals are cg.run()'s: it cancels us, and we ask uvicorn for its graceful
    # shutdown (the lifespan closes the group) instead of cancelling it in mid-serve.
    server.capture_signals = contextlib.nullcontext  # type: ignore[method-assign]
    serving = asyncio.create_task(server.serve())
    try:
        await asyncio.shield(serving)
    finally:
        server.should_exit = True
        await serving


def main(argv: list[str] | None = None) -> int:
    return run_order_service(argv, framework="FastAPI", serve=serve, port=8000)


if __name__ == "__main__":
    sys.exit(main())
