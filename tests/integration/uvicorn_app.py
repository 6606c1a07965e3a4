"""The FastAPI app of ``test_event_loops.py``, for ``uvicorn --factory``: what a user deploys.

One group from the environment (``CG_BOOTSTRAP``, ``CG_TOPIC``, ``CG_GROUP``) run by
:class:`~consumergroup.integrations.fastapi.ConsumerGroupLifespan`, the health routes, and
``GET /count``: the records handled so far and the module of the loop serving it.
"""

from __future__ import annotations

import asyncio
import os

from fastapi import FastAPI

import consumergroup as cg
from consumergroup.integrations.fastapi import ConsumerGroupLifespan, health_router
from tests.integration.group_support import group_config


class Counter(cg.ConsumerGroupHandler):
    """Counts and marks every record."""

    def __init__(self) -> None:
        self.count = 0

    async def consume_claim(
        self, session: cg.ConsumerGroupSession, claim: cg.ConsumerGroupClaim
    ) -> None:
        async for message in claim.messages():
            self.count += 1
            session.mark_message(message)


def make_app() -> FastAPI:
    """The app (``uvicorn --factory tests.integration.uvicorn_app:make_app``)."""
    group = cg.ConsumerGroup([os.environ["CG_BOOTSTRAP"]], os.environ["CG_GROUP"], group_config())
    counter = Counter()
    app = FastAPI(
        lifespan=ConsumerGroupLifespan(group, [os.environ["CG_TOPIC"]], counter, close_timeout=10)
    )
    app.include_router(health_router(group))

    @app.get("/count")
    async def count() -> dict[str, object]:
        return {"count": counter.count, "loop": type(asyncio.get_running_loop()).__module__}

    return app
