"""The basic handler: ``claim.messages()`` + ``session.mark_message()``, ``run()`` until Ctrl-C.

    python examples/basic_handler.py [BOOTSTRAP] [--topic T] [--group G] [--max-messages N]

BOOTSTRAP (``host:port``) comes from the argument or ``$KAFKA_BOOTSTRAP_SERVERS``.
With neither, the example starts an embedded broker (Tansu, ``pip install
'consumergroup[embedded]'``), creates the topic, produces a few records and
stops once it has consumed them, so it runs standalone.

Marked offsets are committed every second (auto-commit) and once more when the
group closes, so a second run with the same group starts where this one ended.
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

STANDALONE_RECORDS = 12


class PrintHandler(cg.ConsumerGroupHandler):
    """Prints every message and marks it; sets ``done`` after ``max_messages``."""

    def __init__(self, max_messages: int | None, done: asyncio.Event) -> None:
        self.max_messages = max_messages
        self.done = done
        self.count = 0

    async def setup(self, session: cg.ConsumerGroupSession) -> None:
        print(f"session {session.generation_id}: claims {session.claims}", flush=True)

    async def consume_claim(
        self, session: cg.ConsumerGroupSession, claim: cg.ConsumerGroupClaim
    ) -> None:
        # Ends by itself when the session ends (a rebalance or close()).
        async for msg in claim.messages():
            value = msg.value.decode(errors="replace") if msg.value is not None else None
            print(f"{msg.topic}/{msg.partition}@{msg.offset} key={msg.key!r} value={value}")
            session.mark_message(msg)  # committed later: offset + 1, sarama semantics
            self.count += 1
            if self.max_messages is not None and self.count >= self.max_messages:
                self.done.set()
                return


async def consume(bootstrap: str, topic: str, group_id: str, max_messages: int | None) -> int:
    """Join ``group_id`` and print ``topic`` until Ctrl-C / SIGTERM or ``max_messages``."""
    config = cg.Config(client_id="basic-handler-example")
    config.consumer.offsets.initial = cg.OFFSET_OLDEST  # where the group has no commit yet
    config.consumer.group.session_timeout = 6.0  # small: the embedded broker joins faster
    config.consumer.group.heartbeat_interval = 1.0

    done = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, done.set)

    handler = PrintHandler(max_messages, done)
    async with cg.ConsumerGroup([bootstrap], group_id, config) as group:
        runner = asyncio.create_task(group.run([topic], handler))  # re-joins after rebalances
        waiter = asyncio.create_task(done.wait())
        await asyncio.wait({runner, waiter}, return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        await group.close()  # ends the session, commits what was marked, leaves the group
        await runner  # raises here if the group failed
    print(f"consumed {handler.count} messages", flush=True)
    return handler.count


@contextlib.asynccontextmanager
async def broker_for(bootstrap: str | None, topic: str) -> AsyncIterator[str]:
    """The given bootstrap, or an embedded broker with ``topic`` and a few records in it."""
    if bootstrap:
        yield bootstrap
        return
    async with EmbeddedBroker() as broker:
        await broker.create_topic(topic, partitions=3)
        values = [f"record-{i}".encode() for i in range(STANDALONE_RECORDS)]
        keys = [f"key-{i}".encode() for i in range(STANDALONE_RECORDS)]
        await produce(broker.bootstrap, topic, values, keys=keys)
        print(f"embedded broker at {broker.bootstrap}: produced {len(values)} records", flush=True)
        yield broker.bootstrap


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Print a topic with a consumer group.")
    parser.add_argument("bootstrap", nargs="?", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"))
    parser.add_argument("--topic", default="example-topic")
    parser.add_argument("--group", default="basic-handler-example")
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
