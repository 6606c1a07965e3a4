"""Broker faults on a 3-node Apache Kafka (``cg.testing.KafkaCluster``), for the chaos run.

One node at a time is ever down: three nodes keep the KRaft quorum and
``min.insync.replicas=2`` through one loss, not two. Each fault waits, before it returns,
until the cluster is whole again (every node running, every partition of the chaos
topic and of ``__consumer_offsets`` led and fully in sync), as an operator's rolling
restart waits for no under-replicated partition before the next node.

* ``bounce``: a rolling restart, every node in turn stopped cleanly (SIGTERM: controlled
  shutdown, the controller moves the node's leaderships first) and started again;
* ``kill_leader`` / ``kill_coordinator``: SIGKILL the leader of a random partition of the
  topic, or the group's coordinator, and start it again after a while (the cluster
  notices a dead node only after its broker session timeout);
* ``add_partitions``: CreatePartitions, one or two more.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable

from consumergroup.client import Client
from consumergroup.errors import ConsumerGroupError, UnknownTopicOrPartitionError
from consumergroup.net.protocol import MetadataRequest
from consumergroup.testing import KafkaCluster
from tests.integration.test_topic_changes import grow

OFFSETS_TOPIC = "__consumer_offsets"
_UNKNOWN_TOPIC = UnknownTopicOrPartitionError.errno
#: How long the cluster may take to be whole again after a fault (JVM start on a loaded
#: machine, replicas catching up).
HEAL_TIMEOUT = 120.0


class BrokerFaults:
    """The broker-side faults of a chaos run against ``cluster``."""

    def __init__(
        self,
        cluster: KafkaCluster,
        topic: str,
        group: str,
        rng: random.Random,
        log: Callable[[str], None],
    ) -> None:
        self.cluster = cluster
        self.topic = topic
        self.group = group
        self.rng = rng
        self.log = log
        self.client = Client(cluster.bootstrap.split(","))

    async def __aenter__(self) -> BrokerFaults:
        await self.client.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        try:
            for node in range(self.cluster.nodes):  # never leave a node down
                if not self.cluster.running(node):
                    await self.cluster.start_node(node)
        finally:
            await self.client.close()

    # ------------------------------------------------------------------ faults

    async def bounce(self) -> str:
        """A rolling restart: each node stopped cleanly and started again, in turn."""
        order = list(range(self.cluster.nodes))
        self.rng.shuffle(order)
        for node in order:
            started = time.time()
            await self.cluster.stop_node(node)
            stopped = time.time()
            await self.cluster.start_node(node)
            await self.healthy()
            self.log(
                f"  node {node} bounced: stopped in {stopped - started:.1f}s, whole again "
                f"{time.time() - stopped:.1f}s later"
            )
        return f"bounce {'->'.join(map(str, order))}"

    async def kill_leader(self, down: float) -> str:
        """SIGKILL the leader of a random partition; start it again after ``down`` s."""
        await self.client.refresh_metadata(self.topic)
        partitions = self.client.cached_partitions(self.topic) or [0]
        partition = self.rng.choice(partitions)
        node = self.client.leader_id(self.topic, partition)
        await self._kill(node, down)
        return f"kill_leader node {node} (partition {partition}) for {down:.1f}s"

    async def kill_coordinator(self, down: float) -> str:
        """SIGKILL the group's coordinator; start it again after ``down`` s."""
        self.client.invalidate_coordinator(self.group)
        node = (await self.client.coordinator(self.group)).node_id
        assert node is not None
        await self._kill(node, down)
        return f"kill_coordinator node {node} for {down:.1f}s"

    async def add_partitions(self) -> tuple[str, int]:
        """One or two more partitions; returns the description and the new count."""
        await self.client.refresh_metadata(self.topic)
        now = len(self.client.cached_partitions(self.topic) or ())
        total = now + self.rng.randint(1, 2)
        await grow(self.cluster.bootstrap.split(",")[0], self.topic, total)
        await self.healthy()
        return f"add_partitions {now}->{total}", total

    async def _kill(self, node: int, down: float) -> None:
        await self.cluster.kill_node(node)
        await asyncio.sleep(down)
        await self.cluster.start_node(node)
        await self.healthy()

    # ------------------------------------------------------------------ health

    async def healthy(self, timeout: float = HEAL_TIMEOUT) -> None:
        """Until every node runs and every partition of the topic and of the offsets topic
        has a leader and all its replicas in sync."""
        deadline = time.monotonic() + timeout
        problem = "no metadata yet"
        while time.monotonic() < deadline:
            problem = await self._problem()
            if not problem:
                return
            await asyncio.sleep(0.5)
        raise AssertionError(f"the cluster was not whole within {timeout}s: {problem}")

    async def _problem(self) -> str:
        """What keeps the cluster from being whole ("" when it is)."""
        down = [n for n in range(self.cluster.nodes) if not self.cluster.running(n)]
        if down:
            return f"nodes {down} not running"
        try:
            conn = await self.client.any()
            request = MetadataRequest([self.topic, OFFSETS_TOPIC], False)
            meta = (await conn.send(request)).to_object()
        except ConsumerGroupError as exc:
            return f"metadata: {exc}"
        if len(meta["brokers"]) < self.cluster.nodes:
            return f"{len(meta['brokers'])} brokers in the metadata"
        for topic in meta["topics"]:
            if topic["topic"] == OFFSETS_TOPIC and topic["error_code"] == _UNKNOWN_TOPIC:
                continue  # created with the first group lookup
            if topic["error_code"]:
                return f"{topic['topic']}: error {topic['error_code']}"
            for p in topic["partitions"]:
                if p["leader"] < 0 or sorted(p["isr"]) != sorted(p["replicas"]):
                    return (
                        f"{topic['topic']}-{p['partition']}: leader {p['leader']}, "
                        f"replicas {p['replicas']}, in sync {p['isr']}"
                    )
        return ""
