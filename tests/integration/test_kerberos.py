"""SASL/GSSAPI (Kerberos) against Apache Kafka and an MIT KDC started by the test.

The module starts a KDC for its own realm on 127.0.0.1 (kdc_support), makes the
broker's service principal ``kafka/127.0.0.1`` and a client principal with keytabs,
and one Kafka node whose SASL_PLAINTEXT listener takes GSSAPI (Java's Krb5LoginModule
with the broker's keytab; ``connections.max.reauth.ms`` of a few seconds). A group
reaches it with a keytab and re-authenticates again and again; a ticket cache (after
``kinit``) works too; a wrong service name is a clear error; the CLI reads Kafka's
Krb5LoginModule JAAS. Where MIT Kerberos cannot be installed the module skips, saying
what to install; test_sasl_wire.py runs the GSSAPI framing without a KDC everywhere.

Kafka only: the embedded Tansu broker has no GSSAPI.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

import consumergroup as cg
from consumergroup.errors import SaslAuthenticationFailedError
from consumergroup.testing import KafkaCluster
from tests.conftest import unique
from tests.helpers import connection_log, produce
from tests.integration.cli_support import run_cli
from tests.integration.group_support import Recorder, group_config, running_member, wait_for
from tests.integration.kdc_support import KDC, missing_kerberos

_MISSING = missing_kerberos()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.kafka,
    pytest.mark.timeout(180),
    pytest.mark.xdist_group("kafka-kerberos"),  # one worker starts the KDC and cluster, once
    pytest.mark.skipif(_MISSING is not None, reason=_MISSING or ""),
]

LISTENER = "SASL_PLAINTEXT"
REAUTH_MS = 3000


class Kerberized:
    """The KDC, the cluster, its GSSAPI listener's address and the client's keytab."""

    def __init__(self, kdc: KDC, cluster: KafkaCluster, client_keytab: Path) -> None:
        self.kdc = kdc
        self.cluster = cluster
        self.address = cluster.listener_bootstrap(LISTENER)
        self.client_keytab = client_keytab
        self.client = kdc.principal("app")


@pytest_asyncio.fixture(scope="module")
async def kerberized() -> AsyncIterator[Kerberized]:
    """The KDC and the cluster; this process uses the realm's krb5.conf meanwhile (MIT's
    library reads KRB5_CONFIG on each use)."""
    saved = {name: os.environ.get(name) for name in ("KRB5_CONFIG", "KRB5_KDC_PROFILE")}
    try:
        async with KDC() as kdc:
            os.environ.update(kdc.env)
            async with _cluster(kdc) as kerberized:
                yield kerberized
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextlib.asynccontextmanager
async def _cluster(kdc: KDC) -> AsyncIterator[Kerberized]:
    """Kafka with a GSSAPI listener, the broker's principal and the client's keytab."""
    broker_keytab = await asyncio.to_thread(kdc.keytab, "kafka/127.0.0.1")
    client_keytab = await asyncio.to_thread(kdc.keytab, "app")
    prefix = f"listener.name.{LISTENER.lower()}"
    cluster = KafkaCluster(
        listeners={LISTENER: LISTENER},
        extra_properties={
            f"{prefix}.sasl.enabled.mechanisms": "GSSAPI",
            f"{prefix}.gssapi.sasl.jaas.config": (
                "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true "
                f'storeKey=true keyTab="{broker_keytab}" '
                f'principal="{kdc.principal("kafka/127.0.0.1")}";'
            ),
            "sasl.kerberos.service.name": "kafka",
            "connections.max.reauth.ms": str(REAUTH_MS),
        },
        jvm_options=[f"-Djava.security.krb5.conf={kdc.krb5_conf}"],
    )
    async with cluster:
        yield Kerberized(kdc, cluster, client_keytab)


def kerberos_config(k: Kerberized, *, keytab: bool = True, service: str = "kafka") -> cg.Config:
    config = group_config()
    config.net.sasl.enable = True
    config.net.sasl.mechanism = "GSSAPI"
    config.net.sasl.kerberos_service_name = service
    if keytab:
        config.net.sasl.kerberos_principal = k.client
        config.net.sasl.kerberos_keytab = str(k.client_keytab)
    return config


async def test_a_group_consumes_with_a_keytab_across_reauthentications(
    kerberized: Kerberized,
) -> None:
    kc = kerberized.cluster
    topic = unique("krb")
    await kc.create_topic(topic, 2)
    await produce(kc.bootstrap, topic, [b"%d" % i for i in range(20)])
    rec = Recorder()
    config = kerberos_config(kerberized)
    with connection_log() as log:
        async with running_member(kerberized.address, unique(), [topic], rec, config) as (m, run):
            await wait_for(lambda: len(rec.seen) == 20, 60, "the 20 records")
            await wait_for(lambda: log.reauthenticated >= 4, 30, "re-authentications")
            await produce(kc.bootstrap, topic, [b"late-%d" % i for i in range(10)])
            await wait_for(lambda: len(rec.seen) == 30, 60, "the 10 later records")
            assert not run.done() and m.state is cg.GroupState.STABLE
            dropped = list(log.dropped)
    assert dropped == []
    assert len(rec.sessions) == 1 and len(set(rec.seen)) == 30


async def test_the_ticket_cache_after_kinit(
    kerberized: Kerberized, monkeypatch: pytest.MonkeyPatch
) -> None:
    ccache = await asyncio.to_thread(kerberized.kdc.kinit, "app", kerberized.client_keytab)
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{ccache}")
    config = kerberos_config(kerberized, keytab=False)  # no principal: the cache's
    async with cg.Consumer([kerberized.address], config) as consumer:
        assert isinstance(await consumer.topics(), list)


async def test_a_wrong_service_name_is_a_clear_error(kerberized: Kerberized) -> None:
    config = kerberos_config(kerberized, service="not-kafka")
    with pytest.raises(SaslAuthenticationFailedError) as info:
        async with cg.Consumer([kerberized.address], config) as consumer:
            await consumer.topics()
    message = str(info.value)
    assert "SASL GSSAPI with 127.0.0.1:" in message and "Kerberos said:" in message
    assert "not found in Kerberos database" in message, message
    assert "kerberos_service_name" in message


async def test_the_cli_reads_kafkas_krb5_login_module(
    kerberized: Kerberized, tmp_path: Path
) -> None:
    kc = kerberized.cluster
    topic = unique("cli-krb")
    await kc.create_topic(topic, 1)
    path = tmp_path / "client.properties"
    path.write_text(
        f"bootstrap.servers={kerberized.address}\n"
        "security.protocol=SASL_PLAINTEXT\n"
        "sasl.mechanism=GSSAPI\n"
        "sasl.kerberos.service.name=kafka\n"
        "sasl.jaas.config=com.sun.security.auth.module.Krb5LoginModule required \\\n"
        f'    useKeyTab=true storeKey=true keyTab="{kerberized.client_keytab}" \\\n'
        f'    principal="{kerberized.client}";\n'
    )
    result = await run_cli(
        "topics", "--json", "--command-config", str(path), env=kerberized.kdc.env, timeout=60
    )
    assert result.code == 0, result.err
    listed = [t["topic"] if isinstance(t, dict) else t for t in json.loads(result.out)]
    assert topic in listed
