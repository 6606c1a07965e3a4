"""Which brokers the integration tests use, and shared helpers.

Every test that asks for ``bootstrap`` runs once per broker: the embedded Tansu
broker and a one-node Apache Kafka (:class:`KafkaCluster`, jars fetched from
Maven Central into ``.cache/`` on first use). ``--broker tansu|kafka|both``
(default both) narrows the choice. A test that holds on one broker only is marked
``@pytest.mark.tansu_only("why")`` or ``@pytest.mark.kafka_only("why")``.
``KAFKA_BOOTSTRAP_SERVERS`` (an existing cluster) replaces both.
"""

from __future__ import annotations

import asyncio
import os
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

BROKERS = ("tansu", "kafka")
_running_kafka: list[KafkaCluster] = []  # the session's one-node cluster, for failure reports


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--broker",
        choices=(*BROKERS, "both"),
        default="both",
        help="run the integration tests on the embedded Tansu broker, on Apache Kafka, "
        "or on both (default)",
    )


def pytest_configure(config: pytest.Config) -> None:
    # pytest-xdist (3.8) groups a test under --dist loadgroup by writing "@group" into the
    # test's Node._nodeid; pytest 9.2 keeps node ids elsewhere, so the groups were silently
    # ignored and every worker that drew one of a group's tests started its cluster again
    # (pytest-dev/pytest-xdist#1386). pyproject pins pytest below 9.2; this says so at once.
    from _pytest.nodes import Node

    dist = config.getoption("dist", default="no")
    if dist == "loadgroup" and "_nodeid" not in getattr(Node, "__slots__", ("_nodeid",)):
        raise pytest.UsageError(
            f"--dist loadgroup would ignore every xdist_group on pytest {pytest.__version__} "
            "(pytest-dev/pytest-xdist#1386): install pyproject's pin, pytest<9.2 "
            "(make .venv/.installed after touching setup.py), or run with -n 0"
        )
    for broker in BROKERS:
        config.addinivalue_line(
            "markers",
            f"{broker}_only(why): the test holds on {broker} only, for the reason given",
        )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrise every test that reaches ``broker`` (through ``bootstrap``) per broker."""
    if "broker" not in metafunc.fixturenames:
        return
    if os.environ.get("KAFKA_BOOTSTRAP_SERVERS"):
        chosen: list[str] = ["external"]
    else:
        option = metafunc.config.getoption("--broker")
        chosen = list(BROKERS) if option == "both" else [option]
        for broker in BROKERS:
            if metafunc.definition.get_closest_marker(f"{broker}_only"):
                chosen = [b for b in chosen if b == broker]
    # Session scope: pytest runs every test of one broker before starting the next.
    metafunc.parametrize("broker", chosen, scope="session")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``--broker tansu`` also skips the tests that start Apache Kafka themselves."""
    if config.getoption("--broker") != "tansu":
        return
    skip = pytest.mark.skip(reason="--broker tansu: the test needs Apache Kafka")
    for item in items:
        if {"kafka_cluster", "kafka_cluster3", "kafka_cluster_tv1"} & set(
            getattr(item, "fixturenames", ())
        ):
            item.add_marker(skip)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Before the Spark tests: bytecode in pyspark's zip (see tests/spark_bytecode.py) and
    the JVM settings of every Spark process they start (tests/spark_jvm.py)."""
    if any(item.get_closest_marker("spark") for item in session.items):
        from tests import spark_jvm
        from tests.spark_bytecode import compile_pyspark_zip

        compile_pyspark_zip()
        spark_jvm.configure()


if os.environ.get("CONSUMERGROUP_TEST_LOOP") == "uvloop":

    def pytest_asyncio_loop_factories(
        config: pytest.Config, item: pytest.Item
    ) -> dict[str, Callable[[], asyncio.AbstractEventLoop]]:
        """Every async test on uvloop (uvicorn's loop when installed), not asyncio's."""
        import uvloop

        return {"uvloop": uvloop.new_event_loop}


@pytest.fixture(scope="session")
def bootstrap(broker: str, request: pytest.FixtureRequest) -> str:
    """``host:port`` of the broker the integration test talks to."""
    if broker == "external":
        return os.environ["KAFKA_BOOTSTRAP_SERVERS"].split(",")[0]
    # Looked up by name: a run on one broker never starts the other.
    started: EmbeddedBroker | KafkaCluster = request.getfixturevalue(f"{broker}_broker")
    return started.bootstrap


@pytest_asyncio.fixture(scope="session")
async def tansu_broker() -> AsyncIterator[EmbeddedBroker]:
    """The embedded Tansu broker, shared by the session."""
    async with EmbeddedBroker() as broker:
        yield broker


@pytest.fixture(scope="session")
def kafka_broker(kafka_cluster: KafkaCluster) -> KafkaCluster:
    """The one-node Apache Kafka the ``bootstrap`` tests use."""
    return kafka_cluster


@pytest_asyncio.fixture(scope="session")
async def kafka_cluster() -> AsyncIterator[KafkaCluster]:
    """A one-node Apache Kafka (KRaft), shared by the session (settings: KafkaCluster's doc)."""
    async with KafkaCluster(nodes=1, quick_share_groups=True) as cluster:
        _running_kafka.append(cluster)
        yield cluster
        _running_kafka.remove(cluster)


#: The racks of the nodes of ``kafka_cluster3``.
RACKS = ("rack-a", "rack-b", "rack-c")


def still_to_run(item: pytest.Item) -> list[pytest.Item]:
    """The tests this process will run after ``item``, as far as it knows now: under
    pytest-xdist, those the controller has sent its worker (with ``--dist loadgroup`` an
    xdist group's tests are sent together, in one batch), else the rest of the session's."""
    from xdist.remote import WorkerInteractor

    items = item.session.items
    for plugin in item.config.pluginmanager.get_plugins():
        if isinstance(plugin, WorkerInteractor):
            # The worker took the test after ``item`` off its queue before running ``item``.
            with plugin.torun.lock() as queued:
                indices = [plugin.nextitem_index, *queued]
            return [items[i] for i in indices if isinstance(i, int)]
    return items[items.index(item) + 1 :]


class WorkerShared:
    """A cluster the tests of one process share while any of them is still to run: the
    first test that asks starts it, and it is closed once no test queued here needs it
    (:meth:`release`), instead of idling to the end of the run (a 3-node cluster takes
    0.09 of a core doing nothing). A later test that asks starts it again."""

    def __init__(self, fixture: str, make: Callable[[], KafkaCluster]) -> None:
        self.fixture = fixture
        self.make = make
        self.cluster: KafkaCluster | None = None

    async def acquire(self) -> KafkaCluster:
        if self.cluster is None:
            cluster = self.make()
            await cluster.start()
            self.cluster = cluster
        return self.cluster

    async def release(self, item: pytest.Item) -> None:
        """Close the cluster unless a test queued after ``item`` uses the fixture."""
        if not any(self.fixture in getattr(i, "fixturenames", ()) for i in still_to_run(item)):
            await self.close()

    async def close(self) -> None:
        cluster, self.cluster = self.cluster, None
        if cluster is not None:
            await cluster.close()


@pytest_asyncio.fixture(scope="session")
async def _kafka_cluster3_shared() -> AsyncIterator[WorkerShared]:
    shared = WorkerShared("kafka_cluster3", lambda: KafkaCluster(nodes=3, racks=RACKS))
    try:
        yield shared
    finally:
        await shared.close()


@pytest_asyncio.fixture
async def kafka_cluster3(
    _kafka_cluster3_shared: WorkerShared, request: pytest.FixtureRequest
) -> AsyncIterator[KafkaCluster]:
    """A three-node Apache Kafka (replication factor 3, min.insync.replicas=2), node i in
    rack ``RACKS[i]`` with the rack-aware replica selector (clients naming no rack read
    from leaders, as on any cluster). Shared by the tests of a worker (xdist groups
    ``kafka3`` and ``kafka3-chaos``), and stopped after the last one (:class:`WorkerShared`)."""
    yield await _kafka_cluster3_shared.acquire()
    await _kafka_cluster3_shared.release(request.node)


@pytest_asyncio.fixture(scope="module")
async def kafka_cluster_tv1() -> AsyncIterator[KafkaCluster]:
    """A one-node Apache Kafka running the classic transaction protocol
    (``transaction.version=1``; the other clusters run KIP-890's v2, Kafka 4.x's default).
    Module scope: its one module (xdist group ``kafka-tv1``) runs it, not the rest of the run."""
    async with KafkaCluster(nodes=1, features={"transaction.version": 1}) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def on_tansu(broker: str) -> bool:
    """True when the test runs on the embedded Tansu broker (for its documented quirks)."""
    return broker == "tansu"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Iterator[pytest.TestReport]:
    """A failed test's report shows the tail of each Kafka node's log it used."""
    report: pytest.TestReport = yield
    if report.failed:
        funcargs = getattr(item, "funcargs", {})
        clusters = [v for v in funcargs.values() if isinstance(v, KafkaCluster)]
        if funcargs.get("broker") == "kafka":
            clusters += _running_kafka
        for cluster in dict.fromkeys(clusters):
            report.sections.append(("Kafka log tail", cluster.log_tail()))
    return report


TopicFactory = Callable[..., Awaitable[str]]


@pytest_asyncio.fixture
async def new_topic(bootstrap: str) -> AsyncIterator[TopicFactory]:
    """``await new_topic(partitions=3)`` -> the name of a fresh, uniquely named topic
    (``configs={"max.message.bytes": "2048"}``: with those topic configs)."""

    async with Client([bootstrap]) as client:

        async def make(
            partitions: int = 1, prefix: str = "t", configs: dict[str, str] | None = None
        ) -> str:
            name = f"{prefix}-{uuid.uuid4().hex[:10]}"
            await client.create_topic(name, partitions, configs=configs)
            return name

        yield make


def unique(prefix: str = "g") -> str:
    """A unique group id / name for one test."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"
