"""``python -m bench``: consumergroup vs aiokafka, confluent-kafka, kcat, franz-go, sarama and
the Java consumer, on the embedded Tansu broker and on Apache Kafka, one data set each.

Starts each broker of ``--brokers`` in turn (or uses ``--bootstrap`` /
``KAFKA_BOOTSTRAP_SERVERS``), loads the topic once per broker, runs each peer as its own
process, interleaved, and prints markdown tables (the broker named in each) with ratios to
aiokafka and the PASS/FAIL targets. Results go to
``bench/results/<timestamp>.json`` and ``bench/results/latest.md``.

``--quick`` (100k messages, 1 rep, small scaling sweep) smoke-tests the harness.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from . import harness
from .harness import (
    BROKERS,
    CONSUMER_PROTOCOL_PEERS,
    COOPERATIVE_PEERS,
    KAFKA_ONLY_PEERS,
    PEERS,
    REBALANCE_SETTINGS,
    log,
)
from .report import markdown, targets

RESULTS = Path(__file__).resolve().parent / "results"
SECTIONS = (
    "throughput",
    "produce",
    "latency",
    "rebalance",
    "scaling",
    "spark",
    "spark_kafka",
    "otel",
)
#: Sections that need no broker (run once, whatever ``--brokers`` says).
BROKERLESS = ("spark_kafka", "otel")
#: Eager vs cooperative for us and for librdkafka, and aiokafka (eager only).
REBALANCE_PEERS = (
    "cg_messages",
    "cg_messages_coop",
    "confluent",
    "confluent_coop",
    "aiokafka_getmany",
)
#: On Apache Kafka: ours eager, cooperative and on the consumer protocol (KIP-848), and
#: librdkafka on the consumer protocol.
KAFKA_REBALANCE_PEERS = (
    "cg_messages",
    "cg_messages_coop",
    "cg_messages_consumer",
    "confluent_consumer",
)


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def _wide(text: str) -> tuple[int, int]:
    parts, _, members = text.partition(":")
    return int(parts), int(members or 1)


def _names_of(kind: str, known: Iterable[str]) -> Callable[[str], list[str]]:
    """An argparse type: a comma-separated list of ``kind`` names, each one of ``known``."""
    choices = list(known)

    def parse(text: str) -> list[str]:
        names = [x.strip() for x in text.split(",") if x.strip()]
        for name in names:
            if name not in choices:
                raise argparse.ArgumentTypeError(
                    f"unknown {kind} {name!r}; known: {', '.join(choices)}"
                )
        return names

    return parse


_peers = _names_of("peer", PEERS)
_brokers = _names_of("broker", BROKERS)
_settings = _names_of("setting", REBALANCE_SETTINGS)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line."""
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    p.add_argument("--n", type=int, help="messages to load (default 1,000,000; quick 100,000)")
    p.add_argument("--size", type=int, default=100, help="value bytes (default 100)")
    p.add_argument("--key-size", type=int, default=8, help="key bytes (default 8)")
    p.add_argument("--partitions", type=int, default=8, help="partitions (default 8)")
    p.add_argument(
        "--compression",
        default="none",
        choices=("none", "gzip", "snappy", "lz4", "zstd"),
        help="producer compression of the loaded data (default none)",
    )
    p.add_argument("--reps", type=int, help="interleaved repetitions (default 3; quick 1)")
    p.add_argument(
        "--only",
        action="append",
        choices=SECTIONS,
        help="run only this section (repeatable; default: all; spark needs the [spark] extra; "
        "otel, the OpenTelemetry extra's cost with no tracer provider, needs valgrind and "
        "no broker)",
    )
    p.add_argument("--quick", action="store_true", help="smoke test: 100k messages, 1 rep")
    p.add_argument(
        "--brokers",
        type=_brokers,
        default=list(BROKERS),
        help="tansu (embedded), kafka (Apache Kafka, 1 node), in this order (default both)",
    )
    p.add_argument("--bootstrap", help="use this one cluster instead of --brokers")
    p.add_argument(
        "--peers",
        type=_peers,
        default=[p for p in PEERS if p not in COOPERATIVE_PEERS],
        help="throughput peers (default: all but the cooperative twins)",
    )
    p.add_argument(
        "--rebalance-peers",
        type=_peers,
        help=f"rebalance peers (default on Apache Kafka {','.join(KAFKA_REBALANCE_PEERS)}; "
        f"elsewhere {','.join(REBALANCE_PEERS)}; the consumer-protocol ones need Kafka 4.x)",
    )
    p.add_argument(
        "--rebalance-partitions",
        type=_ints,
        default=[8, 64],
        help="partition counts of the rebalance topic (default 8,64)",
    )
    p.add_argument(
        "--rebalance-settings",
        type=_settings,
        default=list(REBALANCE_SETTINGS),
        help="Apache Kafka only: the broker's consumer-group heartbeat settings of the "
        "rebalance runs, each on its own broker: 'fixture' (the test fixture's 0.5 s "
        "interval, 6 s session), 'default' (Kafka's 5 s, 45 s) (default both)",
    )
    p.add_argument(
        "--scaling-peers",
        type=_peers,
        default=["cg_batches", "aiokafka_getmany", "confluent"],
        help="scaling peers (default cg_batches,aiokafka_getmany,confluent)",
    )
    p.add_argument(
        "--timeline",
        type=Path,
        help="write each rebalance run's per-member deliveries and events as JSON here",
    )
    p.add_argument("--rate", type=int, default=2000, help="rebalance stream msgs/s (default 2000)")
    p.add_argument("--members", type=_ints, help="member counts (default 1,2,3,4; quick 1,2)")
    p.add_argument(
        "--scaling-partitions",
        type=_ints,
        help="partition counts on one member (default 8,100,1000; quick 8,1000)",
    )
    p.add_argument(
        "--scaling-n", type=int, help="messages in the partition-scaling topics (default --n)"
    )
    p.add_argument("--scaling-reps", type=int, help="reps of the scaling runs (default 1)")
    p.add_argument(
        "--cpu-n",
        type=int,
        help="messages of the separate CPU run at the lowest and highest --scaling-partitions "
        "(default 400,000; quick 40,000; 0 skips it)",
    )
    p.add_argument(
        "--wide",
        default="5000:4",
        help="PARTITIONS:MEMBERS of the wide scaling run (default 5000:4; 'none' to skip)",
    )
    p.add_argument("--session-timeout", type=float, default=6.0, help="group peers (default 6)")
    p.add_argument("--heartbeat", type=float, default=1.0, help="group peers (default 1)")
    p.add_argument(
        "--batch-bytes", type=int, default=1_000_000, help="loader batch size (default 1e6)"
    )
    p.add_argument(
        "--cg-set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="experiment: override the consumergroup peers' Config, e.g. "
        "channel_buffer_size=20000 (repeatable; recorded in the results)",
    )
    p.add_argument(
        "--gc",
        choices=("default", "freeze", "off"),
        default="default",
        help="experiment: the cyclic GC in every peer (freeze = gc.freeze() after start-up)",
    )
    p.add_argument("--timeout", type=float, help="per-run timeout in seconds (default scales)")
    args = p.parse_args(argv)
    quick = args.quick
    args.n = args.n or (100_000 if quick else 1_000_000)
    args.reps = args.reps or (1 if quick else 3)
    args.members = args.members or ([1, 2] if quick else [1, 2, 3, 4])
    args.scaling_partitions = args.scaling_partitions or ([8, 1000] if quick else [8, 100, 1000])
    args.scaling_n = args.scaling_n or args.n
    args.scaling_reps = args.scaling_reps or 1
    if args.cpu_n is None:
        args.cpu_n = 40_000 if quick else 400_000
    if args.bootstrap:
        args.brokers = ["external"]
    args.timeout = args.timeout or max(120.0, args.n / 10_000)
    args.only = args.only or list(SECTIONS)
    return args


