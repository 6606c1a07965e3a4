"""A group member in its own process, for crash tests: ``python -m tests.integration.member_process
BOOTSTRAP GROUP TOPIC``. Prints one JSON line per event: claims and handled offsets."""

from __future__ import annotations

import asyncio
import json
import sys

import consumergroup as cg
from tests.integration.group_support import group_config


class Printer(cg.ConsumerGroupHandler):
    """Prints claims and every handled message (after marking it)."""

    async def setup(self, session: cg.ConsumerGroupSession) -> None:
        print(json.dumps({"claims": session.claims}), flush=True)

    async def consume_claim(
        self, session: cg.ConsumerGroupSession, claim: cg.ConsumerGroupClaim
    ) -> None:
        async for batch in claim.batches():
            for msg in batch:
                session.mark_message(msg)
            await session.commit()
            offsets = [m.offset for m in batch]
            print(json.dumps({"p": claim.partition, "offsets": offsets}), flush=True)


async def main(bootstrap: str, group: str, topic: str) -> None:
    async with cg.ConsumerGroup([bootstrap], group, group_config()) as member:
        await member.run([topic], Printer())


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
