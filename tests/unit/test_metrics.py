"""consumergroup.metrics and the integrations' argument checks, without a broker.

The groups here are never started: ``stats()`` of a fresh member and the
observer events (called as the runtime calls them) are what is exported.
"""

from __future__ import annotations

import importlib
import sys

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

import consumergroup as cg
from consumergroup.integrations._service import GroupRunner, ServiceHealth
from consumergroup.metrics import METRIC_NAMES, GroupMetrics


def exposition(registry: CollectorRegistry) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """sample name -> sorted labels -> value, parsed back from the text format."""
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    text = generate_latest(registry).decode()
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return out


def test_events_and_snapshot_are_exported_with_group_labels() -> None:
    registry = CollectorRegistry()
    metrics = GroupMetrics(registry)
    group = cg.ConsumerGroup(["127.0.0.1:9092"], "orders")
    metrics.track(group)
    g = (("group", "orders"),)

    before = exposition(registry)
    assert before["consumergroup_commit_failures_total"] == {g: 0.0}  # exists before any event
    assert before["consumergroup_state"][(*g, ("state", "starting"))] == 1.0
    assert before["consumergroup_state"][(*g, ("state", "stable"))] == 0.0
    assert before["consumergroup_assigned_partitions"] == {g: 0.0}

    group._notify("on_commit", 0.02, None)
    group._notify("on_commit", 0.5, cg.KafkaConnectionError("refused"))
    group._notify("on_heartbeat", cg.KafkaConnectionError("lost"))
    group._notify("on_heartbeat", None)
    group._notify("on_rebalance", 3.0)
    group._notify("on_fetch", 0.1, 10, 1000)
    after = exposition(registry)
    assert after["consumergroup_commit_latency_seconds_count"] == {g: 2.0}
    assert after["consumergroup_commit_latency_seconds_sum"] == {g: 0.52}
    assert after["consumergroup_commit_failures_total"] == {g: 1.0}
    assert after["consumergroup_heartbeat_failures_total"] == {g: 1.0}
    assert after["consumergroup_rebalance_duration_seconds_count"] == {g: 1.0}
    assert after["consumergroup_rebalance_duration_seconds_bucket"][(*g, ("le", "2.5"))] == 0.0
    assert after["consumergroup_rebalance_duration_seconds_bucket"][(*g, ("le", "5.0"))] == 1.0
    assert after["consumergroup_fetch_latency_seconds_count"] == {g: 1.0}
    # Exactly the documented families (the per-partition ones, empty while nothing is
    # claimed, included).
    assert {family.name for family in registry.collect()} == set(METRIC_NAMES)


def test_one_exporter_per_registry_and_one_member_per_group_id() -> None:
    registry = CollectorRegistry()
    metrics = GroupMetrics.of(registry)
    assert GroupMetrics.of(registry) is metrics
    with pytest.raises(ValueError, match="Duplicated timeseries"):
        GroupMetrics(registry)  # prometheus_client's own refusal: use of()
    first = cg.ConsumerGroup(["127.0.0.1:9092"], "orders")
    metrics.track(first)
    metrics.track(first)  # idempotent
    with pytest.raises(ValueError, match="its own CollectorRegistry"):
        metrics.track(cg.ConsumerGroup(["127.0.0.1:9092"], "orders"))
    assert metrics.groups() == [first]


def test_missing_prometheus_client_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    # FastAPI where a test uses it (every worker collects this module): 1 s of imports.
    from consumergroup.integrations.fastapi import health_router

    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # import fails
    monkeypatch.delitem(sys.modules, "consumergroup.metrics")
    with pytest.raises(ImportError, match=r"pip install 'consumergroup\[prometheus\]'"):
        importlib.import_module("consumergroup.metrics")
    # The health endpoints work without it; only /metrics is left out.
    router = health_router(cg.ConsumerGroup(["127.0.0.1:9092"], "g"))
    assert {r.path for r in router.routes} == {"/health/live", "/health/ready"}  # type: ignore[attr-defined]


def test_bad_arguments_get_clear_errors() -> None:
    from consumergroup.integrations.fastapi import ConsumerGroupLifespan

    group = cg.ConsumerGroup(["127.0.0.1:9092"], "g")

    class Handler(cg.ConsumerGroupHandler):
        async def consume_claim(
            self, session: cg.ConsumerGroupSession, claim: cg.ConsumerGroupClaim
        ) -> None:
            pass

    with pytest.raises(cg.ConfigurationError, match="ConsumerGroupHandler instance"):
        ConsumerGroupLifespan(group, ["t"], Handler)  # type: ignore[arg-type]  # the class
    with pytest.raises(cg.ConfigurationError, match="list of topic names"):
        ConsumerGroupLifespan(group, "t", Handler())
    with pytest.raises(cg.ConfigurationError, match="ConsumerGroup or a non-empty list"):
        ConsumerGroupLifespan([], ["t"], Handler())
    with pytest.raises(cg.ConfigurationError, match="already run"):
        ConsumerGroupLifespan(group, ["t"], Handler()).add(group, ["u"], Handler())
    with pytest.raises(cg.ConfigurationError, match="close_timeout"):
        GroupRunner(close_timeout=0)
    with pytest.raises(cg.ConfigurationError, match="stall_threshold"):
        ServiceHealth([group], stall_threshold=-1)


