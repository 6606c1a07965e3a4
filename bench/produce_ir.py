"""Instructions per produced record: ``python -m bench.produce_ir``.

Counts what one record costs this producer on its own path — ``await producer.send()``
(checks, partitioner, accumulator), the batch's encoding, and its completion (the
record's ``RecordMetadata`` set on its future) — as instructions under ``valgrind
--tool=callgrind``, stable on a shared machine where timings are not. No broker: the
producer is opened on a topic of 8 partitions without connecting, the batches are
encoded as the sender would encode them and completed as an answer would.

Each run is its own valgrind process at two record counts; the difference divided by
the extra records is the per-record cost (start-up and imports cancel out). ``--run N``
is the child: it produces N records once, uninstrumented.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import subprocess
import sys


async def produce(n: int, size: int) -> None:
    """N keyless records of ``size`` bytes through send(), encode and completion."""
    import consumergroup as cg
    from consumergroup.producer.batch import CODECS
    from consumergroup.producer.producer import _Topic

    producer = cg.Producer(["127.0.0.1:9"])
    producer._loop = asyncio.get_running_loop()
    producer._open = producer._acc.accepting = True
    producer._fast = producer._fast_path()
    producer._topics["t"] = info = _Topic(producer._acc.batch_size)
    info.resize(producer._acc, "t", 8)
    info.recheck_ms = 1 << 62
    info.sticky.switch(list(range(8)), 8, 0)
    value = b"v" * size
    send = producer.send
    for _ in range(n):
        await send("t", value)
    offset = 0
    for q in producer._acc.partitions.values():
        for batch in q.queue:
            batch.encode(CODECS["none"], 1, 0, offset, False)
            batch.complete(offset, -1)
            offset += len(batch)


def main(argv: list[str] | None = None) -> None:
    """Count instructions at two record counts; print the per-record difference."""
    p = argparse.ArgumentParser(prog="python -m bench.produce_ir")
    p.add_argument("--run", type=int, help=argparse.SUPPRESS)
    p.add_argument("--size", type=int, default=100)
    p.add_argument("--counts", default="20000,60000", help="two record counts")
    args = p.parse_args(argv)
    if args.run is not None:
        asyncio.run(produce(args.run, args.size))
        return
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is needed (apt-get install valgrind)")
    low, high = (int(x) for x in args.counts.split(","))
    totals = []
    for n in (low, high):
        out = f"/tmp/produce_ir.{os.getpid()}.{n}"
        cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
        cmd += [sys.executable, "-m", "bench.produce_ir", "--run", str(n), "--size", str(args.size)]
        done = subprocess.run(cmd, capture_output=True, text=True, check=True)
        match = re.search(r"Collected : (\d+)", done.stderr)
        assert match, done.stderr[-500:]
        totals.append(int(match[1]))
        os.unlink(out)
    per = (totals[1] - totals[0]) / (high - low)
    print(f"{per:,.0f} instructions per record (send + encode + complete, {args.size} B values)")


if __name__ == "__main__":
    main()
