"""Exactly-once copiers on a 3-node Apache Kafka while a broker is bounced and a copier
is SIGKILLed and restarted (Kafka's own ``transactions_test.py`` shape, kept short).

Needs a replicated cluster: a bounced broker moves partition leaders and group and
transaction coordinators to the others, which a single node (or Tansu) cannot show.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator

import pytest

from consumergroup.client import Client
from consumergroup.testing import KafkaCluster
from tests.conftest import unique
from tests.helpers import produce, read_committed_records
from tests.integration.group_support import wait_for
from tests.integration.test_exactly_once import ROOT, assert_exactly_once, committed_through

pytestmark = [
    pytest.mark.slow,
    pytest.mark.kafka,
    pytest.mark.timeout(240),
    pytest.mark.xdist_group("kafka3"),  # one 3-node cluster per worker, shared
]

PARTITIONS = 6
OUT_PARTITIONS = 2
COUNT = 2400


class CopierProcess:
    """``tests.integration.copier_process`` in a child process; ``copied`` follows the
    JSON lines it prints."""

    def __init__(self, args: list[str]) -> None:
        self.args = args
        self.copied = 0
        self.child: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.child = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.integration.copier_process",
            *self.args,
            stdout=asyncio.subprocess.PIPE,
            cwd=ROOT,
        )
        self._reader = asyncio.create_task(self._read(self.child))

    async def _read(self, child: asyncio.subprocess.Process) -> None:
        assert child.stdout is not None
        while line := await child.stdout.readline():
            self.copied = max(self.copied, json.loads(line)["copied"])

    async def kill(self) -> None:
        if self.child is not None and self.child.returncode is None:
            self.child.kill()
            await self.child.wait()
        if self._reader is not None:
            await self._reader

    def alive(self) -> bool:
        assert self.child is not None
        if self.child.returncode is not None:
            raise AssertionError(f"a copier exited early ({self.child.returncode})")
        return True


@contextlib.asynccontextmanager
async def copiers(args: list[list[str]]) -> AsyncIterator[list[CopierProcess]]:
    procs = [CopierProcess(a) for a in args]
    try:
        for p in procs:
            await p.start()
        yield procs
    finally:
        for p in procs:
            await p.kill()


@pytest.mark.parametrize("protocol", ["cooperative", "consumer"])
async def test_copiers_through_a_broker_bounce_and_a_copier_kill(
    kafka_cluster3: KafkaCluster, protocol: str
) -> None:
    """Two copier processes copy a 6-partition topic (replication 3); the leader of
    input partition 0 is stopped with SIGTERM; meanwhile one copier is SIGKILLed
    mid-transaction and restarted with its transactional id (fencing its previous
    incarnation), then the broker comes back. The output read ``read_committed`` holds
    every input record exactly once, and the copies of each input partition in its
    order."""
    kc = kafka_cluster3
    source, out = unique("eos-in"), unique("eos-out")
    await kc.create_topic(source, PARTITIONS, replication_factor=3)
    await kc.create_topic(out, OUT_PARTITIONS, replication_factor=3)
    for p in range(PARTITIONS):
        values = [b"%d" % i for i in range(p, COUNT, PARTITIONS)]
        await produce(kc.bootstrap, source, values, partition=p, acks="all")
    group = unique("eos")
    tids = [unique("tid"), unique("tid")]

    def args(n: int) -> list[str]:
        common = ["--delay", "0.05", "--transaction-timeout", "6", "--protocol", protocol]
        return [kc.bootstrap, group, source, out, tids[n], *common]

    async with copiers([args(0), args(1)]) as (a, b):
        await wait_for(
            lambda: a.alive() and b.alive() and a.copied >= 50 and b.copied >= 50,
            90,
            "both copiers under way",
        )
        async with Client(kc.bootstrap.split(",")) as client:
            await client.refresh_metadata(source)
            leader = client.leader_id(source, 0)
        await kc.stop_node(leader)  # SIGTERM: a controlled shutdown
        mark = a.copied + b.copied
        await wait_for(
            lambda: a.alive() and b.alive() and a.copied + b.copied > mark + 50,
            90,
            "copying on without the bounced broker",
        )
        assert a.copied + b.copied < COUNT, "the faults must land mid-copy"
        await a.kill()  # SIGKILL, its transaction open, while the broker is down
        await a.start()  # the same transactional id: its old transaction is aborted
        await kc.start_node(leader)
        await committed_through(kc.bootstrap, group, COUNT)
    records = await read_committed_records(kc.bootstrap, out, OUT_PARTITIONS)
    assert_exactly_once([v for _, v in records], COUNT)
    for partition in range(OUT_PARTITIONS):
        copies = [int(v) for p, v in records if p == partition]
        for source_partition in range(PARTITIONS):
            seq = [i for i in copies if i % PARTITIONS == source_partition]
            assert seq == sorted(seq), (partition, source_partition)
