"""The "roundrobin" assignor, identical in output to Java's RoundRobinAssignor."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from consumergroup.balance.protocol import MemberSubscription
from consumergroup.balance.strategy import BalanceStrategy, Plan, build_plan


class RoundRobinAssignor(BalanceStrategy):
    """Deals all partitions to the members in turn.

    Every subscribed topic-partition, sorted by (topic, partition), goes to the next member in
    member-id order, skipping members that do not subscribe to its topic; the turn carries over
    across topics. Identical subscriptions give counts within one of each other; differing ones
    may be unbalanced.
    """

    name = "roundrobin"

    def plan(
        self, members: Mapping[str, MemberSubscription], partitions: Mapping[str, Sequence[int]]
    ) -> Plan:
        """Deal the sorted topic-partitions to sorted members, skipping non-subscribers."""
        order = sorted(members)
        subscribed = {member: frozenset(members[member].topics) for member in order}
        topics = sorted({t for topics in subscribed.values() for t in topics if t in partitions})

        assigned: dict[str, list[tuple[str, int]]] = {}
        turn = 0
        for topic in topics:
            for partition in sorted(partitions[topic]):
                # Terminates: `topic` came from some member's subscription.
                while topic not in subscribed[order[turn]]:
                    turn = (turn + 1) % len(order)
                assigned.setdefault(order[turn], []).append((topic, partition))
                turn = (turn + 1) % len(order)
        return build_plan(members, assigned)
