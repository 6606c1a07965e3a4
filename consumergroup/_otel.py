"""OpenTelemetry tracing of handled records and batches (the optional ``otel`` extra).

Off unless the program set a tracer provider: a claim asks :meth:`ClaimTracing.tracer`
once, when it is created, and with no tracer its streams are the plain ones (the C
``messages()`` stream), so tracing costs nothing per message when it is off. The check
itself imports nothing: a program that never imported ``opentelemetry.trace`` cannot have
set a provider.

With a provider, each record a handler takes from ``messages()`` gets a CONSUMER span
``process <topic>`` that is current while the handler works on the record (the spans the
handler starts are its children) and ends when the handler asks for the next record; each
list from ``batches()`` gets one span likewise. Attributes follow OpenTelemetry's messaging
semantic conventions. A record's producer context (the W3C ``traceparent`` header, read by
the global propagator) is its span's parent and a link; a batch's span links every
producer context in it.

Who touches what: a claim's :class:`_Open` is written by its traced streams and by the
claim's task when ``consume_claim`` ends (``ConsumerGroupClaim._untrace``), all in that
task, so the context token made current there is reset there.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Callable, Iterable, MutableSequence, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Link, Span, Tracer

    from .message import ConsumerMessage

__all__ = ["ClaimTracing", "header_injector", "inject_trace_context"]

#: The instrumentation scope of our spans.
SCOPE = "consumergroup"
#: The semantic-conventions version the attribute names follow.
SCHEMA_URL = "https://opentelemetry.io/schemas/1.27.0"

# Messaging semantic conventions (attribute names).
SYSTEM = "messaging.system"
OPERATION_NAME = "messaging.operation.name"
OPERATION_TYPE = "messaging.operation.type"
DESTINATION = "messaging.destination.name"
PARTITION = "messaging.destination.partition.id"
CONSUMER_GROUP = "messaging.consumer.group.name"
CLIENT_ID = "messaging.client.id"
OFFSET = "messaging.kafka.offset"
TOMBSTONE = "messaging.kafka.message.tombstone"
BODY_SIZE = "messaging.message.body.size"
BATCH_COUNT = "messaging.batch.message_count"


def _trace_module() -> Any:
    """``opentelemetry.trace`` if the program imported it, else None (never imports it)."""
    return sys.modules.get("opentelemetry.trace")


def _provided() -> Any:
    """``opentelemetry.trace`` when the program set a tracer provider, else None."""
    trace = _trace_module()
    if trace is None or isinstance(
        trace.get_tracer_provider(), (trace.ProxyTracerProvider, trace.NoOpTracerProvider)
    ):
        return None
    return trace


class ClaimTracing:
    """A group's tracing settings; each new claim asks it for a tracer once."""

    __slots__ = ("_attributes",)

    def __init__(self, group_id: str, client_id: str) -> None:
        self._attributes = {
            SYSTEM: "kafka",
            OPERATION_NAME: "process",
            OPERATION_TYPE: "process",
            CONSUMER_GROUP: group_id,
            CLIENT_ID: client_id,
        }

    def tracer(self) -> Tracer | None:
        """The tracer of a new claim's spans; None when no tracer provider is set."""
        trace = _provided()
        if trace is None:
            return None
        from . import __version__

        tracer: Tracer = trace.get_tracer_provider().get_tracer(
            SCOPE, __version__, schema_url=SCHEMA_URL
        )
        return tracer

    def messages(
        self, stream: AsyncIterator[ConsumerMessage], tracer: Tracer, topic: str, partition: int
    ) -> tuple[AsyncIterator[ConsumerMessage], _Open]:
        """``stream`` with a span per record, and what ends the open one."""
        open_span = _Open()
        return _traced_messages(stream, tracer, self._base(topic, partition), open_span), open_span

    def batches(
        self,
        stream: AsyncIterator[list[ConsumerMessage]],
        tracer: Tracer,
        topic: str,
        partition: int,
    ) -> tuple[AsyncIterator[list[ConsumerMessage]], _Open]:
        """``stream`` with a span per list, and what ends the open one."""
        open_span = _Open()
        return _traced_batches(stream, tracer, self._base(topic, partition), open_span), open_span

    def _base(self, topic: str, partition: int) -> dict[str, Any]:
        return {**self._attributes, DESTINATION: topic, PARTITION: str(partition)}


