"""The codecs of the APIs no consumer's start-up sends: topic and group administration, SASL.

CreateTopics, DeleteTopics, DescribeGroups, DeleteGroups, SaslHandshake and
SaslAuthenticate come from ``aiokafka.protocol.admin``, a module of ~17 M instructions at
import (every admin API's structs at every version). :mod:`.protocol` exports these
builders lazily: this module loads with the first use of one of them (creating a topic,
describing a group, a SASL handshake), not with every connection.
"""

from __future__ import annotations

from typing import TypeAlias

from aiokafka.protocol.admin import (
    CreateTopicsRequest,
    DeleteGroupsRequest,
    DeleteTopicsRequest,
    DescribeGroupsRequest_v0,
    DescribeGroupsRequest_v1,
    DescribeGroupsRequest_v2,
    DescribeGroupsRequest_v3,
    DescribeGroupsResponse_v3,
    SaslAuthenticateRequest,
    SaslHandShakeRequest,
)
from aiokafka.protocol.api import Request

__all__ = [
    "CreateTopicsRequest",
    "DeleteGroupsRequest",
    "DeleteTopicsRequest",
    "DescribeGroupsRequest",
    "SaslAuthenticateRequest",
    "SaslHandShakeRequest",
]


class _DescribeGroupsRequestV3(DescribeGroupsRequest_v3):  # type: ignore[misc]
    """DescribeGroups v3 answered by the v3 response (aiokafka 0.14 pairs it with v2's,
    which lacks ``authorized_operations`` and misreads every group after the first)."""

    RESPONSE_TYPE = DescribeGroupsResponse_v3


_DescribeGroupsStruct: TypeAlias = (
    DescribeGroupsRequest_v0
    | DescribeGroupsRequest_v1
    | DescribeGroupsRequest_v2
    | _DescribeGroupsRequestV3
)


class DescribeGroupsRequest(Request[_DescribeGroupsStruct]):  # type: ignore[misc]
    """DescribeGroups v0-v3 for ``groups`` (group ids); authorized operations not asked.

    Each answered group is ``(error_code, group, state, protocol_type, protocol,
    members[(member_id, client_id, client_host, member_metadata, member_assignment)],
    ...)``.
    """

    API_KEY = 15

    def __init__(self, groups: list[str]) -> None:
        self._groups = groups

    def build(self, request_struct_class: type[_DescribeGroupsStruct]) -> _DescribeGroupsStruct:
        """The struct for the negotiated version."""
        if request_struct_class.API_VERSION < 3:
            return request_struct_class(self._groups)
        return request_struct_class(self._groups, False)
