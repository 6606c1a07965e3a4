"""SASL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) and TLS listeners of a real broker.

Needs a real cluster: the embedded Tansu broker has no SASL or TLS listener; here one
Apache Kafka node serves SASL_PLAINTEXT, SSL and SASL_SSL listeners next to its
plaintext one, with a certificate signed by a test CA made at test time (PEM files, with
``cryptography``) and SCRAM users created through the plaintext listener. Our group
reaches each listener from Python config, and the CLI from its flags and from
``--command-config``.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

import consumergroup as cg
from consumergroup.errors import ConsumerGroupError
from consumergroup.testing import KafkaCluster
from tests.conftest import unique
from tests.helpers import add_scram_user, certificate, produce
from tests.integration.cli_support import run_cli
from tests.integration.group_support import Recorder, group_config, running_member, wait_for
from tests.integration.test_event_loops import on_uvloop, produce_and_resume

confluent_kafka = pytest.importorskip("confluent_kafka", reason="needs confluent-kafka ([bench])")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.kafka,
    pytest.mark.timeout(180),
    pytest.mark.xdist_group("kafka-secured"),  # one worker starts the secured cluster, once
]

USER, PASSWORD = "alice", "alice-secret"
SCRAM = ("SCRAM-SHA-256", "SCRAM-SHA-512")
LISTENERS = {"SASL_PLAINTEXT": "SASL_PLAINTEXT", "SSL": "SSL", "SASL_SSL": "SASL_SSL"}


def make_certificates(home: Path) -> tuple[Path, Path]:
    """A test CA and a broker key pair for 127.0.0.1 signed by it, as PEM files: (the
    broker's key and certificate chain, the CA's certificate). Made in-process with
    ``cryptography``: keytool took seven JVM starts for the same (about 17 s of CPU)."""
    ca_key, broker_key = (
        rsa.generate_private_key(public_exponent=65537, key_size=2048) for _ in range(2)
    )
    ca_name = "consumergroup test CA"
    ca = certificate(ca_name, ca_key.public_key(), ca_key, ca=True)
    san = ["127.0.0.1", "localhost"]
    broker = certificate("127.0.0.1", broker_key.public_key(), ca_key, ca_name, san=san)
    pem = serialization.Encoding.PEM
    keystore, ca_pem = home / "broker.pem", home / "ca.pem"
    # Kafka's PEM keystore: the (unencrypted PKCS#8) key, then the chain from the leaf.
    key = broker_key.private_bytes(
        pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    keystore.write_bytes(key + broker.public_bytes(pem) + ca.public_bytes(pem))
    ca_pem.write_bytes(ca.public_bytes(pem))
    return keystore, ca_pem


def broker_properties(keystore: Path) -> dict[str, str]:
    """TLS keystore and SASL mechanisms (with PLAIN's user) for the extra listeners."""
    props = {
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(keystore),
    }
    plain = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'user_{USER}="{PASSWORD}";'
    )
    scram = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
    for listener in ("sasl_plaintext", "sasl_ssl"):
        props[f"listener.name.{listener}.plain.sasl.jaas.config"] = plain
        for mechanism in SCRAM:
            props[f"listener.name.{listener}.{mechanism.lower()}.sasl.jaas.config"] = scram
    return props


class Secured:
    """The secured cluster and the CA a client trusts."""

    def __init__(self, cluster: KafkaCluster, ca: Path) -> None:
        self.cluster = cluster
        self.ca = ca


@pytest_asyncio.fixture(scope="module")
async def secured(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Secured]:
    """One Kafka node with SASL_PLAINTEXT, SSL and SASL_SSL listeners (and SCRAM users)."""
    home = tmp_path_factory.mktemp("tls")
    keystore, ca = make_certificates(home)
    cluster = KafkaCluster(listeners=LISTENERS, extra_properties=broker_properties(keystore))
    async with cluster:
        await asyncio.to_thread(add_scram_user, cluster.bootstrap, USER, PASSWORD, SCRAM)
        yield Secured(cluster, ca)


def secure_config(ca: Path, listener: str, mechanism: str | None) -> cg.Config:
    """A group config for ``listener`` (TLS trusting ``ca``; SASL with ``mechanism``)."""
    config = group_config()
    if listener.endswith("SSL"):
        config.net.tls.enable = True
        config.net.tls.context = ssl.create_default_context(cafile=str(ca))
    if mechanism is not None:
        config.net.sasl.enable = True
        config.net.sasl.mechanism = mechanism  # type: ignore[assignment]
        config.net.sasl.user = USER
        config.net.sasl.password = PASSWORD
    return config


