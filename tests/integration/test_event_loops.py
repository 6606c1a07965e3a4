"""The runtime on uvloop, the event loop uvicorn (and so most FastAPI services) runs when
it is installed: produce, consume, commit and resume on the broker, on plain TCP here and
through TLS in ``test_security.py``; and a FastAPI app served by ``uvicorn`` itself, as a
user deploys one.

uvloop's transports implement ``asyncio.Transport`` without deriving from it, so code that
checks ``isinstance(transport, asyncio.Transport)`` fails on every connection there.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable

import pytest

import consumergroup as cg
from consumergroup.client import Client
from consumergroup.group.offsets import OffsetManager
from consumergroup.testing import free_port
from tests.conftest import TopicFactory, unique
from tests.helpers import produce
from tests.integration.cli_support import ROOT, reaped
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
    async with running_member(bootstrap, group, [topic], second, config) as (member, _):

        def at_the_end() -> bool:
            # Every partition handed out up to its end (201 records in all): anything read
            # twice would have reached the handler by now.
            parts = member.stats().partitions.values()
            return sum(p.high_water_mark for p in parts) == 201 and all(
                p.position == p.high_water_mark for p in parts
            )

        await wait_for(at_the_end, 60, "the second member at the end of every partition")
    assert len(second.seen) == 1, second.seen
    assert len({(p, o) for _, p, o in first.seen}) == 200


async def test_a_group_produces_consumes_and_resumes_on_uvloop(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    topic = await new_topic(partitions=3)
    await asyncio.to_thread(on_uvloop, lambda: produce_and_resume(bootstrap, topic))


async def test_a_fastapi_app_under_uvicorn_on_uvloop_consumes_and_commits_at_shutdown(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    """``uvicorn --factory ... --loop uvloop`` (``--loop auto`` picks it when installed):
    the lifespan runs the group, ``/health/ready`` says so, and SIGTERM (uvicorn's graceful
    shutdown) closes it with a final commit of everything handled."""
    import httpx  # here, not at the top: every pytest-xdist worker collects this module

    topic, group, port = await new_topic(partitions=3), unique("uvicorn"), free_port()
    await produce(bootstrap, topic, [b"%d" % i for i in range(120)])
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "uvicorn", "--factory", "tests.integration.uvicorn_app:make_app",
        "--host", "127.0.0.1", "--port", str(port), "--loop", "uvloop",
        cwd=ROOT,
        env={**os.environ, "CG_BOOTSTRAP": bootstrap, "CG_TOPIC": topic, "CG_GROUP": group},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    async with reaped(proc):
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=5) as http:
            got: dict[str, object] = {}
            deadline = time.monotonic() + 60
            while got.get("count") != 120:
                assert time.monotonic() < deadline, f"the app never handled 120 records: {got}"
                await asyncio.sleep(0.2)
                with contextlib.suppress(httpx.TransportError):  # not listening yet
                    got = (await http.get("/count")).json()
            assert str(got["loop"]).startswith("uvloop"), got
            ready = await http.get("/health/ready")
            assert ready.status_code == 200, ready.text
        proc.send_signal(signal.SIGTERM)
        out, err = await asyncio.wait_for(proc.communicate(), 30)
    # Recent uvicorn re-raises the signal once it has shut down: -SIGTERM is a clean exit.
    logs = out.decode() + err.decode()
    assert proc.returncode in (0, -signal.SIGTERM), f"uvicorn exited {proc.returncode}:\n{logs}"
    assert "Application shutdown complete" in err.decode(), err.decode()
    assert "Traceback" not in err.decode(), err.decode()
    async with Client([bootstrap]) as client:
        offsets = await OffsetManager(client, group, cg.Config()).fetch_committed(
            [(topic, p) for p in range(3)]
        )
    assert sum(offsets[(topic, p)][0] for p in range(3)) == 120, offsets
