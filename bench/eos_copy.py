"""Exactly-once copy: read, transform, write, commit every 100 ms; ours exactly-once vs
ours at-least-once vs confluent-kafka's transactional copier, on Apache Kafka.

``python -m bench.eos_copy [--n 200000] [--size 100] [--partitions 8] [--reps 3]
[--interval 0.1] [--peers ours_eos,ours_alo,confluent_eos] [--bootstrap HOST:PORT]``

Starts a one-node Apache Kafka 4.4.0 (or uses ``--bootstrap``), loads ``--n`` records of
``--size`` bytes into ``--partitions`` partitions once, then for each repetition and peer
runs one copier process (``--peer``) in a fresh group, copying the input to a fresh
output topic of as many partitions, the value upper-cased (the transform), until every
record is copied and committed:

* ``ours_eos``: ``ConsumerGroup(producer=transactional producer)``, ``session.send`` then
  ``mark_message`` per record; the runtime commits a transaction every ``--interval``
  (``auto_commit.interval``);
* ``ours_alo``: the same handler at least once: a plain idempotent ``cg.Producer`` and
  the group's own offset commits every ``--interval``;
* ``confluent_eos``: confluent-kafka (librdkafka), the usual transactional loop:
  ``consume(500)``, ``produce`` each, every ``--interval`` ``send_offsets_to_transaction``
  (with ``consumer_group_metadata()``) and ``commit_transaction``.

Measured from the first record copied to the last commit: records/s, the copier
process's CPU time per record (librdkafka's threads included; steadier than records/s on
a shared machine), and the transaction
(or offset) commit's latency, p50 and p99: for ours, the group's ``on_commit`` observer
(the whole commit point: the gate, the flush, TxnOffsetCommit, EndTxn); for confluent,
around ``send_offsets_to_transaction`` + ``commit_transaction``. Prints a markdown table
(medians over the repetitions, the machine's load beside them) with ours_eos /
ours_alo (target >= 0.7) and ours_eos / confluent_eos, and writes
``bench/results/eos-<timestamp>.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from .fetch_throughput import produce

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
PEERS = ("ours_eos", "ours_alo", "confluent_eos")
#: At-least-once throughput the exactly-once copy must reach (of ours_alo's).
TARGET = 0.7


def _percentiles(latencies: list[float]) -> tuple[float, float]:
    if not latencies:
        return 0.0, 0.0
    ordered = sorted(latencies)
    return ordered[len(ordered) // 2], ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


async def copy_ours(args: argparse.Namespace) -> dict[str, Any]:
    """One copier of ours (``--peer ours_eos`` / ``ours_alo``) until ``--n`` are copied."""
    import consumergroup as cg

    eos = args.peer == "ours_eos"
    config = cg.Config(client_id=f"bench-{args.peer}")
    config.consumer.offsets.initial = cg.OFFSET_OLDEST
    config.consumer.offsets.auto_commit.interval = args.interval
    if eos:
        config.producer.transactional_id = f"bench-{uuid.uuid4().hex[:8]}"
    latencies: list[float] = []
    first: list[float] = []
    cpu: list[float] = []  # the process's CPU time at the first record
    done = asyncio.Event()
    out, n = args.output, args.n

    class Observer(cg.GroupObserver):
        def on_commit(self, group_id: str, latency: float, error: BaseException | None) -> None:
            if first and not done.is_set():
                latencies.append(latency)

    class Copier(cg.ConsumerGroupHandler):
        copied = 0

        async def consume_claim(
            self, session: cg.ConsumerGroupSession, claim: cg.ConsumerGroupClaim
        ) -> None:
            send = session.send if eos else producer.send
            async for msg in claim.messages():
                if not first:
                    first.append(time.perf_counter())
                    cpu.append(time.process_time())
                await send(out, (msg.value or b"").upper(), key=msg.key)
                session.mark_message(msg)
                Copier.copied += 1
                if Copier.copied >= n:
                    done.set()

    async with (
        cg.Producer([args.bootstrap], config) as producer,
        cg.ConsumerGroup(
            [args.bootstrap], args.group, config, producer=producer if eos else None
        ) as group,
    ):
        group.add_observer(Observer())
        run = asyncio.create_task(group.run([args.input], Copier()))
        await asyncio.wait({run, asyncio.create_task(done.wait())}, return_when="FIRST_COMPLETED")
        copied_at = time.perf_counter()
        await group.close()  # the last commit point
        if not eos:
            await producer.flush()
        end = time.perf_counter()
        cpu_end = time.process_time()
        await run
    p50, p99 = _percentiles(latencies)
    return {
        "seconds": end - first[0],
        "cpu": cpu_end - cpu[0],
        "close": end - copied_at,
        "copied": Copier.copied,
        "commits": len(latencies),
        "p50": p50,
        "p99": p99,
    }


def copy_confluent(args: argparse.Namespace) -> dict[str, Any]:
    """librdkafka's transactional copier (``--peer confluent_eos``) until ``--n`` are copied."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": args.bootstrap,
            "group.id": args.group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    producer = Producer(
        {
            "bootstrap.servers": args.bootstrap,
            "transactional.id": f"bench-{uuid.uuid4().hex[:8]}",
            "linger.ms": 5,
        }
    )
    producer.init_transactions()
    consumer.subscribe([args.input])
    latencies: list[float] = []
    positions: dict[int, int] = {}
    copied, first, cpu = 0, 0.0, 0.0
    producer.begin_transaction()
    last_commit = time.perf_counter()

    def commit() -> None:
        started = time.perf_counter()
        offsets = [TopicPartition(args.input, p, o) for p, o in positions.items()]
        producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata())
        producer.commit_transaction()
        latencies.append(time.perf_counter() - started)

    while copied < args.n:
        for msg in consumer.consume(500, timeout=0.1):
            if msg.error():
                continue
            if not first:
                first = time.perf_counter()
                cpu = time.process_time()
            producer.produce(args.output, (msg.value() or b"").upper(), key=msg.key())
            producer.poll(0)
            positions[msg.partition()] = msg.offset() + 1
            copied += 1
        if time.perf_counter() - last_commit >= args.interval and positions:
            commit()
            producer.begin_transaction()
            last_commit = time.perf_counter()
    commit()
    end = time.perf_counter()
    cpu = time.process_time() - cpu
    consumer.close()
    p50, p99 = _percentiles(latencies)
    return {"seconds": end - first, "cpu": cpu, "copied": copied, "p50": p50, "p99": p99}


