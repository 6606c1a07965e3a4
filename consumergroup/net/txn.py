"""Producer-id and transaction request builders (KIP-98, KIP-360, KIP-890).

aiokafka 0.14 ships these APIs at their first versions only; they are written here with
aiokafka's ``Struct``/``Schema`` types after Apache Kafka's message definitions:

* InitProducerId v0-v1 (classic), v2+ flexible; v3 adds the current ``producer_id`` and
  ``producer_epoch``, so an idempotent producer can bump its epoch (KIP-360); v4 and v5
  have v3's layout.
"""

from __future__ import annotations

from aiokafka.protocol.api import Request, RequestStruct
from aiokafka.protocol.types import Int16, Int32, Int64, Schema, String

from .flexible import STR, request_version, tagged

__all__ = ["InitProducerIdRequest"]

_STR = String("utf-8")


def _init_producer_id(version: int) -> tuple[Schema, Schema]:
    flexible = version >= 2
    fields: list[tuple[str, object]] = [
        ("transactional_id", STR if flexible else _STR),
        ("transaction_timeout_ms", Int32),
    ]
    if version >= 3:
        fields += [("producer_id", Int64), ("producer_epoch", Int16)]
    answer = [
        ("throttle_time_ms", Int32),
        ("error_code", Int16),
        ("producer_id", Int64),
        ("producer_epoch", Int16),
    ]
    if flexible:
        return Schema(*tagged(*fields)), Schema(*tagged(*answer))
    return Schema(*fields), Schema(*answer)


class InitProducerIdRequest(Request[RequestStruct]):  # type: ignore[misc]
    """InitProducerId v0-v5: a producer id and epoch for an idempotent or transactional
    producer. ``producer_id``/``producer_epoch`` (-1: none yet) ask for an epoch bump of
    that id (v3+; an older broker cannot bump and is sent none)."""

    API_KEY = 22

    def __init__(
        self,
        transactional_id: str | None,
        transaction_timeout_ms: int,
        producer_id: int = -1,
        producer_epoch: int = -1,
    ) -> None:
        self._transactional_id = transactional_id
        self._timeout_ms = transaction_timeout_ms
        self._producer_id = producer_id
        self._producer_epoch = producer_epoch

    def build(self, request_struct_class: type[RequestStruct]) -> RequestStruct:
        """The struct for the negotiated version."""
        version = request_struct_class.API_VERSION
        fields: tuple[object, ...] = (self._transactional_id, self._timeout_ms)
        if version >= 3:
            fields += (self._producer_id, self._producer_epoch)
        if version >= 2:
            fields += ({},)  # no tagged fields
        return request_struct_class(*fields)


InitProducerIdRequest._CLASSES = tuple(
    request_version("InitProducerId", 22, v, *_init_producer_id(v), flexible=v >= 2)
    for v in range(6)
)
