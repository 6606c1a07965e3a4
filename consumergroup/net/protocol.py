"""The one adapter between this project and aiokafka's wire codecs.

Everything the rest of the package needs from ``aiokafka.protocol`` is imported
here and re-exported under a stable name, so an aiokafka upgrade touches one
file. aiokafka's ``Request`` builders already implement "pick the highest codec
version inside the broker's [min, max] range" (``Request.prepare``); the
connection feeds them the ranges the broker advertised in ApiVersions.

Responses decode to aiokafka ``Struct`` objects: top-level fields are
attributes, nested arrays are plain tuples in schema order.

Fetch and Produce are the exceptions: each has its own encoder and decoder
(:mod:`.fetch`, v1-v12, and :mod:`.produce`, v3-v12: the hot paths), negotiated here the
same way.
"""

from __future__ import annotations

import functools
import struct as _struct
from io import BytesIO
from typing import TYPE_CHECKING, Any, TypeAlias

from aiokafka.errors import IncompatibleBrokerVersion
from aiokafka.protocol.api import Request, RequestStruct, Response
from aiokafka.protocol.coordination import FindCoordinatorRequest
from aiokafka.protocol.offset import OffsetRequest_v1, OffsetRequest_v2, OffsetRequest_v3

from .. import _lazy
from ..errors import UnsupportedVersionError
from .api_versions import ApiVersionRequest_v0, ApiVersionsRequest, Features, features_of
from .fetch import FETCH_VERSIONS, FetchFrame, FetchRequest, decode_fetch_response
from .group_protocol import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    OffsetCommitRequest,
    SyncGroupRequest,
)
from .metadata import MetadataRequest
from .offset_fetch import OffsetFetchRequest, offset_fetch_topics
from .produce import PRODUCE_VERSIONS, ProduceFrame, ProduceRequest, decode_produce_response

__all__ = [
    "API_NAMES",
    "AnyRequest",
    "AnyRequestStruct",
    "ApiVersionRequest_v0",
    "ApiVersionsRequest",
    "ConsumerGroupDescribeRequest",
    "ConsumerGroupHeartbeatRequest",
    "Features",
    "FetchRequest",
    "FindCoordinatorRequest",
    "HeartbeatRequest",
    "JoinGroupRequest",
    "LeaveGroupRequest",
    "ListOffsetsRequest",
    "MetadataRequest",
    "OffsetCommitRequest",
    "OffsetFetchRequest",
    "ProduceRequest",
    "Request",
    "RequestStruct",
    "Response",
    "SyncGroupRequest",
    "VersionRanges",
    "codec_versions",
    "common_version",
    "decode_response",
    "encode_request",
    "features_of",
    "offset_fetch_topics",
    "prepare",
    "sized_request",
]

#: api_key -> (min_version, max_version) as advertised by a broker.
VersionRanges: TypeAlias = dict[int, tuple[int, int]]

#: The APIs this package speaks, by key (names for logs and error messages).
#: Every key has a builder in ``_BUILDERS`` (a unit test checks it).
API_NAMES: dict[int, str] = {
    0: "Produce",
    1: "Fetch",
    2: "ListOffsets",
    3: "Metadata",
    8: "OffsetCommit",
    9: "OffsetFetch",
    10: "FindCoordinator",
    11: "JoinGroup",
    12: "Heartbeat",
    13: "LeaveGroup",
    14: "SyncGroup",
    17: "SaslHandshake",
    18: "ApiVersions",
    19: "CreateTopics",
    20: "DeleteTopics",
    36: "SaslAuthenticate",
    68: "ConsumerGroupHeartbeat",
    69: "ConsumerGroupDescribe",
}

_ListOffsetsStruct: TypeAlias = OffsetRequest_v1 | OffsetRequest_v2 | OffsetRequest_v3


class ListOffsetsRequest(Request[_ListOffsetsStruct]):  # type: ignore[misc]
    """ListOffsets v1-v3 (v1 is the floor of Kafka 4.0).

    aiokafka 0.14's v4/v5 structs declare ``current_leader_epoch`` as int64 (the
    protocol says int32) and its builder omits the field, so those versions are
    left out here; v1-v3 carry everything a consumer needs.
    ``topics``: ``[(topic, [(partition, timestamp)])]`` with timestamp -2 (earliest)
    or -1 (latest).
    """

    API_KEY = 2

    def __init__(self, isolation_level: int, topics: list[tuple[str, list[tuple[int, int]]]]):
        self._isolation_level = isolation_level
        self._topics = topics

    def build(self, request_struct_class: type[_ListOffsetsStruct]) -> _ListOffsetsStruct:
        """The struct for the negotiated version (isolation level from v2 on)."""
        if request_struct_class.API_VERSION < 2:
            return request_struct_class(-1, self._topics)
        return request_struct_class(-1, self._isolation_level, self._topics)


