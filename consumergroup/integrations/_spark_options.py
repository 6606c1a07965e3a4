"""Options of ``format("consumergroup")``: Spark's Kafka source names, checked once.

Pure Python (no PySpark import): the driver parses the options when the source is
created, so a bad option fails the query before it starts, with a message that
names the option. :class:`SourceOptions` is a plain frozen dataclass that pickles
to the executors; the :class:`~consumergroup.Config` (whose TLS context cannot be
pickled) is rebuilt from it in each process by :meth:`SourceOptions.config`.
"""

from __future__ import annotations

import difflib
import json
import logging
import re
import ssl
from collections.abc import Mapping
from dataclasses import field
from typing import Any, Literal

from .._dataclass import dataclass
from ..config import Config
from ..errors import ConfigurationError

log = logging.getLogger("consumergroup.integrations.spark")

TopicPartition = tuple[str, int]
#: startingOffsets / endingOffsets: a keyword, or per-partition offsets (-2 earliest, -1 latest).
OffsetSpec = Literal["earliest", "latest"] | dict[TopicPartition, int]

EARLIEST = -2
LATEST = -1

# Canonical spelling of every option this source reads, by its lower-case key
# (Spark hands Python data sources a case-insensitive option map).
_KNOWN = {
    name.lower(): name
    for name in (
        "kafka.bootstrap.servers",
        "subscribe",
        "subscribePattern",
        "assign",
        "startingOffsets",
        "endingOffsets",
        "startingTimestamp",
        "startingOffsetsByTimestamp",
        "startingOffsetsByTimestampStrategy",
        "maxOffsetsPerTrigger",
        "minOffsetsPerTrigger",
        "maxTriggerDelay",
        "minPartitions",
        "failOnDataLoss",
        "includeHeaders",
        "kafka.group.id",
        "kafka.client.id",
        "kafka.isolation.level",
        "kafka.request.timeout.ms",
        "kafka.security.protocol",
        "kafka.sasl.mechanism",
        "kafka.sasl.jaas.config",
        "kafka.ssl.truststore.location",
        "kafka.ssl.truststore.type",
        "kafka.ssl.keystore.location",
        "kafka.ssl.keystore.type",
        "kafka.ssl.key.password",
        "kafka.ssl.endpoint.identification.algorithm",
        "path",  # Spark adds it for load(path); unused
    )
}
# Spark Kafka options that have no meaning here: accepted (a switch of format must not
# fail on them) and reported once.
_IGNORED = {
    name.lower(): why
    for name, why in {
        "groupIdPrefix": "this source reads without joining a consumer group",
        "fetchOffset.numRetries": "offset look-ups retry per the client's metadata.retry",
        "fetchOffset.retryIntervalMs": "offset look-ups retry per the client's metadata.retry",
        "kafkaConsumer.pollTimeoutMs": "fetches long-poll per consumer.max_wait_time",
        "maxRecordsPerPartition": "use minPartitions to split large ranges",
        "kafka.auto.offset.reset": "startingOffsets decides where a query starts",
        "kafka.enable.auto.commit": "offsets live in Spark's checkpoint (see kafka.group.id)",
        "kafka.key.deserializer": "key and value are binary columns",
        "kafka.value.deserializer": "key and value are binary columns",
        "kafka.interceptor.classes": "no Java consumer runs",
    }.items()
}
_UNSUPPORTED = {
    "endingtimestamp": "endingTimestamp is not supported: use endingOffsets",
    "endingoffsetsbytimestamp": "endingOffsetsByTimestamp is not supported: use endingOffsets",
}
_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|min|h)?\s*$", re.IGNORECASE)
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}
_JAAS_FIELD = r'\b{}\s*=\s*"((?:[^"\\]|\\.)*)"'


def _fail(option: str, value: object, why: str) -> ConfigurationError:
    return ConfigurationError(f"option {option}={value!r}: {why}")


