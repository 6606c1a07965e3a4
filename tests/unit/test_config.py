"""Unit tests for consumergroup.config: defaults and Config.validate()."""

from __future__ import annotations

import re
import ssl
from collections.abc import Mapping, Sequence
from functools import reduce
from typing import Any

import pytest

import consumergroup as cg
from consumergroup.balance.cooperative import CooperativeStickyAssignor
from consumergroup.balance.range import RangeAssignor
from consumergroup.config import (
    OFFSET_NEWEST,
    OFFSET_OLDEST,
    Config,
    RetryConfig,
)
from consumergroup.errors import ConfigurationError, ConsumerGroupError


class _Strategy:
    """Duck-typed strategy: validate() only needs ``name`` and ``plan``."""

    def __init__(self, name: object) -> None:
        self.name = name

    def plan(
        self, members: Mapping[str, Any], partitions: Mapping[str, Sequence[int]]
    ) -> dict[str, dict[str, list[int]]]:
        return {member: {} for member in members}


def _set(config: Config, path: str, value: object) -> None:
    *parents, leaf = path.split(".")
    setattr(reduce(getattr, parents, config), leaf, value)


def _get(config: Config, path: str) -> Any:
    return reduce(getattr, path.split("."), config)


def test_defaults_validate() -> None:
    config = Config()
    config.validate()
    strategies = config.consumer.group.rebalance.strategies
    assert [type(s) for s in strategies] == [RangeAssignor]
    assert strategies[0].name == "range"


def test_defaults_match_sarama_like_values() -> None:
    config = Config()
    assert config.client_id == "consumergroup"
    assert config.channel_buffer_size == 256
    assert (config.net.dial_timeout, config.net.read_timeout, config.net.write_timeout) == (
        30.0,
        30.0,
        30.0,
    )
    assert config.net.max_open_requests == 5
    assert not config.net.tls.enable and config.net.tls.context is None
    assert not config.net.sasl.enable and config.net.sasl.mechanism == "PLAIN"
    assert config.net.sasl.handshake
    assert config.metadata.retry == RetryConfig(max=3, backoff=0.25)
    assert config.metadata.refresh_frequency == 600.0
    assert not config.metadata.allow_auto_topic_creation
    group = config.consumer.group
    assert (group.session_timeout, group.heartbeat_interval) == (10.0, 3.0)
    assert group.rebalance.timeout == 60.0
    assert group.rebalance.retry == RetryConfig(max=4, backoff=2.0)
    assert group.member.user_data == b""
    assert group.instance_id is None
    consumer = config.consumer
    assert consumer.retry.backoff == 2.0
    assert (consumer.fetch.min, consumer.fetch.default, consumer.fetch.max) == (1, 1048576, 0)
    assert consumer.fetch.max_bytes == 52428800
    assert consumer.max_wait_time == 0.5
    assert consumer.fetch.check_crcs is False
    assert consumer.fetch.buffer_bytes == 1048576
    assert not consumer.return_errors
    assert consumer.isolation_level == "read_uncommitted"
    offsets = consumer.offsets
    assert offsets.auto_commit.enable and offsets.auto_commit.interval == 1.0
    assert offsets.initial == OFFSET_NEWEST == -1 and OFFSET_OLDEST == -2
    assert offsets.reset is None and offsets.retention == 0.0
    assert offsets.retry == RetryConfig(max=3, backoff=0.25)


def test_configs_do_not_share_mutable_defaults() -> None:
    a, b = Config(), Config()
    assert a.consumer.group.rebalance.strategies is not b.consumer.group.rebalance.strategies
    assert a.metadata.retry is not b.metadata.retry
    a.consumer.group.session_timeout = 30.0
    assert b.consumer.group.session_timeout == 10.0


