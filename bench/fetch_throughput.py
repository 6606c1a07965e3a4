"""Fetch-path throughput: this runtime's Consumer vs aiokafka's consumer, same broker, same data.

Starts an EmbeddedBroker (Tansu), produces ``--records`` (default 1,000,000) records of
``--size`` (100) bytes, uncompressed, into 8 partitions, then reads them all back, each
reader in a fresh Python process:

- ``messages``: ``Consumer.consume_partitions`` + ``PartitionConsumer.messages()``, one
  task per partition;
- ``batches``: the same with ``PartitionConsumer.batches()``;
- ``aiokafka``: ``AIOKafkaConsumer`` (no group), all partitions assigned, seek to the
  beginning, ``getmany()`` until every record is in;
- ``batches_keep``, ``messages_keep``, ``aiokafka_keep``: the same, but every message is
  also kept in one list until the end (a handler accumulating a bulk write): what the
  cyclic GC costs when decoded messages survive.

Each reader touches every value (``len``), and the clock runs from the moment its
client is connected until the last record arrives. Prints msgs/s, MB/s and CPU
(user+sys) per message of each reader.

Run from the repository root: ``.venv/bin/python -m bench.fetch_throughput``
(``--profile`` writes cProfiles of our readers to ``$TMPDIR/fetch_<mode>.prof``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BATCH_BYTES = 512 * 1024  # per produced batch (under Tansu's / Kafka's 1 MiB default)


async def produce(bootstrap: str, topic: str, records: int, size: int, partitions: int) -> None:
    """``records`` values of ``size`` bytes spread evenly over the partitions, fast."""
    from aiokafka import AIOKafkaProducer

    pool = [os.urandom(size) for _ in range(1024)]
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, max_batch_size=BATCH_BYTES, linger_ms=50, acks=1
    )
    await producer.start()
    try:
        in_flight: set[asyncio.Future[object]] = set()
        per_partition = records // partitions
        extra = records % partitions
        n = 0
        for p in range(partitions):
            left = per_partition + (1 if p < extra else 0)
            while left:
                batch = producer.create_batch()
                while left and batch.append(key=None, value=pool[n % 1024], timestamp=None):
                    left -= 1
                    n += 1
                batch.close()
                in_flight.add(await producer.send_batch(batch, topic, partition=p))
                if len(in_flight) >= 16:
                    _, pending = await asyncio.wait(in_flight, return_when=asyncio.FIRST_COMPLETED)
                    in_flight = set(pending)
        await asyncio.gather(*in_flight)
    finally:
        await producer.stop()


async def read_ours(
    bootstrap: str, topic: str, records: int, mode: str, partitions: int
) -> dict[str, float]:
    """Read every record with consumergroup.Consumer; returns seconds, CPU and bytes."""
    import consumergroup as cg

    config = cg.Config(client_id="bench")
    total = 0
    nbytes = 0
    done = asyncio.Event()
    kept: list[cg.ConsumerMessage] = []
    keep = mode.endswith("_keep")
    async with cg.Consumer([bootstrap], config) as consumer:
        start = time.perf_counter()
        cpu = time.process_time()
        pcs = await consumer.consume_partitions(
            {(topic, p): cg.OFFSET_OLDEST for p in range(partitions)}
        )

        async def by_message(pc: cg.PartitionConsumer) -> None:
            nonlocal total, nbytes
            async for message in pc.messages():
                nbytes += len(message.value or b"")
                if keep:
                    kept.append(message)
                total += 1
                if total >= records:
                    done.set()
                    return

        async def by_batch(pc: cg.PartitionConsumer) -> None:
            nonlocal total, nbytes
            async for batch in pc.batches():
                for message in batch:
                    nbytes += len(message.value or b"")
                if keep:
                    kept.extend(batch)
                total += len(batch)
                if total >= records:
                    done.set()
                    return

        reader = by_message if mode.startswith("messages") else by_batch
        tasks = [asyncio.create_task(reader(pc)) for pc in pcs.values()]
        await done.wait()
        elapsed = time.perf_counter() - start
        cpu = time.process_time() - cpu
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return {"seconds": elapsed, "cpu": cpu, "records": total, "bytes": nbytes, "kept": len(kept)}


async def read_aiokafka(
    bootstrap: str, topic: str, records: int, mode: str, partitions: int
) -> dict[str, float]:
    """Read every record with aiokafka's AIOKafkaConsumer (assign + seek_to_beginning)."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    kept: list[object] = []
    keep = mode.endswith("_keep")
    try:
        start = time.perf_counter()
        cpu = time.process_time()
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        total = 0
        nbytes = 0
        while total < records:
            got = await consumer.getmany(timeout_ms=1000)
            for messages in got.values():
                for message in messages:
                    nbytes += len(message.value or b"")
                if keep:
                    kept += messages
                total += len(messages)
        elapsed = time.perf_counter() - start
        cpu = time.process_time() - cpu
    finally:
        await consumer.stop()
    return {"seconds": elapsed, "cpu": cpu, "records": total, "bytes": nbytes, "kept": len(kept)}


