"""ApiVersions v0-v3, and the broker's finalized features (KIP-584).

aiokafka 0.14 ships ApiVersions up to v2. v3 (Kafka 2.4+) is flexible, names the client
software, and its answer carries, in tagged fields, the features the cluster finalized:
``transaction.version`` among them, which says which transaction protocol the brokers run
(2: KIP-890's, with an epoch bump per transaction and partitions added by the brokers).

Unlike every other flexible API, an ApiVersions *answer* keeps the v0 response header
(no tagged fields): a client that asked a version the broker does not know must still
read the error, so the header is the one every version shares.
"""

from __future__ import annotations

from dataclasses import field
from io import BytesIO
from typing import Any

from aiokafka.protocol.api import Request, RequestStruct, Response, ResponseHeader_v0
from aiokafka.protocol.types import Array, Int16, Int32, Int64, Schema

from .._dataclass import dataclass
from .flexible import STR, request_version, struct, tagged

__all__ = ["ApiVersionRequest_v0", "ApiVersionsRequest", "Features", "features_of"]

# KIP-511: the software name and version must match [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?
# (Kafka refuses the request with INVALID_REQUEST otherwise): these characters, starting and
# ending with a letter or digit. Checked with str methods, not a regular expression: two
# compiles (~1 M instructions) at every start for a constant string.
_SOFTWARE_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-.")
# The answer's tagged fields: 1 the finalized features' epoch, 2 the finalized features.
_EPOCH_TAG, _FINALIZED_TAG = 1, 2
_FINALIZED = Schema(("features", struct(("name", STR), ("max_level", Int16), ("min_level", Int16))))


# v0-v2, as aiokafka.protocol.admin has them: written here so that a connection's first
# request does not import that module (~17 M instructions of admin codecs at start-up).
_RANGES = Array(("api_key", Int16), ("min_version", Int16), ("max_version", Int16))


class ApiVersionResponse_v0(Response):  # type: ignore[misc]
    """ApiVersions v0 answer: error, then (api_key, min, max) per API."""

    API_KEY = 18
    API_VERSION = 0
    SCHEMA = Schema(("error_code", Int16), ("api_versions", _RANGES))


class ApiVersionResponse_v1(Response):  # type: ignore[misc]
    """ApiVersions v1-v2 answer: v0's fields, then the throttle time."""

    API_KEY = 18
    API_VERSION = 1
    SCHEMA = Schema(("error_code", Int16), ("api_versions", _RANGES), ("throttle_time_ms", Int32))


class ApiVersionRequest_v0(RequestStruct):  # type: ignore[misc]
    """ApiVersions v0 (no fields): the version every broker answers."""

    API_KEY = 18
    API_VERSION = 0
    RESPONSE_TYPE = ApiVersionResponse_v0
    SCHEMA = Schema()


class _ApiVersionRequestV1(RequestStruct):  # type: ignore[misc]
    API_KEY = 18
    API_VERSION = 1
    RESPONSE_TYPE = ApiVersionResponse_v1
    SCHEMA = Schema()


class _ApiVersionRequestV2(RequestStruct):  # type: ignore[misc]
    API_KEY = 18
    API_VERSION = 2
    RESPONSE_TYPE = ApiVersionResponse_v1
    SCHEMA = Schema()


@dataclass(frozen=True)
class Features:
    """The features a broker says the cluster finalized: ``levels`` (name -> the finalized
    max version level) as of ``epoch`` (-1: the broker sent none, as before Kafka 2.4 or
    with ApiVersions below v3)."""

    epoch: int = -1
    levels: dict[str, int] = field(default_factory=dict)


def software_version(version: str) -> str:
    """``version`` as KIP-511 allows it (``0.1.0.dev1+g12ab`` -> ``0.1.0.dev1-g12ab``):
    any other character becomes ``-``, and ``-``/``.`` go from both ends ("unknown" if
    nothing is left), so what remains starts and ends with a letter or digit."""
    cleaned = "".join(c if c in _SOFTWARE_CHARS else "-" for c in version).strip("-.")
    return cleaned or "unknown"


def _v3() -> type[RequestStruct]:
    request = Schema(*tagged(("client_software_name", STR), ("client_software_version", STR)))
    response = Schema(
        *tagged(
            ("error_code", Int16),
            (
                "api_versions",
                struct(("api_key", Int16), ("min_version", Int16), ("max_version", Int16)),
            ),
            ("throttle_time_ms", Int32),
        )
    )
    cls = request_version("ApiVersions", 18, 3, request, response)

    def parse_response_header(self: Any, read_buffer: BytesIO | bytes) -> ResponseHeader_v0:
        return ResponseHeader_v0.decode(read_buffer)  # ApiVersions keeps header v0

    cls.parse_response_header = parse_response_header
    return cls


_ApiVersionsStruct = ApiVersionRequest_v0 | _ApiVersionRequestV1 | _ApiVersionRequestV2


class ApiVersionsRequest(Request[_ApiVersionsStruct]):  # type: ignore[misc]
    """ApiVersions v0-v3; v3 names this client (``consumergroup`` and its version)."""

    API_KEY = 18
    ALLOW_UNKNOWN_API_VERSION = True

    def build(self, request_struct_class: type[RequestStruct]) -> RequestStruct:
        """The struct for the negotiated version."""
        if request_struct_class.API_VERSION < 3:
            return request_struct_class()
        from .. import __version__

        return request_struct_class("consumergroup", software_version(__version__), {})


ApiVersionsRequest._CLASSES = (
    ApiVersionRequest_v0,
    _ApiVersionRequestV1,
    _ApiVersionRequestV2,
    _v3(),
)


def features_of(response: Any) -> Features:
    """The finalized features an ApiVersions answer carries (v3+: its tagged fields)."""
    tags: dict[int, bytes] = getattr(response, "_tagged_fields", None) or {}
    if _FINALIZED_TAG not in tags:
        return Features()
    epoch = Int64.decode(BytesIO(tags[_EPOCH_TAG])) if _EPOCH_TAG in tags else -1
    (entries,) = _FINALIZED.decode(BytesIO(tags[_FINALIZED_TAG]))
    return Features(epoch, {name: max_level for name, max_level, _min, _tags in entries})
