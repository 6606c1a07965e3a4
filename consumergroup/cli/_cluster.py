"""How every subcommand reaches the cluster: ``--bootstrap``, TLS, SASL, a config file.

Each setting comes from, in order: its command-line option, its environment
variable, the ``--command-config`` file (a Java-style properties file, as
Kafka's own tools take), the default. The file understands the client
properties of Kafka and librdkafka that matter for connecting::

    bootstrap.servers=broker-1:9093,broker-2:9093
    security.protocol=SASL_SSL          # PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL
    sasl.mechanism=SCRAM-SHA-512        # PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER,
                                        # GSSAPI, AWS_MSK_IAM
    sasl.username=alice                 # or sasl.jaas.config=... username="alice" password="..."
    sasl.password=secret
    ssl.ca.location=/etc/kafka/ca.pem   # PEM files
    ssl.certificate.location=/etc/kafka/client.pem
    ssl.key.location=/etc/kafka/client.key
    ssl.endpoint.identification.algorithm=   # empty: do not check the host name

OAUTHBEARER with an OIDC provider's client credentials (KIP-768), as Kafka's tools
(``sasl.jaas.config=...OAuthBearerLoginModule required clientId="..." clientSecret="..."
scope="..." extension_logicalCluster="...";``, Kafka 4.1's
``sasl.oauthbearer.client.credentials.client.id/secret``) or librdkafka spell it::

    sasl.mechanism=OAUTHBEARER
    sasl.oauthbearer.token.endpoint.url=https://idp.example.com/oauth2/token
    sasl.oauthbearer.client.id=orders-consumer
    sasl.oauthbearer.client.secret=...
    sasl.oauthbearer.scope=kafka                  # optional
    sasl.oauthbearer.extensions=logicalCluster=lkc-1,identityPoolId=pool-1   # optional

Kerberos: ``sasl.mechanism=GSSAPI``, ``sasl.kerberos.service.name`` (default ``kafka``),
and the client's keytab and principal from ``sasl.jaas.config=...Krb5LoginModule required
useKeyTab=true keyTab="..." principal="...";`` or librdkafka's ``sasl.kerberos.keytab``
and ``sasl.kerberos.principal`` (neither: the ticket cache, after ``kinit``). Amazon MSK
IAM: ``sasl.mechanism=AWS_MSK_IAM`` (or OAUTHBEARER with AWS's
``IAMOAuthBearerLoginCallbackHandler``); the region is ``$AWS_REGION``, else the one in
the brokers' host names.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import ssl
from collections.abc import AsyncIterator, Callable
from dataclasses import field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

import click

from .._dataclass import dataclass
from .._lifecycle import AsyncResource
from ..admin import ClusterAdmin
from ..config import Config, SASLConfig
from ..errors import ConfigurationError, ConsumerGroupError
from . import _properties as properties
from ._common import CliError, explain_connect_error, split_bootstrap, status

if TYPE_CHECKING:
    from ..producer import Producer
    from ..share.admin import ShareGroupAdmin

_R = TypeVar("_R", bound=AsyncResource)

_F = TypeVar("_F", bound=Callable[..., Any])

#: security.protocol -> (TLS, SASL).
_PROTOCOLS = {
    "PLAINTEXT": (False, False),
    "SSL": (True, False),
    "SASL_PLAINTEXT": (False, True),
    "SASL_SSL": (True, True),
}
_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI", "AWS_MSK_IAM")
#: Properties file key -> ClusterOptions field (Kafka's names, and librdkafka's).
_PROPERTIES = {
    "bootstrap.servers": "bootstrap",
    "sasl.mechanism": "sasl_mechanism",
    "sasl.mechanisms": "sasl_mechanism",
    "sasl.username": "sasl_user",
    "sasl.password": "sasl_password",
    "sasl.oauthbearer.token.endpoint.url": "sasl_oauth_token_url",
    "sasl.oauthbearer.client.id": "sasl_oauth_client_id",
    "sasl.oauthbearer.client.credentials.client.id": "sasl_oauth_client_id",
    "sasl.oauthbearer.client.secret": "sasl_oauth_client_secret",
    "sasl.oauthbearer.client.credentials.client.secret": "sasl_oauth_client_secret",
    "sasl.oauthbearer.scope": "sasl_oauth_scope",
    "sasl.oauthbearer.extensions": "sasl_oauth_extensions",
    "sasl.kerberos.service.name": "sasl_kerberos_service_name",
    "sasl.kerberos.principal": "sasl_kerberos_principal",
    "sasl.kerberos.keytab": "sasl_kerberos_keytab",
    "ssl.ca.location": "tls_ca",
    "ssl.certificate.location": "tls_cert",
    "ssl.key.location": "tls_key",
    "ssl.key.password": "tls_key_password",
    "client.id": "client_id",
}
_SPECIAL = (
    "security.protocol",
    "sasl.jaas.config",
    "ssl.endpoint.identification.algorithm",
    # What Java's and librdkafka's clients need to pick the OIDC or AWS login code: the
    # mechanism's settings say it here.
    "sasl.login.callback.handler.class",
    "sasl.client.callback.handler.class",
    "sasl.oauthbearer.method",
)
#: sasl.jaas.config's login module -> {its option: ClusterOptions field}.
_JAAS_OPTIONS = {
    "PlainLoginModule": {"username": "sasl_user", "password": "sasl_password"},
    "ScramLoginModule": {"username": "sasl_user", "password": "sasl_password"},
    "OAuthBearerLoginModule": {
        "clientId": "sasl_oauth_client_id",
        "clientSecret": "sasl_oauth_client_secret",
        "scope": "sasl_oauth_scope",
    },
    "Krb5LoginModule": {"principal": "sasl_kerberos_principal", "keyTab": "sasl_kerberos_keytab"},
    "IAMLoginModule": {"awsProfileName": "sasl_aws_profile", "awsRoleArn": "sasl_aws_role_arn"},
}
# Krb5LoginModule options that only say how Java's module works (ours always does so).
_JAAS_IGNORED = {"useKeyTab", "storeKey", "useTicketCache", "doNotPrompt", "debug"}
#: The mechanism a login module implies when the file names none.
_JAAS_MECHANISM = {
    "PlainLoginModule": "PLAIN",
    "OAuthBearerLoginModule": "OAUTHBEARER",
    "Krb5LoginModule": "GSSAPI",
    "IAMLoginModule": "AWS_MSK_IAM",
}
_IAM_HANDLER = "IAMOAuthBearerLoginCallbackHandler"
# An MSK broker's host: b-1.name.abc123.c2.kafka.eu-west-1.amazonaws.com, and Serverless's
# boot-abc.c1.kafka-serverless.eu-west-1.amazonaws.com.
_MSK_HOST = re.compile(r"\.kafka(?:-serverless)?\.([a-z0-9-]+)\.amazonaws\.com(?::\d+)?$")
#: ClusterOptions field -> its option (with the environment variable, if any).
_OPTION_NAMES = {
    "sasl_mechanism": "--sasl-mechanism ($CONSUMERGROUP_SASL_MECHANISM)",
    "sasl_user": "--sasl-user ($CONSUMERGROUP_SASL_USER)",
    "sasl_password": "--sasl-password ($CONSUMERGROUP_SASL_PASSWORD)",
    "sasl_oauth_token_url": "--sasl-oauth-token-url ($CONSUMERGROUP_SASL_OAUTH_TOKEN_URL)",
    "sasl_oauth_client_id": "--sasl-oauth-client-id ($CONSUMERGROUP_SASL_OAUTH_CLIENT_ID)",
    "sasl_oauth_client_secret": (
        "--sasl-oauth-client-secret ($CONSUMERGROUP_SASL_OAUTH_CLIENT_SECRET)"
    ),
}
#: ClusterOptions field -> what it is, in words.
_WHAT = {
    "sasl_user": "user",
    "sasl_password": "password",
    "sasl_oauth_token_url": "token endpoint URL",
    "sasl_oauth_client_id": "client id",
    "sasl_oauth_client_secret": "client secret",
}
#: ClusterOptions field -> the properties file keys that give it.
_FILE_KEYS = {
    "sasl_user": 'sasl.username (or sasl.jaas.config=... username="...")',
    "sasl_password": 'sasl.password (or sasl.jaas.config=... password="...")',
    "sasl_oauth_token_url": "sasl.oauthbearer.token.endpoint.url",
    "sasl_oauth_client_id": 'sasl.oauthbearer.client.id (or sasl.jaas.config=... clientId="...")',
    "sasl_oauth_client_secret": (
        'sasl.oauthbearer.client.secret (or sasl.jaas.config=... clientSecret="...")'
    ),
}


@dataclass
class ClusterOptions:
    """The connection settings of one command, merged from options, env and file."""

    bootstrap: str | None = None
    tls: bool | None = None
    tls_ca: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_key_password: str | None = None
    tls_insecure: bool | None = None
    sasl_mechanism: str | None = None
    sasl_user: str | None = None
    sasl_password: str | None = None
    sasl_oauth_token_url: str | None = None
    sasl_oauth_client_id: str | None = None
    sasl_oauth_client_secret: str | None = None
    sasl_oauth_scope: str | None = None
    #: ``name=value,name=value`` (librdkafka's sasl.oauthbearer.extensions).
    sasl_oauth_extensions: str | None = None
    sasl_kerberos_service_name: str | None = None
    sasl_kerberos_principal: str | None = None
    sasl_kerberos_keytab: str | None = None
    sasl_aws_profile: str | None = None
    sasl_aws_role_arn: str | None = None
    #: sasl.login.callback.handler.class from the file (AWS's IAM handler means MSK IAM).
    sasl_login_handler: str | None = None
    #: The login module of the file's sasl.jaas.config (its simple name).
    sasl_jaas_module: str | None = None
    client_id: str | None = None
    connect_timeout: float = 10.0
    #: Where the --command-config file supplied a setting: field -> "KEY in FILE".
    sources: dict[str, str] = field(default_factory=dict)

    @property
    def addrs(self) -> list[str]:
        """The bootstrap addresses (a usage error when none were given anywhere)."""
        if not self.bootstrap:
            raise CliError(
                "no broker given: pass --bootstrap HOST:PORT (or set CONSUMERGROUP_BOOTSTRAP, "
                "or bootstrap.servers in --command-config)"
            )
        return split_bootstrap(self.bootstrap)

    def config(self, client_id: str = "consumergroup-cli") -> Config:
        """A validated :class:`Config` with these connection settings."""
        config = Config(client_id=self.client_id or client_id)
        config.net.dial_timeout = self.connect_timeout
        if self.tls or self.tls_ca or self.tls_cert or self.tls_insecure:
            config.net.tls.enable = True
            config.net.tls.context = self._ssl_context()
        mechanism = self._mechanism()
        if mechanism is not None:
            config.net.sasl.enable = True
            self._sasl(config.net.sasl, mechanism)
        try:
            config.validate()
        except ConfigurationError as exc:
            raise CliError(str(exc)) from None
        return config

    def _ssl_context(self) -> ssl.SSLContext:
        try:
            context = ssl.create_default_context(cafile=self.tls_ca)
            if self.tls_cert:
                context.load_cert_chain(self.tls_cert, self.tls_key, self.tls_key_password)
        except (OSError, ssl.SSLError) as exc:
            raise CliError(
                f"cannot load the TLS files (--tls-ca/--tls-cert/--tls-key): {exc}"
            ) from None
        if self.tls_insecure:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        return context

    def fill_from(self, path: Path) -> None:
        """Take every setting still unset from the properties file ``path`` (read as
        Java reads it: see :mod:`._properties`)."""
        try:
            text = properties.decode(path.read_bytes())
        except OSError as exc:
            raise CliError(f"cannot read --command-config {str(path)!r}: {exc.strerror}") from None
        try:
            parsed = properties.parse(text)
        except properties.PropertiesError as exc:
            raise CliError(f"{path}:{exc}") from None
        props: dict[str, str] = {}
        for prop in parsed:
            if prop.key not in _PROPERTIES and prop.key not in _SPECIAL:
                status(f"{path}:{prop.line}: ignoring {prop.key!r} (not a connection setting)")
            props[prop.key] = prop.value
        for key, attr in _PROPERTIES.items():
            if key in props:
                self._default(attr, props[key], f"{key} in {path}")
        if "sasl.jaas.config" in props:
            self._fill_from_jaas(props["sasl.jaas.config"], f"sasl.jaas.config in {path}")
        if "sasl.login.callback.handler.class" in props:
            self.sasl_login_handler = props["sasl.login.callback.handler.class"]
        if "ssl.endpoint.identification.algorithm" in props:
            self._default(
                "tls_insecure",
                props["ssl.endpoint.identification.algorithm"] == "",
                f"ssl.endpoint.identification.algorithm in {path}",
            )
        protocol = props.get("security.protocol", "PLAINTEXT").upper()
        if protocol not in _PROTOCOLS:
            raise CliError(
                f"{path}: security.protocol {props['security.protocol']!r} is not one of "
                f"{', '.join(_PROTOCOLS)}"
            )
        tls, sasl = _PROTOCOLS[protocol]
        where = f"security.protocol={protocol} in {path}"
        self._default("tls", tls, where)
        if sasl:  # PLAIN unless the settings say which (Java's default, GSSAPI, rarely is)
            self._default("sasl_mechanism", self._implied_mechanism() or "PLAIN", where)

    def _default(self, attr: str, value: object, source: str) -> None:
        if getattr(self, attr) is None:
            setattr(self, attr, value)
            self.sources[attr] = source

    def _named(self, attr: str) -> str:
        """Where a setting was given, in the user's words: the file's key, else the option."""
        return self.sources.get(attr) or _OPTION_NAMES[attr]

    def _fill_from_jaas(self, text: str, where: str) -> None:
        """The credentials a ``sasl.jaas.config`` carries, by its login module."""
        try:
            entry = properties.parse_jaas(text)
        except properties.JaasError as exc:
            raise CliError(f"{where}: {exc}") from None
        known = _JAAS_OPTIONS.get(entry.name)
        if known is None:
            raise CliError(
                f"{where}: login module {entry.module} is not one this tool knows: use "
                "PlainLoginModule, ScramLoginModule, OAuthBearerLoginModule, Krb5LoginModule "
                "or IAMLoginModule"
            )
        self.sasl_jaas_module = entry.name
        extensions = []
        for option, value in entry.options.items():
            if option in known:
                self._default(known[option], value, where)
            elif entry.name == "OAuthBearerLoginModule" and option.startswith("extension_"):
                extensions.append(f"{option.removeprefix('extension_')}={value}")
            elif entry.name != "Krb5LoginModule" or option not in _JAAS_IGNORED:
                status(f"{where}: ignoring option {option!r} of {entry.name}")
        if extensions:
            self._default("sasl_oauth_extensions", ",".join(extensions), where)

    def _implied_mechanism(self) -> str | None:
        """The mechanism the other SASL settings imply (a login module, an OIDC endpoint,
        a Kerberos principal), when none is named."""
        if self.sasl_jaas_module in _JAAS_MECHANISM:
            return _JAAS_MECHANISM[self.sasl_jaas_module]
        if self.sasl_oauth_token_url or self.sasl_oauth_client_id:
            return "OAUTHBEARER"
        if self.sasl_kerberos_principal or self.sasl_kerberos_keytab:
            return "GSSAPI"
        return None

    def _mechanism(self) -> str | None:
        """The SASL mechanism (upper case), None without SASL; an unknown one is refused."""
        if self.sasl_mechanism is None:
            implied = self._implied_mechanism()
            return implied or ("PLAIN" if self.sasl_user is not None else None)
        mechanism = self.sasl_mechanism.upper()
        if mechanism not in _MECHANISMS:
            raise CliError(
                f"unknown SASL mechanism {self.sasl_mechanism!r} "
                f"({self._named('sasl_mechanism')}): use one of {', '.join(_MECHANISMS)}"
            )
        return mechanism

    def _sasl(self, sasl: SASLConfig, mechanism: str) -> None:
        """Fill ``sasl`` for ``mechanism`` from these settings; a missing one is refused
        in the words the settings came in."""
        if mechanism == "AWS_MSK_IAM" or (
            mechanism == "OAUTHBEARER" and (self.sasl_login_handler or "").endswith(_IAM_HANDLER)
        ):
            sasl.mechanism = "OAUTHBEARER"
            sasl.token_provider = self._msk_provider()
        elif mechanism == "OAUTHBEARER":
            sasl.mechanism = "OAUTHBEARER"
            sasl.token_provider = self._oidc_provider()
            sasl.extensions = self._extensions()
        elif mechanism == "GSSAPI":
            sasl.mechanism = "GSSAPI"
            sasl.kerberos_service_name = self.sasl_kerberos_service_name or "kafka"
            sasl.kerberos_principal = self.sasl_kerberos_principal or ""
            sasl.kerberos_keytab = self.sasl_kerberos_keytab or ""
        else:
            self._require(mechanism, "sasl_user", "sasl_password")
            sasl.mechanism = mechanism  # type: ignore[assignment]  # one of _MECHANISMS
            sasl.user = self.sasl_user or ""
            sasl.password = self.sasl_password or ""

    def _require(self, mechanism: str, *attrs: str) -> None:
        for attr in attrs:
            if not getattr(self, attr):
                what = _WHAT[attr]
                given = self.sources.get("sasl_mechanism") or _OPTION_NAMES["sasl_mechanism"]
                raise CliError(
                    f"SASL {mechanism} ({given}) needs a {what}: set {_OPTION_NAMES[attr]}, "
                    f"or {_FILE_KEYS[attr]} in --command-config"
                )

    def _oidc_provider(self) -> Any:
        self._require(
            "OAUTHBEARER",
            "sasl_oauth_token_url",
            "sasl_oauth_client_id",
            "sasl_oauth_client_secret",
        )
        from ..oauth import OIDCTokenProvider

        try:
            return OIDCTokenProvider(
                self.sasl_oauth_token_url or "",
                self.sasl_oauth_client_id or "",
                self.sasl_oauth_client_secret or "",
                self.sasl_oauth_scope or None,
            )
        except ConfigurationError as exc:
            raise CliError(f"OAUTHBEARER: {exc}") from None

    def _extensions(self) -> dict[str, str]:
        """librdkafka's ``name=value,name=value``."""
        extensions: dict[str, str] = {}
        for pair in filter(None, (self.sasl_oauth_extensions or "").split(",")):
            name, sep, value = pair.partition("=")
            if not sep:
                raise CliError(
                    f"SASL extension {pair!r}: write name=value "
                    "(sasl.oauthbearer.extensions=logicalCluster=lkc-1,identityPoolId=pool-1)"
                )
            extensions[name.strip()] = value.strip()
        return extensions

    def _msk_provider(self) -> Any:
        from ..oauth import MSKIAMTokenProvider

        region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
        for address in self.addrs:
            found = _MSK_HOST.search(address)
            if region is None and found is not None:
                region = found[1]
        if region is None:
            raise CliError(
                "Amazon MSK IAM: no AWS region: set AWS_REGION (the brokers' host names "
                "do not say it)"
            )
        try:
            return MSKIAMTokenProvider(
                region, profile=self.sasl_aws_profile, role_arn=self.sasl_aws_role_arn
            )
        except ConfigurationError as exc:
            raise CliError(f"Amazon MSK IAM: {exc}") from None

    @contextlib.asynccontextmanager
    async def admin(self) -> AsyncIterator[ClusterAdmin]:
        """A started :class:`ClusterAdmin`; failing to reach the cluster is one clear line."""
        async with self._started(ClusterAdmin(self.addrs, self.config())) as admin:
            yield admin

    @contextlib.asynccontextmanager
    async def share_admin(self) -> AsyncIterator[ShareGroupAdmin]:
        """A started :class:`~consumergroup.share.admin.ShareGroupAdmin`, the same way."""
        from ..share.admin import ShareGroupAdmin  # only the share commands load it

        async with self._started(ShareGroupAdmin(self.addrs, self.config())) as admin:
            yield admin

    @contextlib.asynccontextmanager
    async def producer(self, linger: float) -> AsyncIterator[Producer]:
        """A started :class:`~consumergroup.Producer` (``producer.linger`` = ``linger``);
        failing to reach the cluster is one clear line."""
        from ..producer import Producer  # only the commands that write load it

        config = self.config()
        config.producer.linger = linger
        async with self._started(Producer(self.addrs, config)) as producer:
            yield producer

    @contextlib.asynccontextmanager
    async def _started(self, resource: _R) -> AsyncIterator[_R]:
        try:
            await resource.start()
        except ConsumerGroupError as exc:
            await resource.close()
            raise explain_connect_error(exc, self.bootstrap or "") or exc from None
        try:
            yield resource
        finally:
            await resource.close()