def test_readiness_of_members_that_never_joined() -> None:
    health = ServiceHealth([cg.ConsumerGroup(["127.0.0.1:9092"], "g")], metrics=False)
    status, body = health.ready()
    assert status == 503 and body["status"] == "unavailable"
    assert body["groups"] == [
        {"ready": False, **cg.ConsumerGroup(["127.0.0.1:9092"], "g").stats().as_dict()}
    ]
    assert ServiceHealth(metrics=False).ready()[0] == 503  # no group: never ready
    status, live = health.live()
    assert status == 200 and live["loop_lag"] is None  # the monitor is not running


def test_aiohttp_setup_twice_adds_groups_not_routes() -> None:
    from aiohttp import web

    from consumergroup.integrations.aiohttp import CONSUMER_GROUPS, setup_consumer_group

    class Handler(cg.ConsumerGroupHandler):
        async def consume_claim(
            self, session: cg.ConsumerGroupSession, claim: cg.ConsumerGroupClaim
        ) -> None:
            pass

    app = web.Application()
    first = cg.ConsumerGroup(["127.0.0.1:9092"], "a")
    second = cg.ConsumerGroup(["127.0.0.1:9092"], "b")
    registry = CollectorRegistry()
    setup_consumer_group(app, first, ["t"], Handler(), registry=registry, prefix="/ops")
    setup_consumer_group(app, second, ["u"], Handler())
    assert app[CONSUMER_GROUPS] == [first, second]
    paths = sorted(r.resource.canonical for r in app.router.routes() if r.method == "GET")
    assert paths == ["/ops/health/live", "/ops/health/ready", "/ops/metrics"]
    assert len(app.cleanup_ctx) == 1
    assert GroupMetrics.of(registry).groups() == [first, second]  # both exported


def test_the_member_epoch_and_protocol_are_exported_and_in_stats() -> None:
    registry = CollectorRegistry()
    metrics = GroupMetrics(registry)
    config = cg.Config()
    config.consumer.group.protocol = "consumer"
    classic, consumer = cg.ConsumerGroup(["b:9092"], "a"), cg.ConsumerGroup(["b:9092"], "b", config)
    metrics.track(classic)
    metrics.track(consumer)
    epochs = exposition(registry)["consumergroup_member_epoch"]
    # Not joined yet: the consumer protocol's epoch is 0 (it joins with it); classic has none.
    assert epochs == {
        (("group", "a"), ("protocol", "classic")): -1.0,
        (("group", "b"), ("protocol", "consumer")): 0.0,
    }
    stats = consumer.stats().as_dict()
    assert (stats["protocol"], stats["member_epoch"]) == ("consumer", 0)
    assert classic.stats().protocol == "classic"


def test_a_share_group_is_exported_from_its_stats() -> None:
    from consumergroup.share.group import ShareGroupStats, SharePartitionStats

    registry = CollectorRegistry()
    metrics = GroupMetrics(registry)
    group = cg.ShareGroup(["127.0.0.1:9092"], "workers")
    metrics.track(group)
    metrics.track(group)  # idempotent
    g = (("group", "workers"),)
    before = exposition(registry)
    assert before["consumergroup_state"][(*g, ("state", "starting"))] == 1.0
    assert before["consumergroup_member_epoch"] == {(*g, ("protocol", "share")): 0.0}
    assert "consumergroup_commit_failures_total" not in before  # no observer events
    snapshot = ShareGroupStats(
        "workers",
        cg.GroupState.STABLE,
        "m-1",
        4,
        concurrency=8,
        in_flight=3,
        partitions={
            ("jobs", 0): SharePartitionStats(
                3, True, delivered=10, redelivered=2, accepted=6, released=1, rejected=0,
                renewed=5,
            )
        },
        handler_errors=1,
        last_heartbeat_age=0.2,
    )  # fmt: skip
    group.stats = lambda: snapshot  # type: ignore[method-assign]
    after = exposition(registry)
    p = (*g, ("partition", "0"), ("topic", "jobs"))
    assert after["consumergroup_share_in_flight"] == {p: 3.0}
    assert after["consumergroup_share_delivered_total"] == {p: 10.0}
    assert after["consumergroup_share_redelivered_total"] == {p: 2.0}
    assert after["consumergroup_share_renewals_total"] == {p: 5.0}
    assert after["consumergroup_share_acknowledged_total"] == {
        (*p[:2], ("topic", "jobs"), ("type", "accept")): 6.0,
        (*p[:2], ("topic", "jobs"), ("type", "release")): 1.0,
        (*p[:2], ("topic", "jobs"), ("type", "reject")): 0.0,
    }
    assert after["consumergroup_share_handler_errors_total"] == {g: 1.0}
    assert after["consumergroup_state"][(*g, ("state", "stable"))] == 1.0
    assert after["consumergroup_last_heartbeat_age_seconds"] == {g: 0.2}
    health = ServiceHealth([group], metrics=False)
    status, body = health.ready()
    assert status == 200 and body["groups"][0]["in_flight"] == 3  # type: ignore[index]