async def run_peer(
    args: argparse.Namespace, peer: str, bootstrap: str, topic: str
) -> dict[str, Any]:
    """One copier process of ``peer`` into a fresh output topic; its result."""
    from consumergroup.admin import ClusterAdmin

    output = f"{topic}-{peer}-{uuid.uuid4().hex[:6]}"
    async with ClusterAdmin([bootstrap]) as admin:
        await admin.create_topic(output, args.partitions)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.eos_copy", "--peer", peer, "--bootstrap", bootstrap,
        "--input", topic, "--output", output, "--group", f"eos-{uuid.uuid4().hex[:8]}",
        "--n", str(args.n), "--interval", str(args.interval),
        stdout=asyncio.subprocess.PIPE, cwd=ROOT,
    )  # fmt: skip
    out, _ = await asyncio.wait_for(proc.communicate(), args.timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{peer} exited {proc.returncode}")
    result: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    result["rate"] = result["copied"] / result["seconds"]
    result["cpu_us"] = result["cpu"] / result["copied"] * 1e6
    return result


def table(runs: dict[str, list[dict[str, Any]]]) -> str:
    def median(peer: str, what: str) -> float:
        return statistics.median(r[what] for r in runs[peer]) if runs.get(peer) else 0.0

    lines = [
        "| peer | records/s | CPU µs/record | commit p50 ms | commit p99 ms | vs ours_alo "
        "| vs confluent_eos |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for peer in runs:
        rate = median(peer, "rate")
        alo, conf = median("ours_alo", "rate"), median("confluent_eos", "rate")
        lines.append(
            f"| {peer} | {rate:,.0f} | {median(peer, 'cpu_us'):.2f} | "
            f"{median(peer, 'p50') * 1000:.1f} | "
            f"{median(peer, 'p99') * 1000:.1f} | {rate / alo if alo else 0:.2f} | "
            f"{rate / conf if conf else 0:.2f} |"
        )
    return "\n".join(lines)


async def main(args: argparse.Namespace) -> None:
    from consumergroup.testing import KafkaCluster

    cluster = None
    bootstrap = args.bootstrap
    if bootstrap is None:
        cluster = KafkaCluster()
        await cluster.start()
        bootstrap = cluster.bootstrap
    runs: dict[str, list[dict[str, Any]]] = {peer: [] for peer in args.peers}
    try:
        from consumergroup.admin import ClusterAdmin

        topic = f"eos-bench-{uuid.uuid4().hex[:8]}"
        async with ClusterAdmin([bootstrap]) as admin:
            await admin.create_topic(topic, args.partitions)
        await produce(bootstrap, topic, args.n, args.size, args.partitions)
        for rep in range(args.reps):
            for peer in args.peers:
                result = await run_peer(args, peer, bootstrap, topic)
                runs[peer].append(result)
                print(
                    f"rep {rep + 1} {peer}: {result['rate']:,.0f} records/s, "
                    f"{result['cpu_us']:.2f} CPU us/record, commit p50 "
                    f"{result['p50'] * 1000:.1f} ms p99 {result['p99'] * 1000:.1f} ms, "
                    f"load {os.getloadavg()[0]:.1f}",
                    file=sys.stderr,
                    flush=True,
                )
    finally:
        if cluster is not None:
            await cluster.close()
    load = os.getloadavg()
    rates = {p: statistics.median(r["rate"] for r in rs) for p, rs in runs.items() if rs}
    verdict = ""
    if "ours_eos" in rates and "ours_alo" in rates:
        ratio = rates["ours_eos"] / rates["ours_alo"]
        verdict = f"ours_eos / ours_alo = {ratio:.2f} (target >= {TARGET}: " + (
            "PASS)" if ratio >= TARGET else "FAIL)"
        )
    print(
        f"Exactly-once copy, Apache Kafka 4.4.0 (1 node), {args.n:,} x {args.size} B, "
        f"{args.partitions} partitions, commit every {args.interval}s, medians of "
        f"{args.reps} (load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} at the end)"
        f"\n\n{table(runs)}\n\n{verdict}"
    )
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    (RESULTS / f"eos-{stamp}.json").write_text(
        json.dumps({"args": vars(args), "load": load, "runs": runs}, indent=1)
    )


def _peers(text: str) -> list[str]:
    names = [x for x in text.split(",") if x]
    for name in names:
        if name not in PEERS:
            raise argparse.ArgumentTypeError(f"unknown peer {name!r}: {', '.join(PEERS)}")
    return names


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--n", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--interval", type=float, default=0.1)
    parser.add_argument("--peers", type=_peers, default=list(PEERS))
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per copier run")
    parser.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"))
    # One copier process (what main() starts per run): prints its result as JSON.
    parser.add_argument("--peer", choices=PEERS, help=argparse.SUPPRESS)
    parser.add_argument("--input", help=argparse.SUPPRESS)
    parser.add_argument("--output", help=argparse.SUPPRESS)
    parser.add_argument("--group", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


if __name__ == "__main__":
    ARGS = parse()
    if ARGS.peer == "confluent_eos":
        print(json.dumps(copy_confluent(ARGS)))
    elif ARGS.peer is not None:
        print(json.dumps(asyncio.run(copy_ours(ARGS))))
    else:
        asyncio.run(main(ARGS))
