"""The group through broker faults: an outage of several seconds, a frozen broker.

A dedicated Tansu broker advertises the port of a TcpProxy in front of it, so
every connection the member opens goes through the proxy. Closing the proxy
refuses every connection (the broker looks down); ``pause()`` makes it hang.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence

import pytest

import consumergroup as cg
from consumergroup.testing import EmbeddedBroker, free_port
from tests.conftest import unique
from tests.helpers import TcpProxy, produce
from tests.integration.group_support import Recorder, group_config, wait_for
from tests.integration.test_group import committed_offsets

pytestmark = pytest.mark.slow

PARTITIONS = 2
TopicPartition = tuple[str, int]


class Losing(Recorder):
    """A Recorder that notes the partitions it lost and those it gave up gracefully."""

    def __init__(self) -> None:
        super().__init__()
        self.lost: list[list[TopicPartition]] = []
        self.revoked: list[list[TopicPartition]] = []

    async def on_lost(self, partitions: Sequence[TopicPartition]) -> None:
        self.lost.append(list(partitions))

    async def on_revoked(
        self, session: cg.ConsumerGroupSession, partitions: Sequence[TopicPartition]
    ) -> None:
        self.revoked.append(list(partitions))


def fault_config() -> cg.Config:
    config = group_config(consumer__return_errors=True)
    config.net.dial_timeout = 1.0
    config.net.read_timeout = 2.0
    config.metadata.retry.backoff = 0.1
    config.consumer.group.rebalance.retry.max = 1
    return config


async def test_run_survives_a_broker_outage_and_loses_nothing() -> None:
    """Defects 3, 5 and 17: an outage ended run() with a raw ExceptionGroup (no broker
    answering was not transient, join gave up after 4 tries, ...). Now the member keeps
    rejoining with backoff, reports each failure, and resumes by itself."""
    port = free_port()
    topic = unique("outage")
    async with EmbeddedBroker(advertised_port=port) as broker, contextlib.AsyncExitStack() as stack:
        group = unique()
        handler = Losing()
        member = cg.ConsumerGroup([f"127.0.0.1:{port}"], group, fault_config())
        stack.push_async_callback(member.close, 5.0)  # also when the test fails
        errors: list[cg.ConsumerError] = []

        async def collect() -> None:
            async for err in member.errors():
                errors.append(err)

        collector = asyncio.create_task(collect())
        states: list[cg.GroupState] = []

        class Watch(cg.GroupObserver):
            def on_state(self, group_id: str, old: cg.GroupState, new: cg.GroupState) -> None:
                states.append(new)

        member.add_observer(Watch())
        async with TcpProxy("127.0.0.1", broker.port, listen_port=port) as proxy:
            await broker.create_topic(topic, PARTITIONS)
            run = asyncio.create_task(member.run([topic], handler))
            await produce(proxy.address, topic, [str(i).encode() for i in range(100)])
            await wait_for(lambda: len(handler.seen) == 100, 30, "the first 100")
        # The proxy is gone: every connection is refused, for longer than the session timeout.
        outage = time.monotonic()
        await wait_for(lambda: bool(handler.lost), 20, "the member to notice it lost its claims")
        await asyncio.sleep(max(0.0, 8.0 - (time.monotonic() - outage)))
        assert not run.done(), run
        assert member.state in (cg.GroupState.REBALANCING, cg.GroupState.JOINING)
        async with TcpProxy("127.0.0.1", broker.port, listen_port=port) as proxy:
            await produce(proxy.address, topic, [str(i).encode() for i in range(100, 200)])
            await wait_for(lambda: len(set(handler.seen)) == 200, 60, "consumption to resume")
            assert not run.done()
            await asyncio.wait_for(member.close(), 20)
            await asyncio.wait_for(run, 5)
            await asyncio.wait_for(collector, 5)
            committed = await committed_offsets(proxy.address, group, topic, PARTITIONS)
    handled: dict[int, set[int]] = {}
    for _, partition, offset in handler.seen:
        handled.setdefault(partition, set()).add(offset)
    assert sum(len(o) for o in handled.values()) == 200, "a message was lost"
    assert all(o == set(range(len(o))) for o in handled.values())
    assert committed == {p: len(handled[p]) for p in range(PARTITIONS)}
    assert handler.lost[0] == sorted((topic, p) for p in range(PARTITIONS))
    assert errors and all(e.retriable for e in errors), errors
    assert cg.GroupState.FAILED not in states
    assert states[-2:] == [cg.GroupState.CLOSING, cg.GroupState.CLOSED]


async def test_close_keeps_its_bound_against_a_frozen_broker() -> None:
    """Defect 18: close(timeout=5) took 30 s against a broker that stopped answering."""
    port = free_port()
    topic = unique("frozen")
    async with EmbeddedBroker(advertised_port=port) as broker, contextlib.AsyncExitStack() as stack:
        handler = Recorder()
        config = group_config()  # net.read_timeout stays 30 s: only close()'s bound may cut
        config.consumer.offsets.auto_commit.enable = False  # the final commit has work to do
        member = cg.ConsumerGroup([f"127.0.0.1:{port}"], unique(), config)
        stack.push_async_callback(member.close, 5.0)  # also when the test fails
        async with TcpProxy("127.0.0.1", broker.port, listen_port=port) as proxy:
            await broker.create_topic(topic, PARTITIONS)
            run = asyncio.create_task(member.run([topic], handler))
            await produce(proxy.address, topic, [b"x"] * 10)
            await wait_for(lambda: len(handler.seen) == 10, 30, "the messages")
            proxy.pause()
            started = time.monotonic()
            await asyncio.wait_for(member.close(timeout=3), 20)
            took = time.monotonic() - started
            await asyncio.wait_for(run, 2)
            proxy.resume()
    assert took < 3.5, took
    assert member.state is cg.GroupState.CLOSED


async def test_close_during_the_backoff_of_an_outage() -> None:
    """Stopping while the member backs off between failed joins takes effect at once."""
    port = free_port()
    topic = unique("backoff")
    async with EmbeddedBroker(advertised_port=port) as broker, contextlib.AsyncExitStack() as stack:
        handler = Recorder()
        member = cg.ConsumerGroup([f"127.0.0.1:{port}"], unique(), fault_config())
        stack.push_async_callback(member.close, 5.0)  # also when the test fails
        async with TcpProxy("127.0.0.1", broker.port, listen_port=port):
            await broker.create_topic(topic, 1)
            run = asyncio.create_task(member.run([topic], handler))
            await wait_for(lambda: handler.owned() == 1, 30, "the claim")
        await wait_for(
            lambda: member.stats().error is not None and member.state is cg.GroupState.REBALANCING,
            30,
            "the backoff after a failed rejoin",
        )
        started = time.monotonic()
        await asyncio.wait_for(member.close(timeout=10), 15)
        assert time.monotonic() - started < 2.5
        await asyncio.wait_for(run, 2)
