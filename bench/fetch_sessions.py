"""Fetch sessions (KIP-227) at many partitions: request size and client CPU per message.

The embedded Tansu broker keeps no fetch sessions (it answers session id 0), so
this runs against the scripted session broker of the tests
(``tests/integration/session_broker.py``) in a child process: the parent's CPU
time is the client's alone. Each run reads every partition to its end with
``batches()``; the broker serves ``--per-response`` partitions per answer (about
what Tansu serves per round at 1,000 partitions; a third of a partition per
answer, so each is served three times), once with sessions and once
answering session id 0 (the sessionless full requests Tansu gets).

    python -m bench.fetch_sessions [--partitions 1000] [--records 300]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import time
from multiprocessing.connection import Connection

import consumergroup as cg

TOPIC = "wide"


def _serve(
    conn: Connection, partitions: int, records: int, per_response: int, sessions: bool
) -> None:
    """Child process: run the session broker until told to stop, then report its fetches."""
    from tests.integration.session_broker import SessionBroker

    async def main() -> None:
        broker = SessionBroker(
            TOPIC,
            partitions,
            records,
            sessions=sessions,
            per_response=per_response,
            per_partition=max(1, records // 3),
        )
        async with broker:
            conn.send(broker.address)
            await asyncio.get_running_loop().run_in_executor(None, conn.recv)
        full = [f for f in broker.fetches if f.full]
        inc = [f for f in broker.fetches if not f.full]
        conn.send(
            {
                "full": len(full),
                "incremental": len(inc),
                "full_bytes": sum(f.size for f in full),
                "incremental_bytes": sum(f.size for f in inc),
                "named_incremental": sum(len(f.named) for f in inc),
            }
        )

    asyncio.run(main())


async def _consume(address: str, partitions: int, records: int) -> tuple[float, float, int]:
    config = cg.Config(client_id="bench-fetch-sessions")
    config.consumer.max_wait_time = 0.05
    async with cg.Consumer([address], config) as consumer:
        cpu0, wall0 = time.process_time(), time.perf_counter()
        pcs = await consumer.consume_partitions({(TOPIC, p): 0 for p in range(partitions)})

        async def drain(pc: cg.PartitionConsumer) -> int:
            n = 0
            async for batch in pc.batches():
                n += len(batch)
                if batch[-1].offset + 1 >= records:
                    break
            return n

        total = sum(await asyncio.gather(*(drain(pc) for pc in pcs.values())))
        return time.process_time() - cpu0, time.perf_counter() - wall0, total


def run(partitions: int, records: int, per_response: int, sessions: bool) -> dict[str, float]:
    """One run: the client's CPU and the broker's view of the requests."""
    parent, child = mp.Pipe()
    proc = mp.get_context("spawn").Process(
        target=_serve, args=(child, partitions, records, per_response, sessions)
    )
    proc.start()
    try:
        address = parent.recv()
        cpu, wall, total = asyncio.run(_consume(address, partitions, records))
        parent.send("stop")
        seen = parent.recv()
    finally:
        proc.join(timeout=30)
        if proc.is_alive():
            proc.kill()
    assert total == partitions * records, (total, partitions * records)
    requests = seen["full"] + seen["incremental"]
    return {
        "msgs": total,
        "cpu_us_per_msg": cpu / total * 1e6,
        "msgs_per_s": total / wall,
        "requests": requests,
        "full": seen["full"],
        "bytes_per_request": (seen["full_bytes"] + seen["incremental_bytes"]) / requests,
        "named_per_incremental": seen["named_incremental"] / max(1, seen["incremental"]),
    }


def main() -> None:
    """Both runs, one table."""
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--partitions", type=int, default=1000)
    args.add_argument("--records", type=int, default=300, help="per partition")
    args.add_argument("--per-response", type=int, default=20)
    a = args.parse_args()
    print(f"{a.partitions} partitions x {a.records} records, {a.per_response} served per answer")
    print("| broker | requests (full) | bytes/request | named/incremental | CPU us/msg | msgs/s |")
    print("|---|---:|---:|---:|---:|---:|")
    for sessions in (True, False):
        r = run(a.partitions, a.records, a.per_response, sessions)
        print(
            f"| {'sessions' if sessions else 'session id 0 (Tansu)'}"
            f" | {r['requests']} ({r['full']})"
            f" | {r['bytes_per_request']:.0f} | {r['named_per_incremental']:.1f}"
            f" | {r['cpu_us_per_msg']:.2f} | {r['msgs_per_s']:.0f} |"
        )


if __name__ == "__main__":
    main()
