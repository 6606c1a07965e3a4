"""ClusterAdmin: groups, offsets and topics of a cluster (sarama's ``ClusterAdmin``).

Built on this package's own :class:`~consumergroup.client.Client` and wire codecs
(``net/protocol.py``), like everything else here. What ``kafka-consumer-groups.sh``
and ``kafka-topics.sh`` do, as coroutines::

    async with ClusterAdmin(["127.0.0.1:9092"]) as admin:
        groups = await admin.list_groups()                  # {group: protocol type}
        [desc] = await admin.describe_groups(["my-group"])  # state, members, assignments
                                                            # (either group protocol)
        committed = await admin.list_consumer_group_offsets("my-group")
        ends = await admin.end_offsets(committed)           # Fetch high watermarks

End offsets come from the Fetch high watermark, not ListOffsets(LATEST): some
Kafka-compatible brokers (Tansu) answer the latter with the last batch's base
offset + 1 instead of the log end.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import field
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import unquote

from ._dataclass import dataclass
from ._lifecycle import AsyncResource
from .balance.protocol import MemberAssignment, MemberSubscription
from .client import Client, PartitionMetadata
from .config import OFFSET_NEWEST, OFFSET_OLDEST, Config
from .consumer.positions import resolve_offsets
from .errors import (
    ConsumerGroupError,
    GroupIdNotFoundError,
    NonEmptyGroupError,
    error_for_code,
    raise_for_code,
)
from .group.offsets import OffsetManager
from .net.group_admin import GROUP_RESOURCE
from .net.protocol import (
    ConsumerGroupDescribeRequest,
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    IncrementalAlterConfigsRequest,
    ListGroupsRequest,
    OffsetFetchRequest,
    offset_fetch_topics,
)
from .retry import COORDINATOR_LOST, retrying

if TYPE_CHECKING:
    from .net.connection import BrokerConnection

__all__ = ["ClusterAdmin", "GroupDescription", "GroupMember", "TopicInfo"]

TopicPartition = tuple[str, int]
_T = TypeVar("_T")

#: Group states in which the group has no member (offsets may be changed from outside).
EMPTY_STATES = frozenset({"Empty", "Dead"})


@dataclass(frozen=True, slots=True)
class GroupMember:
    """One member of a group as DescribeGroups reports it.

    ``assignment`` is the member's share decoded with the consumer protocol
    (``{topic: [partitions]}``); empty for members of other protocol types or
    while the group is rebalancing.
    """

    member_id: str
    client_id: str
    client_host: str
    assignment: dict[str, list[int]] = field(default_factory=dict)
    #: Consumer protocol (KIP-848) groups only: the member's epoch, the assignment the
    #: coordinator is moving it to, its static instance id, and whether it speaks the
    #: consumer protocol or is a classic member of a migrating group.
    member_epoch: int | None = None
    target_assignment: dict[str, list[int]] | None = None
    instance_id: str | None = None
    member_protocol: str | None = None
    #: The rack the member named (``client.rack``; KIP-881), None when it named none.
    rack_id: str | None = None


@dataclass(frozen=True, slots=True)
class GroupDescription:
    """A group's state, protocol and members (DescribeGroups, or ConsumerGroupDescribe
    for a consumer-protocol group: then ``group_protocol`` is ``"consumer"``,
    ``protocol`` the broker's assignor and ``group_epoch``/``assignment_epoch`` set)."""

    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: list[GroupMember]
    group_protocol: str = "classic"
    group_epoch: int | None = None
    assignment_epoch: int | None = None

    @property
    def is_empty(self) -> bool:
        """True when the group has no member (its offsets may be reset or deleted)."""
        return not self.members and self.state in EMPTY_STATES | {""}


@dataclass(frozen=True, slots=True)
class TopicInfo:
    """A topic as metadata shows it."""

    name: str
    partitions: int
    internal: bool


def _decode_consumer(protocol_type: str, data: bytes, decode: Callable[[bytes], _T]) -> _T | None:
    """``decode(data)`` for a member of the "consumer" protocol type; None for other
    types, no bytes, or bytes of another layout (a client writing something else under
    the "consumer" label)."""
    if protocol_type != "consumer" or not data:
        return None
    try:
        return decode(data)
    except ValueError:
        return None


