"""ConsumerGroupClaim: one partition a session owns, and its message stream."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer

    from .._otel import ClaimTracing, _Open
    from ..consumer.partition import PartitionConsumer
    from ..message import ConsumerMessage
    from .transaction import GroupTransaction


class ConsumerGroupClaim:
    """A claimed partition (sarama's ``ConsumerGroupClaim``).

    Its iterators end when the session ends; they raise
    :class:`~consumergroup.ConsumerError` if the partition fails for good.
    """

    def __init__(
        self,
        pc: PartitionConsumer,
        initial_offset: int,
        tracing: ClaimTracing | None = None,
        transaction: GroupTransaction | None = None,
    ) -> None:
        self._pc = pc
        # Exactly-once: deliveries pass the member's transaction's gate.
        self._transaction = transaction
        self.topic = pc.topic
        self.partition = pc.partition
        self.initial_offset = initial_offset
        # Tracing is decided here, once (None: off, the streams are the partition's own).
        self._tracing = tracing
        self._tracer: Tracer | None = tracing.tracer() if tracing is not None else None
        # The span a traced stream has open (claim task only).
        self._open: _Open | None = None

    def __repr__(self) -> str:
        return f"<ConsumerGroupClaim {self.topic}/{self.partition} from {self.initial_offset}>"

    @property
    def high_water_mark_offset(self) -> int:
        """The partition's high watermark as of the latest fetch (-1 before the first)."""
        return self._pc.high_water_mark_offset

    def messages(self) -> AsyncIterator[ConsumerMessage]:
        """One message at a time, in offset order.

        With an OpenTelemetry tracer provider set, each message gets a ``process`` span,
        current while the handler works on it, ended when it asks for the next one.
        """
        source = self._pc.messages()
        if self._transaction is not None:
            source = self._transaction.gate(source)
        if self._tracer is None:
            return source
        assert self._tracing is not None
        self._untrace()
        stream, self._open = self._tracing.messages(
            source, self._tracer, self.topic, self.partition
        )
        return stream

    def batches(self) -> AsyncIterator[list[ConsumerMessage]]:
        """Decoded chunks as fetched: the fast path (the list is yours; no copy is made).

        With an OpenTelemetry tracer provider set, each list gets a ``process`` span,
        current while the handler works on it, ended when it asks for the next one.
        """
        source = self._pc.batches()
        if self._transaction is not None:
            source = self._transaction.gate(source)
        if self._tracer is None:
            return source
        assert self._tracing is not None
        self._untrace()
        stream, self._open = self._tracing.batches(source, self._tracer, self.topic, self.partition)
        return stream

    def _untrace(self) -> None:
        """End the span of the message or list the handler was working on, if any (the
        claim's task calls it when ``consume_claim`` ends, however it ends)."""
        if self._open is not None:
            self._open.close()


def end_span(claim: ConsumerGroupClaim) -> None:
    """End the span ``claim``'s handler left open, if any: its task calls this when
    ``consume_claim`` ends (a loop left by ``break`` or an error leaves the span open)."""
    claim._untrace()
