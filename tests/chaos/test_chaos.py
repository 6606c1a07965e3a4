"""The short chaos profiles as part of ``make test``: on the embedded broker (11 network and
member fault cycles, 3-4 member processes) and on the suite's 3-node Apache Kafka (every
broker and member fault once: a rolling restart, a partition leader and the coordinator
killed, partitions added, members killed, frozen, joining and leaving), for each protocol.

``make chaos`` runs the long ones. Reproduce a run with ``CHAOS_SEED=<seed>``; the
members' record, status and log files stay in the directory the report names when
the run breaks an invariant.
"""

from __future__ import annotations

import os
import shutil

import pytest

from consumergroup.testing import KafkaCluster
from tests.chaos.driver import PROFILES, ChaosRun

pytestmark = [pytest.mark.chaos, pytest.mark.slow]

SEED = int(os.environ.get("CHAOS_SEED", "20261123"))


async def _passes(run: ChaosRun) -> None:
    report = await run.run()
    print(report.format())
    assert not report.violations, report.format()
    assert report.cycles == run.profile.cycles
    shutil.rmtree(run.workdir)  # kept when an invariant broke, for the post-mortem


@pytest.mark.timeout(420)
async def test_short_chaos_profile_keeps_every_invariant() -> None:
    await _passes(ChaosRun(PROFILES["tansu"]["short"], SEED))


# Two workers share the three runs (about 4 min each at load 23): eager and cooperative
# on a 3-node cluster of their own (xdist group kafka3-chaos), consumer with the other
# 3-node tests (group kafka3, about 3 min at load 16). Queued all on one worker, they
# made its queue the longest of the parallel run.
@pytest.mark.kafka
@pytest.mark.timeout(480)
@pytest.mark.parametrize(
    "protocol",
    [
        pytest.param("eager", marks=pytest.mark.xdist_group("kafka3-chaos")),
        pytest.param("cooperative", marks=pytest.mark.xdist_group("kafka3-chaos")),
        pytest.param("consumer", marks=pytest.mark.xdist_group("kafka3")),
    ],
)
async def test_short_kafka_chaos_profile_keeps_every_invariant(
    kafka_cluster3: KafkaCluster, protocol: str
) -> None:
    """On a 3-node cluster (a replicated one: leader elections, coordinator moves, clean
    and hard restarts exist only there; the embedded broker is one node)."""
    await _passes(
        ChaosRun(PROFILES["kafka"]["short"], SEED, protocol=protocol, cluster=kafka_cluster3)
    )