BAD_VALUES: list[tuple[str, object]] = [
    ("client_id", 123),
    ("client_id", None),
    ("client_id", "x" * 32768),
    ("client_id", "\ud800"),
    ("client_rack", None),
    ("client_rack", "r" * 32768),
    ("channel_buffer_size", 0),
    ("channel_buffer_size", 1.5),
    ("channel_buffer_size", True),
    ("channel_buffer_size", "256"),
    ("net", None),
    ("net.dial_timeout", 0),
    ("net.dial_timeout", -1.0),
    ("net.dial_timeout", float("nan")),
    ("net.dial_timeout", float("inf")),
    ("net.dial_timeout", "30"),
    ("net.read_timeout", 0.0),
    ("net.write_timeout", -0.5),
    ("net.max_open_requests", 0),
    ("net.max_open_requests", 2.0),
    ("net.tls", None),
    ("net.tls.enable", "yes"),
    ("net.tls.context", "my-context"),
    ("net.sasl", {}),
    ("net.sasl.enable", 1),
    ("net.sasl.mechanism", "KERBEROS"),
    ("net.sasl.mechanism", "plain"),
    ("net.sasl.user", None),
    ("net.sasl.handshake", "true"),
    ("net.sasl.token_provider", "my-token"),
    ("net.sasl.extensions", None),
    ("net.sasl.extensions", {"auth": "x"}),
    ("net.sasl.extensions", {"logical-cluster": "lkc-1"}),
    ("net.sasl.extensions", {"logicalCluster": ""}),
    ("net.sasl.extensions", {"logicalCluster": "caf\u00e9"}),
    ("net.sasl.extensions", {"logicalCluster": 1}),
    ("net.sasl.kerberos_service_name", ""),
    ("net.sasl.kerberos_principal", None),
    ("metadata", None),
    ("metadata.retry", None),
    ("metadata.retry.max", -1),
    ("metadata.retry.max", 1.5),
    ("metadata.retry.backoff", -0.1),
    ("metadata.refresh_frequency", -1.0),
    ("metadata.allow_auto_topic_creation", None),
    ("consumer", None),
    ("consumer.group", None),
    ("consumer.group.session_timeout", 0),
    ("consumer.group.session_timeout", 0.0005),
    ("consumer.group.session_timeout", 3_000_000.0),
    ("consumer.group.heartbeat_interval", 0),
    ("consumer.group.heartbeat_interval", 10.0),
    ("consumer.group.heartbeat_interval", 12.0),
    ("consumer.group.heartbeat_interval", None),
    ("consumer.group.rebalance", None),
    ("consumer.group.rebalance.strategies", []),
    ("consumer.group.rebalance.strategies", None),
    ("consumer.group.rebalance.strategies", (RangeAssignor(),)),
    ("consumer.group.rebalance.timeout", 0),
    ("consumer.group.rebalance.timeout", float("inf")),
    ("consumer.group.rebalance.retry.max", -1),
    ("consumer.group.rebalance.retry.backoff", -1),
    ("consumer.group.member", None),
    ("consumer.group.member.user_data", "text"),
    ("consumer.group.instance_id", ""),
    ("consumer.group.instance_id", "worker 1"),
    ("consumer.group.instance_id", ".."),
    ("consumer.group.instance_id", "x" * 250),
    ("consumer.group.instance_id", 5),
    ("consumer.group.missing_topic", "ignore"),
    ("consumer.group.missing_topic", None),
    ("consumer.retry", None),
    ("consumer.retry.backoff", -1),
    ("consumer.fetch", None),
    ("consumer.fetch.min", 0),
    ("consumer.fetch.min", 2**31),
    ("consumer.fetch.default", 0),
    ("consumer.fetch.default", 1024.0),
    ("consumer.fetch.max", -1),
    ("consumer.fetch.max", 1024),
    ("consumer.fetch.max", 0.0),
    ("consumer.fetch.max", False),
    ("consumer.fetch.max_bytes", 0),
    ("consumer.fetch.buffer_bytes", 0),
    ("consumer.fetch.buffer_bytes", 2**31),
    ("consumer.max_wait_time", 0),
    ("consumer.max_wait_time", 0.0001),
    ("consumer.fetch.check_crcs", 1),
    ("consumer.return_errors", "no"),
    ("consumer.isolation_level", "READ_COMMITTED"),
    ("consumer.isolation_level", None),
    ("consumer.offsets", None),
    ("consumer.offsets.auto_commit", None),
    ("consumer.offsets.auto_commit.enable", None),
    ("consumer.offsets.auto_commit.interval", 0),
    ("consumer.offsets.initial", 0),
    ("consumer.offsets.initial", -1.0),
    ("consumer.offsets.initial", "oldest"),
    ("consumer.offsets.reset", "latest"),
    ("consumer.offsets.reset", ""),
    ("consumer.offsets.retention", -1),
    ("consumer.offsets.retry", None),
    ("consumer.offsets.retry.backoff", float("inf")),
]


