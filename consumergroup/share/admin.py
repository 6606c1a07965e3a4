"""ShareGroupAdmin: the share groups of a cluster, as ``kafka-share-groups.sh`` sees them.

A :class:`~consumergroup.admin.ClusterAdmin` that also speaks the share-group admin APIs::

    async with ShareGroupAdmin(["127.0.0.1:9092"]) as admin:
        groups = await admin.list_share_groups()            # {group: state}
        [desc] = await admin.describe_share_groups(["workers"])
        offsets = await admin.share_group_offsets("workers")  # start offset and lag
        await admin.alter_share_group_offsets("workers", {("jobs", 0): 0})   # group empty

* Listing: ListGroups v5 filtered on the ``share`` type, on every broker.
* Describing: ShareGroupDescribe at the group's coordinator.
* Offsets: a share group keeps no committed offset but a *start offset* per partition
  (below it every record is acknowledged) and the records in flight above it;
  DescribeShareGroupOffsets v1 also answers the lag (records not yet acknowledged).
  AlterShareGroupOffsets sets start offsets, DeleteShareGroupOffsets forgets a topic's
  state; both only while the group has no member.
* Deleting: DeleteGroups, as for any group (its share state goes with it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import field
from typing import Any

from .._dataclass import dataclass
from ..admin import ClusterAdmin, TopicPartition
from ..errors import (
    GroupIdNotFoundError,
    NonEmptyGroupError,
    error_for_code,
    raise_for_code,
)
from ..net.group_admin import ListGroupsRequest
from ..net.protocol import DeleteGroupsRequest
from ..net.share import (
    AlterShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequest,
    ShareGroupDescribeRequest,
)
from .membership import unsupported

__all__ = ["ShareGroupAdmin", "ShareGroupDescription", "ShareMember", "ShareOffset"]

_DESCRIBE_API = ShareGroupDescribeRequest.API_KEY
#: The share-group states in which it has no member (offsets may be changed from outside).
EMPTY_STATES = frozenset({"Empty", "Dead"})


@dataclass
class ShareMember:
    """One member of a share group, as its coordinator describes it."""

    member_id: str
    client_id: str
    client_host: str
    member_epoch: int
    rack_id: str | None
    subscribed_topics: list[str]
    #: topic -> sorted partitions the member fetches.
    assignment: dict[str, list[int]]


@dataclass
class ShareGroupDescription:
    """A share group: state, epochs, assignor and members."""

    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor: str
    members: list[ShareMember] = field(default_factory=list)

    @property
    def is_empty(self) -> bool:
        """Whether the group has no member (its offsets may be changed)."""
        return not self.members


@dataclass(frozen=True)
class ShareOffset:
    """Where a share group stands on one partition."""

    #: Every record below it is acknowledged (None: the group never read the partition).
    start_offset: int | None
    #: Records from the start offset to the end not yet acknowledged (None: unknown,
    #: a broker answering DescribeShareGroupOffsets v0).
    lag: int | None
    leader_epoch: int


class ShareGroupAdmin(ClusterAdmin):
    """:class:`~consumergroup.admin.ClusterAdmin` plus the share groups of the cluster."""

    async def list_share_groups(self) -> dict[str, str]:
        """Every share group: ``{group_id: state}`` (brokers without share groups list none)."""
        await self.client.refresh_metadata()
        out: dict[str, str] = {}
        for broker in self.client.brokers():
            conn = await self.client.connection(broker.node_id)
            version = conn.version(ListGroupsRequest.API_KEY)
            if version is None or version < 5 or conn.version(_DESCRIBE_API) is None:
                continue  # no share groups here
            resp = (await conn.send(ListGroupsRequest(types=["share"]))).to_object()
            raise_for_code(resp["error_code"], f"ListGroups on {broker.address}")
            for g in resp["groups"]:
                out[g["group_id"]] = g["group_state"]
        return dict(sorted(out.items()))

    async def describe_share_groups(self, groups: Iterable[str]) -> list[ShareGroupDescription]:
        """Each share group as its coordinator describes it, in the order given. Raises
        :class:`~consumergroup.errors.GroupIdNotFoundError` for a group that is not a
        share group (or does not exist)."""
        out: list[ShareGroupDescription] = []
        for group in groups:

            async def attempt(group: str = group) -> ShareGroupDescription:
                conn = await self.client.coordinator(group)
                if conn.version(_DESCRIBE_API) is None:
                    raise unsupported(group, conn.address, "ShareGroupDescribe")
                resp = (await conn.send(ShareGroupDescribeRequest([group]))).to_object()
                return _description(resp["groups"][0])

            out.append(await self._at_coordinator(group, "ShareGroupDescribe", attempt))
        return out

    async def share_group_offsets(
        self, group: str, topics: Iterable[str] | None = None
    ) -> dict[TopicPartition, ShareOffset]:
        """The start offset (and lag) of ``group`` on each partition it has state for
        (``topics``: those topics' partitions, each named)."""
        named: dict[str, list[int]] | None = None
        if topics is not None:
            named = {t: await self.partitions(t) for t in topics}

        async def attempt() -> dict[TopicPartition, ShareOffset]:
            conn = await self.client.coordinator(group)
            resp = (await conn.send(DescribeShareGroupOffsetsRequest(group, named))).to_object()
            [answer] = resp["groups"]
            raise_for_code(
                answer["error_code"],
                f"DescribeShareGroupOffsets {group!r}: {answer['error_message'] or ''}",
            )
            found: dict[TopicPartition, ShareOffset] = {}
            for topic in answer["topics"]:
                for p in topic["partitions"]:
                    raise_for_code(
                        p["error_code"],
                        f"{topic['topic_name']}/{p['partition_index']}: {p['error_message'] or ''}",
                    )
                    start = p["start_offset"]
                    lag = p.get("lag", -1)
                    found[(topic["topic_name"], p["partition_index"])] = ShareOffset(
                        start if start >= 0 else None, lag if lag >= 0 else None, p["leader_epoch"]
                    )
            return dict(sorted(found.items()))

        return await self._at_coordinator(group, "DescribeShareGroupOffsets", attempt)

    async def _check_share_empty(self, group: str, doing: str) -> None:
        [desc] = await self.describe_share_groups([group])
        if not desc.is_empty:
            raise NonEmptyGroupError(
                f"share group {group!r} has {len(desc.members)} active member(s) (state "
                f"{desc.state}): stop them before {doing}"
            )

    async def alter_share_group_offsets(
        self, group: str, offsets: Mapping[TopicPartition, int]
    ) -> None:
        """Set ``group``'s start offset on these partitions (it must have no member)."""
        await self._check_share_empty(group, "changing its offsets")

        async def attempt() -> None:
            conn = await self.client.coordinator(group)
            resp = (await conn.send(AlterShareGroupOffsetsRequest(group, offsets))).to_object()
            raise_for_code(
                resp["error_code"],
                f"AlterShareGroupOffsets {group!r}: {resp['error_message'] or ''}",
            )
            for topic in resp["responses"]:
                for p in topic["partitions"]:
                    raise_for_code(
                        p["error_code"],
                        f"{topic['topic_name']}/{p['partition_index']}: {p['error_message'] or ''}",
                    )

        await self._at_coordinator(group, "AlterShareGroupOffsets", attempt)

    async def delete_share_group_offsets(self, group: str, topics: Iterable[str]) -> None:
        """Forget ``group``'s state on ``topics`` (it must have no member): the next
        member starts them as ``share.auto.offset.reset`` says."""
        names = list(topics)
        await self._check_share_empty(group, "deleting its offsets")

        async def attempt() -> None:
            conn = await self.client.coordinator(group)
            resp = (await conn.send(DeleteShareGroupOffsetsRequest(group, names))).to_object()
            raise_for_code(
                resp["error_code"],
                f"DeleteShareGroupOffsets {group!r}: {resp['error_message'] or ''}",
            )
            for topic in resp["responses"]:
                raise_for_code(
                    topic["error_code"], f"{topic['topic_name']}: {topic['error_message'] or ''}"
                )

        await self._at_coordinator(group, "DeleteShareGroupOffsets", attempt)

    async def delete_share_groups(self, groups: Iterable[str]) -> None:
        """Delete share groups and their state (each must have no member)."""
        for group in groups:
            await self._check_share_empty(group, "deleting it")

            async def attempt(group: str = group) -> None:
                conn = await self.client.coordinator(group)
                resp = await conn.send(DeleteGroupsRequest([group]))
                for group_id, code, *_ in resp.results:
                    raise_for_code(code, f"DeleteGroups {group_id!r}")

            await self._at_coordinator(group, "DeleteGroups", attempt)


def _description(g: dict[str, Any]) -> ShareGroupDescription:
    code = g["error_code"]
    if code:
        cls = error_for_code(code)
        detail = f"ShareGroupDescribe {g['group_id']!r}: {g['error_message'] or 'no detail'}"
        if cls is GroupIdNotFoundError:
            raise GroupIdNotFoundError(f"share group {g['group_id']!r} does not exist ({detail})")
        raise cls(detail)
    return ShareGroupDescription(
        g["group_id"],
        g["group_state"],
        g["group_epoch"],
        g["assignment_epoch"],
        g["assignor_name"],
        [
            ShareMember(
                m["member_id"],
                m["client_id"],
                m["client_host"],
                m["member_epoch"],
                m["rack_id"],
                list(m["subscribed_topic_names"]),
                {
                    tp["topic_name"]: sorted(tp["partitions"])
                    for tp in m["assignment"]["topic_partitions"]
                },
            )
            for m in g["members"]
        ],
    )
