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
from consumergroup.testing import EmbeddedBroker, KafkaCluster

# Kafka's jars (and Maven's repository) go to the repo's git-ignored cache unless told otherwise.
os.environ.setdefault(
    "CONSUMERGROUP_CACHE", os.path.join(os.path.dirname(os.path.dirname(__file__)), ".cache")
)


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


@pytest_asyncio.fixture(scope="session")
async def kafka_cluster() -> AsyncIterator[KafkaCluster]:
    """A one-node Apache Kafka (KRaft), shared by the session (settings: KafkaCluster's doc)."""
    async with KafkaCluster(nodes=1) as cluster:
        yield cluster


@pytest_asyncio.fixture(scope="session")
async def kafka_cluster3() -> AsyncIterator[KafkaCluster]:
    """A three-node Apache Kafka (replication factor 3, min.insync.replicas=2)."""
    async with KafkaCluster(nodes=3) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def on_tansu() -> bool:
    """True when the tests run on the embedded Tansu broker (for its documented quirks)."""
    return not os.environ.get("KAFKA_BOOTSTRAP_SERVERS") and not _docker_answers()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Iterator[pytest.TestReport]:
    """A failed test's report shows the tail of each Kafka node's log it used."""
    report: pytest.TestReport = yield
    if report.failed:
        for value in getattr(item, "funcargs", {}).values():
            if isinstance(value, KafkaCluster):
                report.sections.append(("Kafka log tail", value.log_tail()))
    return report


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
