"""SASL/OAUTHBEARER with OIDC and re-authentication (KIP-368) against Apache Kafka.

One Kafka node whose SASL_PLAINTEXT listener takes OAUTHBEARER, validated by Kafka's
own ``OAuthBearerValidatorCallbackHandler`` against the JWKS of an OIDC server the
module starts on loopback (RS256 keys made at start; Kafka 4 needs the JVM flag
``org.apache.kafka.sasl.oauthbearer.allowed.urls`` naming the JWKS URL), and SCRAM;
``connections.max.reauth.ms`` is a few seconds, so every connection's session ends
again and again. A group and the CLI get tokens by the client credentials grant;
expired, wrongly signed and wrong-audience tokens are clear errors; a group runs
across many re-authentications with fresh tokens and nothing lost, for OAUTHBEARER
and for SCRAM.

Kafka only: the embedded Tansu broker has neither OAUTHBEARER nor re-authentication
(test_sasl_wire.py runs the same rules against a scripted broker).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

import consumergroup as cg
from consumergroup.errors import SaslAuthenticationFailedError
from consumergroup.oauth import TokenProviderError
from consumergroup.testing import KafkaCluster
from tests.conftest import unique
from tests.helpers import add_scram_user, connection_log, produce
from tests.integration.cli_support import run_cli
from tests.integration.group_support import (
    Recorder,
    group_config,
    offsets_by_partition,
    running_member,
    wait_for,
)
from tests.integration.oidc_support import AUDIENCE, OIDCServer, SigningKey

pytest.importorskip("httpx", reason="OIDCTokenProvider needs consumergroup[oidc]")
confluent_kafka = pytest.importorskip("confluent_kafka", reason="needs confluent-kafka ([bench])")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.kafka,
    pytest.mark.timeout(180),
    pytest.mark.xdist_group("kafka-oauth"),  # one worker starts the cluster, once
]

CLIENT, SECRET = "orders-consumer", "orders-secret"
USER, PASSWORD = "alice", "alice-secret"
REAUTH_MS = 3000  # connections.max.reauth.ms: each session lasts at most this long
LISTENER = "SASL_PLAINTEXT"


class OAuthKafka:
    """The cluster, its SASL listener's address and the identity provider."""

    def __init__(self, cluster: KafkaCluster, idp: OIDCServer) -> None:
        self.cluster = cluster
        self.idp = idp
        self.address = cluster.listener_bootstrap(LISTENER)