@dataclass(frozen=True)
class SourceOptions:
    """The checked options of one ``format("consumergroup")`` source."""

    bootstrap: tuple[str, ...]
    subscribe: tuple[str, ...] = ()
    pattern: str | None = None
    assign: tuple[TopicPartition, ...] = ()
    starting: OffsetSpec = "latest"
    ending: OffsetSpec = "latest"
    starting_timestamp: int | None = None
    starting_by_timestamp: dict[TopicPartition, int] | None = None
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay: float = 900.0
    min_partitions: int | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    group_id: str | None = None
    client_id: str = "consumergroup-spark"
    read_committed: bool = False
    request_timeout: float | None = None
    # (mechanism, user, password) when SASL is on.
    sasl: tuple[str, str, str] | None = field(default=None, repr=False)
    tls: bool = False
    truststore: str | None = None
    keystore: str | None = None
    key_password: str | None = field(default=None, repr=False)
    check_hostname: bool = True
    #: startingOffsetsByTimestampStrategy: "error" (Spark's default) or "latest" where a
    #: partition has no record at or after the starting timestamp.
    timestamp_strategy: Literal["error", "latest"] = "error"

    def matches(self, topic: str) -> bool:
        """Whether ``subscribePattern`` takes ``topic`` (a full match, as Java's ``matches()``)."""
        return self.pattern is not None and re.fullmatch(self.pattern, topic) is not None

    def config(self) -> Config:
        """A fresh :class:`~consumergroup.Config` for this process (driver or executor)."""
        config = Config()
        config.client_id = self.client_id
        config.metadata.refresh_frequency = 0  # each trigger / task refreshes what it needs
        config.consumer.isolation_level = (
            "read_committed" if self.read_committed else ("read_uncommitted")
        )
        if self.request_timeout is not None:
            config.net.read_timeout = self.request_timeout
        if self.sasl is not None:
            mechanism, user, password = self.sasl
            sasl = config.net.sasl
            sasl.enable = True
            sasl.mechanism = mechanism  # type: ignore[assignment]  # checked in parse_options
            sasl.user, sasl.password = user, password
        if self.tls:
            config.net.tls.enable = True
            config.net.tls.context = self._ssl_context()
        config.validate()
        return config

    def _ssl_context(self) -> ssl.SSLContext:
        try:
            context = ssl.create_default_context(cafile=self.truststore)
        except (OSError, ssl.SSLError) as exc:
            raise _fail(
                "kafka.ssl.truststore.location", self.truststore, f"cannot load it ({exc})"
            ) from exc
        if self.keystore is not None:
            try:
                context.load_cert_chain(self.keystore, password=self.key_password)
            except (OSError, ssl.SSLError) as exc:
                raise _fail(
                    "kafka.ssl.keystore.location",
                    self.keystore,
                    f"cannot load a PEM certificate and key from it ({exc})",
                ) from exc
        if not self.check_hostname:
            context.check_hostname = False
        return context


def warn_unused(raw: Mapping[str, str]) -> None:
    """Log each option this source ignores, and each unknown one with the closest known name.

    Spark lowercases option names before a Python source sees them, so an unknown name
    is shown lowercased, and the suggestion in its documented spelling.
    """
    for key in (str(k).lower() for k in raw):
        if key in _IGNORED:
            log.warning("option %s is ignored: %s", key, _IGNORED[key])
        elif key not in _KNOWN and key not in _UNSUPPORTED and not key.startswith("spark."):
            close = difflib.get_close_matches(key, [*_KNOWN, *_IGNORED], n=1, cutoff=0.75)
            hint = f": did you mean {_KNOWN.get(close[0], close[0])}?" if close else ""
            log.warning("option %r is not an option of format('consumergroup')%s", key, hint)