def _decode_assignment(protocol_type: str, data: bytes) -> dict[str, list[int]]:
    assignment = _decode_consumer(protocol_type, data, MemberAssignment.decode)
    return {t: sorted(p) for t, p in assignment.topics.items()} if assignment else {}


def _subscription_rack(protocol_type: str, data: bytes) -> str | None:
    """The rack in a classic member's subscription (ConsumerProtocol v3+), if any."""
    subscription = _decode_consumer(protocol_type, data, MemberSubscription.decode)
    return subscription.rack_id or None if subscription else None


class ClusterAdmin(AsyncResource):
    """Administration of groups, offsets and topics (``async with ClusterAdmin(addrs):``).

    Every method refreshes what it needs from the cluster; nothing is cached but
    the client's metadata and coordinators. Errors are the package's
    :class:`~consumergroup.errors.ConsumerGroupError` subclasses.
    """

    def __init__(self, addrs: str | Sequence[str], config: Config | None = None) -> None:
        self.config = config or Config()
        self.client = Client(addrs, self.config)

    async def start(self) -> None:
        """Connect and read the cluster's metadata."""
        await self.client.start()

    async def close(self) -> None:
        """Close every connection (idempotent)."""
        await self.client.close()

    # ------------------------------------------------------------------ groups

    async def list_groups(self) -> dict[str, str]:
        """Every group of the cluster: ``{group_id: protocol_type}`` (ListGroups on each broker)."""
        await self.client.refresh_metadata()
        out: dict[str, str] = {}
        for broker in self.client.brokers():
            conn = await self.client.connection(broker.node_id)
            resp = await conn.send(ListGroupsRequest())
            raise_for_code(resp.error_code, f"ListGroups on {broker.address}")
            for group, protocol_type, *_ in resp.groups:
                out[group] = protocol_type
        return dict(sorted(out.items()))

    async def describe_groups(self, groups: Iterable[str]) -> list[GroupDescription]:
        """Each group as its coordinator describes it, in the order given.

        ConsumerGroupDescribe first where the broker offers it (Kafka 4.x): a group on
        the consumer protocol (KIP-848) is described by it, with epochs and target
        assignments; any other answer (a classic group, no such group) falls back to
        DescribeGroups. A group the cluster does not know comes back in state ``Dead``
        with no member (Kafka's answer), not as an error.
        """
        out: list[GroupDescription] = []
        for group in groups:

            async def attempt(group: str = group) -> GroupDescription:
                conn = await self.client.coordinator(group)
                if conn.version(ConsumerGroupDescribeRequest.API_KEY) is not None:
                    described = await self._consumer_group(conn, group)
                    if described is not None:
                        return described
                resp = await conn.send(DescribeGroupsRequest([group]))
                code, group_id, state, protocol_type, protocol, members = resp.groups[0][:6]
                raise_for_code(code, f"DescribeGroups {group!r}")
                return GroupDescription(
                    group_id,
                    state,
                    protocol_type,
                    protocol,
                    [
                        GroupMember(
                            member_id,
                            client_id,
                            host,
                            _decode_assignment(protocol_type, assigned),
                            rack_id=_subscription_rack(protocol_type, metadata),
                        )
                        for member_id, client_id, host, metadata, assigned in members
                    ],
                )

            out.append(await self._at_coordinator(group, "DescribeGroups", attempt))
        return out

    async def _consumer_group(self, conn: BrokerConnection, group: str) -> GroupDescription | None:
        """ConsumerGroupDescribe: ``group`` if it is a consumer-protocol group, else None."""
        resp = (await conn.send(ConsumerGroupDescribeRequest([group]))).to_object()
        g = resp["groups"][0]
        if g["error_code"]:
            if error_for_code(g["error_code"]).retriable:
                raise_for_code(g["error_code"], f"ConsumerGroupDescribe {group!r}")
            return None  # a classic group (or none): DescribeGroups tells
        if g["group_epoch"] < 0:
            # Not a consumer group either: Tansu answers every group this way (no error,
            # no member, epochs -1) where Kafka says GROUP_ID_NOT_FOUND.
            return None

        def named(assignment: dict[str, Any]) -> dict[str, list[int]]:
            return {
                tp["topic_name"]: sorted(tp["partitions"]) for tp in assignment["topic_partitions"]
            }

        kinds = {0: "classic", 1: "consumer"}
        return GroupDescription(
            g["group_id"],
            g["group_state"],
            "consumer",
            g["assignor_name"],
            [
                GroupMember(
                    m["member_id"],
                    m["client_id"],
                    m["client_host"],
                    named(m["assignment"]),
                    member_epoch=m["member_epoch"],
                    target_assignment=named(m["target_assignment"]),
                    instance_id=m["instance_id"],
                    member_protocol=kinds.get(m.get("member_type", -1)),
                    rack_id=m["rack_id"],
                )
                for m in g["members"]
            ],
            group_protocol="consumer",
            group_epoch=g["group_epoch"],
            assignment_epoch=g["assignment_epoch"],
        )

    async def delete_groups(self, groups: Iterable[str]) -> None:
        """DeleteGroups: remove groups and their committed offsets.

        Raises :class:`~consumergroup.errors.NonEmptyGroupError` for a group that
        still has members (checked here too: not every broker refuses),
        :class:`~consumergroup.errors.GroupIdNotFoundError` for one the cluster
        does not know.
        """
        for group in groups:
            await self._check_empty(group, "deleting it")
            if not await self.group_exists(group):  # Tansu deletes nothing without a word
                raise GroupIdNotFoundError(f"group {group!r} does not exist")

            async def attempt(group: str = group) -> None:
                conn = await self.client.coordinator(group)
                resp = await conn.send(DeleteGroupsRequest([group]))
                for group_id, code in resp.results:
                    raise_for_code(code, f"DeleteGroups {group_id!r}")

            await self._at_coordinator(group, "DeleteGroups", attempt)

    async def group_exists(self, group: str, desc: GroupDescription | None = None) -> bool:
        """Whether the cluster knows ``group``: it has members, or is listed by ListGroups
        (a group with committed offsets and no member is).

        DescribeGroups alone cannot tell: Kafka answers an unknown group as ``Dead``, but
        Tansu as ``Empty``, like a group whose members left. ``desc``: the group's
        description if the caller has it. Tansu lists names percent-encoded
        (``h%C3%A9llo``): those match the decoded name too.
        """
        if desc is None:
            [desc] = await self.describe_groups([group])
        if desc.members or desc.state not in EMPTY_STATES | {""}:
            return True
        listed = await self.list_groups()
        return group in listed or group in {unquote(name) for name in listed}

    async def _check_empty(self, group: str, doing: str) -> None:
        """Raise NonEmptyGroupError while ``group`` has members."""
        [desc] = await self.describe_groups([group])
        if not desc.is_empty:
            raise NonEmptyGroupError(
                f"group {group!r} has {len(desc.members)} active member(s) (state "
                f"{desc.state}): stop them before {doing}"
            )

    async def alter_group_configs(self, group: str, configs: Mapping[str, str | None]) -> None:
        """Set (or, with None, delete) configs of ``group`` (IncrementalAlterConfigs on the
        group resource, Kafka 3.8+/4.x): ``consumer.session.timeout.ms``,
        ``share.auto.offset.reset``, ``share.record.lock.duration.ms``, ... The broker
        checks each against its bounds; an error names the config."""
        conn = await self.client.any()
        resp = await conn.send(IncrementalAlterConfigsRequest(GROUP_RESOURCE, group, configs))
        for code, message, *_ in resp.responses:
            raise_for_code(code, f"altering configs of group {group!r}: {message or ''}")

    # ----------------------------------------------------------------- offsets

    async def list_consumer_group_offsets(
        self, group: str, partitions: Collection[TopicPartition] | None = None
    ) -> dict[TopicPartition, int]:
        """OffsetFetch: the committed offset of each partition (every partition of every
        topic by default); partitions without a committed offset are left out.

        The default asks for every partition by name rather than sending the
        protocol's "all topics" (null) form, which Tansu answers malformed.
        """
        if partitions is None:
            partitions = [
                (topic, p)
                for topic in await self.client.topics()
                for p in self.client.cached_partitions(topic) or []
            ]
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(partition)
        topics = list(by_topic.items())
        if not topics:
            return {}

        async def attempt() -> dict[TopicPartition, int]:
            conn = await self.client.coordinator(group)
            resp = await conn.send(OffsetFetchRequest(group, topics))
            top, fetched = offset_fetch_topics(resp)
            raise_for_code(top, f"OffsetFetch for group {group!r}")
            out: dict[TopicPartition, int] = {}
            for topic, parts in fetched:
                for partition, offset, _metadata, code, _epoch in parts:
                    raise_for_code(code, f"OffsetFetch {topic}/{partition}")
                    if offset >= 0:
                        out[(topic, partition)] = offset
            return dict(sorted(out.items()))

        return await self._at_coordinator(group, "OffsetFetch", attempt)

    async def commit_offsets(self, group: str, offsets: Mapping[TopicPartition, int]) -> None:
        """OffsetCommit for a group with no member (generation -1, no member id).

        ``offsets`` are the next offsets to consume. Raises
        :class:`~consumergroup.errors.NonEmptyGroupError` while the group has
        members: their commits would overwrite these (and the broker refuses).
        """
        await self._check_empty(group, "changing its offsets")
        # The group's own commit path (OffsetManager), as a member with no generation.
        manager = OffsetManager(self.client, group, self.config)
        manager.assign(dict.fromkeys(offsets, (-1, "")), dict(offsets))
        await manager.commit()

    async def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The log end (high watermark) of each partition, from a Fetch probe."""
        return await resolve_offsets(
            self.client, self.config, dict.fromkeys(partitions, OFFSET_NEWEST)
        )

    async def earliest_offsets(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, int]:
        """The first retained offset of each partition (ListOffsets EARLIEST)."""
        return await resolve_offsets(
            self.client, self.config, dict.fromkeys(partitions, OFFSET_OLDEST)
        )

    async def offsets_for_time(
        self, partitions: Iterable[TopicPartition], when: datetime
    ) -> dict[TopicPartition, int]:
        """The first offset whose timestamp is at or after ``when``; where no record is that
        recent, the partition's end offset (as Kafka's ``--to-datetime`` does).

        ``when`` must be timezone-aware. :meth:`Client.offsets_for_times
        <consumergroup.client.Client.offsets_for_times>` tells "no such record" apart (None).
        """
        if when.tzinfo is None:
            raise ValueError("offsets_for_time needs a timezone-aware datetime")
        ms = int(when.timestamp() * 1000)
        committed = self.config.consumer.isolation_level == "read_committed"
        found = await self.client.offsets_for_times(
            dict.fromkeys(partitions, ms), read_committed=committed
        )
        none = [tp for tp, off in found.items() if off is None]
        ends = await self.end_offsets(none) if none else {}
        return {tp: ends[tp] if off is None else off for tp, off in found.items()}

    # ------------------------------------------------------------------ topics

    async def list_topics(self) -> list[TopicInfo]:
        """Every topic with its partition count (fresh metadata)."""
        names = await self.client.topics()
        return [
            TopicInfo(name, len(self.client.cached_partitions(name) or []), name.startswith("__"))
            for name in names
        ]

    async def describe_topic(self, topic: str) -> list[PartitionMetadata]:
        """Each partition's leader, replicas and in-sync replicas (fresh metadata; raises
        UnknownTopicOrPartitionError if the topic does not exist)."""
        await self.client.partitions(topic, refresh=True)
        return self.client.partition_metadata(topic)

    async def delete_topic(self, topic: str) -> None:
        """DeleteTopics (raises UnknownTopicOrPartitionError if it does not exist)."""
        await self.client.delete_topic(topic)

    async def partitions(self, topic: str) -> list[int]:
        """Partition ids of ``topic`` (raises UnknownTopicOrPartitionError if it does not exist)."""
        return await self.client.partitions(topic, refresh=True)

    async def create_topic(self, name: str, partitions: int, replication_factor: int = 1) -> None:
        """CreateTopics, then wait until every partition has a leader.

        Raises :class:`~consumergroup.errors.TopicAlreadyExistsError` if it exists.
        """
        await self.client.create_topic(name, partitions, replication_factor)

    # ----------------------------------------------------------------- helpers

    async def _at_coordinator(
        self, group: str, what: str, attempt: Callable[[], Awaitable[_T]]
    ) -> _T:
        """Run ``attempt``, finding the coordinator again when it moved (``offsets.retry``)."""

        def lost_coordinator(exc: ConsumerGroupError) -> None:
            if isinstance(exc, COORDINATOR_LOST):
                self.client.invalidate_coordinator(group)

        return await retrying(
            f"{what} for group {group!r}",
            attempt,
            self.config.consumer.offsets.retry,
            lost_coordinator,
        )
