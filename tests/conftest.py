"""Which broker the integration tests use, and shared helpers.

In order: ``KAFKA_BOOTSTRAP_SERVERS`` (an existing cluster), else a
testcontainers Apache Kafka when a Docker engine answers, else the embedded
Tansu broker (the default: no Docker runs on our machines or in CI).
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import pytest
import pytest_asyncio

from consumergroup.client import Client
from consumergroup.testing import EmbeddedBroker


def _docker_answers() -> bool:
    try:
        done = subprocess.run(["docker", "info"], capture_output=True, timeout=5, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


@pytest.fixture(scope="session")
def kafka_container() -> Iterator[str | None]:
    """Bootstrap of a testcontainers Kafka, or None where no Docker engine answers."""
    if os.environ.get("KAFKA_BOOTSTRAP_SERVERS") or not _docker_answers():
        yield None
        return
    from testcontainers.kafka import KafkaContainer

    with KafkaContainer() as container:
        yield container.get_bootstrap_server()


@pytest_asyncio.fixture(scope="session")
async def bootstrap(kafka_container: str | None) -> AsyncIterator[str]:
    """``host:port`` of the broker every integration test talks to."""
    env = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if env:
        yield env.split(",")[0]
    elif kafka_container:
        yield kafka_container
    else:
        async with EmbeddedBroker() as broker:
            yield broker.bootstrap


@pytest.fixture(scope="session")
def on_tansu() -> bool:
    """True when the tests run on the embedded Tansu broker (for its documented quirks)."""
    return not os.environ.get("KAFKA_BOOTSTRAP_SERVERS") and not _docker_answers()


TopicFactory = Callable[..., Awaitable[str]]


@pytest_asyncio.fixture
async def new_topic(bootstrap: str) -> AsyncIterator[TopicFactory]:
    """``await new_topic(partitions=3)`` -> the name of a fresh, uniquely named topic."""

    async with Client([bootstrap]) as client:

        async def make(partitions: int = 1, prefix: str = "t") -> str:
            name = f"{prefix}-{uuid.uuid4().hex[:10]}"
            await client.create_topic(name, partitions)
            return name

        yield make


def unique(prefix: str = "g") -> str:
    """A unique group id / name for one test."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"
