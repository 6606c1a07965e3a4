"""Peer: aiokafka's ``AIOKafkaConsumer`` in a group, reading with ``getmany()``.

Defaults except what every peer sets alike: ``auto_offset_reset="earliest"``, the
group timeouts from the command line, auto-commit every 1 s. Per-message work: none
(``getmany`` hands out one list per partition; only its length is read), or with
``keep`` (the ``aiokafka_keep`` peer) every message kept in one list until the end.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener

from ._common import (
    LatencyLog,
    Recorder,
    cpu_now,
    emit,
    emit_throughput,
    parse_args,
    sent_ns,
    usage,
    watch_stdin,
)


class _Listener(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, rec: Recorder) -> None:
        self.rec = rec

    async def on_partitions_revoked(self, revoked: object) -> None:
        self.rec.event("revoked", parts=sorted(tp.partition for tp in revoked))  # type: ignore[attr-defined]

    async def on_partitions_assigned(self, assigned: object) -> None:
        self.rec.event("assigned", parts=sorted(tp.partition for tp in assigned))  # type: ignore[attr-defined]


async def latency(args: Any) -> None:
    """Latency mode: aiokafka's defaults (its documentation names no latency setting
    beyond them: ``fetch_min_bytes=1``), ``getmany()``; arrival read once per answer."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        client_id="bench-aiokafka",
        auto_offset_reset="earliest",
        session_timeout_ms=int(args.session_timeout * 1000),
        heartbeat_interval_ms=int(args.heartbeat * 1000),
    )
    await consumer.start()
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    watch_stdin(lambda: loop.call_soon_threadsafe(stop.set))
    rec = Recorder(stream=True)
    log = LatencyLog()
    add = log.add
    now = time.monotonic_ns
    emit({"ev": "start", "t": time.monotonic()})
    try:
        consumer.subscribe([args.topic], listener=_Listener(rec))
        while not stop.is_set():
            data = await consumer.getmany(timeout_ms=100)
            t = now()
            for msgs in data.values():
                for m in msgs:
                    add(sent_ns(m.value or b""), t)
        rec.result(records=log.write(args.out))
    finally:
        await consumer.stop()


async def amain(keep: bool = False) -> None:
    """Run one peer process to its end (``keep``: hold on to every message read)."""
    args = parse_args("aiokafka AIOKafkaConsumer.getmany() peer")
    emit({"ev": "hello", "t": time.monotonic()})
    if args.mode == "latency":
        await latency(args)
        return
    consumer = AIOKafkaConsumer(
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        client_id="bench-aiokafka",
        auto_offset_reset="earliest",
        enable_auto_commit=True,
        auto_commit_interval_ms=1000,
        session_timeout_ms=int(args.session_timeout * 1000),
        heartbeat_interval_ms=int(args.heartbeat * 1000),
        rebalance_timeout_ms=int(args.rebalance_timeout * 1000),
    )
    await consumer.start()
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    watch_stdin(lambda: loop.call_soon_threadsafe(stop.set))
    rec = Recorder(stream=True)
    emit({"ev": "start", "t": time.monotonic()})
    try:
        if args.mode == "stream":
            consumer.subscribe([args.topic], listener=_Listener(rec))
            while not stop.is_set():
                data = await consumer.getmany(timeout_ms=100)
                for tp, msgs in data.items():
                    rec.add(tp.partition, len(msgs), msgs[-1].offset)
                rec.maybe_flush()
            rec.result()
        else:
            consumer.subscribe([args.topic])
            expect = args.expect
            count = 0
            t_first = 0.0
            n_first = 0
            cpu_first = 0.0
            kept: list[object] = []
            while True:
                data = await consumer.getmany(timeout_ms=1000)
                for msgs in data.values():
                    if keep:
                        kept += msgs
                    count += len(msgs)
                if count and not t_first:
                    t_first = time.monotonic()
                    n_first = count
                    cpu_first = cpu_now()
                if count >= expect:
                    t_last = time.monotonic()
                    break
            emit_throughput(count, n_first, cpu_first, t_first, t_last, **usage())
    finally:
        await consumer.stop()


if __name__ == "__main__":
    asyncio.run(amain())
