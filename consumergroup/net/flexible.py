"""Building blocks for Kafka's flexible (KIP-482) message versions on aiokafka's types.

aiokafka 0.14 ships compact strings, arrays and tagged fields but no UUID, no nullable
struct and no flexible codec for the APIs this package writes itself (the consumer
group protocol, Metadata with topic ids, OffsetCommit v8+). In a flexible version every
struct, the message itself and each array element, ends with its tagged fields, and the
request and response headers carry tagged fields too (``FLEXIBLE_VERSION``).

Topic ids decode to (and encode from) the form Kafka's own tools print: the 16 bytes
in URL-safe base64 without padding (``Uuid.toString()`` in the Java client).
"""

from __future__ import annotations

import base64
import functools
from io import BytesIO
from typing import Any

from aiokafka.protocol.abstract import AbstractType
from aiokafka.protocol.api import RequestStruct, Response
from aiokafka.protocol.types import (
    CompactArray,
    CompactString,
    Int8,
    Schema,
    TaggedFields,
)

__all__ = [
    "NULL_TOPIC_ID",
    "STR",
    "NullableStruct",
    "Uuid",
    "new_uuid",
    "request_version",
    "struct",
    "tagged",
]


class _CompactString(CompactString):  # type: ignore[misc]
    """aiokafka's compact string with a fast path for short values (a one-byte length):
    a Metadata request may name hundreds of thousands of topics."""

    def encode(self, value: str | None) -> bytes:
        if value is not None:
            raw = value.encode(self.encoding)
            if len(raw) < 127:
                return bytes((len(raw) + 1,)) + raw
        encoded: bytes = super().encode(value)
        return encoded


#: A compact (varint-length) UTF-8 string, nullable.
STR = _CompactString("utf-8")


class _Tags(TaggedFields):  # type: ignore[misc]
    """Tagged fields; none (what this client sends) encode as one zero byte."""

    @classmethod
    def encode(cls, value: dict[int, bytes]) -> bytes:
        if not value:
            return b"\x00"
        encoded: bytes = TaggedFields.encode(value)
        return encoded


@functools.lru_cache(maxsize=1024)
def _uuid_bytes(value: str) -> bytes:
    raw = base64.urlsafe_b64decode(value + "==")
    if len(raw) != 16:
        raise ValueError(f"not a Kafka uuid (16 bytes as base64url): {value!r}")
    return raw


class Uuid(AbstractType[str]):  # type: ignore[misc]
    """Kafka's ``uuid``: 16 bytes on the wire, its base64url form (22 chars) in Python."""

    @classmethod
    def encode(cls, value: str) -> bytes:
        return _uuid_bytes(value)

    @classmethod
    def decode(cls, data: BytesIO) -> str:
        raw = data.read(16)
        if len(raw) != 16:
            raise ValueError("Buffer underrun decoding uuid")
        return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


#: The all-zero uuid: "no topic id" (a broker without topic ids, or a request by name).
NULL_TOPIC_ID = Uuid.decode(BytesIO(bytes(16)))


def new_uuid() -> str:
    """A random uuid in Kafka's text form (a KIP-848 member id)."""
    import uuid  # here: its import (platform) is ~10 M instructions of every start-up

    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")


def tagged(*fields: tuple[str, Any]) -> tuple[tuple[str, Any], ...]:
    """The fields of a flexible struct: ``fields`` and then its (empty) tagged fields."""
    return (*fields, ("_tagged_fields", _Tags))


def struct(*fields: tuple[str, Any]) -> CompactArray:
    """A compact array of flexible structs with ``fields``."""
    return CompactArray(*tagged(*fields))


class NullableStruct:
    """A nullable struct field: int8 -1 (null) or 1, then the struct (Kafka's encoding)."""

    def __init__(self, *fields: tuple[str, Any]) -> None:
        self.schema = Schema(*tagged(*fields))

    def encode(self, value: Any) -> bytes:
        """``None`` or a tuple of the fields (tagged fields included)."""
        if value is None:
            null: bytes = Int8.encode(-1)
            return null
        present: bytes = Int8.encode(1) + self.schema.encode(value)
        return present

    def decode(self, data: BytesIO) -> tuple[Any, ...] | None:
        """``None`` or the struct's fields as a tuple."""
        if Int8.decode(data) < 0:
            return None
        fields: tuple[Any, ...] = self.schema.decode(data)
        return fields

    def repr(self, value: Any) -> str:
        """For aiokafka's struct repr."""
        return "None" if value is None else self.schema.repr(value)


def request_version(
    name: str,
    api_key: int,
    version: int,
    request: Schema,
    response: Schema,
    *,
    flexible: bool = True,
) -> type[RequestStruct]:
    """A request struct class for one version of ``name``, and its response class;
    ``flexible``: header v2 (its response header v1), as every version listed in the
    message's ``flexibleVersions``."""
    response_type = type(
        f"{name}Response_v{version}",
        (Response,),
        {"API_KEY": api_key, "API_VERSION": version, "SCHEMA": response},
    )
    request_type: type[RequestStruct] = type(
        f"{name}Request_v{version}",
        (RequestStruct,),
        {
            "API_KEY": api_key,
            "API_VERSION": version,
            "FLEXIBLE_VERSION": flexible,
            "RESPONSE_TYPE": response_type,
            "SCHEMA": request,
        },
    )
    return request_type