def _go_version(peer: str, module: str) -> str:
    """The version of ``module`` in a Go peer's go.mod."""
    text = (harness.ROOT / "tests" / "peers" / peer / "go.mod").read_text()
    return next((ln.split()[-1] for ln in text.splitlines() if module in ln), "?")


def _meta(args: argparse.Namespace, stamp: str) -> dict[str, Any]:
    import aiokafka

    from consumergroup.testing import KAFKA_VERSION

    ck: str
    lrd: str
    try:
        import confluent_kafka

        ck, lrd = str(confluent_kafka.__version__), str(confluent_kafka.libversion()[0])
    except ImportError:
        ck = lrd = "not installed"
    return {
        "timestamp": stamp,
        "kafka": KAFKA_VERSION,
        "franz_go": _go_version("franz", "github.com/twmb/franz-go "),
        "sarama": _go_version("sarama", "github.com/IBM/sarama "),
        "kafka_clients": KAFKA_VERSION,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "aiokafka": aiokafka.__version__,
        "confluent_kafka": ck,
        "librdkafka": lrd,
        "reps": args.reps,
        "quick": args.quick,
        "n": args.n,
        "session_timeout": args.session_timeout,
        "heartbeat": args.heartbeat,
        "argv": sys.argv[1:],
        "cg_set": args.cg_set,
        "gc": args.gc,
    }