_OPTION_FIELDS = {f.name for f in fields(ClusterOptions)}


def cluster_options(func: _F) -> _F:
    """Add the connection options to a command; it receives them as ``cluster``."""

    @functools.wraps(func)
    def wrapper(*args: Any, command_config: Path | None, **kwargs: Any) -> Any:
        cluster = ClusterOptions(**{k: kwargs.pop(k) for k in list(kwargs) if k in _OPTION_FIELDS})
        if command_config is not None:
            cluster.fill_from(command_config)
        return func(*args, cluster=cluster, **kwargs)

    options = [
        click.option(
            "--bootstrap",
            "--bootstrap-server",  # Kafka's tools' name
            "-b",
            "bootstrap",
            envvar=["CONSUMERGROUP_BOOTSTRAP", "KAFKA_BOOTSTRAP_SERVERS"],
            metavar="HOST:PORT",
            help="Broker address(es), comma-separated "
            "(default: $CONSUMERGROUP_BOOTSTRAP, $KAFKA_BOOTSTRAP_SERVERS).",
        ),
        click.option(
            "--command-config",
            envvar="CONSUMERGROUP_COMMAND_CONFIG",
            type=click.Path(dir_okay=False, path_type=Path),
            help="Kafka client properties file (bootstrap.servers, security.protocol, sasl.*, "
            "ssl.*); options and env vars win over it.",
        ),
        click.option("--tls", is_flag=True, default=None, help="Connect with TLS."),
        click.option(
            "--tls-ca",
            envvar="CONSUMERGROUP_TLS_CA",
            metavar="PEM",
            help="CA bundle to verify the brokers (implies --tls).",
        ),
        click.option("--tls-cert", metavar="PEM", help="Client certificate (implies --tls)."),
        click.option("--tls-key", metavar="PEM", help="Client private key."),
        click.option(
            "--tls-insecure",
            is_flag=True,
            default=None,
            help="Do not verify the broker's certificate or host name (implies --tls).",
        ),
        click.option(
            "--sasl-mechanism",
            envvar="CONSUMERGROUP_SASL_MECHANISM",
            type=click.Choice(_MECHANISMS, case_sensitive=False),
            help="SASL mechanism (default PLAIN when a user is given; AWS_MSK_IAM: Amazon MSK "
            "IAM, region from $AWS_REGION).",
        ),
        click.option(
            "--sasl-user", envvar="CONSUMERGROUP_SASL_USER", help="SASL user (enables SASL)."
        ),
        click.option(
            "--sasl-password",
            envvar="CONSUMERGROUP_SASL_PASSWORD",
            help="SASL password (better: $CONSUMERGROUP_SASL_PASSWORD or the config file).",
        ),
        click.option(
            "--sasl-oauth-token-url",
            envvar="CONSUMERGROUP_SASL_OAUTH_TOKEN_URL",
            metavar="URL",
            help="OAUTHBEARER: the OIDC token endpoint (client credentials; enables SASL).",
        ),
        click.option(
            "--sasl-oauth-client-id",
            envvar="CONSUMERGROUP_SASL_OAUTH_CLIENT_ID",
            help="OAUTHBEARER: the client id.",
        ),
        click.option(
            "--sasl-oauth-client-secret",
            envvar="CONSUMERGROUP_SASL_OAUTH_CLIENT_SECRET",
            help="OAUTHBEARER: the client secret (better: its env var or the config file).",
        ),
        click.option("--sasl-oauth-scope", help="OAUTHBEARER: the scope to ask for."),
        click.option(
            "--sasl-kerberos-principal",
            metavar="PRINCIPAL",
            help="GSSAPI: the client principal (enables SASL; default: the ticket cache's).",
        ),
        click.option(
            "--sasl-kerberos-keytab",
            metavar="FILE",
            help="GSSAPI: the principal's keytab (default: the ticket cache, after kinit).",
        ),
        click.option(
            "--sasl-kerberos-service-name",
            metavar="NAME",
            help="GSSAPI: the brokers' Kerberos service name (default kafka).",
        ),
        click.option(
            "--connect-timeout",
            type=click.FloatRange(min=0, min_open=True),
            default=10.0,
            show_default=True,
            metavar="SECONDS",
            help="Give up dialing a broker after this long.",
        ),
    ]
    decorated: Callable[..., Any] = wrapper
    for option in reversed(options):
        decorated = option(decorated)
    return cast(_F, decorated)
