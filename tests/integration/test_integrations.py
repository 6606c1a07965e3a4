"""The FastAPI and aiohttp integrations on the broker: lifespan, health, metrics.

FastAPI runs in-process through ``httpx.ASGITransport`` with its lifespan driven
by the test; aiohttp through its own test server and client. The groups are real
members of real groups on the test broker. The web frameworks are imported by the tests
that use them: every pytest-xdist worker collects this module (FastAPI, aiohttp, httpx
and prometheus_client: ~2 s of imports each).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import pytest

import consumergroup as cg
from tests.conftest import TopicFactory, unique
from tests.helpers import produce
from tests.integration.group_support import Recorder, group_config
from tests.integration.share_support import Collector, share_config, share_group, wait_until

if TYPE_CHECKING:
    import httpx
    from fastapi import FastAPI

pytestmark = pytest.mark.slow

JOIN_TIMEOUT = 30.0


class Gated(Recorder):
    """A Recorder whose handlers wait for ``gate`` before reading anything."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()

    async def consume_claim(
        self, session: cg.ConsumerGroupSession, claim: cg.ConsumerGroupClaim
    ) -> None:
        waits = {
            asyncio.ensure_future(self.gate.wait()),
            asyncio.ensure_future(session.done.wait()),
        }
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for waiting in waits:
            waiting.cancel()
        await super().consume_claim(session, claim)


class Fetches(cg.GroupObserver):
    """Records the on_fetch events of a group."""

    def __init__(self) -> None:
        self.records = 0
        self.nbytes = 0
        self.latencies: list[float] = []

    def on_fetch(self, group_id: str, latency: float, records: int, nbytes: int) -> None:
        self.latencies.append(latency)
        self.records += records
        self.nbytes += nbytes


class Stuck(cg.ConsumerGroupHandler):
    """Ignores the session ending: only the runtime's cancellation stops it."""

    async def consume_claim(
        self, session: cg.ConsumerGroupSession, claim: cg.ConsumerGroupClaim
    ) -> None:
        await asyncio.sleep(3600)


async def poll(get: object, path: str, status: int, timeout: float = JOIN_TIMEOUT) -> object:
    """GET ``path`` until it answers ``status``; returns the JSON body."""
    import httpx

    deadline = time.monotonic() + timeout
    while True:
        resp = await get(path)  # type: ignore[operator]
        code = resp.status_code if isinstance(resp, httpx.Response) else resp.status
        body = resp.json() if isinstance(resp, httpx.Response) else await resp.json()
        if code == status:
            return body
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} still answers {code} after {timeout}s: {body}")
        await asyncio.sleep(0.1)


