"""The partition assignor interface run by the group leader (sarama's BalanceStrategy)."""

from __future__ import annotations

import abc
from collections.abc import Iterable, Mapping, Sequence
from typing import ClassVar, Literal

from consumergroup.balance.protocol import MemberSubscription

Plan = dict[str, dict[str, list[int]]]
"""member id -> topic -> sorted partition ids."""


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

    def assignment_user_data(
        self, member_id: str, plan: dict[str, list[int]], generation_id: int
    ) -> bytes | None:
        """User data the leader sends `member_id` with its share of the plan (none by default)."""
        return None


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
