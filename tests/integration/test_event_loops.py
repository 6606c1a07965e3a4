"""The runtime on uvloop, the event loop uvicorn (and so most FastAPI services) runs when
it is installed: produce, consume, commit and resume on the broker, on plain TCP here and
through TLS in ``test_security.py``.

uvloop's transports implement ``asyncio.Transport`` without deriving from it, so code that
checks ``isinstance(transport, asyncio.Transport)`` fails on every connection there.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

import consumergroup as cg
from tests.conftest import TopicFactory, unique
from tests.integration.group_support import Recorder, running_member, wait_for

uvloop = pytest.importorskip("uvloop", reason="uvloop is in the dev dependencies")

pytestmark = pytest.mark.slow


def on_uvloop(scenario: Callable[[], Awaitable[None]]) -> None:
    """Run ``scenario`` to its end on a new uvloop loop, in this thread (call it in a
    thread of its own: the test's loop runs in the main one)."""
    runner = asyncio.Runner(loop_factory=uvloop.new_event_loop)
    with runner:
        assert type(runner.get_loop()).__module__.startswith("uvloop")

        async def main() -> None:
            await scenario()

        runner.run(main())


async def produce_and_resume(bootstrap: str, topic: str, config: cg.Config | None = None) -> None:
    """Our producer writes 200 records, a member reads and commits them all, and a second
    member of the group, after it, starts where the first committed: records written
    after the first closed, none read twice."""
    group = unique("uvloop")
    async with cg.Producer([bootstrap], config) as producer:
        for i in range(200):
            await producer.send(topic, b"%d" % i, key=b"%d" % (i % 7))
        await producer.flush()
    first = Recorder("first")
    async with running_member(bootstrap, group, [topic], first, config):
        await wait_for(lambda: len(first.seen) == 200, 60, "the first member's 200 records")
    async with cg.Producer([bootstrap], config) as producer:
        await producer.send_and_wait(topic, b"after")
    second = Recorder("second")
    async with running_member(bootstrap, group, [topic], second, config):
        await wait_for(lambda: len(second.seen) == 1, 60, "the record written after")
        await asyncio.sleep(2)  # anything read twice would come now
    assert len(second.seen) == 1, second.seen
    assert len({(p, o) for _, p, o in first.seen}) == 200


async def test_a_group_produces_consumes_and_resumes_on_uvloop(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    topic = await new_topic(partitions=3)
    await asyncio.to_thread(on_uvloop, lambda: produce_and_resume(bootstrap, topic))
