"""Fetch-path throughput: this runtime's Consumer vs aiokafka's consumer, same broker, same data.

Starts an EmbeddedBroker (Tansu), produces ``--records`` (default 1,000,000) records of
``--size`` (100) bytes, uncompressed, into 8 partitions, then reads them all back, each
reader in a fresh Python process:

- ``messages``: ``Consumer.consume_partitions`` + ``PartitionConsumer.messages()``, one
  task per partition;
- ``batches``: the same with ``PartitionConsumer.batches()``;
- ``aiokafka``: ``AIOKafkaConsumer`` (no group), all partitions assigned, seek to the
  beginning, ``getmany()`` until every record is in.

Each reader touches every value (``len``), and the clock runs from the moment its
client is connected until the last record arrives. Prints msgs/s and MB/s per reader.

Run from the repository root: ``.venv/bin/python -m bench.fetch_throughput``
(``--profile`` writes cProfiles of our readers to ``$TMPDIR/fetch_<mode>.prof``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PARTITIONS = 8
BATCH_BYTES = 512 * 1024  # per produced batch (under Tansu's / Kafka's 1 MiB default)


async def produce(bootstrap: str, topic: str, records: int, size: int) -> None:
    """``records`` values of ``size`` bytes spread evenly over the partitions, fast."""
    from aiokafka import AIOKafkaProducer

    pool = [os.urandom(size) for _ in range(1024)]
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, max_batch_size=BATCH_BYTES, linger_ms=50, acks=1
    )
    await producer.start()
    try:
        in_flight: set[asyncio.Future[object]] = set()
        per_partition = records // PARTITIONS
        extra = records % PARTITIONS
        n = 0
        for p in range(PARTITIONS):
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


async def read_ours(bootstrap: str, topic: str, records: int, mode: str) -> dict[str, float]:
    """Read every record with consumergroup.Consumer; returns seconds and bytes."""
    import consumergroup as cg

    config = cg.Config(client_id="bench")
    total = 0
    nbytes = 0
    done = asyncio.Event()
    async with cg.Consumer([bootstrap], config) as consumer:
        start = time.perf_counter()
        pcs = await consumer.consume_partitions(
            {(topic, p): cg.OFFSET_OLDEST for p in range(PARTITIONS)}
        )

        async def by_message(pc: cg.PartitionConsumer) -> None:
            nonlocal total, nbytes
            async for message in pc.messages():
                nbytes += len(message.value or b"")
                total += 1
                if total >= records:
                    done.set()
                    return

        async def by_batch(pc: cg.PartitionConsumer) -> None:
            nonlocal total, nbytes
            async for batch in pc.batches():
                for message in batch:
                    nbytes += len(message.value or b"")
                total += len(batch)
                if total >= records:
                    done.set()
                    return

        reader = by_message if mode == "messages" else by_batch
        tasks = [asyncio.create_task(reader(pc)) for pc in pcs.values()]
        await done.wait()
        elapsed = time.perf_counter() - start
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return {"seconds": elapsed, "records": total, "bytes": nbytes}


async def read_aiokafka(bootstrap: str, topic: str, records: int) -> dict[str, float]:
    """Read every record with aiokafka's AIOKafkaConsumer (assign + seek_to_beginning)."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        start = time.perf_counter()
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        total = 0
        nbytes = 0
        while total < records:
            got = await consumer.getmany(timeout_ms=1000)
            for messages in got.values():
                for message in messages:
                    nbytes += len(message.value or b"")
                total += len(messages)
        elapsed = time.perf_counter() - start
    finally:
        await consumer.stop()
    return {"seconds": elapsed, "records": total, "bytes": nbytes}


def reader_main(args: argparse.Namespace) -> None:
    """Child process: run one reader and print its result as JSON."""
    if args.read == "aiokafka":
        result = asyncio.run(read_aiokafka(args.bootstrap, args.topic, args.records))
    elif args.profile:
        import cProfile

        prof = cProfile.Profile()
        prof.enable()
        result = asyncio.run(read_ours(args.bootstrap, args.topic, args.records, args.read))
        prof.disable()
        path = os.path.join(tempfile.gettempdir(), f"fetch_{args.read}.prof")
        prof.dump_stats(path)
        print(f"profile written to {path}", file=sys.stderr)
    else:
        result = asyncio.run(read_ours(args.bootstrap, args.topic, args.records, args.read))
    print(json.dumps(result))


async def parent_main(args: argparse.Namespace) -> None:
    """Start the broker, produce, run each reader in a fresh process, print the table."""
    from consumergroup import OFFSET_NEWEST, Client
    from consumergroup.consumer.positions import resolve_offsets
    from consumergroup.testing import EmbeddedBroker

    async with EmbeddedBroker() as broker:
        topic = "bench-fetch"
        await broker.create_topic(topic, PARTITIONS)
        t0 = time.perf_counter()
        await produce(broker.bootstrap, topic, args.records, args.size)
        produced = time.perf_counter() - t0
        print(
            f"produced {args.records:,} x {args.size} B in {produced:.1f}s "
            f"({args.records / produced:,.0f} msgs/s)"
        )
        async with Client([broker.bootstrap]) as client:
            ends = await resolve_offsets(
                client, client.config, {(topic, p): OFFSET_NEWEST for p in range(PARTITIONS)}
            )
        assert sum(ends.values()) == args.records, ends
        results = {}
        for mode in args.modes.split(","):
            for rep in range(args.repeat):
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
                ]
                if args.profile and mode != "aiokafka":
                    cmd.append("--profile")
                out = await asyncio.to_thread(
                    subprocess.run, cmd, capture_output=True, text=True, check=True, cwd=ROOT
                )
                result = json.loads(out.stdout.strip().splitlines()[-1])
                rate = result["records"] / result["seconds"]
                mbps = result["bytes"] / result["seconds"] / 1e6
                print(
                    f"{mode:9s} run {rep + 1}: {result['records']:,} msgs in "
                    f"{result['seconds']:.2f}s = {rate:,.0f} msgs/s, {mbps:.1f} MB/s"
                )
                results.setdefault(mode, []).append(rate)
        best = {mode: max(rates) for mode, rates in results.items()}
        if "aiokafka" in best:
            for mode, rate in best.items():
                print(
                    f"best {mode:9s}: {rate:,.0f} msgs/s ({rate / best['aiokafka']:.2f}x aiokafka)"
                )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=1, help="runs per reader")
    parser.add_argument("--modes", default="messages,batches,aiokafka")
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
