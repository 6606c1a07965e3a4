"""The partition assignor interface run by the group leader (sarama's BalanceStrategy)."""

from __future__ import annotations

import abc
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import ClassVar, Literal

from consumergroup.balance.protocol import MemberSubscription

Plan = dict[str, dict[str, list[int]]]
"""member id -> topic -> sorted partition ids."""

Racks = Mapping[tuple[str, int], frozenset[str]]
"""(topic, partition) -> the racks of its replicas (KIP-881; ``broker.rack`` of each)."""


class BalanceStrategy(abc.ABC):
    """A partition assignor (sarama BalanceStrategy). The group leader runs plan()."""

    name: ClassVar[str]
    """Protocol name on the wire, e.g. "range"; all members must support the chosen one."""

    rebalance_protocol: ClassVar[Literal["eager", "cooperative"]] = "eager"
    """KIP-429 rebalance protocol: eager members revoke everything before rejoining."""

    def subscription_user_data(
        self, topics: list[str], owned: dict[str, list[int]], generation_id: int
    ) -> bytes | None:
        """User data this member puts in its JoinGroup metadata (none by default)."""
        return None

    @abc.abstractmethod
    def plan(
        self, members: Mapping[str, MemberSubscription], partitions: Mapping[str, Sequence[int]]
    ) -> Plan:
        """Compute member_id -> topic -> sorted partitions.

        `partitions` holds every subscribed topic's partition ids (topics absent from metadata
        are absent here). Every member appears in the result (possibly with an empty dict).
        Deterministic for the same input.
        """

    def plan_with_racks(
        self,
        members: Mapping[str, MemberSubscription],
        partitions: Mapping[str, Sequence[int]],
        racks: Racks,
    ) -> Plan:
        """:meth:`plan`, knowing the racks of each partition's replicas (KIP-881).

        The group leader calls this one; members name their own rack in their
        subscription (``MemberSubscription.rack_id``, from ``config.client_rack``). A
        rack-aware strategy overrides it; the default ignores the racks.
        """
        return self.plan(members, partitions)

    def assignment_user_data(
        self, member_id: str, plan: dict[str, list[int]], generation_id: int
    ) -> bytes | None:
        """User data the leader sends `member_id` with its share of the plan (none by default)."""
        return None


class RackAwareStrategy(BalanceStrategy):
    """A strategy that plans with racks (KIP-881): :meth:`plan` is its plan with none known."""

    def plan(
        self, members: Mapping[str, MemberSubscription], partitions: Mapping[str, Sequence[int]]
    ) -> Plan:
        """:meth:`plan_with_racks` with no rack known."""
        return self.plan_with_racks(members, partitions, {})

    @abc.abstractmethod
    def plan_with_racks(
        self,
        members: Mapping[str, MemberSubscription],
        partitions: Mapping[str, Sequence[int]],
        racks: Racks,
    ) -> Plan:
        """The plan, knowing the racks of each partition's replicas."""


def build_plan(members: Iterable[str], assigned: Mapping[str, Iterable[tuple[str, int]]]) -> Plan:
    """Shape per-member (topic, partition) pairs into a Plan with sorted topics and partitions.

    Every id in `members` gets an entry, so members left without partitions still appear.
    """
    plan: Plan = {}
    for member in sorted(members):
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(assigned.get(member, ())):
            by_topic.setdefault(topic, []).append(partition)
        plan[member] = by_topic
    return plan


def member_racks(members: Mapping[str, MemberSubscription]) -> dict[str, str]:
    """member id -> its rack, for the members that name one (empty means none, as in Java)."""
    return {member: sub.rack_id for member, sub in members.items() if sub.rack_id}


def use_rack_aware(
    member_racks: Iterable[str], partition_racks: Collection[frozenset[str]]
) -> bool:
    """Whether rack-aware assignment can help (Java's ``useRackAwareAssignment``, KIP-881).

    ``partition_racks``: the racks of each partition's replicas. Only when some member's
    rack holds replicas and some partition lacks a replica in some rack: with every
    partition on every rack, any member reads each one in its own rack (KIP-392) anyway.
    """
    every = frozenset().union(*partition_racks)
    members = frozenset(member_racks)
    if not members or members.isdisjoint(every):
        return False
    return any(racks != every for racks in partition_racks)