async def rebalance_runs(
    args: argparse.Namespace, kind: str, bootstrap: str, ps: harness.Procs
) -> list[dict[str, Any]]:
    """The rebalance section: every partition count, and on Apache Kafka every heartbeat
    setting (the broker of the other sections has the fixture's; another one is started
    for each other setting)."""
    on_kafka = kind == "kafka"
    peers = args.rebalance_peers or list(KAFKA_REBALANCE_PEERS if on_kafka else REBALANCE_PEERS)
    if kind == "tansu":
        peers = [p for p in peers if p not in CONSUMER_PROTOCOL_PEERS]
    out: list[dict[str, Any]] = []
    for setting in args.rebalance_settings if on_kafka else [None]:
        async with contextlib.AsyncExitStack() as stack:
            where, procs = bootstrap, ps
            if setting not in (None, "fixture"):
                where, description = await stack.enter_async_context(
                    harness.broker(None, kind, REBALANCE_SETTINGS[setting]["properties"])
                )
                log(f"broker for the rebalance runs ({setting}): {description}")
                procs = await stack.enter_async_context(
                    harness.procs(where, args.session_timeout, args.heartbeat)
                )
                procs.cg_set, procs.gc_mode, procs.timeline = ps.cg_set, ps.gc_mode, ps.timeline
            for partitions in args.rebalance_partitions:
                result = await harness.rebalance(
                    procs,
                    where,
                    peers,
                    args.reps,
                    partitions,
                    args.rate,
                    args.size,
                    warmup=3.0,
                    settle=3.0,
                    timeout=max(60.0, 10 * args.session_timeout),
                )
                result["setup"].update(
                    client_heartbeat_s=args.heartbeat,
                    setting=setting,
                    consumer_heartbeat_s=(
                        REBALANCE_SETTINGS[setting]["heartbeat_s"] if setting else None
                    ),
                )
                out.append(result)
    return out


