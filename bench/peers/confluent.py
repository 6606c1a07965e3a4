"""Peer: confluent-kafka (librdkafka) ``Consumer`` in a group, reading with ``consume()``.

Tuned queues as the issue asks (``queued.min.messages=1000000``,
``fetch.queue.backoff.ms=10``); otherwise librdkafka defaults plus what every peer
sets alike (earliest, group timeouts, auto-commit every 1 s). Per-message work:
``msg.error()`` (librdkafka delivers errors in-band, so a correct loop checks each).
``confluent_coop`` is the same peer with ``partition.assignment.strategy=cooperative-sticky``
(KIP-429; the rebalance callbacks then get the increments and the client assigns them
incrementally); ``confluent_consumer`` uses ``group.protocol=consumer`` (KIP-848: the broker
sets the session timeout and heartbeat interval, and librdkafka refuses the client ones).
"""

from __future__ import annotations

import threading
import time
from typing import Any

from confluent_kafka import Consumer

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

#: What librdkafka's documentation names for a low consumer latency ("How to decrease
#: message latency", librdkafka wiki): the broker's fetch wait down to the latency
#: allowed, and the backoff after an empty fetch down with it.
LATENCY_TUNED = {"fetch.wait.max.ms": 10, "fetch.error.backoff.ms": 10}


def latency(args: Any) -> None:
    """Latency mode: librdkafka's defaults (``--tuned``: :data:`LATENCY_TUNED`), the
    documented loop (``poll()``, one message per call), arrival read per message."""
    rec = Recorder(stream=True)
    consumer = Consumer(
        {
            "bootstrap.servers": args.bootstrap,
            "group.id": args.group,
            "client.id": "bench-confluent",
            "auto.offset.reset": "earliest",
            "session.timeout.ms": int(args.session_timeout * 1000),
            "heartbeat.interval.ms": int(args.heartbeat * 1000),
            **(LATENCY_TUNED if args.tuned else {}),
        }
    )
    stop = threading.Event()
    watch_stdin(stop.set)

    def on_assign(_consumer: Any, partitions: list[Any]) -> None:
        rec.event("assigned", parts=sorted(tp.partition for tp in partitions))

    log = LatencyLog()
    add = log.add
    now = time.monotonic_ns
    poll = consumer.poll
    emit({"ev": "start", "t": time.monotonic()})
    try:
        consumer.subscribe([args.topic], on_assign=on_assign)
        while not stop.is_set():
            m = poll(0.1)
            if m is not None and m.error() is None:
                add(sent_ns(m.value() or b""), now())
        rec.result(records=log.write(args.out))
    finally:
        consumer.close()


def main(cooperative: bool = False, consumer_protocol: bool = False) -> None:
    """Run one peer process to its end (``cooperative``: cooperative-sticky assignment;
    ``consumer_protocol``: ``group.protocol=consumer``)."""
    args = parse_args("confluent-kafka Consumer.consume() peer")
    emit({"ev": "hello", "t": time.monotonic()})
    if args.mode == "latency":
        latency(args)
        return
    strategy: dict[str, Any] = (
        {"partition.assignment.strategy": "cooperative-sticky"} if cooperative else {}
    )
    timeouts: dict[str, Any] = {
        "session.timeout.ms": int(args.session_timeout * 1000),
        "heartbeat.interval.ms": int(args.heartbeat * 1000),
    }
    if consumer_protocol:
        strategy, timeouts = {"group.protocol": "consumer"}, {}
    rec = Recorder(stream=True)

    def on_commit(err: Any, _partitions: list[Any]) -> None:
        # Served from consume(): the rebalance run times a moved partition's hand-over
        # from its previous owner's commit.
        rec.event("committed", ok=err is None)

    consumer = Consumer(
        {
            "on_commit": on_commit,
            **strategy,
            **timeouts,
            "bootstrap.servers": args.bootstrap,
            "group.id": args.group,
            "client.id": "bench-confluent",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": True,
            "auto.commit.interval.ms": 1000,
            "max.poll.interval.ms": max(int(args.rebalance_timeout * 1000), 10_000),
            "queued.min.messages": 1_000_000,
            "fetch.queue.backoff.ms": 10,
        }
    )
    stop = threading.Event()
    watch_stdin(stop.set)

    def on_assign(_consumer: Any, partitions: list[Any]) -> None:
        rec.event("assigned", parts=sorted(tp.partition for tp in partitions))

    def on_revoke(_consumer: Any, partitions: list[Any]) -> None:
        rec.event("revoked", parts=sorted(tp.partition for tp in partitions))

    emit({"ev": "start", "t": time.monotonic()})
    try:
        if args.mode == "stream":
            consumer.subscribe([args.topic], on_assign=on_assign, on_revoke=on_revoke)
            while not stop.is_set():
                msgs = consumer.consume(num_messages=10_000, timeout=0.1)
                run_p, run_n, run_off = -1, 0, -1
                for m in msgs:
                    if m.error() is not None:
                        continue
                    p = m.partition() or 0
                    if p != run_p and run_n:
                        rec.add(run_p, run_n, run_off)
                        run_n = 0
                    run_p, run_off = p, m.offset() or 0
                    run_n += 1
                if run_n:
                    rec.add(run_p, run_n, run_off)
                rec.maybe_flush()
            rec.result()
        else:
            consumer.subscribe([args.topic])
            expect = args.expect
            count = 0
            t_first = 0.0
            errors = 0
            n_first = 0
            cpu_first = 0.0
            while True:
                msgs = consumer.consume(num_messages=10_000, timeout=1.0)
                for m in msgs:
                    if m.error() is not None:
                        errors += 1
                count += len(msgs)
                if count and not t_first:
                    t_first = time.monotonic()
                    n_first = count
                    cpu_first = cpu_now()
                if count - errors >= expect:
                    t_last = time.monotonic()
                    break
            emit_throughput(
                count - errors, n_first, cpu_first, t_first, t_last, errors=errors, **usage()
            )
    finally:
        consumer.close()


if __name__ == "__main__":
    main()