def parse_options(raw: Mapping[str, str], *, streaming: bool | None) -> SourceOptions:
    """Check ``raw`` (Spark's option map) and return the :class:`SourceOptions`.

    ``streaming`` None checks what holds for both a batch and a streaming read
    (the data source's schema() does not know which one it serves).
    Raises :class:`~consumergroup.ConfigurationError` naming the option at fault.
    """
    opts = {str(k).lower(): str(v) for k, v in raw.items()}
    for key, why in _UNSUPPORTED.items():
        if key in opts:
            raise _fail(why.split(" ", 1)[0], opts[key], why.split(": ", 1)[1])

    servers = opts.get("kafka.bootstrap.servers", "").strip()
    if not servers:
        raise ConfigurationError(
            "option kafka.bootstrap.servers is required: "
            '.option("kafka.bootstrap.servers", "host1:9092,host2:9092")'
        )
    bootstrap = tuple(s.strip() for s in servers.split(",") if s.strip())

    chosen = [k for k in ("subscribe", "subscribepattern", "assign") if opts.get(k, "").strip()]
    if len(chosen) != 1:
        names = ", ".join(_KNOWN[k] for k in chosen) or "none"
        raise ConfigurationError(
            f"exactly one of the options subscribe, subscribePattern, assign must be set "
            f"(got: {names})"
        )
    subscribe: tuple[str, ...] = ()
    pattern = None
    assign: tuple[TopicPartition, ...] = ()
    if chosen[0] == "subscribe":
        subscribe = tuple(t.strip() for t in opts["subscribe"].split(",") if t.strip())
    elif chosen[0] == "subscribepattern":
        pattern = opts["subscribepattern"].strip()
        try:
            re.compile(pattern)
        except re.error as exc:
            raise _fail(
                "subscribePattern", pattern, f"not a valid regular expression ({exc})"
            ) from exc
    else:
        assign = _parse_assign(opts["assign"])

    starting = _offset_spec(opts, "startingOffsets", "earliest" if streaming is False else "latest")
    if streaming is False and starting == "latest":
        raise _fail("startingOffsets", "latest", "a batch read cannot start at latest")
    if isinstance(starting, dict) and streaming is False and LATEST in starting.values():
        raise _fail(
            "startingOffsets", opts["startingoffsets"], "-1 (latest) is not allowed in a batch read"
        )
    if streaming and "endingoffsets" in opts:
        raise _fail(
            "endingOffsets", opts["endingoffsets"], "only a batch read (spark.read) has an end"
        )
    ending = _offset_spec(opts, "endingOffsets", "latest")
    if ending == "earliest" or (isinstance(ending, dict) and EARLIEST in ending.values()):
        raise _fail("endingOffsets", opts["endingoffsets"], "a read cannot end at earliest (-2)")

    starting_ts = _long(opts, "startingTimestamp", low=0)
    by_ts = None
    if "startingoffsetsbytimestamp" in opts:
        by_ts = _partition_map(opts["startingoffsetsbytimestamp"], "startingOffsetsByTimestamp")
        if any(ts < 0 for ts in by_ts.values()):
            raise _fail(
                "startingOffsetsByTimestamp",
                opts["startingoffsetsbytimestamp"],
                "timestamps are milliseconds since the epoch (>= 0)",
            )

    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise _fail(
            "startingOffsetsByTimestampStrategy",
            strategy,
            "use error (fail where no record is at or after the timestamp) or latest",
        )

    max_per = _long(opts, "maxOffsetsPerTrigger", low=1)
    min_per = _long(opts, "minOffsetsPerTrigger", low=1)
    if max_per is not None and min_per is not None and min_per > max_per:
        raise _fail(
            "minOffsetsPerTrigger", min_per, f"must not exceed maxOffsetsPerTrigger={max_per}"
        )
    delay = _duration(opts, "maxTriggerDelay", 900.0)
    min_partitions = _long(opts, "minPartitions", low=1)

    isolation = opts.get("kafka.isolation.level", "read_uncommitted").strip().lower()
    if isolation not in ("read_committed", "read_uncommitted"):
        raise _fail("kafka.isolation.level", isolation, "use read_committed or read_uncommitted")
    timeout_ms = _long(opts, "kafka.request.timeout.ms", low=1)
    group = opts.get("kafka.group.id", "").strip() or None
    return SourceOptions(
        bootstrap=bootstrap,
        subscribe=subscribe,
        pattern=pattern,
        assign=assign,
        starting=starting,
        ending=ending,
        starting_timestamp=starting_ts,
        starting_by_timestamp=by_ts,
        max_offsets_per_trigger=max_per,
        min_offsets_per_trigger=min_per,
        max_trigger_delay=delay,
        min_partitions=min_partitions,
        fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
        include_headers=_bool(opts, "includeHeaders", False),
        group_id=group,
        client_id=opts.get("kafka.client.id", "").strip() or "consumergroup-spark",
        read_committed=isolation == "read_committed",
        request_timeout=timeout_ms / 1000 if timeout_ms is not None else None,
        timestamp_strategy="latest" if strategy == "latest" else "error",
        **_security(opts),
    )


def _parse_assign(text: str) -> tuple[TopicPartition, ...]:
    try:
        parsed = json.loads(text)
    except ValueError as exc:
        raise _fail("assign", text, f'not JSON ({exc}); expected {{"topic": [0, 1]}}') from exc
    if not isinstance(parsed, dict) or not all(
        isinstance(parts, list) and all(type(p) is int and p >= 0 for p in parts)
        for parts in parsed.values()
    ):
        raise _fail("assign", text, 'expected {"topic": [0, 1], ...} with partition numbers')
    return tuple(sorted({(t, p) for t, parts in parsed.items() for p in parts}))