async def run_on(args: argparse.Namespace, kind: str, results: dict[str, Any]) -> dict[str, Any]:
    """The sections on one broker (``kind``); the Spark ones go into ``results``."""
    run: dict[str, Any] = {}
    bootstrap_arg = args.bootstrap if kind == "external" else None
    async with (
        harness.broker(bootstrap_arg, kind) as (bootstrap, description),
        harness.procs(bootstrap, args.session_timeout, args.heartbeat) as ps,
    ):
        ps.cg_set = ",".join(args.cg_set)
        ps.gc_mode = args.gc
        ps.timeline = args.timeline
        log(f"broker: {description}")
        run["broker"] = description
        peers = [p for p in args.peers if kind != "tansu" or p not in KAFKA_ONLY_PEERS]
        base = None
        if "throughput" in args.only or "scaling" in args.only:
            topic = await harness.create_topic(bootstrap, args.partitions, "tp")
            log(
                f"loading {args.n:,} x {args.size} B into {args.partitions} partitions "
                f"({args.compression})"
            )
            base = await harness.load(
                bootstrap,
                topic,
                args.partitions,
                args.n,
                args.size,
                args.key_size,
                args.compression,
                args.batch_bytes,
            )
            log(f"  loaded in {base.seconds:.1f}s ({args.n / base.seconds:,.0f} msgs/s)")
        if "throughput" in args.only:
            assert base is not None
            run["throughput"] = await harness.throughput(ps, peers, base, args.reps, args.timeout)
        if "produce" in args.only:
            from . import produce

            writers = [p for p in produce.PEERS if kind != "tansu" or p not in KAFKA_ONLY_PEERS]
            log(f"producing {args.n:,} x {args.size} B per peer: {', '.join(writers)}")
            run["produce"] = await produce.run(
                bootstrap, writers, args.partitions, args.n, args.size, args.reps
            )
        if "latency" in args.only:
            from . import latency

            # --quick: one rate, one rep, short windows, one stall run (a smoke test of the
            # section). The default: every rate, latency.REPS reps, the peers together (from
            # latency.APART_FROM records/s one at a time).
            run["latency"] = await (
                latency.run(
                    bootstrap,
                    kind,
                    ps,
                    latency.LATENCY_PEERS,
                    [1_000],
                    reps=1,
                    warmup=2.0,
                    window=5.0,
                    stall_runs=1,
                )
                if args.quick
                else latency.run(bootstrap, kind, ps, latency.LATENCY_PEERS)
            )
        if "rebalance" in args.only:
            run["rebalance"] = await rebalance_runs(args, kind, bootstrap, ps)
        if "scaling" in args.only:
            assert base is not None
            run["scaling"] = await harness.scaling(
                ps,
                bootstrap,
                args.scaling_peers,
                base,
                args.members,
                args.scaling_partitions,
                args.scaling_n,
                args.scaling_reps,
                args.batch_bytes,
                args.timeout,
                None if args.wide == "none" else _wide(args.wide),
            )
            if args.cpu_n:
                # Few records per partition: what a wide topic costs per message.
                ends = sorted({min(args.scaling_partitions), max(args.scaling_partitions)})
                run["scaling_cpu"] = await harness.scaling(
                    ps,
                    bootstrap,
                    ["cg_batches"],
                    base,
                    [],
                    ends,
                    args.cpu_n,
                    max(args.scaling_reps, args.reps),
                    args.batch_bytes,
                    args.timeout,
                )
        if "spark" in args.only and kind == args.brokers[0]:
            from . import spark_source  # imports pyspark: only when the section runs

            results["spark"] = await spark_source.run(bootstrap, args.quick)
    run["targets"] = targets(run)
    return run


async def amain(args: argparse.Namespace) -> dict[str, Any]:
    """Run the selected sections on every broker; returns the results tree."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    results: dict[str, Any] = {"meta": _meta(args, stamp), "runs": {}}
    if any(section not in BROKERLESS for section in args.only):
        for kind in args.brokers:
            results["runs"][kind] = await run_on(args, kind, results)
    if "otel" in args.only:
        from . import hotpath_ir

        log("OpenTelemetry extra absent vs present without a provider (callgrind)")
        low, high = (2_000, 8_000) if args.quick else (20_000, 120_000)
        results["otel"] = await asyncio.to_thread(hotpath_ir.otel, low, high)
    if "spark_kafka" in args.only:
        from . import spark_kafka  # its own Apache Kafka: Spark's source needs ListOffsets

        rows, reps = (200_000, 1) if args.quick else (2_000_000, 3)
        results["spark_kafka"] = await spark_kafka.run(None, rows, ["local", "standalone"], reps)
    return results


def main(argv: list[str] | None = None) -> None:
    """Run, write ``bench/results/<timestamp>.json`` and ``latest.md``, print the table."""
    args = parse_args(argv)
    results = asyncio.run(amain(args))
    RESULTS.mkdir(exist_ok=True)
    stamp = results["meta"]["timestamp"]
    (RESULTS / f"{stamp}.json").write_text(json.dumps(results, indent=2, default=str) + "\n")
    text = markdown(results)
    for run in results["runs"].values():
        if "produce" in run:
            from . import produce

            text += "\n" + produce.markdown(run["produce"], run["broker"])
        if "latency" in run:
            from . import latency

            text += "\n" + latency.markdown(run["latency"], run["broker"])
    if "spark" in results:
        from . import spark_source

        text += "\n" + spark_source.markdown(results["spark"])
    if "spark_kafka" in results:
        from . import spark_kafka

        text += "\n" + spark_kafka.markdown(results["spark_kafka"])
    if "otel" in results:
        from . import hotpath_ir

        text += "\n" + hotpath_ir.otel_markdown(results["otel"])
    (RESULTS / "latest.md").write_text(text)
    print(text)
    log(f"wrote {RESULTS / (stamp + '.json')} and {RESULTS / 'latest.md'}")


if __name__ == "__main__":
    main()
