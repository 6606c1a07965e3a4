"""SASL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) and TLS listeners of a real broker.

Needs a real cluster: the embedded Tansu broker has no SASL or TLS listener; here one
Apache Kafka node serves SASL_PLAINTEXT, SSL and SASL_SSL listeners next to its
plaintext one, with a certificate signed by a test CA made with ``keytool`` at test time
and SCRAM users created through the plaintext listener. Our group reaches each listener
from Python config, and the CLI from its flags and from ``--command-config``.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import ssl
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

import consumergroup as cg
from consumergroup.errors import ConsumerGroupError
from consumergroup.testing import KafkaCluster
from tests.conftest import unique
from tests.helpers import add_scram_user, produce
from tests.integration.cli_support import run_cli
from tests.integration.group_support import Recorder, group_config, running_member, wait_for

confluent_kafka = pytest.importorskip("confluent_kafka", reason="needs confluent-kafka ([bench])")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.kafka,
    pytest.mark.timeout(180),
    pytest.mark.xdist_group("kafka-secured"),  # one worker starts the secured cluster, once
]

USER, PASSWORD = "alice", "alice-secret"
STORE_PASSWORD = "test-store"
SCRAM = ("SCRAM-SHA-256", "SCRAM-SHA-512")
LISTENERS = {"SASL_PLAINTEXT": "SASL_PLAINTEXT", "SSL": "SSL", "SASL_SSL": "SASL_SSL"}


def keytool(*args: str) -> None:
    """Run keytool (Java's); failures show its output."""
    done = subprocess.run(["keytool", *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"keytool {args[0]}: {done.stdout}{done.stderr}"


def make_certificates(home: Path) -> tuple[Path, Path]:
    """A test CA and a broker key pair for 127.0.0.1 signed by it: (broker keystore, CA PEM)."""
    ca, broker, csr, crt, ca_pem = (
        home / "ca.p12", home / "broker.p12", home / "broker.csr", home / "broker.crt",
        home / "ca.pem",
    )  # fmt: skip
    store = ("-storetype", "PKCS12", "-storepass", STORE_PASSWORD)
    san = "SAN=ip:127.0.0.1,dns:localhost"
    keytool("-genkeypair", "-alias", "ca", "-keyalg", "RSA", "-keysize", "2048", "-validity",
            "2", "-dname", "CN=consumergroup test CA", "-ext", "bc:c", "-keystore", str(ca),
            *store)  # fmt: skip
    keytool("-exportcert", "-alias", "ca", "-rfc", "-file", str(ca_pem), "-keystore", str(ca),
            *store)  # fmt: skip
    keytool("-genkeypair", "-alias", "broker", "-keyalg", "RSA", "-keysize", "2048",
            "-validity", "2", "-dname", "CN=127.0.0.1", "-ext", san, "-keystore", str(broker),
            *store)  # fmt: skip
    keytool("-certreq", "-alias", "broker", "-file", str(csr), "-keystore", str(broker), *store)
    keytool("-gencert", "-alias", "ca", "-infile", str(csr), "-outfile", str(crt), "-rfc",
            "-validity", "2", "-ext", san, "-keystore", str(ca), *store)  # fmt: skip
    keytool("-importcert", "-noprompt", "-alias", "ca", "-file", str(ca_pem),
            "-keystore", str(broker), *store)  # fmt: skip
    keytool("-importcert", "-alias", "broker", "-file", str(crt), "-keystore", str(broker),
            *store)  # fmt: skip
    return broker, ca_pem


def broker_properties(keystore: Path) -> dict[str, str]:
    """TLS keystore and SASL mechanisms (with PLAIN's user) for the extra listeners."""
    props = {
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(keystore),
        "ssl.keystore.password": STORE_PASSWORD,
        "ssl.key.password": STORE_PASSWORD,
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
    if shutil.which("keytool") is None:
        pytest.skip("needs Java's keytool to make the test certificates")
    home = tmp_path_factory.mktemp("tls")
    keystore, ca = await asyncio.to_thread(make_certificates, home)
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
