"""``python -m tests.chaos [--profile long|short] [--seed N] [--assignor NAME]``
(``make chaos``): exit 1 on any broken invariant."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import sys
import time

from tests.chaos.driver import PROFILES, ChaosRun
from tests.integration.member_process import ASSIGNORS


def main() -> int:
    """Run one profile, print its report, return the exit code."""
    parser = argparse.ArgumentParser(description="the consumergroup chaos suite")
    parser.add_argument("--profile", choices=sorted(PROFILES), default="long")
    parser.add_argument(
        "--seed",
        type=int,
        default=int(os.environ.get("CHAOS_SEED", time.time())),
        help="RNG seed (default: $CHAOS_SEED, else the clock); printed to reproduce a run",
    )
    parser.add_argument("--cycles", type=int, help="override the profile's number of cycles")
    parser.add_argument(
        "--assignor",
        choices=sorted(ASSIGNORS),
        default="range",
        help="every member's one strategy: eager (range, ...) or cooperative-sticky",
    )
    args = parser.parse_args()
    profile = PROFILES[args.profile]
    if args.cycles:
        profile = dataclasses.replace(profile, cycles=args.cycles)
    run = ChaosRun(
        profile, args.seed, log=lambda line: print(line, flush=True), assignor=args.assignor
    )
    report = asyncio.run(run.run())
    print(report.format(), flush=True)
    return 1 if report.violations else 0


if __name__ == "__main__":
    sys.exit(main())
