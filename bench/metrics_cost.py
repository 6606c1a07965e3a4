"""What metrics cost a consuming group: CPU time per record, with and without them.

Starts an EmbeddedBroker, loads ``--records`` records of 100 bytes into 8 partitions,
then, ``--reps`` times interleaved, reads them all with a ``ConsumerGroup``
(``claim.batches()``, one mark per batch), each read in a fresh process, in variants:

- ``plain``: no exporter;
- ``metrics``: a ``GroupMetrics`` tracking the group and a task rendering the
  Prometheus exposition (``generate_latest``) every ``--scrape`` seconds;
- ``before`` (with ``--before PATH``): ``plain`` on the consumergroup package found in
  PATH (e.g. a ``git worktree`` of the commit before the metrics), for the cost of the
  counters on the hot path, which are there whether metrics are exported or not.

The clock is the child's CPU time (``time.process_time``) from its first record to its
last, so the join and other processes on a shared machine do not count. Prints the
median µs of CPU per record per variant and the ratios.

``--micro`` isolates the hot path instead: no broker, ``--records`` in ~1 MiB record
sets pushed through ``PartitionConsumer._deliver`` and read back with ``batches()``
(where the counters are), this tree and the ``--before`` tree imported side by side in
one process, rounds interleaved, best of ``5 * --reps`` each.

    .venv/bin/python -m bench.metrics_cost [--records N] [--reps R] [--before PATH] [--micro]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
PARTITIONS = 8


async def read(bootstrap: str, topic: str, records: int, scrape: float | None) -> dict[str, object]:
    """Child: consume every record with a group; CPU seconds from the first record to the last."""
    import consumergroup as cg

    config = cg.Config(client_id="bench-metrics")
    config.consumer.offsets.initial = cg.OFFSET_OLDEST
    config.consumer.group.session_timeout = 6.0
    config.consumer.group.heartbeat_interval = 1.0
    group = cg.ConsumerGroup([bootstrap], f"metrics-cost-{uuid.uuid4().hex[:8]}", config)
    done = asyncio.Event()
    seen = 0
    first_cpu = 0.0

    class Counter(cg.ConsumerGroupHandler):
        async def consume_claim(
            self, session: cg.ConsumerGroupSession, claim: cg.ConsumerGroupClaim
        ) -> None:
            nonlocal seen, first_cpu
            async for batch in claim.batches():
                if not seen:
                    first_cpu = time.process_time()
                seen += len(batch)
                session.mark_message(batch[-1])
                if seen >= records:
                    done.set()

    scrapes = 0

    async def scraper(every: float) -> None:
        nonlocal scrapes
        from prometheus_client import CollectorRegistry, generate_latest

        from consumergroup.metrics import GroupMetrics

        exporter = GroupMetrics(CollectorRegistry())
        exporter.track(group)
        while True:
            generate_latest(exporter.registry)
            scrapes += 1
            await asyncio.sleep(every)

    tasks = [asyncio.create_task(group.run([topic], Counter()))]
    if scrape is not None:
        tasks.append(asyncio.create_task(scraper(scrape)))
    await done.wait()
    cpu = time.process_time() - first_cpu
    await group.close()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return {"cpu": cpu, "records": seen, "scrapes": scrapes, "package": cg.__file__}


def load_tree(path: str, name: str) -> ModuleType:
    """Import ``path``/consumergroup as package ``name``, beside this tree's consumergroup."""
    init = os.path.join(path, "consumergroup", "__init__.py")
    spec = importlib.util.spec_from_file_location(
        name, init, submodule_search_locations=[os.path.dirname(init)]
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def micro(args: argparse.Namespace) -> None:
    """The hot path alone, both trees in this process, rounds interleaved: ns CPU/record."""
    from bench.decode_micro import build_record_sets

    trees = {"plain": "consumergroup", "before": load_tree(args.before, "cg_before").__name__}
    sets = build_record_sets(args.records, 0)

    def drain(package: str) -> float:
        partition = importlib.import_module(f"{package}.consumer.partition")
        records = importlib.import_module(f"{package}.consumer.records")
        pc = partition.PartitionConsumer(
            "t", 0, 0, buffer_size=args.records, fetch_size=1 << 20, on_close=lambda pc: None
        )
        scanned = [records.scan_records("t", 0, data, offset) for data, offset in sets]

        async def read() -> None:
            seen = 0
            async for batch in pc.batches():
                seen += len(batch)
                if seen >= args.records:
                    return

        start = time.process_time()
        for record_set in scanned:
            pc._deliver(record_set)
        asyncio.run(read())
        return time.process_time() - start

    best = {variant: float("inf") for variant in trees}
    for _ in range(args.reps * 5):
        for variant, package in trees.items():
            best[variant] = min(best[variant], drain(package))
    ns = {v: best[v] / args.records * 1e9 for v in trees}
    print(f"{args.records:,} records through PartitionConsumer, best of {args.reps * 5}:")
    print(f"  plain {ns['plain']:.1f} ns/record, before {ns['before']:.1f} ns/record")
    print(f"plain/before: {ns['plain'] / ns['before']:.3f}")


async def parent(args: argparse.Namespace) -> None:
    """Load the topic once, run the variants interleaved, print medians and ratios."""
    from bench.fetch_throughput import produce
    from consumergroup.testing import EmbeddedBroker

    variants = ["plain", "metrics"] + (["before"] if args.before else [])
    cpu: dict[str, list[float]] = {v: [] for v in variants}
    async with EmbeddedBroker() as broker:
        topic = "bench-metrics"
        await broker.create_topic(topic, PARTITIONS)
        await produce(broker.bootstrap, topic, args.records, 100, PARTITIONS)
        for rep in range(args.reps):
            for variant in variants:
                cmd = [sys.executable, __file__, "--child", broker.bootstrap, topic]
                cmd += ["--records", str(args.records)]
                if variant == "metrics":
                    cmd += ["--export-every", str(args.scrape)]
                env = {
                    **os.environ,
                    "PYTHONPATH": args.before if variant == "before" else str(ROOT),
                }
                out = await asyncio.to_thread(
                    subprocess.run, cmd, capture_output=True, text=True, check=True, env=env
                )
                result = json.loads(out.stdout.strip().splitlines()[-1])
                cpu[variant].append(result["cpu"])
                per = result["cpu"] / result["records"] * 1e6
                print(
                    f"rep {rep + 1} {variant:8} {per:6.2f} µs CPU/record "
                    f"({result['scrapes']} scrapes, {result['package']})",
                    file=sys.stderr,
                )
    median = {v: statistics.median(cpu[v]) / args.records * 1e6 for v in variants}
    print(f"{args.records:,} records, {args.reps} reps, median µs of CPU per record:")
    for v in variants:
        print(f"  {v:8} {median[v]:6.2f}")
    print(f"metrics/plain: {median['metrics'] / median['plain']:.3f}")
    if args.before:
        print(f"plain/before:  {median['plain'] / median['before']:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--scrape", type=float, default=0.5, help="seconds between scrapes")
    parser.add_argument("--before", help="a tree whose consumergroup/ is the baseline")
    parser.add_argument("--micro", action="store_true", help="the hot path alone (needs --before)")
    parser.add_argument("--child", nargs=2, metavar=("BOOTSTRAP", "TOPIC"), help=argparse.SUPPRESS)
    parser.add_argument("--export-every", type=float, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.before:
        args.before = os.path.abspath(args.before)
    if args.micro and not args.before:
        parser.error("--micro compares against a baseline: give --before PATH")
    if args.child:
        print(json.dumps(asyncio.run(read(*args.child, args.records, args.export_every))))
    elif args.micro:
        sys.path.insert(0, str(ROOT))  # bench.decode_micro, when run as a script
        micro(args)
    else:
        sys.path.insert(0, str(ROOT))  # bench.fetch_throughput, when run as a script
        asyncio.run(parent(args))


if __name__ == "__main__":
    main()
