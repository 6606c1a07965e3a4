"""Producer throughput: ``cg.Producer`` vs aiokafka's producer, confluent-kafka's
``produce()``, franz-go and the Java producer, on the same broker and data.

Each peer writes ``--n`` (1,000,000) records of ``--size`` (100) bytes without a key into
a fresh topic of ``--partitions`` (8) partitions, idempotence on, ``acks=all``, 5 ms
linger (every client's default but franz-go's 0, set to 5 ms there), in a process of its
own. The clock and the CPU (user + system of that process) run from the first send to the
last acknowledgement (a warm-up record is acknowledged first, so connections and metadata
are ready). Reported: records/s with the ratio to confluent-kafka's (the target: ours at
least 1.0x), and CPU per record with the ratio to franz-go's.

``python -m bench.produce`` (an embedded Tansu broker; ``--broker kafka`` starts Apache
Kafka, ``--bootstrap`` uses a running cluster); ``python -m bench --only produce`` runs
it as a section of the whole benchmark. ``--peer cg`` runs one peer in this process
(what the harness does per peer). ``--peers cg,cg16k,...`` adds ours with Java's
``batch.size`` (16384) instead of our default (1,000,000), to show what the default buys.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import resource
import statistics
import sys
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from .harness import KAFKA_ONLY_PEERS

PEERS = ("cg", "aiokafka", "confluent", "franz", "java")
#: The peers that run on the Go or Java toolchain (built by tests/peers).
BUILT = {"franz": "franz", "java": "java"}
BASE, CPU_BASE = "confluent", "franz"


def _cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


async def _cg(
    bootstrap: str, topic: str, n: int, value: bytes, batch_size: int | None = None
) -> dict[str, Any]:
    import consumergroup as cg

    config = cg.Config(client_id="bench-cg")
    if batch_size is not None:
        config.producer.batch_size = batch_size
    async with cg.Producer(bootstrap.split(","), config) as producer:
        await producer.send_and_wait(topic, b"warm-up")
        send = producer.send
        t0, cpu0 = time.perf_counter(), _cpu()
        futures = [await send(topic, value) for _ in range(n)]
        await producer.flush()
        t1, cpu1 = time.perf_counter(), _cpu()
    failed = sum(1 for f in futures if f.exception() is not None)
    return {"count": n, "failed": failed, "seconds": t1 - t0, "cpu": cpu1 - cpu0}


async def _aiokafka(bootstrap: str, topic: str, n: int, value: bytes) -> dict[str, Any]:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, enable_idempotence=True, acks="all", linger_ms=5
    )
    await producer.start()
    try:
        await producer.send_and_wait(topic, b"warm-up")
        t0, cpu0 = time.perf_counter(), _cpu()
        futures = [await producer.send(topic, value) for _ in range(n)]
        await producer.flush()
        t1, cpu1 = time.perf_counter(), _cpu()
    finally:
        await producer.stop()
    failed = sum(1 for f in futures if f.exception() is not None)
    return {"count": n, "failed": failed, "seconds": t1 - t0, "cpu": cpu1 - cpu0}


def _confluent(bootstrap: str, topic: str, n: int, value: bytes) -> dict[str, Any]:
    import confluent_kafka

    failed = 0

    def report(err: object, _msg: object) -> None:
        nonlocal failed
        failed += err is not None

    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5}
    )
    producer.produce(topic, b"warm-up")
    producer.flush(30)
    t0, cpu0 = time.perf_counter(), _cpu()
    for i in range(n):
        while True:
            try:
                producer.produce(topic, value, on_delivery=report)
                break
            except BufferError:  # its queue is full: serve delivery reports, then again
                producer.poll(0.01)
        if i % 1000 == 0:
            producer.poll(0)
    producer.flush(120)
    t1, cpu1 = time.perf_counter(), _cpu()
    return {"count": n, "failed": failed, "seconds": t1 - t0, "cpu": cpu1 - cpu0}


def run_peer(peer: str, bootstrap: str, topic: str, n: int, size: int) -> dict[str, Any]:
    """Run one Python peer in this process; its result."""
    value = b"v" * size
    if peer == "cg":
        return asyncio.run(_cg(bootstrap, topic, n, value))
    if peer == "cg16k":
        return asyncio.run(_cg(bootstrap, topic, n, value, batch_size=16384))
    if peer == "aiokafka":
        return asyncio.run(_aiokafka(bootstrap, topic, n, value))
    if peer == "confluent":
        return _confluent(bootstrap, topic, n, value)
    raise ValueError(f"unknown Python peer {peer!r}")


async def _run_process(cmd: list[str], timeout: float) -> dict[str, Any]:
    proc = await asyncio.create_subprocess_exec(
        *cmd,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise RuntimeError(f"{cmd[0]} took over {timeout:.0f}s") from None
    for line in out.decode().splitlines():
        with contextlib.suppress(json.JSONDecodeError):
            event = json.loads(line)
            if event.get("ev") == "result":
                return dict(event)
    raise RuntimeError(f"{cmd[0]} gave no result (exit {proc.returncode}): {err.decode()[-500:]}")


async def one(peer: str, bootstrap: str, partitions: int, n: int, size: int) -> dict[str, Any]:
    """One run of ``peer`` into a fresh topic; records/s and CPU per record."""
    from consumergroup.client import Client

    topic = f"produce-{peer}-{uuid.uuid4().hex[:8]}"
    async with Client(bootstrap.split(",")) as client:
        await client.create_topic(topic, partitions)
    timeout = 60 + n / 10_000
    if peer in BUILT:
        from tests.peers import command

        cmd = command(BUILT[peer])
        dash = "-" if peer == "franz" else "--"
        cmd += [f"{dash}bootstrap", bootstrap, f"{dash}topic", topic, f"{dash}mode", "produce"]
        cmd += [f"{dash}expect", str(n), f"{dash}size", str(size)]
    else:
        cmd = [sys.executable, "-m", "bench.produce", "--peer", peer, "--bootstrap", bootstrap]
        cmd += ["--topic", topic, "--n", str(n), "--size", str(size)]
    result = await _run_process(cmd, timeout)
    if result.get("failed"):
        raise RuntimeError(f"{peer}: {result['failed']} records failed")
    return {
        "records_per_s": result["count"] / result["seconds"],
        "cpu_us_per_record": result["cpu"] / result["count"] * 1e6,
    }


async def run(
    bootstrap: str, peers: list[str], partitions: int, n: int, size: int, reps: int
) -> dict[str, Any]:
    """Every peer ``reps`` times, interleaved; the medians."""
    runs: dict[str, list[dict[str, Any]]] = {p: [] for p in peers}
    errors: dict[str, str] = {}
    for _ in range(reps):
        for peer in peers:
            if peer in errors:
                continue
            try:
                runs[peer].append(await one(peer, bootstrap, partitions, n, size))
            except Exception as exc:  # a peer that cannot run here is reported, not fatal
                errors[peer] = str(exc)
    median = {
        peer: {k: statistics.median(r[k] for r in rs) for k in rs[0]}
        for peer, rs in runs.items()
        if rs
    }
    return {
        "data": {"n": n, "size": size, "partitions": partitions, "reps": reps},
        "median": median,
        "errors": errors,
    }


def markdown(result: dict[str, Any], broker: str) -> str:
    """The table: records/s vs confluent-kafka, CPU per record vs franz-go, the verdict."""
    d, med = result["data"], result["median"]
    base = med.get(BASE, {}).get("records_per_s")
    cpu_base = med.get(CPU_BASE, {}).get("cpu_us_per_record")
    lines = [
        f"## Producing: {d['n']:,} x {d['size']} B, {d['partitions']} partitions, idempotent, "
        f"acks=all, linger 5 ms — {broker}",
        "",
        "| peer | records/s | vs confluent-kafka | CPU us/record | vs franz-go |",
        "|---|---:|---:|---:|---:|",
    ]
    for peer, m in med.items():
        rate, cpu = m["records_per_s"], m["cpu_us_per_record"]
        vs = f"{rate / base:.2f}x" if base else "-"
        cpu_vs = f"{cpu / cpu_base:.2f}x" if cpu_base else "-"
        lines.append(f"| {peer} | {rate:,.0f} | {vs} | {cpu:.2f} | {cpu_vs} |")
    for peer, why in result["errors"].items():
        lines.append(f"| {peer} | FAILED: {why[:120]} | | | |")
    ours = med.get("cg", {}).get("records_per_s")
    if ours and base:
        verdict = "PASS" if ours >= base else "FAIL"
        lines += [
            "",
            f"Target ours >= 1.0x confluent-kafka's records/s: {ours / base:.2f}x {verdict}",
        ]
    return "\n".join(lines) + "\n"


@contextlib.asynccontextmanager
async def _broker(kind: str, bootstrap: str | None) -> AsyncIterator[tuple[str, str]]:
    if bootstrap:
        yield bootstrap, f"external {bootstrap}"
        return
    from consumergroup.testing import EmbeddedBroker, KafkaCluster

    if kind == "kafka":
        async with KafkaCluster(nodes=1) as kc:
            yield kc.bootstrap, "Apache Kafka 4.4.0 (1 node)"
    else:
        async with EmbeddedBroker() as broker:
            yield broker.bootstrap, "Tansu (embedded)"


async def _main(args: argparse.Namespace) -> None:
    async with _broker(args.broker, args.bootstrap) as (bootstrap, description):
        # An external cluster (--bootstrap) runs every peer asked for: which broker it is
        # is not known here (franz-go and Java fail against Tansu, and say so in the table).
        tansu = args.broker == "tansu" and not args.bootstrap
        peers = [p for p in args.peers if not tansu or p not in KAFKA_ONLY_PEERS]
        result = await run(bootstrap, peers, args.partitions, args.n, args.size, args.reps)
    print(markdown(result, description))


def main(argv: list[str] | None = None) -> None:
    """Run the comparison (or, with ``--peer``, one Python peer for the harness)."""
    p = argparse.ArgumentParser(prog="python -m bench.produce", description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=1_000_000, help="records (default 1,000,000)")
    p.add_argument("--size", type=int, default=100, help="value bytes (default 100)")
    p.add_argument("--partitions", type=int, default=8, help="partitions (default 8)")
    p.add_argument("--reps", type=int, default=3, help="interleaved repetitions (default 3)")
    p.add_argument("--peers", type=lambda s: s.split(","), default=list(PEERS))
    p.add_argument("--broker", choices=("tansu", "kafka"), default="tansu")
    p.add_argument("--bootstrap", help="a running cluster instead of --broker")
    p.add_argument(
        "--peer", choices=("cg", "cg16k", "aiokafka", "confluent"), help=argparse.SUPPRESS
    )
    p.add_argument("--topic", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.peer:
        result = run_peer(args.peer, args.bootstrap, args.topic, args.n, args.size)
        print(json.dumps({"ev": "result", **result}), flush=True)
        return
    asyncio.run(_main(args))


if __name__ == "__main__":
    main()
