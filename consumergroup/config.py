"""Configuration: nested dataclasses with sarama-like defaults.

Durations are float seconds, sizes are int bytes. Build a :class:`Config`,
change what you need (``config.consumer.group.session_timeout = 30.0``) and
call :meth:`Config.validate`, which checks every field and raises
:class:`~consumergroup.errors.ConfigurationError` naming the field path, the
bad value, the allowed range and what to do.
"""

from __future__ import annotations

import math
import os
import re
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import field, fields
from typing import TYPE_CHECKING, Literal, NoReturn, TypeAlias, get_args

from ._dataclass import dataclass
from .errors import ConfigurationError

if TYPE_CHECKING:
    import ssl

    from .balance.strategy import BalanceStrategy

__all__ = [
    "OFFSET_NEWEST",
    "OFFSET_OLDEST",
    "AutoCommitConfig",
    "Config",
    "ConsumerConfig",
    "ConsumerRetryConfig",
    "FetchConfig",
    "GroupConfig",
    "GroupProtocol",
    "IsolationLevel",
    "MemberConfig",
    "MetadataConfig",
    "MissingTopic",
    "NetConfig",
    "OffsetReset",
    "OffsetsConfig",
    "ProducerAcks",
    "ProducerCompression",
    "ProducerConfig",
    "RebalanceConfig",
    "RetryConfig",
    "SASLConfig",
    "SaslMechanism",
    "TLSConfig",
    "TokenProvider",
]

OFFSET_NEWEST = -1
"""Start from the next message produced (Kafka's ``latest``; sarama's ``OffsetNewest``)."""
OFFSET_OLDEST = -2
"""Start from the oldest retained message (Kafka's ``earliest``; sarama's ``OffsetOldest``)."""

ProducerAcks = Literal[0, 1, -1, "all"]
"""Which replicas must have a batch before the leader answers: none, the leader, all in sync."""
ProducerCompression = Literal["none", "gzip", "snappy", "lz4", "zstd"]
"""The codec record batches are compressed with on write."""
SaslMechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI"]
"""The SASL mechanisms this client implements."""
TokenProvider: TypeAlias = Callable[[], Awaitable[tuple[str, float]]]
"""An OAUTHBEARER token source: ``async () -> (token, lifetime in seconds)``.

Called for every connection's authentication and re-authentication: cache the token
and refresh it before it expires (:class:`~consumergroup.OIDCTokenProvider` does)."""
IsolationLevel = Literal["read_uncommitted", "read_committed"]
"""Which records a fetch returns: all, or only those of committed transactions."""
OffsetReset = Literal["oldest", "newest", "error"]
"""What to do when a committed offset is out of range."""
GroupProtocol = Literal["classic", "consumer"]
"""The group protocol: classic (JoinGroup/SyncGroup) or consumer (KIP-848)."""
MissingTopic = Literal["wait", "fail"]
"""What a member does about a subscribed topic that does not exist: wait for it, or fail."""

_INT32_MAX = 2**31 - 1
# Kafka carries these durations as int32 milliseconds.
_INT32_MS_MAX_SECONDS = _INT32_MAX / 1000
# group.instance.id rules, as the broker enforces them. This and the two below are
# patterns, compiled by re (and cached there) on the first check that needs them: most
# programs set neither, and each compile is ~0.3 M instructions of import consumergroup.
_INSTANCE_ID = r"[A-Za-z0-9._-]{1,249}"
_MAX_PROTOCOL_STRING_BYTES = 32767  # int16 length prefix
_MAX_SHOWN = 80  # longest value repr quoted in an error message
# SASL extension names and values (KIP-342), as Kafka's OAuthBearerClientInitialResponse checks.
_EXTENSION_KEY = r"[A-Za-z]+"
_EXTENSION_VALUE = r"[\x21-\x7E \t\r\n]+"
_USER_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def _default_strategies() -> list[BalanceStrategy]:
    # Imported lazily so that importing config never pulls in (or cycles through)
    # the balance package.
    from .balance.range import RangeAssignor

    return [RangeAssignor()]


# ----------------------------------------------------------------------------- checks


def _fail(path: str, value: object, rule: str, fix: str, *, secret: bool = False) -> NoReturn:
    shown = f"<{type(value).__name__}, hidden>" if secret else repr(value)
    if len(shown) > _MAX_SHOWN:
        shown = f"{shown[: _MAX_SHOWN - 3]}..."
    raise ConfigurationError(f"{path}={shown} {rule}: {fix}")


def _check_number(
    path: str,
    value: object,
    fix: str,
    *,
    low: float,
    high: float | None = None,
    low_open: bool = False,
    integer: bool = False,
    unit: str = "",
) -> None:
    """Fail unless ``value`` is a finite number (an int if ``integer``) within the bounds."""
    ok = (
        isinstance(value, (int, float))
        # bool is an int subclass, but True is never a meaningful timeout or size.
        and not isinstance(value, bool)
        and not (integer and isinstance(value, float))
        and math.isfinite(value)
        and (value > low if low_open else value >= low)
        and (high is None or value <= high)
    )
    if not ok:
        if high is not None:
            bounds = f"between {low} and {high}"
        else:
            bounds = f"{'>' if low_open else '>='} {low}"
        kind = "an integer" if integer else "a number"
        _fail(path, value, f"must be {kind} {bounds}{unit}", fix)


# Above these a duration is almost surely milliseconds written out of Kafka's habit
# (session.timeout.ms=45000): refused, with the value in seconds it probably meant.
_HOUR = 3600.0
_DAY = 86400.0
# The producer's short durations: a linger over a second holds every partial batch that
# long; a first retry later than 10 s, or backoffs over a minute, outlast most
# delivery timeouts.
_LINGER_MOST = 1.0
_RETRY_BACKOFF_MOST = 10.0
_RETRY_BACKOFF_MAX_MOST = 60.0


def _check_not_milliseconds(path: str, value: float, most: float) -> None:
    """Refuse ``value`` seconds above ``most``: "did you mean value/1000 s?"."""
    if value > most:
        limit = f"{most / _HOUR:g} hour(s)" if most >= _HOUR else f"{most:g} s"
        raise ConfigurationError(
            f"{path}={value!r} is {value:g} seconds, more than {limit}: durations are "
            f"seconds here, not Kafka's milliseconds. Did you mean {value / 1000:g} s? "
            f"Set {path} = {value / 1000:g}"
        )


