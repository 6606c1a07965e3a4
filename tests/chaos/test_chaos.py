"""The short chaos profile (~10 fault cycles, 3-4 member processes) as part of ``make test``.

``make chaos`` runs the long one. Reproduce a run with ``CHAOS_SEED=<seed>``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.chaos.driver import PROFILES, ChaosRun

pytestmark = [pytest.mark.chaos, pytest.mark.slow]


@pytest.mark.timeout(420)
@pytest.mark.xfail(
    raises=AssertionError,
    strict=False,
    reason="the runtime does not survive the faults yet (issue 8): a broker outage or a "
    "dropped Metadata answer while starting ends run() with NoBrokersAvailableError "
    "(defects 3, 5, 17); close() then raises it and leaves the metadata-refresh task; "
    "close(timeout=10) overruns after SIGSTOP (defect 18)",
)
async def test_short_chaos_profile_keeps_every_invariant(tmp_path: Path) -> None:
    seed = int(os.environ.get("CHAOS_SEED", "20261123"))
    run = ChaosRun(PROFILES["short"], seed, tmp_path)
    report = await run.run()
    print(report.format())
    assert not report.violations, report.format()
    assert report.cycles == PROFILES["short"].cycles
