"""OpenTelemetry spans of a running group, on both brokers: a record our producer sends
under a span carries its ``traceparent``; the member's span for it continues that trace and
links it, the handler's own spans are its children, and the attributes name the
system, topic, partition, offset and group (messaging semantic conventions). The SDK's
in-memory exporter collects the spans; the global tracer provider is set for the test
only.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

import consumergroup as cg
from tests.conftest import TopicFactory, unique
from tests.helpers import global_tracer_provider
from tests.integration.group_support import group_config, running_member, wait_for


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with global_tracer_provider(provider):
        yield exporter


class Traced(cg.ConsumerGroupHandler):
    """Handles records (``messages()``) or lists (``batches()``), a span of its own each."""

    def __init__(self, batches: bool) -> None:
        self.batches = batches
        self.offsets: list[int] = []

    async def consume_claim(
        self, session: cg.ConsumerGroupSession, claim: cg.ConsumerGroupClaim
    ) -> None:
        tracer = trace.get_tracer("handler")
        if self.batches:
            async for batch in claim.batches():
                with tracer.start_as_current_span("store"):
                    self.offsets += [m.offset for m in batch]
                session.mark_message(batch[-1])
        else:
            async for msg in claim.messages():
                with tracer.start_as_current_span("store"):
                    self.offsets.append(msg.offset)
                session.mark_message(msg)


@pytest.mark.parametrize("batches", [False, True], ids=["messages", "batches"])
async def test_spans_of_a_running_group(
    bootstrap: str, new_topic: TopicFactory, spans: InMemorySpanExporter, batches: bool
) -> None:
    topic, group = await new_topic(), unique()
    async with cg.Producer([bootstrap]) as producer:  # started under the provider: it injects
        with trace.get_tracer("app").start_as_current_span("send", kind=SpanKind.PRODUCER) as send:
            await producer.send_and_wait(topic, b"traced", partition=0)
        await producer.send_and_wait(topic, b"plain", partition=0)
    handler = Traced(batches)
    async with running_member(bootstrap, group, [topic], handler, group_config()):
        await wait_for(lambda: handler.offsets == [0, 1], 60, "both records")
    # The last span ended when the session ended its stream.
    process = [s for s in spans.get_finished_spans() if s.name == f"process {topic}"]
    stores = [s for s in spans.get_finished_spans() if s.name == "store"]
    producer = send.get_span_context()
    for store in stores:  # every span of the handler is a child of a process span
        assert store.parent is not None
        assert store.parent.span_id in {p.context.span_id for p in process}
    common = {
        "messaging.system": "kafka",
        "messaging.destination.name": topic,
        "messaging.destination.partition.id": "0",
        "messaging.consumer.group.name": group,
        "messaging.operation.name": "process",
        "messaging.client.id": "test",
    }
    for span in process:
        assert span.kind is SpanKind.CONSUMER
        assert common.items() <= dict(span.attributes or {}).items()
    linked = [
        s for s in process if [link.context.span_id for link in s.links] == [producer.span_id]
    ]
    assert linked, [s.links for s in process]
    if not batches:
        first, second = sorted(process, key=lambda s: s.attributes["messaging.kafka.offset"])
        assert first.context.trace_id == producer.trace_id  # the producer's trace goes on
        assert first.parent is not None and first.parent.span_id == producer.span_id
        assert second.parent is None and not second.links