def broker_properties(idp: OIDCServer) -> dict[str, str]:
    prefix = f"listener.name.{LISTENER.lower()}"
    oauth = "org.apache.kafka.common.security.oauthbearer"
    return {
        f"{prefix}.sasl.enabled.mechanisms": "OAUTHBEARER,SCRAM-SHA-256",
        f"{prefix}.oauthbearer.sasl.jaas.config": f"{oauth}.OAuthBearerLoginModule required;",
        f"{prefix}.oauthbearer.sasl.server.callback.handler.class": (
            f"{oauth}.OAuthBearerValidatorCallbackHandler"
        ),
        f"{prefix}.scram-sha-256.sasl.jaas.config": (
            "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        ),
        "sasl.oauthbearer.jwks.endpoint.url": idp.jwks_url,
        "sasl.oauthbearer.expected.audience": AUDIENCE,
        "sasl.oauthbearer.expected.issuer": idp.issuer,
        "connections.max.reauth.ms": str(REAUTH_MS),
    }


@pytest_asyncio.fixture(scope="module")
async def oauth_kafka() -> AsyncIterator[OAuthKafka]:
    async with OIDCServer(clients={CLIENT: SECRET}) as idp:
        cluster = KafkaCluster(
            listeners={LISTENER: LISTENER},
            extra_properties=broker_properties(idp),
            jvm_options=[f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={idp.jwks_url}"],
        )
        async with cluster:
            await asyncio.to_thread(
                add_scram_user, cluster.bootstrap, USER, PASSWORD, ["SCRAM-SHA-256"]
            )
            yield OAuthKafka(cluster, idp)


def oauth_config(provider: cg.config.TokenProvider, **extensions: str) -> cg.Config:
    config = group_config()
    config.net.sasl.enable = True
    config.net.sasl.mechanism = "OAUTHBEARER"
    config.net.sasl.token_provider = provider
    config.net.sasl.extensions = dict(extensions)
    return config


async def test_a_group_consumes_with_oidc_client_credentials(oauth_kafka: OAuthKafka) -> None:
    kc = oauth_kafka.cluster
    topic = unique("oauth")
    await kc.create_topic(topic, 2)
    await produce(kc.bootstrap, topic, [b"%d" % i for i in range(20)])
    provider = cg.OIDCTokenProvider(oauth_kafka.idp.token_url, CLIENT, SECRET, scope="kafka")
    rec = Recorder()
    # Extensions travel too (Kafka's validator accepts any; Confluent Cloud reads them).
    config = oauth_config(provider, logicalCluster="lkc-1")
    async with running_member(oauth_kafka.address, unique(), [topic], rec, config) as (m, run):
        await wait_for(lambda: len(rec.seen) == 20, 60, "the 20 records")
        assert not run.done() and m.state is cg.GroupState.STABLE


def fixed(token: str) -> cg.config.TokenProvider:
    async def provide() -> tuple[str, float]:
        return token, 300.0  # whatever the token says: the broker is the judge

    return provide


@pytest.mark.parametrize("flaw", ["expired", "wrongly signed", "wrong audience"])
async def test_a_token_kafka_refuses_is_a_clear_error(oauth_kafka: OAuthKafka, flaw: str) -> None:
    idp = oauth_kafka.idp
    token = {
        # Beyond the validator's 30 s clock skew allowance.
        "expired": lambda: idp.mint(CLIENT, lifetime=-120),
        "wrongly signed": lambda: idp.mint(CLIENT, key=SigningKey()),
        "wrong audience": lambda: idp.mint(CLIENT, audience="not-kafka"),
    }[flaw]()
    config = oauth_config(fixed(token))
    with pytest.raises(SaslAuthenticationFailedError) as info:
        async with cg.Consumer([oauth_kafka.address], config) as consumer:
            await consumer.topics()
    message = str(info.value)
    assert "refused the token (status=invalid_token)" in message, message
    assert f"sub='{CLIENT}'" in message and token not in message
    if flaw == "expired":
        assert "expired 12" in message  # 120-129 s ago
    if flaw == "wrong audience":
        assert "aud='not-kafka'" in message


async def test_bad_client_credentials_never_reach_the_broker(oauth_kafka: OAuthKafka) -> None:
    provider = cg.OIDCTokenProvider(oauth_kafka.idp.token_url, CLIENT, "not-the-secret")
    with pytest.raises(TokenProviderError, match=f"refused client '{CLIENT}'"):
        async with cg.Consumer([oauth_kafka.address], oauth_config(provider)) as consumer:
            await consumer.topics()


@pytest.mark.parametrize("mechanism", ["OAUTHBEARER", "SCRAM-SHA-256"])
async def test_a_group_runs_across_reauthentications_with_nothing_lost(
    oauth_kafka: OAuthKafka, mechanism: str
) -> None:
    """Sessions of 3 s (tokens of 15 s, refreshed at 80-85 %) for about 15 s while records
    keep coming: every connection re-authenticates several times, none is closed by the
    broker or retired, the group stays in its first session, and every record is handled
    exactly once."""
    kc, idp = oauth_kafka.cluster, oauth_kafka.idp
    topic = unique("reauth")
    await kc.create_topic(topic, 2)
    if mechanism == "OAUTHBEARER":
        idp.lifetime = 15
        provider = cg.OIDCTokenProvider(idp.token_url, CLIENT, SECRET)
        config = oauth_config(provider)
    else:
        config = group_config()
        config.net.sasl.enable = True
        config.net.sasl.mechanism = "SCRAM-SHA-256"
        config.net.sasl.user, config.net.sasl.password = USER, PASSWORD
    rec = Recorder()
    sent = 0
    try:
        with connection_log() as log:
            async with running_member(oauth_kafka.address, unique(), [topic], rec, config) as (
                member,
                run,
            ):
                await wait_for(lambda: member.state is cg.GroupState.STABLE, 60, "STABLE")
                loop = asyncio.get_running_loop()
                deadline = loop.time() + 5 * REAUTH_MS / 1000
                while loop.time() < deadline:
                    await produce(kc.bootstrap, topic, [b"%d" % (sent + i) for i in range(10)])
                    sent += 10
                    await asyncio.sleep(0.2)  # a steady trickle, not a test of throughput
                await wait_for(lambda: len(rec.seen) >= sent, 60, f"the {sent} records")
                assert not run.done() and member.state is cg.GroupState.STABLE
                reauthenticated, dropped = log.reauthenticated, list(log.dropped)
    finally:
        idp.lifetime = 3600
    assert dropped == []
    assert reauthenticated >= 6  # coordinator, fetch and metadata connections, ~4 rounds each
    assert len(rec.sessions) == 1
    counts = offsets_by_partition(rec.seen)
    assert sum(len(c) for c in counts.values()) == sent
    assert all(n == 1 for c in counts.values() for n in c.values())
    if mechanism == "OAUTHBEARER":
        assert provider.fetches >= 2  # the token was refreshed while the group ran


async def test_the_cli_gets_a_token_from_kafka_tools_properties(
    oauth_kafka: OAuthKafka, tmp_path: Path
) -> None:
    kc, idp = oauth_kafka.cluster, oauth_kafka.idp
    topic = unique("cli-oauth")
    await kc.create_topic(topic, 1)
    oauth = "org.apache.kafka.common.security.oauthbearer"
    files = {
        "java.properties": [
            f"bootstrap.servers={oauth_kafka.address}",
            "security.protocol=SASL_PLAINTEXT",
            "sasl.mechanism=OAUTHBEARER",
            f"sasl.login.callback.handler.class={oauth}.OAuthBearerLoginCallbackHandler",
            f"sasl.oauthbearer.token.endpoint.url={idp.token_url}",
            f"sasl.jaas.config={oauth}.OAuthBearerLoginModule required "
            f'clientId="{CLIENT}" clientSecret="{SECRET}" extension_logicalCluster="lkc-1";',
        ],
        "librdkafka.properties": [
            f"bootstrap.servers={oauth_kafka.address}",
            "security.protocol=SASL_PLAINTEXT",
            "sasl.mechanisms=OAUTHBEARER",
            "sasl.oauthbearer.method=oidc",
            f"sasl.oauthbearer.token.endpoint.url={idp.token_url}",
            f"sasl.oauthbearer.client.id={CLIENT}",
            f"sasl.oauthbearer.client.secret={SECRET}",
            "sasl.oauthbearer.scope=kafka",
        ],
    }
    for name, lines in files.items():
        path = tmp_path / name
        path.write_text("\n".join(lines) + "\n")
        result = await run_cli("topics", "--json", "--command-config", str(path), timeout=60)
        assert result.code == 0, result.err
        listed = [t["topic"] if isinstance(t, dict) else t for t in json.loads(result.out)]
        assert topic in listed, name
    # And from the options, with a wrong secret: one clear line, no traceback.
    result = await run_cli(
        "topics",
        "--bootstrap",
        oauth_kafka.address,
        "--sasl-oauth-token-url",
        idp.token_url,
        "--sasl-oauth-client-id",
        CLIENT,
        "--sasl-oauth-client-secret",
        "wrong",
        timeout=60,
    )
    assert result.code != 0
    assert f"refused client '{CLIENT}'" in result.err and "Traceback" not in result.err
