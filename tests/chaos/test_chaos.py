"""The short chaos profile (11 fault cycles, 3-4 member processes) as part of ``make test``.

``make chaos`` runs the long one. Reproduce a run with ``CHAOS_SEED=<seed>``; the
members' record, status and log files stay in the directory the report names when
the run breaks an invariant.
"""

from __future__ import annotations

import os
import shutil

import pytest

from tests.chaos.driver import PROFILES, ChaosRun

pytestmark = [pytest.mark.chaos, pytest.mark.slow]


@pytest.mark.timeout(420)
async def test_short_chaos_profile_keeps_every_invariant() -> None:
    seed = int(os.environ.get("CHAOS_SEED", "20261123"))
    run = ChaosRun(PROFILES["short"], seed)
    report = await run.run()
    print(report.format())
    assert not report.violations, report.format()
    assert report.cycles == PROFILES["short"].cycles
    shutil.rmtree(run.workdir)  # kept when an invariant broke, for the post-mortem