class _Open:
    """The span a traced stream has open, and the token that made it current in the
    task of the handler that took its record."""

    __slots__ = ("span", "task", "token")

    def __init__(self) -> None:
        self.span: Span | None = None
        self.token: object = None
        self.task: asyncio.Task[Any] | None = None

    def open(self, span: Span) -> None:
        """Make ``span`` the current one of the running task (ending any open one)."""
        from opentelemetry import context, trace

        self.close()
        self.span = span
        self.token = context.attach(trace.set_span_in_context(span))
        self.task = asyncio.current_task()

    def close(self) -> None:
        """End the open span (idempotent); its context is reset in the task that set it.

        From another task (a stream closed by the garbage collector) the context is left
        alone: it belongs to that task, which may be gone.
        """
        span, self.span = self.span, None
        if span is None:
            return
        span.end()
        token, self.token = self.token, None
        if self.task is asyncio.current_task():
            from opentelemetry import context

            context.detach(token)  # type: ignore[arg-type]


async def _traced_messages(
    stream: AsyncIterator[ConsumerMessage],
    tracer: Tracer,
    base: dict[str, Any],
    open_span: _Open,
) -> AsyncIterator[ConsumerMessage]:
    from opentelemetry.trace import SpanKind

    name = f"process {base[DESTINATION]}"
    try:
        async for message in stream:
            parent = _producer_context(message.headers)
            links = _links([parent])
            value = message.value
            attributes = {**base, OFFSET: message.offset}
            if value is None:
                attributes[TOMBSTONE] = True
            else:
                attributes[BODY_SIZE] = len(value)
            open_span.open(
                tracer.start_span(
                    name, context=parent, kind=SpanKind.CONSUMER, attributes=attributes, links=links
                )
            )
            yield message
            open_span.close()
    finally:
        open_span.close()


async def _traced_batches(
    stream: AsyncIterator[list[ConsumerMessage]],
    tracer: Tracer,
    base: dict[str, Any],
    open_span: _Open,
) -> AsyncIterator[list[ConsumerMessage]]:
    from opentelemetry.trace import SpanKind

    name = f"process {base[DESTINATION]}"
    try:
        async for batch in stream:
            links = _links(_producer_context(m.headers) for m in batch)
            attributes = {**base, BATCH_COUNT: len(batch)}
            open_span.open(
                tracer.start_span(name, kind=SpanKind.CONSUMER, attributes=attributes, links=links)
            )
            yield batch
            open_span.close()
    finally:
        open_span.close()


def _links(contexts: Iterable[Context | None]) -> list[Link]:
    """A link to each distinct valid span context among ``contexts``."""
    from opentelemetry.trace import Link, get_current_span

    seen = set()
    links = []
    for ctx in contexts:
        if ctx is None:
            continue
        span_context = get_current_span(ctx).get_span_context()
        key = (span_context.trace_id, span_context.span_id)
        if span_context.is_valid and key not in seen:
            seen.add(key)
            links.append(Link(span_context))
    return links


class _HeaderGetter:
    """The propagator's view of a record's headers (``(str, bytes | None)`` pairs)."""

    @staticmethod
    def get(carrier: Sequence[tuple[str, bytes | None]], key: str) -> list[str] | None:
        values = [v.decode("latin-1") for k, v in carrier if k == key and v is not None]
        return values or None

    @staticmethod
    def keys(carrier: Sequence[tuple[str, bytes | None]]) -> list[str]:
        return [k for k, _ in carrier]


_GETTER = _HeaderGetter()


def _producer_context(headers: Sequence[tuple[str, bytes | None]]) -> Context | None:
    """The context a producer put in ``headers`` (None when there is none)."""
    if not headers:
        return None
    from opentelemetry import propagate

    return propagate.extract(headers, getter=_GETTER)  # type: ignore[arg-type]


def inject_trace_context(headers: MutableSequence[tuple[str, bytes]]) -> None:
    """Append the current span's context (``traceparent``, ...) to a record's ``headers``.

    For producers: a no-op unless the program imported OpenTelemetry and a span is current,
    so it costs one dictionary look-up otherwise.
    """
    trace = _trace_module()
    if trace is None or not trace.get_current_span().get_span_context().is_valid:
        return
    from opentelemetry import propagate

    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    headers.extend((k, v.encode("latin-1")) for k, v in carrier.items())


Headers = Sequence[tuple[str, "bytes | None"]]


def header_injector() -> Callable[[Headers | None], Headers | None] | None:
    """For a producer, decided once when it starts: None when no tracer provider is set
    (nothing to inject, nothing paid per record), else a function that returns a record's
    headers with the current span's context added (unchanged without a current span, or
    when they carry a ``traceparent`` already)."""
    trace = _provided()
    if trace is None:
        return None
    get_current_span = trace.get_current_span

    def inject(headers: Headers | None) -> Headers | None:
        if not get_current_span().get_span_context().is_valid:
            return headers
        if headers and any(k == "traceparent" for k, _ in headers):
            return headers
        added: list[tuple[str, bytes]] = []
        inject_trace_context(added)
        return [*(headers or ()), *added]

    return inject