def _partition_map(text: str, option: str) -> dict[TopicPartition, int]:
    """``{"topic": {"0": 23, "1": -2}}`` -> ``{("topic", 0): 23, ("topic", 1): -2}``."""
    try:
        parsed = json.loads(text)
    except ValueError as exc:
        raise _fail(option, text, f'not JSON ({exc}); expected {{"topic": {{"0": 23}}}}') from exc
    out: dict[TopicPartition, int] = {}
    if not isinstance(parsed, dict):
        raise _fail(option, text, 'expected {"topic": {"0": 23, ...}}')
    for topic, parts in parsed.items():
        if not isinstance(parts, dict):
            raise _fail(option, text, f'topic {topic!r}: expected {{"0": 23, ...}}')
        for partition, value in parts.items():
            if not str(partition).isdigit() or type(value) is not int:
                raise _fail(option, text, f"{topic}/{partition}: expected an integer per partition")
            out[(topic, int(partition))] = value
    return out


def _offset_spec(opts: dict[str, str], option: str, default: OffsetSpec) -> OffsetSpec:
    text = opts.get(option.lower(), "").strip()
    if not text:
        return default
    if text.lower() in ("earliest", "latest"):
        return "earliest" if text.lower() == "earliest" else "latest"
    offsets = _partition_map(text, option)
    bad = {tp: off for tp, off in offsets.items() if off < EARLIEST}
    if bad:
        raise _fail(option, text, f"offsets {bad} are below -2 (-2 earliest, -1 latest)")
    return offsets


def _long(opts: dict[str, str], option: str, *, low: int) -> int | None:
    text = opts.get(option.lower())
    if text is None:
        return None
    try:
        value = int(text.strip())
    except ValueError:
        raise _fail(option, text, "not an integer") from None
    if value < low:
        raise _fail(option, text, f"must be >= {low}")
    return value


def _bool(opts: dict[str, str], option: str, default: bool) -> bool:
    text = opts.get(option.lower())
    if text is None:
        return default
    if text.strip().lower() not in ("true", "false"):
        raise _fail(option, text, "use true or false")
    return text.strip().lower() == "true"


def _duration(opts: dict[str, str], option: str, default: float) -> float:
    text = opts.get(option.lower())
    if text is None:
        return default
    match = _DURATION.match(text)
    if match is None:
        raise _fail(option, text, "expected a duration such as '30s', '5m' or '500ms'")
    return int(match.group(1)) * _DURATION_UNITS[(match.group(2) or "ms").lower()]


def _security(opts: dict[str, str]) -> dict[str, Any]:
    """The SASL / TLS fields from the ``kafka.*`` security options."""
    protocol = opts.get("kafka.security.protocol", "PLAINTEXT").strip().upper()
    if protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
        raise _fail(
            "kafka.security.protocol", protocol, "use PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"
        )
    out: dict[str, Any] = {"tls": protocol in ("SSL", "SASL_SSL")}
    if protocol.startswith("SASL"):
        mechanism = opts.get("kafka.sasl.mechanism", "PLAIN").strip().upper()
        if mechanism not in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
            raise _fail(
                "kafka.sasl.mechanism", mechanism, "supported: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512"
            )
        jaas = opts.get("kafka.sasl.jaas.config", "")
        fields = {}
        for name in ("username", "password"):
            found = re.search(_JAAS_FIELD.format(name), jaas)
            if found is None:
                raise ConfigurationError(
                    f'option kafka.sasl.jaas.config must carry {name}="..." for '
                    f"kafka.security.protocol={protocol} (e.g. 'org.apache.kafka.common."
                    'security.plain.PlainLoginModule required username="u" password="p";\')'
                )
            fields[name] = re.sub(r"\\(.)", r"\1", found.group(1))
        out["sasl"] = (mechanism, fields["username"], fields["password"])
    for kind in ("truststore", "keystore"):
        store_type = opts.get(f"kafka.ssl.{kind}.type", "PEM").strip().upper()
        location = opts.get(f"kafka.ssl.{kind}.location", "").strip() or None
        if location is not None and store_type != "PEM":
            raise _fail(
                f"kafka.ssl.{kind}.type",
                store_type,
                "only PEM files are read (convert JKS/PKCS12 with keytool/openssl)",
            )
        out[kind] = location
    out["key_password"] = opts.get("kafka.ssl.key.password") or None
    algorithm = opts.get("kafka.ssl.endpoint.identification.algorithm")
    out["check_hostname"] = algorithm is None or algorithm.strip() != ""
    return out
