"""The consumergroup share-group peer: one member of a share group (KIP-932).

``python -m bench.peers.cg_share --bootstrap B --topic T --group G [--concurrency N]
[--delay-ms D] [--acquire-mode record_limit|batch_optimized]``: a
:class:`consumergroup.ShareGroup` whose handler counts each record (per partition) and,
with ``--delay-ms``, awaits that long first (a handler doing I/O); returning accepts the
record (implicit acknowledgement). ``--acquire-mode`` sets ``config.share.acquire_mode``.
Stream mode of the peers' protocol (``bench/peers/_common.py``): ``consumed`` items every
100 ms, ``result`` when the harness writes a line on stdin (then the member closes:
acknowledges, leaves).
"""

from __future__ import annotations

import argparse
import asyncio
import time

import consumergroup as cg

from ._common import FLUSH_INTERVAL, apply_gc_mode, emit, usage, watch_stdin


class Counting(cg.ShareGroupHandler):
    """Counts records per partition (the least a handler does with each)."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.counts: dict[int, int] = {}
        self.last: dict[int, int] = {}
        self.total = 0
        self.t_first = 0.0
        self.t_last = 0.0

    async def consume(self, session: cg.ShareSession, record: cg.ShareRecord) -> None:
        if self.delay:
            await asyncio.sleep(self.delay)
        p = record.partition
        self.counts[p] = self.counts.get(p, 0) + 1
        self.last[p] = record.offset

    def flush(self) -> None:
        """One ``consumed`` line with what was handled since the last one."""
        if not self.counts:
            return
        now = time.monotonic()
        counts, self.counts = self.counts, {}
        items = [[p, now, n, self.last[p]] for p, n in counts.items()]
        n = sum(counts.values())
        if not self.total:
            self.t_first = now
        self.total += n
        self.t_last = now
        emit({"ev": "consumed", "items": items})


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--delay-ms", type=float, default=0.0)
    parser.add_argument(
        "--acquire-mode", choices=("record_limit", "batch_optimized"), default="record_limit"
    )
    args = parser.parse_args()
    gc_mode = apply_gc_mode()
    emit({"ev": "hello", "t": time.monotonic()})
    config = cg.Config(client_id="bench-share")
    config.share.close_timeout = 10.0
    config.share.acquire_mode = args.acquire_mode
    handler = Counting(args.delay_ms / 1000)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    watch_stdin(lambda: loop.call_soon_threadsafe(stop.set))

    async def flusher() -> None:
        while True:
            await asyncio.sleep(FLUSH_INTERVAL)
            handler.flush()

    async with cg.ShareGroup([args.bootstrap], args.group, config) as member:
        emit({"ev": "start", "t": time.monotonic()})
        flushing = asyncio.create_task(flusher())
        running = asyncio.create_task(
            member.run([args.topic], handler, concurrency=args.concurrency)
        )
        await stop.wait()
        await member.close()
        await running
        flushing.cancel()
        handler.flush()
    emit(
        {
            "ev": "result",
            "count": handler.total,
            "t_first": handler.t_first,
            "t_last": handler.t_last,
            "gc": gc_mode,
            **usage(),
        }
    )


if __name__ == "__main__":
    asyncio.run(main())
