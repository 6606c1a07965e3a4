"""The CLI's SASL settings from options and --command-config, spelled as Kafka's tools
(``sasl.jaas.config`` login modules, Kafka 4.1's OAuth keys) and librdkafka spell them:
OAUTHBEARER with OIDC client credentials, GSSAPI, Amazon MSK IAM. The connections they
make are tested against Kafka in test_sasl_kafka.py and test_kerberos.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from consumergroup.cli._cluster import ClusterOptions
from consumergroup.cli._common import CliError
from consumergroup.cli._properties import JaasError, parse_jaas
from consumergroup.oauth import MSKIAMTokenProvider, OIDCTokenProvider

OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
KRB5_MODULE = "com.sun.security.auth.module.Krb5LoginModule"


def test_jaas_is_read_as_kafkas_jaas_config_reads_it() -> None:
    entry = parse_jaas(
        f'{OAUTH_MODULE} required clientId=\'orders\' clientSecret="s\\"e\\\\c" '
        'scope=kafka.read extension_logicalCluster="lkc-1" ;'
    )
    assert entry.name == "OAuthBearerLoginModule"
    assert entry.options == {
        "clientId": "orders",
        "clientSecret": 's"e\\c',
        "scope": "kafka.read",
        "extension_logicalCluster": "lkc-1",
    }


@pytest.mark.parametrize(
    "text",
    ["", 'username="alice";', f'{OAUTH_MODULE} required clientId="a" garbage', f"{OAUTH_MODULE}"],
)
def test_unreadable_jaas_is_refused(text: str) -> None:
    with pytest.raises(JaasError):
        parse_jaas(text)


def from_file(tmp_path: Path, *lines: str, **options: str) -> ClusterOptions:
    props = tmp_path / "client.properties"
    props.write_text("\n".join(["bootstrap.servers=b1:9092", *lines]) + "\n")
    cluster = ClusterOptions(**options)  # type: ignore[arg-type]
    cluster.fill_from(props)
    return cluster


def test_kafka_tools_oauth_file_makes_an_oidc_provider(tmp_path: Path) -> None:
    cluster = from_file(
        tmp_path,
        "security.protocol=SASL_SSL",
        "sasl.mechanism=OAUTHBEARER",
        "sasl.login.callback.handler.class="
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
        "sasl.oauthbearer.token.endpoint.url=https://idp.example.com/oauth2/token",
        f"sasl.jaas.config={OAUTH_MODULE} required clientId='orders' clientSecret='s3cret' "
        "scope='kafka' extension_logicalCluster='lkc-1' extension_identityPoolId='pool-Ab';",
    )
    sasl = cluster.config().net.sasl
    assert sasl.enable and sasl.mechanism == "OAUTHBEARER"
    provider = sasl.token_provider
    assert isinstance(provider, OIDCTokenProvider)
    assert provider.token_endpoint_url == "https://idp.example.com/oauth2/token"
    assert (provider.client_id, provider.scope) == ("orders", "kafka")
    assert sasl.extensions == {"logicalCluster": "lkc-1", "identityPoolId": "pool-Ab"}


@pytest.mark.parametrize(
    "keys",
    [
        ("sasl.oauthbearer.client.id", "sasl.oauthbearer.client.secret"),  # librdkafka
        (  # Kafka 4.1 (KIP-1139)
            "sasl.oauthbearer.client.credentials.client.id",
            "sasl.oauthbearer.client.credentials.client.secret",
        ),
    ],
)
def test_oauth_client_credentials_as_properties(tmp_path: Path, keys: tuple[str, str]) -> None:
    cluster = from_file(
        tmp_path,
        "security.protocol=SASL_PLAINTEXT",
        "sasl.oauthbearer.method=oidc",
        "sasl.oauthbearer.token.endpoint.url=http://127.0.0.1:8080/token",
        f"{keys[0]}=orders",
        f"{keys[1]}=s3cret",
        "sasl.oauthbearer.extensions=logicalCluster=lkc-1,identityPoolId=pool-Ab",
    )
    sasl = cluster.config().net.sasl
    assert sasl.mechanism == "OAUTHBEARER"  # implied by the OAuth settings
    assert isinstance(sasl.token_provider, OIDCTokenProvider)
    assert sasl.token_provider.client_id == "orders"
    assert sasl.extensions == {"logicalCluster": "lkc-1", "identityPoolId": "pool-Ab"}


def test_oauth_without_a_secret_says_where_to_give_it(tmp_path: Path) -> None:
    cluster = from_file(
        tmp_path,
        "sasl.mechanism=OAUTHBEARER",
        "sasl.oauthbearer.token.endpoint.url=http://127.0.0.1:8080/token",
        "sasl.oauthbearer.client.id=orders",
    )
    with pytest.raises(CliError) as info:
        cluster.config()
    message = str(info.value)
    assert message.startswith("SASL OAUTHBEARER (sasl.mechanism in ")
    assert "needs a client secret" in message
    assert "--sasl-oauth-client-secret" in message and "sasl.oauthbearer.client.secret" in message


def test_oauth_from_options(tmp_path: Path) -> None:
    cluster = ClusterOptions(
        bootstrap="b1:9092",
        sasl_oauth_token_url="https://idp/token",
        sasl_oauth_client_id="orders",
        sasl_oauth_client_secret="s3cret",
    )
    sasl = cluster.config().net.sasl
    assert sasl.enable and sasl.mechanism == "OAUTHBEARER"
    assert isinstance(sasl.token_provider, OIDCTokenProvider)


def test_kerberos_from_kafka_tools_jaas(tmp_path: Path) -> None:
    keytab = tmp_path / "client.keytab"
    keytab.write_bytes(b"\x05\x02")
    cluster = from_file(
        tmp_path,
        "security.protocol=SASL_PLAINTEXT",
        "sasl.kerberos.service.name=kafka-prod",
        f"sasl.jaas.config={KRB5_MODULE} required useKeyTab=true storeKey=true "
        f'keyTab="{keytab}" principal="app@EXAMPLE.COM";',
    )
    sasl = cluster.config().net.sasl
    assert sasl.enable and sasl.mechanism == "GSSAPI"  # implied by Krb5LoginModule
    assert (sasl.kerberos_service_name, sasl.kerberos_principal) == (
        "kafka-prod",
        "app@EXAMPLE.COM",
    )
    assert sasl.kerberos_keytab == str(keytab)


def test_kerberos_from_librdkafka_keys_and_a_missing_keytab(tmp_path: Path) -> None:
    cluster = from_file(
        tmp_path,
        "sasl.mechanisms=GSSAPI",
        "security.protocol=SASL_PLAINTEXT",
        "sasl.kerberos.principal=app@EXAMPLE.COM",
        f"sasl.kerberos.keytab={tmp_path / 'missing.keytab'}",
    )
    with pytest.raises(CliError, match=r"kerberos_keytab=.* is not a file"):
        cluster.config()


@pytest.mark.parametrize(
    ("bootstrap", "env", "region"),
    [
        ("b-1.orders.abc123.c2.kafka.eu-west-1.amazonaws.com:9098", {}, "eu-west-1"),
        ("boot-x.c1.kafka-serverless.us-east-2.amazonaws.com:9098", {}, "us-east-2"),
        ("b-1.orders.abc123.c2.kafka.eu-west-1.amazonaws.com:9098", {"AWS_REGION": "ap-south-1"},
         "ap-south-1"),
    ],
)  # fmt: skip
def test_aws_msk_iam_takes_the_region_from_the_env_else_the_brokers_names(
    monkeypatch: pytest.MonkeyPatch, bootstrap: str, env: dict[str, str], region: str
) -> None:
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    cluster = ClusterOptions(bootstrap=bootstrap, tls=True, sasl_mechanism="aws_msk_iam")
    sasl = cluster.config().net.sasl
    assert sasl.mechanism == "OAUTHBEARER"
    assert isinstance(sasl.token_provider, MSKIAMTokenProvider)
    assert sasl.token_provider.region == region


def test_aws_msk_iam_from_awss_jaas_and_handler(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    cluster = from_file(
        tmp_path,
        "security.protocol=SASL_SSL",
        "sasl.mechanism=OAUTHBEARER",
        "sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule "
        "required;",
        "sasl.login.callback.handler.class="
        "software.amazon.msk.auth.iam.IAMOAuthBearerLoginCallbackHandler",
    )
    assert isinstance(cluster.config().net.sasl.token_provider, MSKIAMTokenProvider)
    profiled = from_file(
        tmp_path,
        "security.protocol=SASL_SSL",
        "sasl.mechanism=AWS_MSK_IAM",
        "sasl.jaas.config=software.amazon.msk.auth.iam.IAMLoginModule required "
        'awsProfileName="analytics";',
    )
    provider = profiled.config().net.sasl.token_provider
    assert isinstance(provider, MSKIAMTokenProvider) and provider.profile == "analytics"


def test_aws_msk_iam_without_a_region_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    cluster = ClusterOptions(bootstrap="broker:9098", sasl_mechanism="AWS_MSK_IAM")
    with pytest.raises(CliError, match="no AWS region: set AWS_REGION"):
        cluster.config()


def test_an_unknown_login_module_is_refused(tmp_path: Path) -> None:
    with pytest.raises(CliError, match=r"login module com\.example\.MyModule is not one"):
        from_file(tmp_path, 'sasl.jaas.config=com.example.MyModule required a="b";')