def reader_main(args: argparse.Namespace) -> None:
    """Child process: run one reader and print its result as JSON."""
    if args.read.startswith("aiokafka"):
        result = asyncio.run(
            read_aiokafka(args.bootstrap, args.topic, args.records, args.read, args.partitions)
        )
    elif args.profile:
        import cProfile

        prof = cProfile.Profile()
        prof.enable()
        result = asyncio.run(
            read_ours(args.bootstrap, args.topic, args.records, args.read, args.partitions)
        )
        prof.disable()
        path = os.path.join(tempfile.gettempdir(), f"fetch_{args.read}.prof")
        prof.dump_stats(path)
        print(f"profile written to {path}", file=sys.stderr)
    else:
        result = asyncio.run(
            read_ours(args.bootstrap, args.topic, args.records, args.read, args.partitions)
        )
    print(json.dumps(result))


async def parent_main(args: argparse.Namespace) -> None:
    """Start the broker, produce, run each reader in a fresh process, print the table."""
    from consumergroup import OFFSET_NEWEST, Client
    from consumergroup.consumer.positions import resolve_offsets
    from consumergroup.testing import EmbeddedBroker

    async with EmbeddedBroker() as broker:
        topic = "bench-fetch"
        await broker.create_topic(topic, args.partitions)
        t0 = time.perf_counter()
        await produce(broker.bootstrap, topic, args.records, args.size, args.partitions)
        produced = time.perf_counter() - t0
        print(
            f"produced {args.records:,} x {args.size} B in {produced:.1f}s "
            f"({args.records / produced:,.0f} msgs/s)"
        )
        async with Client([broker.bootstrap]) as client:
            ends = await resolve_offsets(
                client, client.config, {(topic, p): OFFSET_NEWEST for p in range(args.partitions)}
            )
        assert sum(ends.values()) == args.records, ends
        results: dict[str, list[float]] = {}
        modes = args.modes.split(",")
        # Interleaved (A B C, A B C, ...): the machine's noise hits every reader alike.
        for rep in range(args.repeat):
            for mode in modes:
                cmd = [
                    sys.executable,
                    "-m",
                    "bench.fetch_throughput",
                    "--read",
                    mode,
                    "--bootstrap",
                    broker.bootstrap,
                    "--topic",
                    topic,
                    "--records",
                    str(args.records),
                    "--partitions",
                    str(args.partitions),
                ]
                if args.profile and not mode.startswith("aiokafka"):
                    cmd.append("--profile")
                out = await asyncio.to_thread(
                    subprocess.run, cmd, capture_output=True, text=True, check=True, cwd=ROOT
                )
                result = json.loads(out.stdout.strip().splitlines()[-1])
                rate = result["records"] / result["seconds"]
                mbps = result["bytes"] / result["seconds"] / 1e6
                cpu_ns = result["cpu"] / result["records"] * 1e9
                print(
                    f"{mode:14s} run {rep + 1}: {result['records']:,} msgs in "
                    f"{result['seconds']:.2f}s = {rate:,.0f} msgs/s, {mbps:.1f} MB/s, "
                    f"CPU {cpu_ns:,.0f} ns/msg",
                    flush=True,
                )
                results.setdefault(mode, []).append(cpu_ns)
        for mode, cpus in results.items():
            print(f"median CPU {mode:14s}: {statistics.median(cpus):,.0f} ns/msg")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=1, help="runs per reader")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument(
        "--modes",
        default="messages,batches,aiokafka",
        help="readers, from messages, batches, aiokafka and their *_keep variants",
    )
    parser.add_argument("--profile", action="store_true", help="cProfile our readers")
    parser.add_argument("--read", help=argparse.SUPPRESS)
    parser.add_argument("--bootstrap", help=argparse.SUPPRESS)
    parser.add_argument("--topic", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.read:
        reader_main(args)
    else:
        asyncio.run(parent_main(args))


if __name__ == "__main__":
    main()
