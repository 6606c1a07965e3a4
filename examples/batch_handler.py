"""Batches: ``claim.batches()`` (the fast path), marking the last message of each batch.

    python examples/batch_handler.py [BOOTSTRAP] [--topic T] [--group G] [--max-messages N]

BOOTSTRAP (``host:port``) comes from the argument or ``$KAFKA_BOOTSTRAP_SERVERS``.
With neither, the example starts an embedded broker (Tansu, ``pip install
'consumergroup[embedded]'``), creates the topic, produces a few hundred records
and stops once it has consumed them, so it runs standalone.

A batch is a list of messages as one fetch decoded them, in offset order.
Marking its last message marks the whole batch (sarama semantics: the commit
is that offset + 1).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator

import consumergroup as cg
from consumergroup.demo_producer import produce
from consumergroup.testing import EmbeddedBroker

STANDALONE_RECORDS = 300


class BatchHandler(cg.ConsumerGroupHandler):
    """Processes whole batches; marks each batch's last message."""

    def __init__(self, max_messages: int | None, done: asyncio.Event) -> None:
        self.max_messages = max_messages
        self.done = done
        self.count = 0

    async def consume_claim(
        self, session: cg.ConsumerGroupSession, claim: cg.ConsumerGroupClaim
    ) -> None:
        async for batch in claim.batches():
            if not batch:
                continue
            total_bytes = sum(len(m.value or b"") for m in batch)  # "process" the batch
            first, last = batch[0], batch[-1]
            print(
                f"{claim.topic}/{claim.partition}@{first.offset}..{last.offset} "
                f"{len(batch)} messages {total_bytes} bytes "
                f"(high watermark {claim.high_water_mark_offset})",
                flush=True,
            )
            session.mark_message(last)  # one mark for the whole batch
            self.count += len(batch)
            if self.max_messages is not None and self.count >= self.max_messages:
                self.done.set()
                return


async def consume(bootstrap: str, topic: str, group_id: str, max_messages: int | None) -> int:
    """Join ``group_id`` and consume ``topic`` batch by batch until stopped."""
    config = cg.Config(client_id="batch-handler-example")
    config.consumer.offsets.initial = cg.OFFSET_OLDEST
    config.consumer.group.session_timeout = 6.0  # small: the embedded broker joins faster
    config.consumer.group.heartbeat_interval = 1.0

    done = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, done.set)

    handler = BatchHandler(max_messages, done)
    async with cg.ConsumerGroup([bootstrap], group_id, config) as group:
        runner = asyncio.create_task(group.run([topic], handler))
        waiter = asyncio.create_task(done.wait())
        await asyncio.wait({runner, waiter}, return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        await group.close()  # final commit of the marked batches, LeaveGroup
        await runner
    print(f"consumed {handler.count} messages", flush=True)
    return handler.count


@contextlib.asynccontextmanager
async def broker_for(bootstrap: str | None, topic: str) -> AsyncIterator[str]:
    """The given bootstrap, or an embedded broker with ``topic`` and some records in it."""
    if bootstrap:
        yield bootstrap
        return
    async with EmbeddedBroker() as broker:
        await broker.create_topic(topic, partitions=3)
        values = [f"record-{i}".encode() for i in range(STANDALONE_RECORDS)]
        # Several produce calls, so each partition holds several record batches.
        for start in range(0, len(values), 50):
            await produce(broker.bootstrap, topic, values[start : start + 50])
        print(f"embedded broker at {broker.bootstrap}: produced {len(values)} records", flush=True)
        yield broker.bootstrap


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Consume a topic batch by batch.")
    parser.add_argument("bootstrap", nargs="?", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"))
    parser.add_argument("--topic", default="example-topic")
    parser.add_argument("--group", default="batch-handler-example")
    parser.add_argument("--max-messages", type=int, default=None)
    args = parser.parse_args(argv)
    standalone = not args.bootstrap
    limit = args.max_messages or (STANDALONE_RECORDS if standalone else None)

    async def run() -> int:
        async with broker_for(args.bootstrap, args.topic) as bootstrap:
            return await consume(bootstrap, args.topic, args.group, limit)

    asyncio.run(run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
