"""What both service examples share: the orders, their totals, the handler, the command line.

An order is a JSON object ``{"order_id": "o-1", "customer": "c-2", "amount": 12.5}``.
The handler folds each one into :class:`OrderTotals`, an in-memory aggregate the
web service serves at ``GET /stats``. The handler gets the aggregate through its
constructor (no global), the same object the route reads.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from collections.abc import Awaitable, Callable

from _support import Standalone, run_example

import consumergroup as cg


class OrderTotals:
    """The running aggregate: orders and revenue, overall and per customer."""

    def __init__(self) -> None:
        self.orders = 0
        self.revenue = 0.0
        self.by_customer: defaultdict[str, float] = defaultdict(float)
        #: Records that were not orders (bad JSON, missing fields): skipped, counted.
        self.rejected = 0

    def add(self, value: bytes | None) -> None:
        """Fold one record's value in."""
        try:
            order = json.loads(value or b"")
            customer, amount = str(order["customer"]), float(order["amount"])
        except (ValueError, TypeError, KeyError):
            self.rejected += 1
            return
        self.orders += 1
        self.revenue += amount
        self.by_customer[customer] += amount

    def as_dict(self) -> dict[str, object]:
        """What ``GET /stats`` answers."""
        return {
            "orders": self.orders,
            "revenue": round(self.revenue, 2),
            "by_customer": {c: round(v, 2) for c, v in sorted(self.by_customer.items())},
            "rejected": self.rejected,
        }


class OrderHandler(cg.ConsumerGroupHandler):
    """Adds every order of its claims to ``totals``, in batches, marking each batch."""

    def __init__(self, totals: OrderTotals) -> None:
        self.totals = totals

    async def consume_claim(
        self, session: cg.ConsumerGroupSession, claim: cg.ConsumerGroupClaim
    ) -> None:
        async for batch in claim.batches():  # ends when the session ends
            for msg in batch:
                self.totals.add(msg.value)
            session.mark_message(batch[-1])  # committed later (auto-commit, close)


def order_config() -> cg.Config:
    """The group's config: start at the oldest order; small timeouts for a quick join."""
    config = cg.Config(client_id="order-service")
    config.consumer.offsets.initial = cg.OFFSET_OLDEST
    config.consumer.group.session_timeout = 6.0  # small: the embedded broker joins faster
    config.consumer.group.heartbeat_interval = 1.0
    return config


def sample_order(i: int) -> bytes:
    """Order ``i`` of the standalone data: five customers, amounts 1.50 .. 7.50."""
    return json.dumps(
        {"order_id": f"o-{i}", "customer": f"customer-{i % 5}", "amount": 1.5 + i % 7}
    ).encode()


def run_order_service(
    argv: list[str] | None,
    *,
    framework: str,
    serve: Callable[[str, argparse.Namespace], Awaitable[object]],
    port: int,
) -> int:
    """The services' command line: ``[BOOTSTRAP] [--topic T] [--group G] [--port P]``.

    Without a bootstrap, an embedded broker holds 60 orders in the topic.
    """
    return run_example(
        argv,
        description=f"An order-processing {framework} service on a consumer group.",
        group="order-service",
        topic="orders",
        standalone=Standalone(records=60, value=sample_order),
        consume=serve,
        add_arguments=lambda p: p.add_argument("--port", type=int, default=port),
        service=True,
    )
