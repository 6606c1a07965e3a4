"""Group admin APIs at versions aiokafka lacks: ListGroups v3-v5, IncrementalAlterConfigs v1.

* ListGroups (16): aiokafka 0.14 ships v0-v1 (its ``ListGroupsRequest_v2`` says it is
  v1; v2 has v1's schema, here under its own number). v3 is flexible, v4 adds a states filter
  and each group's state, v5 (Kafka 3.8+, KIP-848) a types filter (``classic``,
  ``consumer``, ``share``, ``streams``) and each group's type: how ``kafka-share-groups.sh``
  lists share groups. Every answered group is ``(group_id, protocol_type, ...)`` first, at
  every version.
* IncrementalAlterConfigs (44) v1 (flexible): set or delete single configs of a resource,
  among them a group's (resource type 32, KIP-848/KIP-932: ``share.auto.offset.reset``,
  ``share.record.lock.duration.ms``, ...).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from aiokafka.protocol.admin import (
    ListGroupsRequest_v0,
    ListGroupsRequest_v1,
    ListGroupsResponse_v1,
)
from aiokafka.protocol.api import Request, RequestStruct
from aiokafka.protocol.types import Boolean, CompactArray, Int8, Int16, Int32, Schema

from ..errors import UnsupportedVersionError
from .flexible import STR, request_version, struct, tagged

__all__ = [
    "GROUP_RESOURCE",
    "IncrementalAlterConfigsRequest",
    "ListGroupsRequest",
]

# --------------------------------------------------------------------------- ListGroups


def _list_request(version: int) -> Schema:
    fields: list[tuple[str, object]] = []
    if version >= 4:
        fields.append(("states_filter", CompactArray(STR)))
    if version >= 5:
        fields.append(("types_filter", CompactArray(STR)))
    return Schema(*tagged(*fields))


def _list_response(version: int) -> Schema:
    group: list[tuple[str, object]] = [("group_id", STR), ("protocol_type", STR)]
    if version >= 4:
        group.append(("group_state", STR))
    if version >= 5:
        group.append(("group_type", STR))
    return Schema(
        *tagged(("throttle_time_ms", Int32), ("error_code", Int16), ("groups", struct(*group)))
    )


class ListGroupsRequest(Request[RequestStruct]):  # type: ignore[misc]
    """ListGroups v0-v5; ``states`` (v4+) and ``types`` (v5+) filter what is listed.

    Each answered group starts ``(group_id, protocol_type)``; v4 adds ``group_state``, v5
    ``group_type``. A filter the negotiated version cannot carry raises
    :class:`~consumergroup.errors.UnsupportedVersionError` (a broker without v5 has no
    share groups: check the API first).
    """

    API_KEY = 16

    def __init__(self, states: Sequence[str] = (), types: Sequence[str] = ()) -> None:
        self.states = list(states)
        self.types = list(types)

    def build(self, request_struct_class: type[RequestStruct]) -> RequestStruct:
        """The struct for the negotiated version, with the filters it can carry."""
        version = request_struct_class.API_VERSION
        if self.types and version < 5:
            raise UnsupportedVersionError(
                f"ListGroups v{version} cannot filter by group type (needs v5, Kafka 3.8+)"
            )
        if self.states and version < 4:
            raise UnsupportedVersionError(
                f"ListGroups v{version} cannot filter by group state (needs v4, Kafka 2.6+)"
            )
        if version < 3:
            return request_struct_class()
        filters: list[object] = []
        if version >= 4:
            filters.append(self.states)
        if version >= 5:
            filters.append(self.types)
        return request_struct_class(*filters, {})


ListGroupsRequest._CLASSES = (
    ListGroupsRequest_v0,
    ListGroupsRequest_v1,
    request_version(
        "ListGroups",
        16,
        2,
        ListGroupsRequest_v1.SCHEMA,
        ListGroupsResponse_v1.SCHEMA,
        flexible=False,
    ),
    *(request_version("ListGroups", 16, v, _list_request(v), _list_response(v)) for v in (3, 4, 5)),
)

# -------------------------------------------------------------- IncrementalAlterConfigs

#: Config resource types (``ConfigResource.Type``): a topic, a broker, a group.
TOPIC_RESOURCE, BROKER_RESOURCE, GROUP_RESOURCE = 2, 4, 32
#: Config operations: set a value, delete it (back to the default).
SET, DELETE = 0, 1

_ALTER_REQUEST = Schema(
    *tagged(
        (
            "resources",
            struct(
                ("resource_type", Int8),
                ("resource_name", STR),
                ("configs", struct(("name", STR), ("config_operation", Int8), ("value", STR))),
            ),
        ),
        ("validate_only", Boolean),
    )
)

_ALTER_RESPONSE = Schema(
    *tagged(
        ("throttle_time_ms", Int32),
        (
            "responses",
            struct(
                ("error_code", Int16),
                ("error_message", STR),
                ("resource_type", Int8),
                ("resource_name", STR),
            ),
        ),
    )
)


class IncrementalAlterConfigsRequest(Request[RequestStruct]):  # type: ignore[misc]
    """IncrementalAlterConfigs v1 for one resource: ``configs`` ``{name: value}`` (a value
    of None deletes the config: back to its default). Each answer:
    ``(error_code, error_message, resource_type, resource_name)``."""

    API_KEY = 44

    def __init__(
        self, resource_type: int, resource_name: str, configs: Mapping[str, str | None]
    ) -> None:
        self.resource_type = resource_type
        self.resource_name = resource_name
        self.configs = dict(configs)

    def build(self, request_struct_class: type[RequestStruct]) -> RequestStruct:
        """The struct (one version)."""
        entries: list[tuple[str, int, str | None, dict[int, bytes]]] = [
            (name, SET if value is not None else DELETE, value, {})
            for name, value in self.configs.items()
        ]
        return request_struct_class(
            [(self.resource_type, self.resource_name, entries, {})], False, {}
        )


IncrementalAlterConfigsRequest._CLASSES = (
    request_version("IncrementalAlterConfigs", 44, 1, _ALTER_REQUEST, _ALTER_RESPONSE),
)
