"""Client on the broker: metadata, leaders, coordinators, seeds, connection registry."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from consumergroup.client import _GROUP, Client, parse_address
from consumergroup.config import Config
from consumergroup.errors import (
    ConfigurationError,
    NoBrokersAvailableError,
    SilentListenerError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from consumergroup.net.protocol import MetadataRequest
from consumergroup.testing import EmbeddedBroker, free_port
from tests.conftest import TopicFactory, unique
from tests.helpers import TcpProxy, delete_topic
from tests.integration.test_connection import ScriptedBroker, raw_server

pytestmark = pytest.mark.timeout(60)


def client_config(**settings: Any) -> Config:
    """Short timeouts and retries; ``settings`` as ``section__field=value``."""
    config = Config(client_id="test-client")
    config.net.dial_timeout = 5.0
    config.net.read_timeout = 10.0
    config.metadata.retry.max = 2
    config.metadata.retry.backoff = 0.05
    for path, value in settings.items():
        *parents, leaf = path.split("__")
        target: Any = config
        for name in parents:
            target = getattr(target, name)
        setattr(target, leaf, value)
    config.validate()
    return config


async def wait_until(condition: Any, timeout: float = 10.0) -> None:
    """Poll ``condition()`` every 50 ms until it is true (bounded)."""
    async with asyncio.timeout(timeout):
        while True:
            if condition():
                return
            await asyncio.sleep(0.05)


@contextlib.asynccontextmanager
async def garbage_seed() -> AsyncIterator[str]:
    """A loopback address that answers every connection with an HTTP error."""

    async def talker(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1024)
        writer.write(b"HTTP/1.1 400 Bad Request\r\n\r\n")
        await writer.drain()
        await reader.read()

    async with raw_server(talker) as address:
        yield address


# ------------------------------------------------------------------ metadata


async def test_metadata_for_a_created_topic(bootstrap: str, new_topic: TopicFactory) -> None:
    async with Client([bootstrap], client_config()) as client:
        topic = await new_topic(partitions=3)
        assert await client.partitions(topic) == [0, 1, 2]
        assert topic in await client.topics()
        nodes = {b.node_id for b in client.brokers()}
        assert nodes
        for partition in range(3):
            leader = client.leader_id(topic, partition)
            assert leader in nodes
            conn = await client.leader(topic, partition)
            assert conn.node_id == leader
            assert not conn.closed
            assert (await conn.send(MetadataRequest([topic], False))).to_object()["topics"]
        with pytest.raises(UnknownTopicOrPartitionError, match="no partition 7"):
            await client.leader(topic, 7)


async def test_leader_connections_are_per_purpose(bootstrap: str, new_topic: TopicFactory) -> None:
    async with Client([bootstrap], client_config()) as client:
        topic = await new_topic(partitions=1)
        default = await client.leader(topic, 0)
        fetch = await client.leader(topic, 0, purpose="fetch")
        assert fetch is not default
        assert await client.leader(topic, 0, purpose="fetch") is fetch
        assert await client.leader(topic, 0) is default


async def test_unknown_topic_says_what_to_do(bootstrap: str) -> None:
    async with Client([bootstrap], client_config()) as client:
        name = unique("absent")
        with pytest.raises(UnknownTopicOrPartitionError, match="create it first"):
            await client.partitions(name)
        with pytest.raises(UnknownTopicOrPartitionError, match="create it first"):
            await client.leader(name, 0)
        assert client.cached_partitions(name) is None


async def test_create_topic_twice_is_topic_already_exists(bootstrap: str) -> None:
    async with Client([bootstrap], client_config()) as client:
        name = unique("dup")
        await client.create_topic(name, 2)
        assert client.cached_partitions(name) == [0, 1]
        with pytest.raises(TopicAlreadyExistsError, match=name):
            await client.create_topic(name, 2)


async def test_background_refresh_picks_up_a_topic_created_elsewhere(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    config = client_config(metadata__refresh_frequency=0.2)
    async with Client([bootstrap], config) as client:
        await client.partitions(await new_topic(partitions=1))  # the cache is not empty
        topic = await new_topic(partitions=2)  # created by another client
        await wait_until(lambda: client.cached_partitions(topic) == [0, 1])


async def test_full_refresh_forgets_a_deleted_topic(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    async with Client([bootstrap], client_config()) as client:
        topic = await new_topic(partitions=1)
        assert topic in await client.topics()
        await delete_topic(bootstrap, topic)
        async with asyncio.timeout(10):
            while True:
                if topic not in await client.topics():
                    break
                await asyncio.sleep(0.1)
        assert client.cached_partitions(topic) is None


# ------------------------------------------------------------------ coordinators, controller


async def test_coordinator_lookup_caching_and_invalidation(bootstrap: str) -> None:
    # Retries for ~10 s: on a fresh Apache Kafka the first FindCoordinator creates
    # __consumer_offsets and is COORDINATOR_NOT_AVAILABLE until its partitions load.
    config = client_config(metadata__retry__max=40, metadata__retry__backoff=0.25)
    async with Client([bootstrap], config) as client:
        group = unique("g")
        key = (_GROUP, group)  # the cache is keyed by (FindCoordinator key type, key)
        first = await client.coordinator(group)
        assert not first.closed
        assert key in client._coordinators
        assert first.node_id == client._coordinators[key].node_id
        assert await client.coordinator(group) is first  # cached: same connection
        assert first is not await client.any(), "coordinator traffic has its own connection"

        client.invalidate_coordinator(group, transaction=True)  # another key type: kept
        assert key in client._coordinators
        client.invalidate_coordinator(group)
        assert key not in client._coordinators
        again = await client.coordinator(group)
        assert key in client._coordinators
        assert not again.closed
        assert again is first, "a live connection to the same broker is reused"

        first.abort()  # the coordinator connection died: the next lookup dials anew
        replaced = await client.coordinator(group)
        assert replaced is not first
        assert not replaced.closed


async def test_controller(bootstrap: str) -> None:
    async with Client([bootstrap], client_config()) as client:
        conn = await client.controller()
        assert not conn.closed
        if client._controller_id >= 0:
            assert conn.node_id == client._controller_id
        assert (await conn.send(MetadataRequest(None, False))).to_object()["brokers"]


# ------------------------------------------------------------------ seeds


async def test_all_seeds_dead_is_no_brokers_available_within_the_bound() -> None:
    dead = [f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"]
    config = client_config(net__dial_timeout=0.5, metadata__retry__max=1)
    start = time.monotonic()
    with pytest.raises(NoBrokersAvailableError) as info:
        async with Client(dead, config):
            pass
    assert time.monotonic() - start < 5
    for address in dead:  # each named once
        assert str(info.value).count(address) == 1, str(info.value)
    # Refused at once: the dial timeout had no part in it, so it is not mentioned.
    assert "dial_timeout" not in str(info.value)
    # Transient (issue 8 #3): a long-lived caller (the group's loop) backs off and retries.
    assert info.value.retriable


async def test_silent_seeds_are_bounded_by_dial_timeout() -> None:
    async with (
        ScriptedBroker(answer_api_versions=False) as a,
        ScriptedBroker(answer_api_versions=False) as b,
    ):
        config = client_config(net__dial_timeout=0.3, metadata__retry__max=1)
        start = time.monotonic()
        with pytest.raises(SilentListenerError) as info:
            async with Client([a.address, b.address], config):
                pass
        for fake in (a, b):  # each address once, saying what was seen
            assert str(info.value).count(fake.address) == 1
        assert "did not answer the Kafka ApiVersions request within 0.3 s" in str(info.value)
        # 2 seeds x 0.3 s per attempt, at most 2 attempts, plus slack.
        assert time.monotonic() - start < 0.3 * 2 * 2 + 3


async def test_a_dead_seed_then_a_live_one_works(bootstrap: str) -> None:
    dead = f"127.0.0.1:{free_port()}"
    # No retries: each start must rotate past the dead seed by itself (seeds are shuffled,
    # so several starts cover both orders).
    config = client_config(metadata__retry__max=0)
    for _ in range(6):
        async with Client([dead, bootstrap], config) as client:
            assert client.brokers()
            assert not (await client.any()).closed


async def test_a_non_kafka_seed_then_a_live_one_works(bootstrap: str) -> None:
    config = client_config(metadata__retry__max=0)
    async with garbage_seed() as garbage:
        for _ in range(6):
            async with Client([garbage, bootstrap], config) as client:
                assert client.brokers()


# ------------------------------------------------------------------ connection registry


async def test_connections_are_reused_and_dead_ones_replaced() -> None:
    broker_port = free_port()
    async with (
        TcpProxy("127.0.0.1", broker_port) as proxy,
        EmbeddedBroker(port=broker_port, advertised_port=proxy.port),
        Client([proxy.address], client_config()) as client,
    ):
        (broker,) = client.brokers()
        assert broker.port == proxy.port  # every connection goes through the proxy
        default = await client.connection(broker.node_id)
        assert await client.connection(broker.node_id) is default
        fetch = await client.connection(broker.node_id, "fetch")
        assert fetch is not default
        assert await client.connection(broker.node_id, "fetch") is fetch

        proxy.cut()
        await wait_until(lambda: default.closed and fetch.closed, timeout=5)

        fresh = await client.connection(broker.node_id)
        assert fresh is not default and not fresh.closed
        assert (await fresh.send(MetadataRequest(None, False))).to_object()["brokers"]
        fresh_fetch = await client.connection(broker.node_id, "fetch")
        assert fresh_fetch is not fetch and not fresh_fetch.closed
        await client.refresh_metadata()  # any() also dials past the dead connection
        assert client.brokers()


async def test_close_closes_every_connection(bootstrap: str) -> None:
    client = Client([bootstrap], client_config())
    await client.start()
    (node, *_) = [b.node_id for b in client.brokers()]
    conns = [await client.connection(node), await client.connection(node, "fetch")]
    await client.close()
    assert client.closed
    assert all(c.closed for c in conns)
    await client.close()  # idempotent


# ------------------------------------------------------------------ addresses


@pytest.mark.parametrize(
    "address",
    [
        "localhost",
        "127.0.0.1:",
        ":9092",
        "host:abc",
        "host:0",
        "host:65536",
        "host:-1",
        "host:9092x",
        "host:\u00b2",
        "host:\u0663\u0663",
    ],
)
def test_bad_addresses_are_configuration_errors(address: str) -> None:
    with pytest.raises(ConfigurationError, match="HOST:PORT"):
        Client([address])


@pytest.mark.parametrize("addresses", [[], "", [""], " , ", ["", " "]])
def test_no_addresses_is_a_configuration_error(addresses: str | list[str]) -> None:
    with pytest.raises(ConfigurationError, match="no bootstrap brokers given"):
        Client(addresses)


def test_good_addresses_parse() -> None:
    assert parse_address("127.0.0.1:9092") == ("127.0.0.1", 9092)
    assert parse_address(" kafka-1.example:19092 ") == ("kafka-1.example", 19092)
    assert parse_address("[::1]:9092") == ("::1", 9092)
    Client("127.0.0.1:9092")  # a single string is one address, not a list of characters