def _check_seconds(
    path: str, value: object, fix: str, *, zero_ok: bool = False, most: float = _HOUR
) -> None:
    _check_number(path, value, fix, low=0, low_open=not zero_ok, unit=" (seconds)")
    _check_not_milliseconds(path, value, most)  # type: ignore[arg-type]  # a number now


def _check_int32_ms(path: str, value: object, fix: str, *, most: float = _HOUR) -> None:
    _check_number(
        path,
        value,
        fix,
        low=0.001,
        high=_INT32_MS_MAX_SECONDS,
        unit=" (seconds; Kafka sends it as int32 milliseconds)",
    )
    _check_not_milliseconds(path, value, most)  # type: ignore[arg-type]  # a number now


def _check_int32(path: str, value: object, fix: str, *, low: int, unit: str = "") -> None:
    _check_number(path, value, fix, low=low, high=_INT32_MAX, integer=True, unit=unit)


def _check_type(
    path: str, value: object, expected: type, fix: str, *, secret: bool = False
) -> None:
    if not isinstance(value, expected):
        _fail(path, value, f"must be of type {expected.__name__}", fix, secret=secret)


def _check_choice(path: str, value: object, allowed: tuple[object, ...], fix: str) -> None:
    # ``in`` alone would accept 1.0 for 1 or True for 1: compare types too.
    if not any(type(value) is type(a) and value == a for a in allowed):
        choices = ", ".join(repr(a) for a in allowed)
        _fail(path, value, f"must be one of {choices}", fix)


def _check_protocol_string(path: str, value: object, fix: str) -> None:
    """Fail unless ``value`` is a str that fits a protocol string (int16 length)."""
    try:
        ok = isinstance(value, str) and len(value.encode()) <= _MAX_PROTOCOL_STRING_BYTES
    except UnicodeEncodeError:  # lone surrogates
        ok = False
    if not ok:
        _fail(
            path, value, f"must be a str of at most {_MAX_PROTOCOL_STRING_BYTES} UTF-8 bytes", fix
        )


def _check_section(path: str, value: object, expected: type[_Section]) -> None:
    if not isinstance(value, expected):
        _fail(path, value, f"must be of type {expected.__name__}", f"assign {expected.__name__}()")
    value._check(path)