def samples(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """The samples of metric ``name`` in an exposition: sorted labels -> value."""
    from prometheus_client.parser import text_string_to_metric_families

    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name:
                out[tuple(sorted(s.labels.items()))] = s.value
    return out


@contextlib.asynccontextmanager
async def fastapi_app(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """The app's lifespan running, and a client that talks to it in-process."""
    import httpx

    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://app") as client,
    ):
        yield client


async def test_fastapi_readiness_follows_the_group_and_metrics_show_lag_draining(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    import httpx
    from fastapi import FastAPI
    from prometheus_client import CollectorRegistry

    from consumergroup.integrations.fastapi import ConsumerGroupLifespan, health_router

    topic = await new_topic(partitions=2)
    await produce(bootstrap, topic, [f"v{i}".encode() for i in range(20)])
    group = cg.ConsumerGroup([bootstrap], unique(), group_config())
    handler = Gated()
    fetches = Fetches()
    group.add_observer(fetches)
    registry = CollectorRegistry()
    app = FastAPI(lifespan=ConsumerGroupLifespan(group, [topic], handler, close_timeout=10))
    app.include_router(health_router(group, registry=registry))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
        before = await client.get("/health/ready")  # the app has not started: no member yet
        assert before.status_code == 503 and before.json()["groups"][0]["state"] == "starting"

        async with app.router.lifespan_context(app):
            body = await poll(client.get, "/health/ready", 200)
            assert isinstance(body, dict) and body["status"] == "ready"
            (stats,) = body["groups"]
            assert stats["state"] == "stable" and stats["claims"] == {topic: [0, 1]}
            assert (await client.get("/health/live")).status_code == 200

            # Nothing handed out yet: the whole topic is lag.
            deadline = time.monotonic() + JOIN_TIMEOUT
            while True:
                text = (await client.get("/metrics")).text
                if sum(samples(text, "consumergroup_high_watermark").values()) == 20:
                    break
                assert time.monotonic() < deadline, text
                await asyncio.sleep(0.1)
            assert sum(samples(text, "consumergroup_lag").values()) == 20, text

            handler.gate.set()
            while len(handler.seen) < 20:
                assert time.monotonic() < deadline, handler.seen
                await asyncio.sleep(0.05)
            text = (await client.get("/metrics")).text
            lag = samples(text, "consumergroup_lag")
            assert set(lag) == {
                (("group", group.group_id), ("partition", str(p)), ("topic", topic)) for p in (0, 1)
            }
            assert set(lag.values()) == {0.0}, text
            consumed = samples(text, "consumergroup_records_consumed_total")
            assert sum(consumed.values()) == 20, text
            state = samples(text, "consumergroup_state")
            assert state[(("group", group.group_id), ("state", "stable"))] == 1.0
            # Every Fetch round trip was observed; the records came in those responses.
            assert fetches.records == 20 and fetches.nbytes > 0
            assert all(latency >= 0 for latency in fetches.latencies)
            fetched = samples(text, "consumergroup_fetch_latency_seconds_count")
            assert fetched[(("group", group.group_id),)] == len(fetches.latencies)
            assert sum(samples(text, "consumergroup_bytes_consumed_total").values()) == (
                fetches.nbytes
            )
            # The group's events reached the exporter: the join, auto-commits, heartbeats.
            g = (("group", group.group_id),)
            assert samples(text, "consumergroup_rebalance_duration_seconds_count")[g] == 1
            assert samples(text, "consumergroup_last_heartbeat_age_seconds")[g] < 6.0
            while sum(samples(text, "consumergroup_committed_offset").values()) != 20:
                assert time.monotonic() < deadline, text  # auto-commit every 0.2 s
                await asyncio.sleep(0.1)
                text = (await client.get("/metrics")).text
            assert samples(text, "consumergroup_commit_latency_seconds_count")[g] >= 1

        after = await client.get("/health/ready")
        assert after.status_code == 503 and after.json()["groups"][0]["state"] == "closed"
    assert group.state is cg.GroupState.CLOSED


@pytest.mark.kafka_only("share groups need Apache Kafka 4.2+ (Tansu has none)")
async def test_fastapi_runs_a_share_group_with_health_and_metrics(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    """A ShareGroup in ConsumerGroupLifespan (concurrency=4): readiness once it is stable
    with an assignment, its records handled (at most 4 at once), /metrics shows them
    accepted; closed when the app stops."""
    from fastapi import FastAPI
    from prometheus_client import CollectorRegistry

    from consumergroup.integrations.fastapi import ConsumerGroupLifespan, health_router

    topic = await new_topic(partitions=2)
    group_id = unique("share")
    await share_group(bootstrap, group_id)
    await produce(bootstrap, topic, [b"v%d" % i for i in range(20)])
    group = cg.ShareGroup([bootstrap], group_id, share_config())
    handler = Collector(delay=0.01)
    registry = CollectorRegistry()
    lifespan = ConsumerGroupLifespan(group, [topic], handler, close_timeout=10, concurrency=4)
    app = FastAPI(lifespan=lifespan)
    app.include_router(health_router(group, registry=registry))
    async with fastapi_app(app) as client:
        body = await poll(client.get, "/health/ready", 200)
        assert isinstance(body, dict)
        (stats,) = body["groups"]
        assert stats["protocol"] == "share" and stats["state"] == "stable"
        assert stats["assignment"] == {topic: [0, 1]}
        await wait_until(lambda: len(handler.seen) >= 20, JOIN_TIMEOUT, "the 20 records")
        accepted: dict[tuple[tuple[str, str], ...], float] = {}
        deadline = time.monotonic() + JOIN_TIMEOUT
        while sum(accepted.values()) < 20:
            assert time.monotonic() < deadline, accepted
            await asyncio.sleep(0.1)
            text = (await client.get("/metrics")).text
            all_acks = samples(text, "consumergroup_share_acknowledged_total")
            accepted = {k: v for k, v in all_acks.items() if ("type", "accept") in k}
        assert {dict(k)["group"] for k in accepted} == {group_id}
        assert (await client.get("/health/live")).status_code == 200
    assert group.state is cg.GroupState.CLOSED
    assert len(handler.offsets()) == 20 and handler.most_running <= 4


async def test_fastapi_a_group_failing_for_good_fails_readiness_and_liveness_not_the_server(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    from fastapi import FastAPI
    from prometheus_client import CollectorRegistry

    from consumergroup.integrations.fastapi import ConsumerGroupLifespan, health_router

    topic = await new_topic(partitions=1)
    await produce(bootstrap, topic, [b"poison"])
    group = cg.ConsumerGroup([bootstrap], unique(), group_config())
    handler = Recorder()
    handler.fail_on = lambda msg: msg.value == b"poison"  # return_errors off: fatal
    app = FastAPI(lifespan=ConsumerGroupLifespan(group, [topic], handler, close_timeout=10))
    app.include_router(health_router(group, registry=CollectorRegistry()))

    @app.get("/hello")
    async def hello() -> dict[str, str]:
        return {"hello": "world"}

    async with fastapi_app(app) as client:
        deadline = time.monotonic() + JOIN_TIMEOUT
        while group.state is not cg.GroupState.FAILED:
            assert time.monotonic() < deadline, group.stats()
            await asyncio.sleep(0.05)
        ready = await client.get("/health/ready")
        assert ready.status_code == 503
        (stats,) = ready.json()["groups"]
        assert stats["state"] == "failed" and not stats["ready"]
        assert "boom" in stats["error"]
        # Liveness fails too: the orchestrator restarts a process whose group gave up.
        live = await client.get("/health/live")
        assert live.status_code == 503
        assert live.json()["status"] == "failed"
        [failed] = live.json()["failed"]
        assert failed["group_id"] == group.group_id and "boom" in failed["error"]
        assert (await client.get("/hello")).json() == {"hello": "world"}
    assert group.state is cg.GroupState.FAILED  # close() of a failed group leaves it FAILED


async def test_fastapi_liveness_fails_while_the_loop_stalls(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    from fastapi import FastAPI

    from consumergroup.integrations.fastapi import ConsumerGroupLifespan, health_router

    topic = await new_topic(partitions=1)
    group = cg.ConsumerGroup([bootstrap], unique(), group_config())
    app = FastAPI(lifespan=ConsumerGroupLifespan(group, [topic], Recorder(), close_timeout=10))
    app.include_router(health_router(group, stall_threshold=0.5, metrics=False))
    async with fastapi_app(app) as client:
        assert (await client.get("/metrics")).status_code == 404  # metrics=False
        live = await poll(client.get, "/health/live", 200)
        assert isinstance(live, dict) and live["status"] == "alive"
        time.sleep(1.5)  # noqa: ASYNC251 - the point: a handler blocking the loop
        stalled = await client.get("/health/live")
        assert stalled.status_code == 503, stalled.json()
        assert stalled.json()["status"] == "stalled" and stalled.json()["loop_lag"] > 0.5
        await poll(client.get, "/health/live", 200, timeout=10)


async def test_fastapi_shutdown_is_bounded_by_close_timeout(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    from fastapi import FastAPI
    from prometheus_client import CollectorRegistry

    from consumergroup.integrations.fastapi import ConsumerGroupLifespan, health_router

    topic = await new_topic(partitions=1)
    await produce(bootstrap, topic, [b"x"])
    config = group_config(consumer__group__rebalance__timeout=60.0)
    group = cg.ConsumerGroup([bootstrap], unique(), config)
    app = FastAPI(lifespan=ConsumerGroupLifespan(group, [topic], Stuck(), close_timeout=1.0))
    app.include_router(health_router(group, registry=CollectorRegistry()))
    async with fastapi_app(app) as client:
        await poll(client.get, "/health/ready", 200)
        stopping = time.monotonic()
    # The handler would hold the session for the 60 s rebalance timeout; the service
    # gives the group 1 s (+ the runner's grace) and goes.
    assert time.monotonic() - stopping < 10, time.monotonic() - stopping


async def test_aiohttp_routes_and_cleanup_ctx(bootstrap: str, new_topic: TopicFactory) -> None:
    from aiohttp import web
    from aiohttp.test_utils import TestClient, TestServer
    from prometheus_client import CollectorRegistry

    from consumergroup.integrations.aiohttp import CONSUMER_GROUPS, setup_consumer_group

    topic = await new_topic(partitions=3)
    await produce(bootstrap, topic, [f"v{i}".encode() for i in range(30)])
    group = cg.ConsumerGroup([bootstrap], unique(), group_config())
    handler = Recorder()
    app = web.Application()
    setup_consumer_group(app, group, [topic], handler, registry=CollectorRegistry())
    assert app[CONSUMER_GROUPS] == [group]
    client = TestClient(TestServer(app, host="127.0.0.1"))
    async with client:  # starts the app: cleanup_ctx starts the group in the background
        body = await poll(client.get, "/health/ready", 200)
        assert isinstance(body, dict)
        assert body["groups"][0]["claims"] == {topic: [0, 1, 2]}
        live = await client.get("/health/live")
        assert live.status == 200 and (await live.json())["status"] == "alive"
        deadline = time.monotonic() + JOIN_TIMEOUT
        while len(handler.seen) < 30:
            assert time.monotonic() < deadline, handler.seen
            await asyncio.sleep(0.05)
        resp = await client.get("/metrics")
        assert resp.status == 200 and resp.content_type == "text/plain"
        text = await resp.text()
        assert sum(samples(text, "consumergroup_records_consumed_total").values()) == 30
        assert set(samples(text, "consumergroup_lag").values()) == {0.0}, text
    # Closing the client ran the cleanup: the group committed, left and closed.
    assert group.state is cg.GroupState.CLOSED


async def test_position_is_what_the_reader_got_not_what_was_fetched(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    topic = await new_topic(partitions=1)
    await produce(bootstrap, topic, [f"v{i}".encode() for i in range(10)], partition=0)
    async with cg.Consumer([bootstrap]) as consumer:
        pc = await consumer.consume_partition(topic, 0, cg.OFFSET_OLDEST)
        assert pc.position == 0
        got = []
        async for msg in pc.messages():
            got.append(msg.offset)
            if len(got) == 3:
                break
        deadline = time.monotonic() + JOIN_TIMEOUT
        while pc.next_offset < 10:  # the rest is fetched (and buffered), not handed out
            assert time.monotonic() < deadline, pc
            await asyncio.sleep(0.05)
        assert pc.position == 3
        async for batch in pc.batches():
            got.extend(m.offset for m in batch)
            if got[-1] == 9:
                break
        assert got == list(range(10)) and pc.position == 10
        await pc.close()


async def test_stopping_during_the_join_is_quiet(
    bootstrap: str, new_topic: TopicFactory, caplog: pytest.LogCaptureFixture
) -> None:
    from fastapi import FastAPI

    from consumergroup.integrations.fastapi import ConsumerGroupLifespan

    topic = await new_topic(partitions=1)
    for pause in (0.0, 0.05, 0.5):  # before run() starts, while it connects, while it joins
        group = cg.ConsumerGroup([bootstrap], unique(), group_config())
        lifespan = ConsumerGroupLifespan(group, [topic], Recorder(), close_timeout=5)
        async with lifespan(FastAPI()) as state:  # the lifespan state requests see
            assert state == {"consumer_groups": [group]}
            await asyncio.sleep(pause)
        assert group.state is cg.GroupState.CLOSED
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not errors, [r.getMessage() for r in errors]