@pytest.mark.parametrize(("path", "value"), BAD_VALUES)
def test_bad_value_is_rejected_with_field_path(path: str, value: object) -> None:
    config = Config()
    _set(config, path, value)
    with pytest.raises(ConfigurationError) as info:
        config.validate()
    message = str(info.value)
    assert message.startswith(f"{path}="), message
    assert ": " in message.removeprefix(f"{path}=")  # a rule, then what to do


GOOD_VALUES: list[tuple[str, object]] = [
    ("client_id", ""),
    ("client_rack", "eu-west-1a"),
    ("channel_buffer_size", 1),
    ("net.dial_timeout", 1),
    ("net.max_open_requests", 1),
    ("metadata.retry.max", 0),
    ("metadata.retry.backoff", 0),
    ("metadata.refresh_frequency", 0),
    ("consumer.group.session_timeout", 45),
    ("consumer.group.heartbeat_interval", 9.99),
    ("consumer.group.rebalance.strategies", [_Strategy("a"), _Strategy("b")]),
    ("consumer.group.rebalance.timeout", 300.0),
    ("consumer.group.member.user_data", b"\x00\x01"),
    ("consumer.group.instance_id", "orders-worker_1.eu"),
    ("consumer.group.missing_topic", "fail"),
    ("consumer.fetch.max", 1048576),
    ("consumer.fetch.max", 2**31 - 1),
    ("consumer.max_wait_time", 0.001),
    ("consumer.return_errors", True),
    ("consumer.isolation_level", "read_committed"),
    ("consumer.offsets.auto_commit.enable", False),
    ("consumer.offsets.initial", OFFSET_OLDEST),
    ("consumer.offsets.reset", "oldest"),
    ("consumer.offsets.reset", "newest"),
    ("consumer.offsets.reset", "error"),
    ("consumer.offsets.retention", 7 * 24 * 3600.0),
]


@pytest.mark.parametrize(("path", "value"), GOOD_VALUES)
def test_good_value_is_accepted(path: str, value: object) -> None:
    config = Config()
    _set(config, path, value)
    config.validate()
    assert _get(config, path) == value


def test_heartbeat_message_explains_the_fix() -> None:
    config = Config()
    config.consumer.group.heartbeat_interval = 12.0
    with pytest.raises(ConfigurationError) as info:
        config.validate()
    assert str(info.value) == (
        "consumer.group.heartbeat_interval=12.0 must be > 0 and < "
        "consumer.group.session_timeout (10.0): lower the heartbeat interval (typically a "
        "third of the session timeout) or raise the session timeout"
    )


def test_range_message_names_bounds() -> None:
    config = Config()
    config.consumer.group.session_timeout = 0
    with pytest.raises(ConfigurationError, match=r"between 0\.001 and 2147483\.647"):
        config.validate()


def test_fetch_max_message_names_fetch_default() -> None:
    config = Config()
    config.consumer.fetch.max = 1024
    with pytest.raises(ConfigurationError, match=r"consumer\.fetch\.default \(1048576\)"):
        config.validate()


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_sasl_enabled_with_credentials_is_valid(mechanism: str) -> None:
    config = Config()
    sasl = config.net.sasl
    sasl.enable, sasl.user, sasl.password = True, "alice", "s3cret"
    _set(config, "net.sasl.mechanism", mechanism)
    config.validate()