#: A request the connection can send: an aiokafka builder or our Fetch or Produce.
AnyRequest: TypeAlias = Request[Any] | FetchRequest | ProduceRequest
#: A request built at its negotiated version.
AnyRequestStruct: TypeAlias = RequestStruct | FetchFrame | ProduceFrame

_BUILDERS: tuple[type[Request[Any]], ...] = (
    ListOffsetsRequest,
    MetadataRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    FindCoordinatorRequest,
    JoinGroupRequest,
    HeartbeatRequest,
    LeaveGroupRequest,
    SyncGroupRequest,
    ApiVersionsRequest,
)


@functools.cache
def codec_versions() -> VersionRanges:
    """The (min, max) codec versions aiokafka ships for every API we use (do not mutate)."""
    out: VersionRanges = {
        FetchRequest.API_KEY: FETCH_VERSIONS,
        ProduceRequest.API_KEY: PRODUCE_VERSIONS,
    }
    for builder in _BUILDERS:
        versions = [cls.API_VERSION for cls in builder._CLASSES]
        out[builder.API_KEY] = (min(versions), max(versions))
    out.update(_LAZY_VERSIONS)
    return out


def encode_request(struct: AnyRequestStruct, correlation_id: int, client_id: str) -> bytes:
    """Header + body of one request, without the int32 size prefix."""
    if isinstance(struct, (FetchFrame, ProduceFrame)):
        return struct.frame(correlation_id, client_id)
    header = struct.build_request_header(correlation_id, client_id)
    data: bytes = header.encode() + struct.encode()
    return data


_SIZE = _struct.Struct(">i")


def sized_request(struct: AnyRequestStruct, correlation_id: int, client_id: str) -> bytes:
    """What goes on the wire for one request: the int32 size, then :func:`encode_request`'s
    bytes (a Produce or Fetch request's joined with its size: copied once)."""
    if isinstance(struct, (FetchFrame, ProduceFrame)):
        return struct.frame(correlation_id, client_id, sized=True)
    data = encode_request(struct, correlation_id, client_id)
    return _SIZE.pack(len(data)) + data


def decode_response(struct: AnyRequestStruct, payload: bytes | bytearray) -> Any:
    """Decode a response frame (header included) for the request ``struct``.

    Fetch responses go through our own decoder (:mod:`.fetch`): same shape, no
    per-field Python calls, record sets as views of the frame.
    """
    if isinstance(struct, FetchFrame):
        return decode_fetch_response(struct.API_VERSION, payload)
    if isinstance(struct, ProduceFrame):
        return decode_produce_response(struct.API_VERSION, payload)
    buf = BytesIO(payload)
    struct.parse_response_header(buf)
    return struct.RESPONSE_TYPE.decode(buf)


def prepare(request: AnyRequest, broker: VersionRanges, address: str) -> AnyRequestStruct:
    """Build ``request`` at the highest version both our codecs and the broker support."""
    try:
        if isinstance(request, (FetchRequest, ProduceRequest)):
            version = common_version(codec_versions()[request.API_KEY], broker.get(request.API_KEY))
            if version is None:
                raise IncompatibleBrokerVersion(f"no common {API_NAMES[request.API_KEY]} version")
            return request.build(version)
        return request.prepare(broker)
    except (IncompatibleBrokerVersion, NotImplementedError) as exc:
        name = API_NAMES.get(request.API_KEY, str(request.API_KEY))
        ours = codec_versions().get(request.API_KEY)
        theirs = broker.get(request.API_KEY)
        if theirs is None:
            raise UnsupportedVersionError(
                f"{name}: broker {address} does not offer this API at all (this client "
                f"speaks versions {ours}): use a broker that supports {name}"
            ) from exc
        raise UnsupportedVersionError(
            f"{name}: broker {address} supports versions {theirs}, this client {ours}: "
            "upgrade the broker or this client"
        ) from exc


def common_version(ours: tuple[int, int] | None, theirs: tuple[int, int] | None) -> int | None:
    """The highest version in both ranges (None: no overlap, or a side lacks the API)."""
    if ours is None or theirs is None:
        return None
    hi = min(ours[1], theirs[1])
    return hi if hi >= max(ours[0], theirs[0]) else None


API_NAMES.update(
    {15: "DescribeGroups", 16: "ListGroups", 42: "DeleteGroups", 44: "IncrementalAlterConfigs"}
)

# ------------------ administration and SASL (admin_codecs.py, group_admin.py), share groups
# (share/), producer APIs (producer/) and the consumer group protocol (kip848.py, KIP-848)
# Their codecs (aiokafka.protocol.admin ~17 M instructions at import, net/share.py and
# net/txn.py ~14 M) load with the first use of a name below (module __getattr__), not with
# every consumer; so their versions are written here and codec_versions() imports nothing
# (a unit test holds them equal to the codecs' classes).