class _Fields:
    """Refuses to set an attribute that is not a field: a typo must not pass silently."""

    def __setattr__(self, name: str, value: object) -> None:
        known = [f.name for f in fields(self)]  # type: ignore[arg-type]
        if name not in known:
            import difflib  # the error path only: not a cost of import consumergroup

            close = difflib.get_close_matches(name, known, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ConfigurationError(
                f"{type(self).__name__} has no field {name!r}: {hint}"
                f"its fields are {', '.join(known)}"
            )
        object.__setattr__(self, name, value)


class _Section(_Fields, ABC):
    """A config dataclass that checks its own fields."""

    @abstractmethod
    def _check(self, path: str) -> None:
        """Raise ConfigurationError for the first invalid field; ``path`` locates this section."""


# ----------------------------------------------------------------------------- net


@dataclass
class TLSConfig(_Section):
    """TLS for broker connections (sarama: ``Net.TLS``).

    Attributes:
        enable: Connect with TLS.
        context: The SSL context to use; None means ``ssl.create_default_context()``
            (verifies the broker certificate against the system CAs). Only
            allowed when ``enable`` is True.
    """

    enable: bool = False
    context: ssl.SSLContext | None = None

    def _check(self, path: str) -> None:
        _check_type(f"{path}.enable", self.enable, bool, "use True or False")
        if self.context is not None:
            import ssl  # only when a context is given: not a cost of import consumergroup

            _check_type(
                f"{path}.context",
                self.context,
                ssl.SSLContext,
                "pass an ssl.SSLContext, or None for the default context",
            )
            if not self.enable:
                _fail(
                    f"{path}.enable",
                    self.enable,
                    f"must be True when {path}.context is set",
                    f"set {path}.enable = True, or drop the context to connect without TLS",
                )


@dataclass
class SASLConfig(_Section):
    """SASL authentication (sarama: ``Net.SASL``).

    Each mechanism takes its own settings, and a setting another mechanism would
    use is refused (it would be silently ignored):

    - ``PLAIN``, ``SCRAM-SHA-256``, ``SCRAM-SHA-512``: ``user`` and ``password``.
    - ``OAUTHBEARER`` (KIP-255): ``token_provider`` and optional ``extensions``.
    - ``GSSAPI`` (Kerberos): ``kerberos_service_name``, and ``kerberos_principal`` with
      ``kerberos_keytab``, or neither (the default ticket cache, as after ``kinit``).

    When the broker sets ``connections.max.reauth.ms``, every connection authenticates
    again before its session expires (KIP-368), for every mechanism.

    Attributes:
        enable: Authenticate every connection with SASL.
        mechanism: ``"PLAIN"``, ``"SCRAM-SHA-256"``, ``"SCRAM-SHA-512"``,
            ``"OAUTHBEARER"`` or ``"GSSAPI"``.
        user: The user name (PLAIN, SCRAM).
        password: The password (PLAIN, SCRAM).
        handshake: Send a SaslHandshake request first (sarama: ``Handshake``);
            when False, SaslAuthenticate requests are sent without one (a
            re-authentication always sends one: the broker requires it).
        token_provider: OAUTHBEARER: ``async () -> (token, lifetime_s)``, called for
            each authentication (:class:`~consumergroup.OIDCTokenProvider`,
            :class:`~consumergroup.MSKIAMTokenProvider`, or your own).
        extensions: OAUTHBEARER: SASL extensions sent with the token (KIP-342), e.g.
            Confluent Cloud's ``{"logicalCluster": "lkc-1", "identityPoolId": "pool-1"}``.
        kerberos_service_name: GSSAPI: the brokers' Kerberos service name (Java:
            ``sasl.kerberos.service.name``); the target is ``<name>@<broker host>``.
        kerberos_principal: GSSAPI: the client principal (``user@REALM``); empty: the
            default one of the ticket cache.
        kerberos_keytab: GSSAPI: a keytab holding ``kerberos_principal``'s keys; empty:
            the ticket cache (``KRB5CCNAME``, ``kinit``).
    """

    enable: bool = False
    mechanism: SaslMechanism = "PLAIN"
    user: str = ""
    password: str = field(default="", repr=False)
    handshake: bool = True
    token_provider: TokenProvider | None = field(default=None, repr=False)
    extensions: dict[str, str] = field(default_factory=dict)
    kerberos_service_name: str = "kafka"
    kerberos_principal: str = ""
    kerberos_keytab: str = ""

    def _check(self, path: str) -> None:
        _check_type(f"{path}.enable", self.enable, bool, "use True or False")
        _check_choice(
            f"{path}.mechanism",
            self.mechanism,
            get_args(SaslMechanism),
            "pick a mechanism the broker's listener has enabled",
        )
        _check_type(f"{path}.user", self.user, str, "give the SASL user name as a str")
        _check_type(
            f"{path}.password", self.password, str, "give the password as a str", secret=True
        )
        _check_type(f"{path}.handshake", self.handshake, bool, "use True or False")
        if self.token_provider is not None and not callable(self.token_provider):
            _fail(
                f"{path}.token_provider",
                self.token_provider,
                "must be an async callable returning (token, lifetime_s)",
                "pass e.g. cg.OIDCTokenProvider(...), or an async def of your own",
            )
        self._check_extensions(path)
        for name in ("kerberos_service_name", "kerberos_principal", "kerberos_keytab"):
            _check_type(f"{path}.{name}", getattr(self, name), str, "give it as a str")
        if not self.kerberos_service_name:
            _fail(
                f"{path}.kerberos_service_name",
                self.kerberos_service_name,
                "must not be empty",
                "use the brokers' Kerberos service name (Kafka's default: 'kafka')",
            )
        if self.enable:
            self._check_mechanism_settings(path)

    def _check_extensions(self, path: str) -> None:
        where = f"{path}.extensions"
        _check_type(where, self.extensions, dict, "give a dict of str to str")
        for key, value in self.extensions.items():
            if not isinstance(key, str) or not re.fullmatch(_EXTENSION_KEY, key) or key == "auth":
                _fail(
                    where,
                    key,
                    "has an invalid extension name (letters only, and not 'auth')",
                    "use the name your broker or cloud expects, e.g. 'logicalCluster'",
                )
            if not isinstance(value, str) or not re.fullmatch(_EXTENSION_VALUE, value):
                _fail(
                    where,
                    {key: value},
                    "must map each name to a non-empty str of printable ASCII",
                    "give the extension's value as text",
                )

    def _check_mechanism_settings(self, path: str) -> None:
        """Each mechanism's own settings are there, and no other mechanism's."""
        mechanism = self.mechanism
        others = {
            "user": ("PLAIN and SCRAM", mechanism in _USER_MECHANISMS),
            "password": ("PLAIN and SCRAM", mechanism in _USER_MECHANISMS),
            "token_provider": ("OAUTHBEARER", mechanism == "OAUTHBEARER"),
            "extensions": ("OAUTHBEARER", mechanism == "OAUTHBEARER"),
            "kerberos_principal": ("GSSAPI", mechanism == "GSSAPI"),
            "kerberos_keytab": ("GSSAPI", mechanism == "GSSAPI"),
        }
        for name, (users, used) in others.items():
            value = getattr(self, name)
            if not used and value:
                _fail(
                    f"{path}.{name}",
                    value,
                    f"is used by {users} only, not by {path}.mechanism={mechanism!r}",
                    f"drop {path}.{name}, or pick the mechanism it belongs to",
                    secret=name == "password",
                )
        if mechanism in _USER_MECHANISMS:
            for name in ("user", "password"):
                if not getattr(self, name):
                    _fail(
                        f"{path}.{name}",
                        getattr(self, name),
                        "must not be empty when SASL is enabled",
                        f"set {path}.{name}, or set {path}.enable = False",
                    )
        elif mechanism == "OAUTHBEARER" and self.token_provider is None:
            _fail(
                f"{path}.token_provider",
                None,
                "must be set for OAUTHBEARER",
                "pass cg.OIDCTokenProvider(token_endpoint_url, client_id, client_secret), "
                "cg.MSKIAMTokenProvider(region), or an async callable returning "
                "(token, lifetime_s)",
            )
        elif mechanism == "GSSAPI":
            self._check_kerberos(path)

    def _check_kerberos(self, path: str) -> None:
        if self.kerberos_keytab and not self.kerberos_principal:
            _fail(
                f"{path}.kerberos_principal",
                self.kerberos_principal,
                f"must be set with {path}.kerberos_keytab",
                "name the principal whose keys the keytab holds (e.g. 'app@EXAMPLE.COM')",
            )
        if self.kerberos_keytab and not os.path.isfile(self.kerberos_keytab):
            _fail(
                f"{path}.kerberos_keytab",
                self.kerberos_keytab,
                "is not a file",
                "give the path of the client's keytab, or leave it empty to use the "
                "ticket cache (kinit)",
            )


@dataclass
class NetConfig(_Section):
    """Broker connections (sarama: ``Net``).

    Attributes:
        dial_timeout: Seconds to open a connection, TLS and SASL included
            (sarama: ``DialTimeout``).
        read_timeout: Seconds to wait for the response to one request
            (sarama: ``ReadTimeout``).
        write_timeout: Seconds a request may wait for room in a full socket
            send buffer before the connection is given up as dead
            (sarama: ``WriteTimeout``).
        max_open_requests: Requests in flight per connection (pipelining;
            sarama: ``MaxOpenRequests``).
        tls: TLS settings.
        sasl: SASL settings.
    """

    dial_timeout: float = 30.0
    read_timeout: float = 30.0
    write_timeout: float = 30.0
    max_open_requests: int = 5
    tls: TLSConfig = field(default_factory=TLSConfig)
    sasl: SASLConfig = field(default_factory=SASLConfig)

    def _check(self, path: str) -> None:
        _check_seconds(f"{path}.dial_timeout", self.dial_timeout, "use e.g. 30.0")
        _check_seconds(f"{path}.read_timeout", self.read_timeout, "use e.g. 30.0")
        _check_seconds(f"{path}.write_timeout", self.write_timeout, "use e.g. 30.0")
        _check_number(
            f"{path}.max_open_requests",
            self.max_open_requests,
            "use 1 to disable pipelining, or e.g. 5",
            low=1,
            integer=True,
        )
        _check_section(f"{path}.tls", self.tls, TLSConfig)
        _check_section(f"{path}.sasl", self.sasl, SASLConfig)


# ----------------------------------------------------------------------------- metadata


@dataclass
class RetryConfig(_Section):
    """How often, and how far apart, to retry an operation after a retriable error.

    Attributes:
        max: Retries after the first attempt (0 = never retry; sarama: ``Retry.Max``).
        backoff: Seconds to wait between attempts (sarama: ``Retry.Backoff``).
    """

    max: int = 3
    backoff: float = 0.25

    def _check(self, path: str) -> None:
        _check_number(
            f"{path}.max", self.max, "use 0 to never retry, or e.g. 3", low=0, integer=True
        )
        _check_seconds(f"{path}.backoff", self.backoff, "use 0 or more, e.g. 0.25", zero_ok=True)


@dataclass
class MetadataConfig(_Section):
    """Cluster metadata (sarama: ``Metadata``).

    Attributes:
        retry: Retries of a metadata request while the cluster is electing
            leaders (sarama: ``Metadata.Retry``).
        refresh_frequency: Seconds between background metadata refreshes;
            0 disables them (sarama: ``Metadata.RefreshFrequency``).
        allow_auto_topic_creation: Let metadata requests create missing
            topics, if the broker allows it (sarama: ``Metadata.AllowAutoTopicCreation``).
    """

    retry: RetryConfig = field(default_factory=RetryConfig)
    refresh_frequency: float = 600.0
    allow_auto_topic_creation: bool = False

    def _check(self, path: str) -> None:
        _check_section(f"{path}.retry", self.retry, RetryConfig)
        _check_seconds(
            f"{path}.refresh_frequency",
            self.refresh_frequency,
            "use 0 to disable background refresh, or e.g. 600.0",
            zero_ok=True,
            most=_DAY,
        )
        _check_type(
            f"{path}.allow_auto_topic_creation",
            self.allow_auto_topic_creation,
            bool,
            "use True or False",
        )


# ----------------------------------------------------------------------------- group


@dataclass
class RebalanceConfig(_Section):
    """How the group rebalances (sarama: ``Consumer.Group.Rebalance``).

    Attributes:
        strategies: Assignment strategies offered to the group, preferred
            first; the leader uses the first one every member supports
            (sarama: ``GroupStrategies``). Default: ``[RangeAssignor()]``.
        timeout: Seconds the coordinator waits for every member to rejoin
            during a rebalance; members that do not rejoin in time are
            removed (sarama: ``Rebalance.Timeout``).
        retry: Retries of a failed join/sync (sarama: ``Rebalance.Retry``).
    """

    strategies: list[BalanceStrategy] = field(default_factory=_default_strategies)
    timeout: float = 60.0
    retry: RetryConfig = field(default_factory=lambda: RetryConfig(max=4, backoff=2.0))

    def _check(self, path: str) -> None:
        strategies_path = f"{path}.strategies"
        fix = "pass a non-empty list of strategies, e.g. [RangeAssignor()]"
        if not isinstance(self.strategies, list) or not self.strategies:
            _fail(strategies_path, self.strategies, "must be a non-empty list", fix)
        seen: set[str] = set()
        for i, strategy in enumerate(self.strategies):
            item = f"{strategies_path}[{i}]"
            name = getattr(strategy, "name", None)
            if not isinstance(name, str) or not name:
                _fail(
                    f"{item}.name",
                    name,
                    "must be a non-empty str",
                    "use a BalanceStrategy (it needs a name and a plan method)",
                )
            if not callable(getattr(strategy, "plan", None)):
                _fail(
                    item,
                    strategy,
                    "must have a plan() method",
                    "use a BalanceStrategy (it needs a name and a plan method)",
                )
            if name in seen:
                _fail(
                    f"{item}.name",
                    name,
                    "must be unique among the strategies",
                    "list each strategy once",
                )
            seen.add(name)
        # Java's max.poll.interval.ms is sometimes hours: a day is the bound here.
        _check_int32_ms(f"{path}.timeout", self.timeout, "use e.g. 60.0", most=_DAY)
        _check_section(f"{path}.retry", self.retry, RetryConfig)


@dataclass
class MemberConfig(_Section):
    """This member's data for the group (sarama: ``Consumer.Group.Member``).

    Attributes:
        user_data: Opaque bytes sent with the subscription in JoinGroup; every
            member's user data reaches the leader's strategy (sarama: ``UserData``).
    """

    user_data: bytes = b""

    def _check(self, path: str) -> None:
        _check_type(f"{path}.user_data", self.user_data, bytes, "pass bytes, e.g. b''")


@dataclass
class GroupConfig(_Section):
    """Group membership (sarama: ``Consumer.Group``).

    Attributes:
        session_timeout: Seconds without a heartbeat after which the
            coordinator removes this member; must lie within the broker's
            group.min/max.session.timeout.ms (sarama: ``Session.Timeout``).
        heartbeat_interval: Seconds between heartbeats; must be less than
            ``session_timeout``, typically at most a third of it
            (sarama: ``Heartbeat.Interval``).
        rebalance: Rebalance settings.
        member: This member's user data.
        instance_id: Static membership id (``group.instance.id``): a member
            that restarts with the same id within the session timeout gets its
            partitions back without a rebalance (sarama: ``InstanceId``).
        partition_watch_interval: Seconds between checks of the subscribed
            topics' partition counts; every member ends its session (and so
            rebalances) when a count changes (sarama checks on the leader only,
            every ``Metadata.RefreshFrequency``).
        protocol: ``"classic"`` (JoinGroup/SyncGroup, client-side assignors) or
            ``"consumer"``: KIP-848 (Apache Kafka 4.0+), the coordinator assigns and
            members reconcile incrementally by heartbeat (Java: ``group.protocol``).
            With ``"consumer"`` the broker sets the session timeout and heartbeat
            interval and picks the assignor, so ``session_timeout``,
            ``heartbeat_interval`` and ``rebalance.strategies`` must keep their
            defaults; ``rebalance.timeout`` is still sent.
        missing_topic: What ``run()``/``consume()`` do about a subscribed topic that
            does not exist (not created yet, deleted, lost by a broker): ``"wait"``
            (default, as Java's consumer and librdkafka do) checks again every
            ``rebalance.retry.backoff`` until it exists, saying what is missing in
            ``stats().error`` and in a warning every minute; ``"fail"`` raises
            UnknownTopicOrPartitionError at once (state FAILED).
        remote_assignor: ``"consumer"`` protocol only: the broker-side assignor to
            ask for (``"uniform"`` or ``"range"``; None: the broker's default,
            ``group.consumer.assignors``) (Java: ``group.remote.assignor``).
    """

    session_timeout: float = 10.0
    heartbeat_interval: float = 3.0
    rebalance: RebalanceConfig = field(default_factory=RebalanceConfig)
    member: MemberConfig = field(default_factory=MemberConfig)
    instance_id: str | None = None
    partition_watch_interval: float = 10.0
    protocol: GroupProtocol = "classic"
    missing_topic: MissingTopic = "wait"
    remote_assignor: str | None = None

    def _check(self, path: str) -> None:
        _check_int32_ms(f"{path}.session_timeout", self.session_timeout, "use e.g. 10.0")
        _check_choice(
            f"{path}.missing_topic",
            self.missing_topic,
            ("wait", "fail"),
            "use 'wait' (until the topic is created) or 'fail' (at once)",
        )
        _check_seconds(
            f"{path}.partition_watch_interval", self.partition_watch_interval, "use e.g. 10.0"
        )
        session = self.session_timeout
        hb = self.heartbeat_interval
        if (
            not isinstance(hb, (int, float))
            or isinstance(hb, bool)
            or not math.isfinite(hb)
            or not 0 < hb < session
        ):
            _fail(
                f"{path}.heartbeat_interval",
                hb,
                f"must be > 0 and < {path}.session_timeout ({session})",
                "lower the heartbeat interval (typically a third of the session timeout) "
                "or raise the session timeout",
            )
        _check_section(f"{path}.rebalance", self.rebalance, RebalanceConfig)
        _check_section(f"{path}.member", self.member, MemberConfig)
        iid = self.instance_id
        if iid is not None and (
            not isinstance(iid, str) or not re.fullmatch(_INSTANCE_ID, iid) or iid in (".", "..")
        ):
            _fail(
                f"{path}.instance_id",
                iid,
                "must be None or 1 to 249 of the characters A-Z a-z 0-9 . _ - "
                "(and not '.' or '..')",
                "use a stable id per process, e.g. 'orders-worker-1'",
            )
        self._check_protocol(path)

    def _check_protocol(self, path: str) -> None:
        """``protocol`` and ``remote_assignor``, and the client-side settings that the
        consumer protocol replaces by broker settings (librdkafka refuses them too)."""
        if self.protocol not in ("classic", "consumer"):
            _fail(
                f"{path}.protocol",
                self.protocol,
                "must be 'classic' or 'consumer'",
                "use 'consumer' for KIP-848 (Apache Kafka 4.0+), else 'classic'",
            )
        assignor = self.remote_assignor
        if assignor is not None and (not isinstance(assignor, str) or not assignor):
            _fail(
                f"{path}.remote_assignor",
                assignor,
                "must be None or a non-empty str",
                "use None (the broker's default), 'uniform' or 'range'",
            )
        if self.protocol == "classic":
            if assignor is not None:
                _fail(
                    f"{path}.remote_assignor",
                    assignor,
                    "applies only to protocol='consumer'",
                    f"set {path}.protocol = 'consumer', or choose a client-side assignor "
                    f"in {path}.rebalance.strategies",
                )
            return
        default = GroupConfig()
        replaced = (
            ("session_timeout", "group.consumer.session.timeout.ms", ""),
            (
                "heartbeat_interval",
                "group.consumer.heartbeat.interval.ms",
                " (the member heartbeats at the interval the broker returns)",
            ),
        )
        for name, broker_setting, note in replaced:
            value = getattr(self, name)
            if value != getattr(default, name):
                _fail(
                    f"{path}.{name}",
                    value,
                    "does not apply with protocol='consumer': the broker sets it",
                    f"leave it at its default and set {broker_setting} on the broker{note}",
                )
        names = [getattr(s, "name", s) for s in self.rebalance.strategies]
        if names != [s.name for s in default.rebalance.strategies]:
            _fail(
                f"{path}.rebalance.strategies",
                names,
                "does not apply with protocol='consumer': the coordinator assigns",
                f"leave it at its default and pick the broker's assignor with "
                f"{path}.remote_assignor ('uniform' or 'range'; the broker's list is "
                "group.consumer.assignors)",
            )


# ----------------------------------------------------------------------------- consumer


@dataclass
class ConsumerRetryConfig(_Section):
    """Partition consumer retries (sarama: ``Consumer.Retry``).

    Attributes:
        backoff: Seconds a partition consumer waits before fetching again
            after an error (sarama: ``Retry.Backoff``).
    """

    backoff: float = 2.0

    def _check(self, path: str) -> None:
        _check_seconds(f"{path}.backoff", self.backoff, "use 0 or more, e.g. 2.0", zero_ok=True)


@dataclass
class FetchConfig(_Section):
    """Fetch sizes (sarama: ``Consumer.Fetch``).

    Attributes:
        min: Bytes the broker should gather before answering a fetch, waiting
            up to ``max_wait_time`` (sarama: ``Fetch.Min``; Kafka ``fetch.min.bytes``).
        default: Bytes requested per partition per fetch; grows automatically
            when a single message is larger (sarama: ``Fetch.Default``).
        max: Cap for that growth per partition; 0 means no cap
            (sarama: ``Fetch.Max``).
        max_bytes: Cap for a whole fetch response (Kafka ``fetch.max.bytes``;
            sarama: ``MaxResponseSize``).
        check_crcs: Verify each record batch's CRC before handing its records
            out; a mismatch fails the partition with CorruptMessageError (Kafka
            ``check.crcs``). Off by default: TCP already checksums, and it costs
            a pass over every byte fetched.
        buffer_bytes: Fetched bytes queued per partition; a partition is not
            fetched while this many are waiting for its reader, whatever
            ``channel_buffer_size`` (which counts messages) allows: with large
            messages, the bound that holds memory down. A partition holds at most
            this plus one fetch response's share. Also how many decompressed bytes
            of a compressed batch are decoded at a time.
        max_record_bytes: The largest record read from a compressed batch,
            decompressed. A compressed batch is decompressed as a stream, a record
            at a time, so memory does not follow its compression ratio; a record
            larger than this is skipped (its bytes are never held) and reported as a
            ConsumerError naming its offset (``group.errors()``, and the log), and
            the partition reads on after it. The default, 64 MiB, is 64 times what
            Kafka's producers send by default (``max.request.size``,
            ``message.max.bytes``: 1 MiB). Also caps the window of a zstd frame
            (at least 8 MiB).
    """

    min: int = 1
    default: int = 1048576
    max: int = 0
    max_bytes: int = 52428800
    check_crcs: bool = False
    buffer_bytes: int = 1048576
    max_record_bytes: int = 67108864

    def _check(self, path: str) -> None:
        _check_int32(f"{path}.min", self.min, "use e.g. 1", low=1, unit=" (bytes)")
        _check_int32(f"{path}.default", self.default, "use e.g. 1048576", low=1, unit=" (bytes)")
        if type(self.max) is not int or self.max != 0:  # exactly 0 means no limit
            _check_int32(
                f"{path}.max",
                self.max,
                f"use 0 for no limit, or a value >= {path}.default ({self.default})",
                low=self.default,
                unit=" (bytes), or 0 for no limit",
            )
        _check_int32(
            f"{path}.max_bytes", self.max_bytes, "use e.g. 52428800", low=1, unit=" (bytes)"
        )
        _check_type(f"{path}.check_crcs", self.check_crcs, bool, "use True or False")
        _check_int32(
            f"{path}.buffer_bytes", self.buffer_bytes, "use e.g. 1048576", low=1, unit=" (bytes)"
        )
        _check_int32(
            f"{path}.max_record_bytes",
            self.max_record_bytes,
            "use e.g. 67108864",
            low=1,
            unit=" (bytes)",
        )


@dataclass
class AutoCommitConfig(_Section):
    """Periodic offset commits (sarama: ``Consumer.Offsets.AutoCommit``).

    Attributes:
        enable: Commit marked offsets in the background (sarama: ``Enable``).
        interval: Seconds between background commits (sarama: ``Interval``).
    """

    enable: bool = True
    interval: float = 1.0

    def _check(self, path: str) -> None:
        _check_type(f"{path}.enable", self.enable, bool, "use True or False")
        _check_seconds(f"{path}.interval", self.interval, "use e.g. 1.0")


@dataclass
class OffsetsConfig(_Section):
    """Offset management (sarama: ``Consumer.Offsets``).

    Attributes:
        auto_commit: Background commit settings.
        initial: Where to start when the group has no committed offset:
            ``OFFSET_NEWEST`` or ``OFFSET_OLDEST`` (sarama: ``Initial``).
        reset: What to do when the committed offset is out of range:
            ``"oldest"``, ``"newest"``, ``"error"`` (surface
            ``OffsetOutOfRangeError``), or None to follow ``initial``
            (sarama: ``ResetInvalidOffsets``).
        retention: Seconds the broker keeps committed offsets; 0 means the
            broker's ``offsets.retention.minutes`` (sarama: ``Retention``).
        retry: Retries of a failed offset commit or fetch (sarama: ``Retry``).
    """

    auto_commit: AutoCommitConfig = field(default_factory=AutoCommitConfig)
    initial: int = OFFSET_NEWEST
    reset: OffsetReset | None = None
    retention: float = 0.0
    retry: RetryConfig = field(default_factory=RetryConfig)

    def _check(self, path: str) -> None:
        _check_section(f"{path}.auto_commit", self.auto_commit, AutoCommitConfig)
        _check_choice(
            f"{path}.initial",
            self.initial,
            (OFFSET_NEWEST, OFFSET_OLDEST),
            "use OFFSET_NEWEST (-1) or OFFSET_OLDEST (-2)",
        )
        _check_choice(
            f"{path}.reset",
            self.reset,
            (*get_args(OffsetReset), None),
            f"pick one; None follows {path}.initial",
        )
        _check_seconds(
            f"{path}.retention",
            self.retention,
            "use 0 for the broker default, or a retention in seconds",
            zero_ok=True,
            most=_INT32_MS_MAX_SECONDS,  # weeks are normal here
        )
        _check_section(f"{path}.retry", self.retry, RetryConfig)


@dataclass
class ConsumerConfig(_Section):
    """Consuming (sarama: ``Consumer``).

    Attributes:
        group: Group membership settings.
        retry: Partition consumer retry settings.
        fetch: Fetch sizes.
        max_wait_time: Seconds the broker may wait for ``fetch.min`` bytes
            before answering a fetch (sarama: ``MaxWaitTime``).
        return_errors: Deliver partition consumer errors to the errors
            channel instead of only logging them (sarama: ``Return.Errors``).
        isolation_level: ``"read_uncommitted"`` or ``"read_committed"``
            (only records of committed transactions; sarama: ``IsolationLevel``).
        offsets: Offset management settings.
    """

    group: GroupConfig = field(default_factory=GroupConfig)
    retry: ConsumerRetryConfig = field(default_factory=ConsumerRetryConfig)
    fetch: FetchConfig = field(default_factory=FetchConfig)
    max_wait_time: float = 0.5
    return_errors: bool = False
    isolation_level: IsolationLevel = "read_uncommitted"
    offsets: OffsetsConfig = field(default_factory=OffsetsConfig)

    def _check(self, path: str) -> None:
        _check_section(f"{path}.group", self.group, GroupConfig)
        _check_section(f"{path}.retry", self.retry, ConsumerRetryConfig)
        _check_section(f"{path}.fetch", self.fetch, FetchConfig)
        _check_int32_ms(f"{path}.max_wait_time", self.max_wait_time, "use e.g. 0.5", most=60.0)
        _check_type(f"{path}.return_errors", self.return_errors, bool, "use True or False")
        _check_choice(
            f"{path}.isolation_level",
            self.isolation_level,
            get_args(IsolationLevel),
            "use 'read_committed' to skip records of aborted or open transactions",
        )
        _check_section(f"{path}.offsets", self.offsets, OffsetsConfig)


# ----------------------------------------------------------------------------- producer


@dataclass
class ProducerConfig(_Section):
    """Producing (Java's producer settings in snake_case, durations in seconds).

    Attributes:
        acks: ``"all"`` (or -1): every in-sync replica has the batch before it is
            acknowledged; 1: the leader has it; 0: no answer is waited for (no
            delivery report, no retry; needs ``idempotent = False``). Java ``acks``.
        linger: Seconds a batch that is not full waits for more records before it is
            sent (Java ``linger.ms``, 5 ms in Kafka 4.0).
        batch_size: Bytes of records per partition batch at most: a batch is sent
            once full, or once it waited ``linger`` (Java ``batch.size``); also how
            long the uniform sticky partitioner stays on one partition for records
            without a key. 1,000,000 (librdkafka's ``batch.size``, franz-go's batch
            limit), not Java's 16384: this producer pays per batch and per request in
            Python, so under load batches as large as ``linger`` lets them grow cost
            about a third less CPU per record; a light load's batches stay small (they
            go after ``linger``), and ``buffer_memory`` bounds memory as before.
        buffer_memory: Bytes of records queued and in flight at most; ``send()`` waits
            (up to ``max_block``) for room (Java ``buffer.memory``).
        max_block: Seconds ``send()`` waits for room in ``buffer_memory`` before it
            fails with BufferExhaustedError (Java ``max.block.ms``).
        compression: ``"none"``, ``"gzip"``, ``"snappy"``, ``"lz4"`` or ``"zstd"``
            (Java ``compression.type``).
        max_request_size: Bytes of one Produce request at most, and so of one record
            (Java ``max.request.size``).
        delivery_timeout: Seconds from ``send()`` until a record is acknowledged or
            failed, retries included (Java ``delivery.timeout.ms``).
        request_timeout: Seconds the client waits for one Produce answer (and the
            broker for its replicas; Java ``request.timeout.ms``).
        retry_backoff: Seconds before a failed batch is sent again, doubling up to
            ``retry_backoff_max`` (Java ``retry.backoff.ms``, ``retry.backoff.max.ms``).
        retry_backoff_max: See ``retry_backoff``.
        idempotent: Producer id and per-partition sequence numbers, so a retried batch
            is written once and in order (KIP-98; Java ``enable.idempotence``, on by
            default since Kafka 3.0). Needs ``acks = "all"`` and ``max_in_flight <= 5``.
        max_in_flight: Produce requests in flight per broker (Java
            ``max.in.flight.requests.per.connection``); at most 5 with ``idempotent``.
        transactional_id: Makes the producer transactional (Java
            ``transactional.id``): unique per producer instance; needs ``idempotent``.
        transaction_timeout: Seconds the coordinator lets a transaction stay open
            before it aborts it (Java ``transaction.timeout.ms``).
    """

    acks: ProducerAcks = "all"
    linger: float = 0.005
    batch_size: int = 1_000_000
    buffer_memory: int = 33554432
    max_block: float = 60.0
    compression: ProducerCompression = "none"
    max_request_size: int = 1048576
    delivery_timeout: float = 120.0
    request_timeout: float = 30.0
    retry_backoff: float = 0.1
    retry_backoff_max: float = 1.0
    idempotent: bool = True
    max_in_flight: int = 5
    transactional_id: str | None = None
    transaction_timeout: float = 60.0

    @property
    def required_acks(self) -> int:
        """``acks`` as the Produce request carries it (-1 for ``"all"``)."""
        return -1 if self.acks == "all" else int(self.acks)

    def _check(self, path: str) -> None:
        _check_choice(
            f"{path}.acks",
            self.acks,
            get_args(ProducerAcks),
            "use 'all' (durable), 1 (the leader only) or 0 (fire and forget)",
        )
        # Java's linger.ms and retry.backoff(.max).ms are small numbers (5, 100, 1000):
        # written here as they are, they are seconds far under the hour bound, so these
        # get bounds of their own.
        _check_seconds(
            f"{path}.linger", self.linger, "use e.g. 0.005", zero_ok=True, most=_LINGER_MOST
        )
        _check_int32(
            f"{path}.batch_size", self.batch_size, "use e.g. 1000000", low=1, unit=" (bytes)"
        )
        _check_number(
            f"{path}.buffer_memory",
            self.buffer_memory,
            "use e.g. 33554432 (32 MiB)",
            low=1,
            integer=True,
            unit=" (bytes)",
        )
        _check_seconds(f"{path}.max_block", self.max_block, "use e.g. 60.0", zero_ok=True)
        _check_choice(
            f"{path}.compression",
            self.compression,
            get_args(ProducerCompression),
            "pick a codec the consumers of the topic can read",
        )
        _check_int32(
            f"{path}.max_request_size",
            self.max_request_size,
            "use e.g. 1048576 (the broker's message.max.bytes or less)",
            low=1024,
            unit=" (bytes)",
        )
        _check_int32_ms(f"{path}.request_timeout", self.request_timeout, "use e.g. 30.0")
        _check_seconds(
            f"{path}.retry_backoff",
            self.retry_backoff,
            "use e.g. 0.1",
            zero_ok=True,
            most=_RETRY_BACKOFF_MOST,
        )
        _check_seconds(
            f"{path}.retry_backoff_max",
            self.retry_backoff_max,
            "use e.g. 1.0",
            zero_ok=True,
            most=_RETRY_BACKOFF_MAX_MOST,
        )
        _check_int32_ms(f"{path}.delivery_timeout", self.delivery_timeout, "use e.g. 120.0")
        if self.delivery_timeout < self.linger + self.request_timeout:
            _fail(
                f"{path}.delivery_timeout",
                self.delivery_timeout,
                f"must be at least {path}.linger + {path}.request_timeout "
                f"({self.linger + self.request_timeout:g})",
                f"raise it, or lower {path}.request_timeout",
            )
        _check_type(f"{path}.idempotent", self.idempotent, bool, "use True or False")
        _check_number(
            f"{path}.max_in_flight", self.max_in_flight, "use e.g. 5", low=1, integer=True
        )
        if self.transactional_id is not None:
            _check_type(
                f"{path}.transactional_id",
                self.transactional_id,
                str,
                "use a str unique to this producer instance, or None",
            )
            if not self.transactional_id:
                _fail(
                    f"{path}.transactional_id",
                    self.transactional_id,
                    "must not be empty",
                    "use a name unique to this producer instance, or None",
                )
        _check_int32_ms(f"{path}.transaction_timeout", self.transaction_timeout, "use e.g. 60.0")
        if self.idempotent:
            if self.acks not in ("all", -1):
                _fail(
                    f"{path}.acks",
                    self.acks,
                    f"must be 'all' when {path}.idempotent is True (only writes every "
                    "in-sync replica has can be deduplicated across a leader change)",
                    f"set {path}.acks = 'all', or {path}.idempotent = False",
                )
            if self.max_in_flight > 5:
                _fail(
                    f"{path}.max_in_flight",
                    self.max_in_flight,
                    f"must be at most 5 when {path}.idempotent is True (the broker keeps "
                    "the last 5 batches per producer to deduplicate retries)",
                    f"use 5 or less, or set {path}.idempotent = False",
                )
        elif self.transactional_id is not None:
            _fail(
                f"{path}.idempotent",
                self.idempotent,
                f"must be True when {path}.transactional_id is set",
                f"set {path}.idempotent = True, or {path}.transactional_id = None",
            )


# ---------------------------------------------------------------------------- share


@dataclass
class ShareConfig(_Section):
    """Share groups (KIP-932; Apache Kafka 4.2+): :class:`~consumergroup.ShareGroup`.

    The broker owns the rest: the record lock duration, the delivery-count limit, where
    a new group starts (``share.auto.offset.reset``), heartbeat interval and session
    timeout are group configs (``kafka-configs.sh --entity-type groups``).

    Attributes:
        concurrency: Handler calls of one member at once, across its partitions and
            within one: ``run()``'s default. A member holds locks on at most this many
            records plus ``max_poll_records`` (with ``acquire_mode="record_limit"``).
        max_poll_records: The most records a member acquires ahead of its handlers
            (Kafka ``max.poll.records``), so the next records wait for a free handler
            while the fetch after them is under way. Below it, the member acquires ahead
            what its handlers finish in about four fetch round trips (the slowest of
            recent ones; slow handlers:
            hardly more than they run; the other members get the rest). 5,000 (Java's
            500 bounds one ``poll()``, not what its consumer buffers): handlers fast
            enough to reach it finish it in milliseconds, and fewer ahead let them run
            dry while the next ShareFetch is under way. Waiting records are
            under the broker's lock like running ones: renewed with them (``renew``),
            or released when half their lock is spent before a handler took them. 0:
            never hold a record no handler can start at once (a round trip per refill).
        acquire_mode: How the broker counts the records a ShareFetch acquires (Kafka
            ``share.acquire.mode``, KIP-1206, Kafka 4.2+): ``"record_limit"`` (strict: a
            member never holds more than ``concurrency + max_poll_records``) or
            ``"batch_optimized"`` (Kafka's default: whole record batches, so an answer
            may bring up to a batch more per partition than asked for; far fewer round
            trips when producers write large batches). Brokers before 4.2 acquire whole
            batches either way. ``"record_limit"`` stays the default for its bound, at
            the broker's cost: splitting a batch into per-record state took Kafka 4.4
            47-61 µs of CPU per record against 1.4-1.6 in whole batches (measured), so
            many small fast records go several times faster with ``"batch_optimized"``.
        max_wait: Seconds the broker may hold a ShareFetch waiting for records (Kafka
            ``fetch.max.wait.ms``); shorter when a lock renewal falls due sooner.
        min_bytes: Bytes the broker should gather before answering (``fetch.min.bytes``).
        max_bytes: Cap for one ShareFetch answer (``fetch.max.bytes``); the records
            waiting for a handler never exceed one answer.
        renew: Renew the acquisition lock of a record whose handler is still running
            when half the lock duration has passed (KIP-1222, Kafka 4.2+), so a slow
            record is not handed to a second member meanwhile. Where the broker refuses
            (``share.renew.acknowledge.enable=false``, or an older broker), one warning
            and the locks expire as they would without it.
        close_timeout: Seconds ``close()`` takes at most by default: running handlers
            finish (or are cancelled and their records released), what finished is
            acknowledged, what did not is released, the member leaves.
    """

    concurrency: int = 100
    max_poll_records: int = 5000
    acquire_mode: str = "record_limit"
    max_wait: float = 0.5
    min_bytes: int = 1
    max_bytes: int = 52428800
    renew: bool = True
    close_timeout: float = 30.0

    def _check(self, path: str) -> None:
        _check_number(
            f"{path}.concurrency",
            self.concurrency,
            "use e.g. 100",
            low=1,
            high=_INT32_MAX,
            integer=True,
            unit=" (handler calls at once)",
        )
        _check_number(
            f"{path}.max_poll_records",
            self.max_poll_records,
            "use e.g. 5000, or 0 to acquire only what handlers can start at once",
            low=0,
            high=_INT32_MAX,
            integer=True,
            unit=" (records)",
        )
        _check_choice(
            f"{path}.acquire_mode",
            self.acquire_mode,
            ("record_limit", "batch_optimized"),
            'use "record_limit" or "batch_optimized"',
        )
        _check_int32_ms(f"{path}.max_wait", self.max_wait, "use e.g. 0.5")
        _check_int32(f"{path}.min_bytes", self.min_bytes, "use e.g. 1", low=1, unit=" (bytes)")
        _check_int32(
            f"{path}.max_bytes", self.max_bytes, "use e.g. 52428800", low=1, unit=" (bytes)"
        )
        _check_type(f"{path}.renew", self.renew, bool, "use True or False")
        _check_seconds(f"{path}.close_timeout", self.close_timeout, "use e.g. 30.0")


# ----------------------------------------------------------------------------- root


@dataclass
class Config(_Fields):
    """Everything configurable, with sarama-like defaults (sarama: ``Config``).

    Attributes:
        client_id: Sent with every request; shows up in broker logs and
            quotas (sarama: ``ClientID``).
        channel_buffer_size: Messages queued per partition; a partition is
            not fetched while this many are waiting (sarama: ``ChannelBufferSize``).
            Also the longest list ``batches()`` hands out, and what an idle
            partition's reader may keep alive: with 1,000+ partitions per member,
            lower it (e.g. 32) to bound memory (README, "Bounded memory").
        net: Broker connection settings.
        metadata: Cluster metadata settings.
        consumer: Consumer and group settings.
        client_rack: The rack (availability zone) this client runs in, as the brokers'
            ``broker.rack`` names them; empty: unknown (Java: ``client.rack``). Fetches
            then read from a replica in this rack when the brokers run a rack-aware
            ``replica.selector.class`` (KIP-392), and the rack-aware assignors keep
            partitions with members in their replicas' racks (KIP-881).
        producer: Producer settings (:class:`~consumergroup.Producer`).
        share: Share-group settings (:class:`~consumergroup.ShareGroup`).
    """

    client_id: str = "consumergroup"
    channel_buffer_size: int = 256
    net: NetConfig = field(default_factory=NetConfig)
    metadata: MetadataConfig = field(default_factory=MetadataConfig)
    consumer: ConsumerConfig = field(default_factory=ConsumerConfig)
    client_rack: str = ""
    producer: ProducerConfig = field(default_factory=ProducerConfig)
    share: ShareConfig = field(default_factory=ShareConfig)

    def validate(self) -> None:
        """Check every field; raise ConfigurationError on the first invalid one."""
        _check_protocol_string("client_id", self.client_id, "use a short name for this application")
        _check_protocol_string(
            "client_rack",
            self.client_rack,
            "use the broker.rack name of this client's rack or zone, e.g. 'eu-west-1a', "
            "or '' when unknown",
        )
        _check_number(
            "channel_buffer_size",
            self.channel_buffer_size,
            "use e.g. 256",
            low=1,
            integer=True,
            unit=" (messages)",
        )
        _check_section("net", self.net, NetConfig)
        _check_section("metadata", self.metadata, MetadataConfig)
        _check_section("consumer", self.consumer, ConsumerConfig)
        _check_section("producer", self.producer, ProducerConfig)
        _check_section("share", self.share, ShareConfig)
