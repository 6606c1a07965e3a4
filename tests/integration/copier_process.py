"""An exactly-once copier in its own process, for the crash tests of test_exactly_once.py.

``python -m tests.integration.copier_process BOOTSTRAP GROUP SOURCE OUT TRANSACTIONAL_ID``
copies SOURCE to OUT through ``ConsumerGroup(producer=...)`` and prints one JSON line
per record copied (``{"copied": n}``, before the record is marked), until it is killed or
its parent goes away.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys

import consumergroup as cg
from tests.integration.group_support import consumer_protocol_config, group_config


class Copier(cg.ConsumerGroupHandler):
    """Copies every record to ``out`` in the member's transaction, ``delay`` seconds
    between its send and its mark; raises once, after its send, on the record whose value
    is ``fail_on`` (after every send while ``broken``); ``printing``: a JSON line per
    record copied, before its mark."""

    def __init__(
        self,
        out: str,
        *,
        delay: float = 0.0,
        fail_on: bytes | None = None,
        printing: bool = False,
    ) -> None:
        self.out = out
        self.delay = delay
        self.fail_on = fail_on
        self.printing = printing
        self.copied = 0
        # Raise after every send while set (tests flip it); failures: how often it raised.
        self.broken = False
        self.failures = 0

    async def consume_claim(
        self, session: cg.ConsumerGroupSession, claim: cg.ConsumerGroupClaim
    ) -> None:
        async for msg in claim.messages():
            await session.send(self.out, msg.value, key=msg.key)
            if self.broken or msg.value == self.fail_on:
                self.fail_on = None
                self.failures += 1
                once = "on every record" if self.broken else "once"
                raise RuntimeError(f"the handler fails {once}, after its send")
            self.copied += 1
            if self.printing:
                sys.stdout.write(json.dumps({"copied": self.copied}) + "\n")
                sys.stdout.flush()
            if self.delay:
                await asyncio.sleep(self.delay)
            session.mark_message(msg)


async def main(args: argparse.Namespace) -> None:
    config = consumer_protocol_config() if args.protocol == "consumer" else group_config()
    if args.protocol == "cooperative":
        config.consumer.group.rebalance.strategies = [cg.CooperativeStickyAssignor()]
    config.producer.transactional_id = args.transactional_id
    config.producer.transaction_timeout = args.transaction_timeout
    async with (
        cg.Producer(args.bootstrap.split(","), config) as producer,
        cg.ConsumerGroup(args.bootstrap.split(","), args.group, config, producer=producer) as group,
    ):
        copier = Copier(args.out, delay=args.delay, printing=True)
        run = asyncio.create_task(group.run([args.source], copier))
        parent = os.getppid()
        while os.getppid() == parent and not run.done():  # noqa: ASYNC110 - no event
            await asyncio.sleep(0.5)
        await group.close()
        await run


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    for name in ("bootstrap", "group", "source", "out", "transactional_id"):
        parser.add_argument(name)
    parser.add_argument("--delay", type=float, default=0.01)
    parser.add_argument("--transaction-timeout", type=float, default=10.0)
    parser.add_argument(
        "--protocol", choices=["classic", "cooperative", "consumer"], default="classic"
    )
    asyncio.run(main(parser.parse_args()))