if TYPE_CHECKING:
    from .admin_codecs import CreateTopicsRequest as CreateTopicsRequest
    from .admin_codecs import DeleteGroupsRequest as DeleteGroupsRequest
    from .admin_codecs import DeleteTopicsRequest as DeleteTopicsRequest
    from .admin_codecs import DescribeGroupsRequest as DescribeGroupsRequest
    from .admin_codecs import SaslAuthenticateRequest as SaslAuthenticateRequest
    from .admin_codecs import SaslHandShakeRequest as SaslHandShakeRequest
    from .group_admin import IncrementalAlterConfigsRequest as IncrementalAlterConfigsRequest
    from .group_admin import ListGroupsRequest as ListGroupsRequest
    from .kip848 import ConsumerGroupDescribeRequest as ConsumerGroupDescribeRequest
    from .kip848 import ConsumerGroupHeartbeatRequest as ConsumerGroupHeartbeatRequest
    from .share import AlterShareGroupOffsetsRequest as AlterShareGroupOffsetsRequest
    from .share import DeleteShareGroupOffsetsRequest as DeleteShareGroupOffsetsRequest
    from .share import DescribeShareGroupOffsetsRequest as DescribeShareGroupOffsetsRequest
    from .share import ShareAcknowledgeRequest as ShareAcknowledgeRequest
    from .share import ShareFetchRequest as ShareFetchRequest
    from .share import ShareGroupDescribeRequest as ShareGroupDescribeRequest
    from .share import ShareGroupHeartbeatRequest as ShareGroupHeartbeatRequest
    from .txn import AddOffsetsToTxnRequest as AddOffsetsToTxnRequest
    from .txn import AddPartitionsToTxnRequest as AddPartitionsToTxnRequest
    from .txn import EndTxnRequest as EndTxnRequest
    from .txn import InitProducerIdRequest as InitProducerIdRequest
    from .txn import TxnOffsetCommitRequest as TxnOffsetCommitRequest

#: Name -> (module, attribute) of the builders loaded on first use.
_LAZY: dict[str, tuple[str, str]] = {
    name: (f"{__package__}.{module}", name)
    for module, names in (
        (
            "admin_codecs",
            (
                "CreateTopicsRequest",
                "DeleteTopicsRequest",
                "DescribeGroupsRequest",
                "DeleteGroupsRequest",
                "SaslHandShakeRequest",
                "SaslAuthenticateRequest",
            ),
        ),
        ("group_admin", ("ListGroupsRequest", "IncrementalAlterConfigsRequest")),
        ("kip848", ("ConsumerGroupHeartbeatRequest", "ConsumerGroupDescribeRequest")),
        (
            "share",
            (
                "ShareGroupHeartbeatRequest",
                "ShareGroupDescribeRequest",
                "ShareFetchRequest",
                "ShareAcknowledgeRequest",
                "DescribeShareGroupOffsetsRequest",
                "AlterShareGroupOffsetsRequest",
                "DeleteShareGroupOffsetsRequest",
            ),
        ),
        (
            "txn",
            (
                "InitProducerIdRequest",
                "AddPartitionsToTxnRequest",
                "AddOffsetsToTxnRequest",
                "EndTxnRequest",
                "TxnOffsetCommitRequest",
            ),
        ),
    )
    for name in names
}
#: Their (min, max) codec versions, by api key.
_LAZY_VERSIONS: VersionRanges = {
    19: (0, 3),
    20: (0, 3),
    15: (0, 3),
    42: (0, 1),
    17: (0, 1),
    36: (0, 1),
    16: (0, 5),
    44: (1, 1),
    68: (0, 1),
    69: (0, 1),
    76: (1, 1),
    77: (1, 1),
    78: (1, 2),
    79: (1, 2),
    90: (0, 1),
    91: (0, 0),
    92: (0, 0),
    22: (0, 5),
    24: (0, 3),
    25: (0, 4),
    26: (0, 5),
    28: (0, 5),
}
__getattr__, __dir__ = _lazy.exports(globals(), _LAZY)

API_NAMES.update(
    {
        76: "ShareGroupHeartbeat",
        77: "ShareGroupDescribe",
        78: "ShareFetch",
        79: "ShareAcknowledge",
        90: "DescribeShareGroupOffsets",
        91: "AlterShareGroupOffsets",
        92: "DeleteShareGroupOffsets",
        22: "InitProducerId",
        24: "AddPartitionsToTxn",
        25: "AddOffsetsToTxn",
        26: "EndTxn",
        28: "TxnOffsetCommit",
    }
)
__all__ += sorted(_LAZY)
