"""The "range" assignor, identical in output to Java's RangeAssignor."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from consumergroup.balance.protocol import MemberSubscription
from consumergroup.balance.strategy import BalanceStrategy, Plan, build_plan


class RangeAssignor(BalanceStrategy):
    """Assigns each topic independently in contiguous ranges.

    For every topic, its subscribers are sorted by member id and its partitions by id; each
    subscriber gets ``n // m`` consecutive partitions and the first ``n % m`` get one more. With
    members C0, C1 and topics t0, t1 of three partitions each: C0 gets t0p0, t0p1, t1p0, t1p1 and
    C1 gets t0p2, t1p2.

    Java also orders static members by group.instance.id first; plan() only sees member ids, so
    groups mixing static Java members with ours may order differently.
    """

    name = "range"

    def plan(
        self, members: Mapping[str, MemberSubscription], partitions: Mapping[str, Sequence[int]]
    ) -> Plan:
        """Divide each topic's partitions among its subscribers in member-id order."""
        subscribers: dict[str, list[str]] = {}
        for member in sorted(members):
            for topic in dict.fromkeys(members[member].topics):
                if topic in partitions:
                    subscribers.setdefault(topic, []).append(member)

        assigned: dict[str, list[tuple[str, int]]] = {}
        for topic, consumers in subscribers.items():
            ids = sorted(partitions[topic])
            share, extra = divmod(len(ids), len(consumers))
            for index, member in enumerate(consumers):
                start = index * share + min(index, extra)
                end = start + share + (1 if index < extra else 0)
                assigned.setdefault(member, []).extend((topic, p) for p in ids[start:end])
        return build_plan(members, assigned)
