"""OpenTelemetry: spans of handled records and batches (claims fed in-process, the SDK's
in-memory exporter), the producer-side injection, and consumergroup.otel's metrics (the
SDK's in-memory reader). No broker: the end-to-end test is in
tests/integration/test_tracing.py.
"""

from __future__ import annotations

import asyncio
import importlib
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

import consumergroup as cg
from consumergroup._otel import ClaimTracing, header_injector, inject_trace_context
from consumergroup.consumer import partition as partition_module
from consumergroup.consumer.partition import PartitionConsumer
from consumergroup.consumer.records import scan_records
from consumergroup.group.claim import ConsumerGroupClaim
from tests.helpers import global_tracer_provider

TOPIC = "orders"


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """A global SDK tracer provider exporting to memory, for this test only."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with global_tracer_provider(provider):
        yield exporter


def fed_claim(headers: list[list[tuple[str, bytes]]], chunk: int = 4) -> ConsumerGroupClaim:
    """A claim on TOPIC/3 whose partition holds one record per ``headers`` entry, then ends."""
    pc = PartitionConsumer(TOPIC, 3, 0, buffer_size=chunk, fetch_size=1 << 20, on_close=_noop)
    builder = DefaultRecordBatchBuilder(2, 0, 0, -1, -1, -1, 1 << 20)
    for i, h in enumerate(headers):
        builder.append(i, 1_700_000_000_000, None, b"v" * (i + 1) if i else None, h)
    pc._deliver(scan_records(TOPIC, 3, bytes(builder.build()), 0))
    pc._closed = True  # the stream ends once they are taken
    return ConsumerGroupClaim(pc, 0, ClaimTracing("billing", "app-1"))


def _noop(_pc: object) -> None:
    pass


def producer_span(name: str = "send") -> tuple[trace.Span, list[tuple[str, bytes]]]:
    """A finished producer span and the headers it injected into a record."""
    tracer = trace.get_tracer("test-producer")
    headers: list[tuple[str, bytes]] = []
    with tracer.start_as_current_span(name, kind=SpanKind.PRODUCER) as span:
        inject_trace_context(headers)
    return span, headers


def by_name(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name == name]


# ---------------------------------------------------------------- off: nothing changes


def test_without_opentelemetry_imported_a_claim_does_not_trace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A program that never imported opentelemetry.trace cannot have set a provider: the
    decision imports nothing, and the claim's streams are the partition's own."""
    monkeypatch.delitem(sys.modules, "opentelemetry.trace")
    claim = fed_claim([[]])
    assert claim._tracer is None
    assert "opentelemetry.trace" not in sys.modules


def test_without_a_tracer_provider_the_c_stream_is_handed_out() -> None:
    """OpenTelemetry imported, no provider set (the API's proxy): no tracing; messages()
    is the partition's C stream itself (nothing checked per message)."""
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    claim = fed_claim([[]])
    assert claim._tracer is None
    if partition_module._MessageStream is not None:
        assert type(claim.messages()) is partition_module._MessageStream


def test_injection_adds_nothing_without_a_current_span(monkeypatch: pytest.MonkeyPatch) -> None:
    headers: list[tuple[str, bytes]] = [("k", b"v")]
    inject_trace_context(headers)
    monkeypatch.delitem(sys.modules, "opentelemetry.trace")
    inject_trace_context(headers)
    assert headers == [("k", b"v")]


# ---------------------------------------------------------------- on: spans


async def test_a_span_per_record_current_while_handled_ended_when_the_next_is_asked(
    spans: InMemorySpanExporter,
) -> None:
    producer, headers = producer_span()
    claim = fed_claim([headers, [], [("other", b"x")]])
    tracer = trace.get_tracer("handler")
    seen = []
    async for msg in claim.messages():
        # Spans the handler starts are children of the record's span...
        with tracer.start_as_current_span("handle") as child:
            pass
        seen.append((msg.offset, child.parent))
        # ...and the previous record's span has ended by now.
        assert len(by_name(spans, f"process {TOPIC}")) == msg.offset
    process = by_name(spans, f"process {TOPIC}")
    assert [s.attributes["messaging.kafka.offset"] for s in process] == [0, 1, 2]
    for (offset, parent), span in zip(seen, process, strict=True):
        assert parent is not None and parent.span_id == span.context.span_id, offset
    first, second, _ = process
    assert first.kind is SpanKind.CONSUMER
    assert dict(first.attributes) == {
        "messaging.system": "kafka",
        "messaging.operation.name": "process",
        "messaging.operation.type": "process",
        "messaging.destination.name": TOPIC,
        "messaging.destination.partition.id": "3",
        "messaging.consumer.group.name": "billing",
        "messaging.client.id": "app-1",
        "messaging.kafka.offset": 0,
        "messaging.kafka.message.tombstone": True,
    }
    assert second.attributes["messaging.message.body.size"] == 2
    # The producer's span is the first record's parent and its link; the others have none.
    context = producer.get_span_context()
    assert first.parent is not None and first.parent.span_id == context.span_id
    assert first.context.trace_id == context.trace_id
    assert [link.context.span_id for link in first.links] == [context.span_id]
    assert second.parent is None and not second.links
    assert trace.get_current_span() is trace.INVALID_SPAN  # nothing left current


