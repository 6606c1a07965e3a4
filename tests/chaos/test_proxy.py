"""The chaos suite's FaultProxy does what each fault says (else the suite proves nothing)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

import consumergroup as cg
from consumergroup.errors import KafkaConnectionError, RequestTimedOutError
from consumergroup.net.connection import BrokerConnection
from consumergroup.net.protocol import MetadataRequest
from consumergroup.testing import EmbeddedBroker
from tests.chaos.proxy import FaultProxy

pytestmark = pytest.mark.chaos


async def _metadata(conn: BrokerConnection) -> dict[str, Any]:
    answer: dict[str, Any] = (await conn.send(MetadataRequest(None, False))).to_object()
    return answer


async def test_fault_proxy_routes_members_through_itself_and_injects_each_fault() -> None:
    config = cg.Config(client_id="proxy-test")
    config.net.dial_timeout = 2.0
    config.net.read_timeout = 1.0
    async with EmbeddedBroker() as broker, FaultProxy(broker.port) as proxy:

        async def dial() -> BrokerConnection:
            return await BrokerConnection.open("127.0.0.1", proxy.port, config)

        conn = await dial()
        meta = await _metadata(conn)
        assert [(b["host"], b["port"]) for b in meta["brokers"]] == [("127.0.0.1", proxy.port)]
        assert proxy.rewrites == 1

        proxy.latency = 0.3
        started = time.monotonic()
        await _metadata(conn)
        assert time.monotonic() - started >= 0.3
        await proxy.heal()

        proxy.cut()
        await asyncio.sleep(0.1)
        with pytest.raises(KafkaConnectionError):
            await _metadata(conn)

        conn = await dial()
        proxy.drop_mid_response()
        with pytest.raises(KafkaConnectionError):
            await _metadata(conn)

        proxy.stop_listening()
        with pytest.raises(KafkaConnectionError):
            await dial()
        await proxy.heal()

        conn = await dial()
        proxy.blackhole()
        with pytest.raises(RequestTimedOutError):
            await _metadata(conn)
        with pytest.raises(KafkaConnectionError):
            await dial()  # accepted, then silent: the dial times out
        await proxy.heal()
        assert (await _metadata(await dial()))["brokers"]
        with pytest.raises((RequestTimedOutError, KafkaConnectionError)):
            await _metadata(conn)  # a black-holed connection stays dead (half-open)
