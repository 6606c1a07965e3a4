"""``python -m tests.chaos [--broker tansu|kafka|both] [--profile long|short]
[--protocol eager,cooperative,consumer] [--seed N] [--cycles N]`` (``make chaos``).

Runs the profile for each broker and protocol (the consumer protocol on Apache Kafka
only), one run after the other, prints each run's report as it ends and then one table
of them all; exit 1 on any broken invariant.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import os
import sys
import time

from tests.chaos.driver import PROFILES, PROTOCOLS, TABLE_HEAD, ChaosReport, ChaosRun


def main() -> int:
    """Run the chosen profiles, print their reports and the table, return the exit code."""
    parser = argparse.ArgumentParser(description="the consumergroup chaos suite")
    parser.add_argument("--broker", choices=["tansu", "kafka", "both"], default="both")
    parser.add_argument("--profile", choices=["short", "long", "rolling"], default="long")
    parser.add_argument(
        "--protocol",
        default=",".join(PROTOCOLS),
        help="comma-separated, of: eager (classic, range), cooperative (classic, "
        "cooperative-sticky), consumer (KIP-848, Apache Kafka only); default: all three",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=int(os.environ.get("CHAOS_SEED", time.time())),
        help="RNG seed (default: $CHAOS_SEED, else the clock); printed to reproduce a run",
    )
    parser.add_argument("--cycles", type=int, help="override the profile's number of cycles")
    args = parser.parse_args()
    # The producer's retries during broker restarts are expected: keep its warnings out.
    logging.getLogger("aiokafka").setLevel(logging.ERROR)
    protocols = [p.strip() for p in args.protocol.split(",") if p.strip()]
    unknown = [p for p in protocols if p not in PROTOCOLS]
    if unknown:
        parser.error(f"unknown protocol {unknown}: use {', '.join(PROTOCOLS)}")
    brokers = ["tansu", "kafka"] if args.broker == "both" else [args.broker]
    reports: list[ChaosReport] = []
    for broker in brokers:
        if args.profile not in PROFILES[broker]:
            continue  # a Kafka-only profile
        profile = PROFILES[broker][args.profile]
        if args.cycles:
            profile = dataclasses.replace(profile, cycles=args.cycles)
        for protocol in protocols:
            if protocol == "consumer" and broker == "tansu":
                continue  # Tansu has no consumer group protocol
            run = ChaosRun(
                profile, args.seed, log=lambda line: print(line, flush=True), protocol=protocol
            )
            report = asyncio.run(run.run())
            print(report.format(), flush=True)
            reports.append(report)
    print(f"\nchaos, profile {args.profile}, seed {args.seed}:\n{TABLE_HEAD}", flush=True)
    for report in reports:
        print(report.row(), flush=True)
    return 1 if any(r.violations for r in reports) else 0


if __name__ == "__main__":
    sys.exit(main())
