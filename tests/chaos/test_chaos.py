"""The short chaos profiles as part of ``make test``: on the embedded broker (11 network and
member fault cycles, 3-4 member processes) and on the suite's 3-node Apache Kafka, one run
per protocol, the broker and member faults shared out among the three runs (a rolling
restart, the coordinator killed, partitions added; members killed, frozen, joining and
leaving): every kind of fault once in ``make test``.

``make chaos`` runs the long ones (every kind with every protocol, many times), and
``make chaos CHAOS_ARGS="--broker kafka --profile short"`` the short Kafka profile (every
kind once with each protocol). Reproduce a run with ``CHAOS_SEED=<seed>``; the
members' record, status and log files stay in the directory the report names when
the run breaks an invariant.
"""

from __future__ import annotations

import dataclasses
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


# The Kafka faults of the short profile shared out among the protocols: each kind of broker
# fault (a broker restart is most of a run's time) with one protocol, member faults with
# each (a leave waits for a join: the runs start with their minimum of members). The
# consumer protocol meets the coordinator's death (its heartbeats and assignments go
# through it) and a partition count change (the coordinator's assignor sees it).
DECKS = {
    "eager": ("kill_coordinator", "join", "leave", "kill9"),
    "cooperative": ("bounce", "sigstop", "join", "leave"),
    "consumer": ("kill_coordinator", "add_partitions", "kill9", "sigstop"),
}


# Two workers share the three runs: eager and cooperative on a 3-node cluster of their own
# (xdist group kafka3-chaos), consumer with the other 3-node tests (group kafka3). Queued
# all on one worker, they made its queue the longest of the parallel run.
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
    deck = DECKS[protocol]
    profile = dataclasses.replace(PROFILES["kafka"]["short"], faults=deck, cycles=len(deck))
    await _passes(ChaosRun(profile, SEED, protocol=protocol, cluster=kafka_cluster3))