CASES = [
    ("SASL_PLAINTEXT", "PLAIN"),
    ("SASL_PLAINTEXT", "SCRAM-SHA-256"),
    ("SASL_PLAINTEXT", "SCRAM-SHA-512"),
    ("SSL", None),
    ("SASL_SSL", "SCRAM-SHA-512"),
]


@pytest.mark.parametrize(("listener", "mechanism"), CASES)
async def test_a_group_consumes_through_a_secured_listener(
    secured: Secured, listener: str, mechanism: str | None
) -> None:
    kc = secured.cluster
    topic = unique("sec")
    await kc.create_topic(topic, 2)
    await produce(kc.bootstrap, topic, [b"%d" % i for i in range(20)])
    rec = Recorder()
    config = secure_config(secured.ca, listener, mechanism)
    address = kc.listener_bootstrap(listener)
    async with running_member(address, unique(), [topic], rec, config) as (member, run):
        await wait_for(lambda: len(rec.seen) == 20, 60, "the 20 records")
        assert not run.done() and member.state is cg.GroupState.STABLE


@pytest.mark.parametrize(("listener", "mechanism"), [("SSL", None), ("SASL_SSL", "SCRAM-SHA-512")])
async def test_tls_on_uvloop(secured: Secured, listener: str, mechanism: str | None) -> None:
    """uvloop's TLS transport carries our buffered protocol: produce, consume, resume."""
    kc = secured.cluster
    topic = unique("sec-uvloop")
    await kc.create_topic(topic, 3)
    config = secure_config(secured.ca, listener, mechanism)
    address = kc.listener_bootstrap(listener)
    await asyncio.to_thread(on_uvloop, lambda: produce_and_resume(address, topic, config))


async def test_a_wrong_password_is_a_clear_error(secured: Secured) -> None:
    config = secure_config(secured.ca, "SASL_PLAINTEXT", "SCRAM-SHA-256")
    config.net.sasl.password = "wrong"
    address = secured.cluster.listener_bootstrap("SASL_PLAINTEXT")
    with pytest.raises(ConsumerGroupError, match=r"(?i)authentication"):
        async with cg.Consumer([address], config) as consumer:
            await consumer.topics()


async def cli_topics(*args: str) -> list[str]:
    """``consumergroup topics --json`` with ``args``: the topic names it lists."""
    result = await run_cli("topics", "--json", *args, timeout=60)
    assert result.code == 0, result.err
    return [t["topic"] if isinstance(t, dict) else t for t in json.loads(result.out)]


async def test_the_cli_reaches_secured_listeners_from_flags(secured: Secured) -> None:
    kc = secured.cluster
    topic = unique("cli-sec")
    await kc.create_topic(topic, 1)
    sasl = ["--sasl-mechanism", "SCRAM-SHA-256", "--sasl-user", USER, "--sasl-password", PASSWORD]
    tls = ["--tls-ca", str(secured.ca)]
    for args in (
        ["--bootstrap", kc.listener_bootstrap("SASL_PLAINTEXT"), *sasl],
        ["--bootstrap", kc.listener_bootstrap("SSL"), *tls],
        ["--bootstrap", kc.listener_bootstrap("SASL_SSL"), *tls, *sasl],
    ):
        assert topic in await cli_topics(*args), args


async def test_the_cli_reaches_secured_listeners_from_a_command_config(
    secured: Secured, tmp_path: Path
) -> None:
    kc = secured.cluster
    topic = unique("cli-sec")
    await kc.create_topic(topic, 1)
    files = {
        "plain.properties": [
            f"bootstrap.servers={kc.listener_bootstrap('SASL_PLAINTEXT')}",
            "security.protocol=SASL_PLAINTEXT",
            "sasl.mechanism=PLAIN",
            "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule "
            f'required username="{USER}" password="{PASSWORD}";',
        ],
        "scram-tls.properties": [
            f"bootstrap.servers={kc.listener_bootstrap('SASL_SSL')}",
            "security.protocol=SASL_SSL",
            "sasl.mechanism=SCRAM-SHA-512",
            f"sasl.username={USER}",
            f"sasl.password={PASSWORD}",
            f"ssl.ca.location={secured.ca}",
        ],
    }
    for name, lines in files.items():
        path = tmp_path / name
        path.write_text("\n".join(lines) + "\n")
        assert topic in await cli_topics("--command-config", str(path)), name