async def test_a_span_per_batch_linking_every_producer(spans: InMemorySpanExporter) -> None:
    a, a_headers = producer_span("send-a")
    b, b_headers = producer_span("send-b")
    claim = fed_claim([a_headers, b_headers, a_headers, [], []], chunk=4)
    sizes = []
    async for batch in claim.batches():
        sizes.append(len(batch))
        assert trace.get_current_span().is_recording()
    process = by_name(spans, f"process {TOPIC}")
    assert sizes == [4, 1] and len(process) == 2
    assert [s.attributes["messaging.batch.message_count"] for s in process] == [4, 1]
    assert "messaging.kafka.offset" not in process[0].attributes
    linked = [link.context.span_id for link in process[0].links]
    assert linked == [a.get_span_context().span_id, b.get_span_context().span_id]
    assert not process[1].links
    assert trace.get_current_span() is trace.INVALID_SPAN


async def test_leaving_the_loop_leaves_the_span_current_until_the_claim_task_ends_it(
    spans: InMemorySpanExporter,
) -> None:
    """A handler that breaks out of its loop still works on that record: its span stays
    current (and open) until the handler returns, when the claim's task ends it and puts
    the context back; a loop started again first ends it too."""
    claim = fed_claim([[], [], []])
    first = await anext(aiter(claim.messages()))  # as a loop left by break
    assert first.offset == 0 and trace.get_current_span().is_recording()
    assert not by_name(spans, f"process {TOPIC}")
    claim._untrace()
    assert trace.get_current_span() is trace.INVALID_SPAN
    assert len(by_name(spans, f"process {TOPIC}")) == 1
    claim._untrace()  # idempotent
    async for msg in claim.messages():
        assert msg.offset == 1
        break
    async for msg in claim.messages():  # the next loop ends the open span first
        assert msg.offset == 2
        assert len(by_name(spans, f"process {TOPIC}")) == 2
        break
    claim._untrace()
    assert len(by_name(spans, f"process {TOPIC}")) == 3


async def test_the_decision_is_taken_when_the_claim_is_made(spans: InMemorySpanExporter) -> None:
    """A provider set after a claim was made does not change it (nothing checked per
    message); the next claim traces."""
    with global_tracer_provider(trace.ProxyTracerProvider()):
        untraced = fed_claim([[]])
    async for _ in untraced.messages():
        pass
    assert not spans.get_finished_spans()
    traced = fed_claim([[]])
    async for _ in traced.messages():
        pass
    assert len(spans.get_finished_spans()) == 1


async def test_injection_puts_the_current_span_in_the_headers(spans: InMemorySpanExporter) -> None:
    span, headers = producer_span()
    (name, value), *_ = headers
    context = span.get_span_context()
    assert name == "traceparent"
    flags = context.trace_flags
    assert value == f"00-{context.trace_id:032x}-{context.span_id:016x}-{flags:02x}".encode()
    assert flags & 1  # sampled


def test_a_producer_injects_only_under_a_provider_and_a_current_span(
    spans: InMemorySpanExporter,
) -> None:
    """Decided when the producer starts: no provider, no injector (send() pays one check);
    with one, the current span's context is added to a copy of the headers, unless they
    carry a traceparent already."""
    with global_tracer_provider(trace.ProxyTracerProvider()):
        assert header_injector() is None
    inject = header_injector()
    assert inject is not None
    mine = [("k", b"v")]
    assert inject(mine) is mine and inject(None) is None  # no current span
    span, _ = producer_span()
    with trace.use_span(span):
        added = inject(mine)
        assert added is not None and added[0] == ("k", b"v") and added[1][0] == "traceparent"
        assert mine == [("k", b"v")]
        ours = [("traceparent", b"00-given")]
        assert inject(ours) is ours


# ---------------------------------------------------------------- metrics


def metric_points(reader: InMemoryMetricReader) -> dict[str, list[tuple[dict[str, Any], Any]]]:
    """instrument name -> [(attributes, value or histogram count)]."""
    out: dict[str, list[tuple[dict[str, Any], Any]]] = {}
    data = reader.get_metrics_data()
    assert data is not None
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    value = getattr(point, "value", None)
                    if value is None:
                        value = point.count
                    out.setdefault(metric.name, []).append((dict(point.attributes), value))
    return out


async def test_metrics_through_opentelemetry() -> None:
    from consumergroup.metrics import METRIC_NAMES
    from consumergroup.otel import OTelMetrics, instrument_name

    reader = InMemoryMetricReader()
    metrics = OTelMetrics(MeterProvider(metric_readers=[reader]))
    group = cg.ConsumerGroup(["127.0.0.1:9092"], "orders")
    metrics.track(group)
    metrics.track(group)  # idempotent
    group._notify("on_commit", 0.02, None)
    group._notify("on_commit", 0.5, cg.KafkaConnectionError("refused"))
    group._notify("on_rebalance", 3.0)
    g = {"messaging.consumer.group.name": "orders"}
    points = metric_points(reader)
    assert points["consumergroup.commit_latency"] == [(g, 2)]
    assert points["consumergroup.commit_failures"] == [(g, 1)]
    assert points["consumergroup.rebalance_duration"] == [(g, 1)]
    assert ({**g, "consumergroup.state": "starting"}, 1.0) in points["consumergroup.state"]
    assert points["consumergroup.assigned_partitions"] == [(g, 0)]
    # Every metric has an instrument of the same meaning (names derived, units in s).
    assert instrument_name("consumergroup_commit_latency_seconds") == (
        "consumergroup.commit_latency",
        "s",
    )
    assert {instrument_name(n)[0] for n in METRIC_NAMES} >= set(points)
    # A periodic reader collects on its own thread: stats() is read on the group's loop.
    again = await asyncio.to_thread(metric_points, reader)
    assert again["consumergroup.assigned_partitions"] == [(g, 0)]


def test_missing_opentelemetry_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry", None)  # import fails
    monkeypatch.delitem(sys.modules, "consumergroup.otel", raising=False)
    with pytest.raises(ImportError, match=r"pip install 'consumergroup\[otel\]'"):
        importlib.import_module("consumergroup.otel")
