"""Manual commits: auto-commit off, ``await session.commit()`` every N messages.

    python examples/manual_commit.py [BOOTSTRAP] [--topic T] [--group G]
                                     [--commit-every N] [--max-messages N]

BOOTSTRAP (``host:port``) comes from the argument or ``$KAFKA_BOOTSTRAP_SERVERS``.
With neither, the example starts an embedded broker (Tansu, ``pip install
'consumergroup[embedded]'``), creates the topic, produces a few records and
stops once it has consumed them, so it runs standalone.

With ``auto_commit.enable = False`` nothing reaches the broker until the
handler commits: here every ``--commit-every`` messages, and once more in
``cleanup`` so the tail of each session is not read again by the next owner.
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


class CommittingHandler(cg.ConsumerGroupHandler):
    """Marks every message and commits every ``commit_every`` of them."""

    def __init__(self, commit_every: int, max_messages: int | None, done: asyncio.Event) -> None:
        self.commit_every = commit_every
        self.max_messages = max_messages
        self.done = done
        self.count = 0
        self.uncommitted = 0  # shared by all claims: they run on one event loop

    async def consume_claim(
        self, session: cg.ConsumerGroupSession, claim: cg.ConsumerGroupClaim
    ) -> None:
        async for msg in claim.messages():
            value = msg.value.decode(errors="replace") if msg.value is not None else None
            print(f"{msg.topic}/{msg.partition}@{msg.offset} value={value}")
            session.mark_message(msg)
            self.count += 1
            self.uncommitted += 1
            if self.uncommitted >= self.commit_every:
                self.uncommitted = 0
                marked = self.count
                await session.commit()  # every claim's marks so far, in one OffsetCommit
                print(f"committed after {marked} messages", flush=True)
            if self.max_messages is not None and self.count >= self.max_messages:
                self.done.set()
                return

    async def cleanup(self, session: cg.ConsumerGroupSession) -> None:
        # The session is ending (rebalance or close): commit the marks of the last
        # few messages too, or their next owner would read them again.
        await session.commit()
        print(f"committed at the end of the session ({self.count} messages)", flush=True)
        self.uncommitted = 0


async def consume(
    bootstrap: str, topic: str, group_id: str, commit_every: int, max_messages: int | None
) -> int:
    """Join ``group_id`` and consume ``topic`` with manual commits until stopped."""
    config = cg.Config(client_id="manual-commit-example")
    config.consumer.offsets.auto_commit.enable = False  # we commit ourselves
    config.consumer.offsets.initial = cg.OFFSET_OLDEST
    config.consumer.group.session_timeout = 6.0  # small: the embedded broker joins faster
    config.consumer.group.heartbeat_interval = 1.0

    done = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, done.set)

    handler = CommittingHandler(commit_every, max_messages, done)
    async with cg.ConsumerGroup([bootstrap], group_id, config) as group:
        runner = asyncio.create_task(group.run([topic], handler))
        waiter = asyncio.create_task(done.wait())
        await asyncio.wait({runner, waiter}, return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        await group.close()  # runs cleanup (our last commit), then leaves the group
        await runner
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
        await produce(broker.bootstrap, topic, values)
        print(f"embedded broker at {broker.bootstrap}: produced {len(values)} records", flush=True)
        yield broker.bootstrap


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Consume with manual commits.")
    parser.add_argument("bootstrap", nargs="?", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"))
    parser.add_argument("--topic", default="example-topic")
    parser.add_argument("--group", default="manual-commit-example")
    parser.add_argument("--commit-every", type=int, default=5)
    parser.add_argument("--max-messages", type=int, default=None)
    args = parser.parse_args(argv)
    standalone = not args.bootstrap
    limit = args.max_messages or (STANDALONE_RECORDS if standalone else None)

    async def run() -> int:
        async with broker_for(args.bootstrap, args.topic) as bootstrap:
            return await consume(bootstrap, args.topic, args.group, args.commit_every, limit)

    asyncio.run(run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
