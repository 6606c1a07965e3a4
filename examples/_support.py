"""Plumbing the examples share; none of it is the point of any example.

Each example is a ``ConsumerGroupHandler`` plus the ``Config`` it needs. What they
all need besides is here: the same command line, an embedded broker with a few
records when no bootstrap is given (so each runs standalone), and "``run()``
until the handler reaches ``--max-messages``, then ``close()``". Ctrl-C and SIGTERM
are the library's: ``cg.run()`` cancels the example, and its ``async with`` blocks
close the group (final commit, LeaveGroup) and the embedded broker.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import consumergroup as cg
from consumergroup.testing import EmbeddedBroker, KafkaCluster


@dataclass(frozen=True)
class Standalone:
    """What an example's embedded broker holds when no bootstrap is given."""

    records: int  # values record-0, record-1, ...; also the default --max-messages
    keyed: bool = False  # keys key-0, key-1, ... alongside the values
    per_request: int | None = None  # records per flush, so per batch (None: all at once)
    value: Callable[[int], bytes] | None = None  # record i's value, instead of record-i
    # Apache Kafka (KafkaCluster: Java 17+, jars from Maven Central on first use) instead of
    # the embedded Tansu: for what Tansu lacks (share groups).
    kafka: bool = False


async def run_until(
    group: cg.ConsumerGroup,
    topics: list[str],
    handler: cg.ConsumerGroupHandler,
    done: asyncio.Event,
) -> None:
    """``group.run(topics, handler)`` until ``done`` is set (the handler sets it at
    ``--max-messages``) or a signal cancels the example, then ``group.close()``.

    ``run()`` re-joins after rebalances; ``close()`` ends the session (the
    handler's ``cleanup`` runs), commits what was marked and leaves the group.
    Raises what ``run()`` raised if the group failed.
    """
    runner = asyncio.create_task(group.run(topics, handler))
    waiter = asyncio.create_task(done.wait())
    try:
        await asyncio.wait({runner, waiter}, return_when=asyncio.FIRST_COMPLETED)
    finally:  # also when cg.run() cancelled us: close, and let run() end
        waiter.cancel()
        await group.close()
        await runner


@contextlib.asynccontextmanager
async def broker_for(
    bootstrap: str | None, topic: str, standalone: Standalone
) -> AsyncIterator[str]:
    """The given bootstrap, or an embedded broker with ``topic`` and a few records in it."""
    if bootstrap:
        yield bootstrap
        return
    async with KafkaCluster() if standalone.kafka else EmbeddedBroker() as broker:
        await broker.create_topic(topic, partitions=3)
        n = standalone.records
        make = standalone.value or (lambda i: f"record-{i}".encode())
        step = standalone.per_request or n
        async with cg.Producer([broker.bootstrap]) as producer:
            for i in range(n):
                key = f"key-{i}".encode() if standalone.keyed else None
                # Round robin, so every partition has records whatever the keys.
                await producer.send(topic, make(i), key=key, partition=i % 3)
                if (i + 1) % step == 0:
                    await producer.flush()
        kind = "Apache Kafka" if standalone.kafka else "embedded broker"
        print(f"{kind} at {broker.bootstrap}: produced {n} records", flush=True)
        yield broker.bootstrap


def run_example(
    argv: list[str] | None,
    *,
    description: str,
    group: str,
    standalone: Standalone,
    consume: Callable[[str, argparse.Namespace], Awaitable[object]],
    add_arguments: Callable[[argparse.ArgumentParser], object] | None = None,
    topic: str = "example-topic",
    service: bool = False,
) -> int:
    """Parse the command line, then ``await consume(bootstrap, args)``; return 0.

    ``[BOOTSTRAP] [--topic T] [--group G] [--max-messages N]`` (plus what
    ``add_arguments`` adds), BOOTSTRAP defaulting to ``$KAFKA_BOOTSTRAP_SERVERS``.
    Without a bootstrap the example consumes from an embedded broker filled as
    ``standalone`` says, and ``args.max_messages`` defaults to what it holds.
    A ``service`` runs until stopped: it has no ``--max-messages``.
    """
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("bootstrap", nargs="?", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"))
    parser.add_argument("--topic", default=topic)
    parser.add_argument("--group", default=group)
    if add_arguments is not None:
        add_arguments(parser)
    if not service:
        parser.add_argument("--max-messages", type=int, default=None)
    args = parser.parse_args(argv)
    if not service and not args.max_messages:
        args.max_messages = None if args.bootstrap else standalone.records

    async def run() -> None:
        async with broker_for(args.bootstrap, args.topic, standalone) as bootstrap:
            await consume(bootstrap, args)

    # Ctrl-C / SIGTERM cancel run(): the group and the embedded broker close; exit 0.
    cg.run(run())
    return 0
