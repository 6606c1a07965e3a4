"""The "range" assignor, identical in output to Java's RangeAssignor, racks included."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from consumergroup.balance.protocol import MemberSubscription
from consumergroup.balance.strategy import (
    Plan,
    RackAwareStrategy,
    Racks,
    build_plan,
    member_racks,
    use_rack_aware,
)


class RangeAssignor(RackAwareStrategy):
    """Assigns each topic independently in contiguous ranges.

    For every topic, its subscribers are sorted by member id and its partitions by id; each
    subscriber gets ``n // m`` consecutive partitions and the first ``n % m`` get one more. With
    members C0, C1 and topics t0, t1 of three partitions each: C0 gets t0p0, t0p1, t1p0, t1p1 and
    C1 gets t0p2, t1p2.

    Rack-aware (KIP-881, as Java's) when members name their racks and some partitions have
    replicas in only some racks: each member first takes, within its per-topic share, the
    partitions with a replica in its rack, then the ranges fill what is left. Topics with
    the same subscribers and partition count stay co-partitioned (partition i of each goes
    to one member), ahead of rack alignment. Shares never change: balance comes first.

    Java also orders static members by group.instance.id first; plan() only sees member ids, so
    groups mixing static Java members with ours may order differently.
    """

    name = "range"

    def plan_with_racks(
        self,
        members: Mapping[str, MemberSubscription],
        partitions: Mapping[str, Sequence[int]],
        racks: Racks,
    ) -> Plan:
        """Divide each topic's partitions among its subscribers in member-id order, aligned on
        racks where the shares allow (Java's ``assignPartitions``)."""
        subscribers: dict[str, list[str]] = {}
        for member in sorted(members):
            for topic in dict.fromkeys(members[member].topics):
                if topic in partitions:
                    subscribers.setdefault(topic, []).append(member)
        rack_of = member_racks(members)
        states = [
            _TopicState(topic, sorted(partitions[topic]), consumers, rack_of, racks)
            for topic, consumers in subscribers.items()
            if partitions[topic]
        ]
        assigned: dict[str, list[tuple[str, int]]] = {}
        if any(state.rack_aware for state in states):
            _assign_with_rack_matching(states, assigned)
        for state in states:
            state.assign_ranges(assigned)
        return build_plan(members, assigned)


class _TopicState:
    """One topic's subscribers (in order, with their racks), shares and unassigned partitions."""

    def __init__(
        self,
        topic: str,
        ids: list[int],
        consumers: list[str],
        rack_of: Mapping[str, str],
        racks: Racks,
    ) -> None:
        self.topic = topic
        self.ids = ids
        #: subscriber -> its rack (None: none named); in member-id order
        self.consumers = {member: rack_of.get(member) for member in consumers}
        self.unassigned = dict.fromkeys(ids)  # an ordered set
        self.count = dict.fromkeys(consumers, 0)
        self.share, self.extra = divmod(len(ids), len(consumers))
        named = {rack for rack in self.consumers.values() if rack is not None}
        #: partition -> its replicas' racks, kept only when some subscriber names a rack
        self.partition_racks = {p: racks.get((topic, p), frozenset()) for p in ids} if named else {}
        self.rack_aware = use_rack_aware(named, self.partition_racks.values())

    def racks_match(self, consumer: str, partition: int) -> bool:
        """Whether ``consumer`` may take ``partition`` in the rack pass (no rack: any)."""
        rack = self.consumers[consumer]
        return rack is None or rack in self.partition_racks.get(partition, ())

    def max_assignable(self, consumer: str) -> int:
        """How many more partitions of this topic ``consumer`` may take within its share."""
        return max(0, self.share + (1 if self.extra > 0 else 0) - self.count[consumer])

    def assign(
        self, consumer: str, taken: list[int], assigned: dict[str, list[tuple[str, int]]]
    ) -> None:
        assigned.setdefault(consumer, []).extend((self.topic, p) for p in taken)
        self.count[consumer] += len(taken)
        if self.count[consumer] > self.share:
            self.extra -= 1
        for p in taken:
            del self.unassigned[p]

    def assign_ranges(
        self,
        assigned: dict[str, list[tuple[str, int]]],
        may_assign: Callable[[str, int], bool] = lambda consumer, partition: True,
    ) -> None:
        """Each subscriber in turn takes the first unassigned partitions it may, up to its share."""
        for consumer in self.consumers:
            if not self.unassigned:
                return
            limit = self.max_assignable(consumer)
            taken = [p for p in self.unassigned if may_assign(consumer, p)][:limit]
            if taken:
                self.assign(consumer, taken, assigned)


def _assign_with_rack_matching(
    states: list[_TopicState], assigned: dict[str, list[tuple[str, int]]]
) -> None:
    """The rack pass: co-partitioned topics together, the others one by one."""
    groups: dict[tuple[tuple[tuple[str, str | None], ...], int], list[_TopicState]] = {}
    for state in states:
        key = (tuple(state.consumers.items()), len(state.partition_racks))
        groups.setdefault(key, []).append(state)
    for (consumers, count), group in groups.items():
        if len(group) > 1:
            _assign_co_partitioned([member for member, _ in consumers], count, group, assigned)
        elif group[0].rack_aware:
            group[0].assign_ranges(assigned, group[0].racks_match)


def _assign_co_partitioned(
    consumers: list[str],
    count: int,
    group: list[_TopicState],
    assigned: dict[str, list[tuple[str, int]]],
) -> None:
    """Partition i of every topic of ``group`` to the first member whose rack matches all of
    them and that has room in each (Java's ``assignCoPartitionedWithRackMatching``)."""
    remaining = list(consumers)
    for i in range(count):
        match = next(
            (
                c
                for c in remaining
                if all(s.racks_match(c, s.ids[i]) and s.max_assignable(c) > 0 for s in group)
            ),
            None,
        )
        if match is None:
            continue
        for state in group:
            state.assign(match, [state.ids[i]], assigned)
        if all(state.max_assignable(match) <= 0 for state in group):
            remaining.remove(match)
            if not remaining:
                return