@pytest.mark.parametrize(
    ("user", "password", "path"),
    [("", "s3cret", "net.sasl.user"), ("alice", "", "net.sasl.password")],
)
def test_sasl_enabled_needs_credentials(user: str, password: str, path: str) -> None:
    config = Config()
    sasl = config.net.sasl
    sasl.enable, sasl.user, sasl.password = True, user, password
    with pytest.raises(ConfigurationError, match=f"^{path}=.*must not be empty"):
        config.validate()


async def _token() -> tuple[str, float]:
    return "a.b.c", 60.0


def _sasl(mechanism: str, **settings: object) -> Config:
    config = Config()
    config.net.sasl.enable = True
    _set(config, "net.sasl.mechanism", mechanism)
    for name, value in settings.items():
        _set(config, f"net.sasl.{name}", value)
    return config


@pytest.mark.parametrize(
    "settings",
    [
        {"mechanism": "OAUTHBEARER", "token_provider": _token},
        {"mechanism": "OAUTHBEARER", "token_provider": _token, "extensions": {"a": "b c"}},
        {"mechanism": "GSSAPI"},
        {"mechanism": "GSSAPI", "kerberos_principal": "app@EXAMPLE.COM"},
        {"mechanism": "GSSAPI", "kerberos_service_name": "kafka-prod"},
    ],
    ids=["oauth", "oauth-extensions", "gssapi-ticket-cache", "gssapi-principal", "gssapi-sn"],
)
def test_each_mechanism_with_its_own_settings_is_valid(settings: dict[str, object]) -> None:
    _sasl(**settings).validate()  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("mechanism", "field", "value", "message"),
    [
        ("OAUTHBEARER", "user", "alice", "used by PLAIN and SCRAM only"),
        ("OAUTHBEARER", "password", "s3cret", "used by PLAIN and SCRAM only"),
        ("GSSAPI", "user", "alice", "used by PLAIN and SCRAM only"),
        ("PLAIN", "token_provider", _token, "used by OAUTHBEARER only"),
        ("SCRAM-SHA-256", "extensions", {"a": "b"}, "used by OAUTHBEARER only"),
        ("GSSAPI", "token_provider", _token, "used by OAUTHBEARER only"),
        ("OAUTHBEARER", "kerberos_principal", "app@EXAMPLE.COM", "used by GSSAPI only"),
        ("PLAIN", "kerberos_keytab", "/etc/app.keytab", "used by GSSAPI only"),
    ],
)
def test_a_setting_of_another_mechanism_is_refused(
    mechanism: str, field: str, value: object, message: str
) -> None:
    settings: dict[str, object] = {"user": "alice", "password": "s3cret"}
    if mechanism == "OAUTHBEARER":
        settings = {"token_provider": _token}
    elif mechanism == "GSSAPI":
        settings = {}
    settings[field] = value
    with pytest.raises(ConfigurationError, match=f"^net.sasl.{field}=.*{message}") as info:
        _sasl(mechanism, **settings).validate()
    assert "s3cret" not in str(info.value)


def test_oauthbearer_needs_a_token_provider() -> None:
    with pytest.raises(ConfigurationError, match="token_provider=None must be set") as info:
        _sasl("OAUTHBEARER").validate()
    assert "OIDCTokenProvider" in str(info.value)


def test_a_keytab_needs_its_principal_and_must_exist(tmp_path: Any) -> None:
    keytab = tmp_path / "app.keytab"
    keytab.write_bytes(b"\x05\x02")
    with pytest.raises(ConfigurationError, match=r"kerberos_principal=.*must be set with"):
        _sasl("GSSAPI", kerberos_keytab=str(keytab)).validate()
    missing = str(tmp_path / "missing.keytab")
    with pytest.raises(ConfigurationError, match=r"kerberos_keytab=.*is not a file"):
        _sasl("GSSAPI", kerberos_principal="app@X", kerberos_keytab=missing).validate()
    _sasl("GSSAPI", kerberos_principal="app@X", kerberos_keytab=str(keytab)).validate()


