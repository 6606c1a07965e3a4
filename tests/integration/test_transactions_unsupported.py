"""A ``transactional_id`` on a broker that will not give it transactions: a scripted
broker (aiokafka's codecs) refuses InitProducerId, and ``producer.start()`` raises at
once an error saying what to do; nothing hangs, nothing leaks.

Broker-independent (a scripted peer stands in for the broker): neither Tansu nor Kafka
can be made to refuse transactions without an authorizer, and an old broker without
InitProducerId is not something the suite can start.
"""

from __future__ import annotations

import asyncio

import pytest
from aiokafka.protocol.coordination import FindCoordinatorResponse_v1
from aiokafka.protocol.metadata import MetadataResponse_v1
from aiokafka.protocol.transaction import InitProducerIdResponse_v0

import consumergroup as cg
from consumergroup.errors import (
    ConsumerGroupError,
    TransactionalIdAuthorizationFailedError,
    UnsupportedVersionError,
)
from tests.integration.test_connection import DEFAULT_VERSIONS, Received, Script, ScriptedBroker

pytestmark = pytest.mark.timeout(60)

#: Metadata, ApiVersions, FindCoordinator v0-v1 and InitProducerId v0.
VERSIONS = {**DEFAULT_VERSIONS, 10: (0, 1), 22: (0, 0)}


def refusing(code: int) -> Script:
    """A script: this broker is the whole cluster and every coordinator; InitProducerId
    is answered with the error ``code``."""

    async def script(fake: ScriptedBroker, req: Received) -> None:
        if req.api_key == 3:
            fake.reply(req, MetadataResponse_v1([(0, "127.0.0.1", fake.port, None)], 0, []))
        elif req.api_key == 10:
            fake.reply(req, FindCoordinatorResponse_v1(0, 0, None, 0, "127.0.0.1", fake.port))
        elif req.api_key == 22:
            fake.reply(req, InitProducerIdResponse_v0(0, code, -1, -1))

    return script


def transactional_config() -> cg.Config:
    config = cg.Config(client_id="test-txn-refused")
    config.producer.transactional_id = "copier-0"
    config.net.dial_timeout = config.net.read_timeout = 5.0
    return config


@pytest.mark.parametrize(
    ("code", "error", "advice"),
    [
        (53, TransactionalIdAuthorizationFailedError, "WRITE on the TransactionalId .copier-0."),
        (35, UnsupportedVersionError, "unset producer.transactional_id"),
        (None, UnsupportedVersionError, "unset producer.transactional_id"),
    ],
    ids=["not-authorized", "unsupported-version-answer", "no-init-producer-id"],
)
async def test_a_broker_refusing_transactions_fails_start_with_advice(
    code: int | None, error: type[ConsumerGroupError], advice: str
) -> None:
    """InitProducerId answered TRANSACTIONAL_ID_AUTHORIZATION_FAILED, or
    UNSUPPORTED_VERSION, or not offered at all (a broker before 0.11): start() raises
    the broker's error naming what to change, in well under the request timeouts, and
    the producer asked only once (no retry loop)."""
    versions = dict(VERSIONS)
    if code is None:
        del versions[22]
    async with ScriptedBroker(refusing(code or 0), versions=versions) as fake:
        producer = cg.Producer([fake.address], transactional_config())
        with pytest.raises(error, match=advice) as caught:
            async with asyncio.timeout(10):
                await producer.start()
        assert "copier-0" in str(caught.value) or code is None
        assert sum(r.api_key == 22 for r in fake.received) == (0 if code is None else 1)
        await producer.close()
