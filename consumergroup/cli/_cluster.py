"""How every subcommand reaches the cluster: ``--bootstrap``, TLS, SASL, a config file.

Each setting comes from, in order: its command-line option, its environment
variable, the ``--command-config`` file (a Java-style properties file, as
Kafka's own tools take), the default. The file understands the client
properties of Kafka and librdkafka that matter for connecting::

    bootstrap.servers=broker-1:9093,broker-2:9093
    security.protocol=SASL_SSL          # PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL
    sasl.mechanism=SCRAM-SHA-512        # PLAIN, SCRAM-SHA-256, SCRAM-SHA-512
    sasl.username=alice                 # or sasl.jaas.config=... username="alice" password="..."
    sasl.password=secret
    ssl.ca.location=/etc/kafka/ca.pem   # PEM files
    ssl.certificate.location=/etc/kafka/client.pem
    ssl.key.location=/etc/kafka/client.key
    ssl.endpoint.identification.algorithm=   # empty: do not check the host name
"""

from __future__ import annotations

import contextlib
import functools
import re
import ssl
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, TypeVar, cast

import click

from ..admin import ClusterAdmin
from ..config import Config
from ..errors import ConfigurationError, ConsumerGroupError
from . import _properties as properties
from ._common import CliError, explain_connect_error, split_bootstrap, status

_F = TypeVar("_F", bound=Callable[..., Any])

#: security.protocol -> (TLS, SASL).
_PROTOCOLS = {
    "PLAINTEXT": (False, False),
    "SSL": (True, False),
    "SASL_PLAINTEXT": (False, True),
    "SASL_SSL": (True, True),
}
_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
#: Properties file key -> ClusterOptions field.
_PROPERTIES = {
    "bootstrap.servers": "bootstrap",
    "sasl.mechanism": "sasl_mechanism",
    "sasl.mechanisms": "sasl_mechanism",
    "sasl.username": "sasl_user",
    "sasl.password": "sasl_password",
    "ssl.ca.location": "tls_ca",
    "ssl.certificate.location": "tls_cert",
    "ssl.key.location": "tls_key",
    "ssl.key.password": "tls_key_password",
    "client.id": "client_id",
}
_SPECIAL = ("security.protocol", "sasl.jaas.config", "ssl.endpoint.identification.algorithm")
#: ClusterOptions field -> its option (with the environment variable, if any).
_OPTION_NAMES = {
    "sasl_mechanism": "--sasl-mechanism ($CONSUMERGROUP_SASL_MECHANISM)",
    "sasl_user": "--sasl-user ($CONSUMERGROUP_SASL_USER)",
    "sasl_password": "--sasl-password ($CONSUMERGROUP_SASL_PASSWORD)",
}
#: ClusterOptions field -> the properties file keys that give it.
_FILE_KEYS = {
    "sasl_user": 'sasl.username (or sasl.jaas.config=... username="...")',
    "sasl_password": 'sasl.password (or sasl.jaas.config=... password="...")',
}
_JAAS = re.compile(r'\b(username|password)\s*=\s*"((?:[^"\\]|\\.)*)"')


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
        sasl = self.sasl_mechanism is not None or self.sasl_user is not None
        if self.tls or self.tls_ca or self.tls_cert or self.tls_insecure:
            config.net.tls.enable = True
            config.net.tls.context = self._ssl_context()
        if sasl:
            config.net.sasl.enable = True
            mechanism = (self.sasl_mechanism or "PLAIN").upper()
            if mechanism not in _MECHANISMS:
                raise CliError(
                    f"unknown SASL mechanism {self.sasl_mechanism!r} "
                    f"({self._named('sasl_mechanism')}): use one of {', '.join(_MECHANISMS)}"
                )
            self._check_sasl()
            config.net.sasl.mechanism = mechanism  # type: ignore[assignment]
            config.net.sasl.user = self.sasl_user or ""
            config.net.sasl.password = self.sasl_password or ""
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
        jaas = f"sasl.jaas.config in {path}"
        for name, value in _JAAS.findall(props.get("sasl.jaas.config", "")):
            self._default("sasl_user" if name == "username" else "sasl_password", value, jaas)
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
        if sasl:
            self._default("sasl_mechanism", "PLAIN", where)  # Kafka's default mechanism

    def _default(self, attr: str, value: object, source: str) -> None:
        if getattr(self, attr) is None:
            setattr(self, attr, value)
            self.sources[attr] = source

    def _named(self, attr: str) -> str:
        """Where a setting was given, in the user's words: the file's key, else the option."""
        return self.sources.get(attr) or _OPTION_NAMES[attr]

    def _check_sasl(self) -> None:
        """SASL needs a user and a password: say so in the words the settings came in."""
        given = "sasl_mechanism" if self.sasl_mechanism is not None else "sasl_user"
        for attr, what in (("sasl_user", "user"), ("sasl_password", "password")):
            if not getattr(self, attr):
                raise CliError(
                    f"SASL is on ({self._named(given)}) but no {what} is given: set "
                    f"{_OPTION_NAMES[attr]}, or {_FILE_KEYS[attr]} in --command-config"
                )

    @contextlib.asynccontextmanager
    async def admin(self) -> AsyncIterator[ClusterAdmin]:
        """A started :class:`ClusterAdmin`; failing to reach the cluster is one clear line."""
        admin = ClusterAdmin(self.addrs, self.config())
        try:
            await admin.start()
        except ConsumerGroupError as exc:
            await admin.close()
            raise explain_connect_error(exc, self.bootstrap or "") or exc from None
        try:
            yield admin
        finally:
            await admin.close()


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
            "-b",
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
            help="SASL mechanism (default PLAIN when a user is given).",
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