def test_password_is_never_echoed() -> None:
    config = Config()
    _set(config, "net.sasl.password", b"hunter2")
    with pytest.raises(ConfigurationError) as info:
        config.validate()
    assert str(info.value).startswith("net.sasl.password=<bytes, hidden> must be of type str")
    assert "hunter2" not in str(info.value)
    config.net.sasl.password = "hunter2"
    assert "hunter2" not in repr(config)


def test_tls_context_requires_enable() -> None:
    config = Config()
    config.net.tls.context = ssl.create_default_context()
    with pytest.raises(ConfigurationError, match=r"^net\.tls\.enable=False must be True"):
        config.validate()
    config.net.tls.enable = True
    config.validate()


@pytest.mark.parametrize(
    ("strategies", "path", "rule"),
    [
        ([_Strategy("a"), _Strategy("a")], "strategies[1].name", "must be unique"),
        ([_Strategy("a"), _Strategy(7)], "strategies[1].name", "must be a non-empty str"),
        ([_Strategy("")], "strategies[0].name", "must be a non-empty str"),
        ([RangeAssignor(), object()], "strategies[1].name", "must be a non-empty str"),
    ],
)
def test_strategy_items_are_checked(strategies: list[Any], path: str, rule: str) -> None:
    config = Config()
    config.consumer.group.rebalance.strategies = strategies
    with pytest.raises(ConfigurationError) as info:
        config.validate()
    assert str(info.value).startswith(f"consumer.group.rebalance.{path}=")
    assert rule in str(info.value)


def test_strategy_without_plan_is_rejected() -> None:
    class NoPlan:
        name = "noplan"

    config = Config()
    config.consumer.group.rebalance.strategies = [NoPlan()]  # type: ignore[list-item]
    with pytest.raises(ConfigurationError, match=r"strategies\[0\]=.* must have a plan\(\)"):
        config.validate()


def test_configuration_error_is_a_value_error() -> None:
    config = Config()
    config.channel_buffer_size = 0
    with pytest.raises(ValueError):
        config.validate()
    with pytest.raises(ConsumerGroupError):
        config.validate()


@pytest.mark.parametrize(
    ("path", "suggestion"),
    [
        ("consumer.offsets.inital", "initial"),
        ("consumer.group.sesion_timeout", "session_timeout"),
        ("net.read_timout", "read_timeout"),
        ("client_di", "client_id"),
        ("consumer.fetch.max_byte", "max_bytes"),
    ],
)
def test_a_typo_in_a_field_name_raises_naming_the_closest_field(path: str, suggestion: str) -> None:
    # Issue 8 #21: ``config.consumer.offsets.inital = ...`` used to be accepted and ignored.
    config = Config()
    leaf = path.rsplit(".", 1)[-1]
    with pytest.raises(ConfigurationError, match=f"no field {leaf!r}: did you mean {suggestion!r}"):
        _set(config, path, 1)
    assert not hasattr(_get(config, path.rsplit(".", 1)[0]) if "." in path else config, leaf)


def test_an_unknown_field_without_a_close_match_lists_the_fields() -> None:
    config = Config()
    with pytest.raises(ConfigurationError, match=r"its fields are .*initial") as info:
        config.consumer.offsets.zzz = 1  # type: ignore[attr-defined]
    assert "did you mean" not in str(info.value)


def test_known_fields_still_set_and_construct() -> None:
    config = Config(client_id="app", channel_buffer_size=10)
    config.consumer.offsets.initial = OFFSET_OLDEST
    config.net.tls.enable = False
    config.consumer.fetch = type(config.consumer.fetch)(max=2 * 1048576)
    config.validate()
    assert (config.client_id, config.consumer.offsets.initial) == ("app", OFFSET_OLDEST)
    assert config.consumer.fetch.max == 2 * 1048576


# --- the consumer group protocol (KIP-848) ---------------------------------------------------


def test_group_protocol_defaults_to_classic_and_consumer_validates() -> None:
    config = Config()
    assert (config.consumer.group.protocol, config.consumer.group.remote_assignor) == (
        "classic",
        None,
    )
    config.consumer.group.protocol = "consumer"
    config.consumer.group.remote_assignor = "uniform"
    config.consumer.group.rebalance.timeout = 30.0  # still sent (RebalanceTimeoutMs)
    config.validate()


@pytest.mark.parametrize(
    ("field", "value", "names"),
    [
        ("session_timeout", 30.0, "group.consumer.session.timeout.ms"),
        ("heartbeat_interval", 1.0, "group.consumer.heartbeat.interval.ms"),
    ],
)
def test_consumer_protocol_refuses_client_timeouts_naming_the_broker_setting(
    field: str, value: float, names: str
) -> None:
    config = Config()
    config.consumer.group.protocol = "consumer"
    setattr(config.consumer.group, field, value)
    with pytest.raises(ConfigurationError, match=rf"consumer\.group\.{field}=.*{names}"):
        config.validate()


def test_consumer_protocol_refuses_client_assignors() -> None:
    config = Config()
    config.consumer.group.protocol = "consumer"
    config.consumer.group.rebalance.strategies = [CooperativeStickyAssignor()]
    with pytest.raises(ConfigurationError, match=r"remote_assignor.*group\.consumer\.assignors"):
        config.validate()


@pytest.mark.parametrize(
    ("protocol", "assignor", "rule"),
    [
        ("kip848", None, "must be 'classic' or 'consumer'"),
        ("classic", "uniform", "applies only to protocol='consumer'"),
        ("consumer", "", "must be None or a non-empty str"),
    ],
)
def test_bad_protocol_settings_say_what_to_do(protocol: str, assignor: Any, rule: str) -> None:
    config = Config()
    config.consumer.group.protocol = protocol  # type: ignore[assignment]
    config.consumer.group.remote_assignor = assignor
    with pytest.raises(ConfigurationError, match=rule):
        config.validate()


@pytest.mark.parametrize(
    ("field", "value", "meant"),
    [
        ("consumer.group.session_timeout", 45000, "45"),
        ("consumer.max_wait_time", 500, "0.5"),
        ("net.read_timeout", 30000.0, "30"),
        ("consumer.group.rebalance.timeout", 300000, "300"),
        ("consumer.offsets.auto_commit.interval", 5000, "5"),
        ("metadata.refresh_frequency", 300000, "300"),
        ("producer.linger", 5, "0.005"),
        ("producer.linger", 100, "0.1"),
        ("producer.retry_backoff", 100, "0.1"),
        ("producer.retry_backoff_max", 1000, "1"),
        ("producer.max_block", 60000, "60"),
        ("producer.request_timeout", 30000, "30"),
        ("producer.delivery_timeout", 120000, "120"),
        ("producer.transaction_timeout", 60000, "60"),
    ],
)
def test_a_duration_in_kafkas_milliseconds_is_refused_with_what_it_meant(
    field: str, value: float, meant: str
) -> None:
    # Before: session_timeout = 45000 (milliseconds, out of Kafka habit) was accepted as
    # 12.5 hours; producer.linger = 5 (Java's linger.ms) as 5 s, retry_backoff = 100 as
    # 100 s: the producer's short durations were held to the hour bound.
    config = cg.Config()
    *parents, name = field.split(".")
    section = config
    for part in parents:
        section = getattr(section, part)
    setattr(section, name, value)
    with pytest.raises(cg.ConfigurationError, match=rf"Did you mean {re.escape(meant)} s\?"):
        config.validate()


def test_long_durations_that_are_meant_stay_allowed() -> None:
    config = cg.Config()
    config.consumer.group.rebalance.timeout = 7200.0  # Java's max.poll.interval.ms of 2 h
    config.consumer.offsets.retention = 7 * 86400.0  # a week
    config.metadata.refresh_frequency = 3600.0
    config.consumer.group.session_timeout = 1800.0  # Kafka's group.max.session.timeout.ms
    config.producer.linger = 1.0
    config.producer.retry_backoff = 10.0
    config.producer.retry_backoff_max = 60.0
    config.producer.max_block = 600.0
    config.producer.delivery_timeout = 3600.0
    config.validate()
