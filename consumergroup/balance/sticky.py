"""The "sticky" assignor (KIP-54): balanced plans that move as few partitions as possible.

The planner works in three steps:

1. Resolve what each member still owns: its reported partitions that exist and that it still
   subscribes to. A partition claimed by several members goes to the claim with the highest
   generation; a tie at that generation means the reports are inconsistent, so nobody keeps it
   (both rules are Java's).
2. Give each unowned partition to its least-loaded subscriber, most constrained partitions first.
3. Rebalance by moving partitions along shortest chains ``a -> b -> ... -> z``, where each member
   hands a partition of a topic the next one subscribes to, from a most-loaded member to a member
   with at least two fewer partitions. Once no such chain exists the sum of squared loads is
   minimal (the standard optimality condition for convex-cost flows), i.e. the plan is as
   balanced as the subscriptions allow. Chains end at the least-loaded member reachable and each
   hop prefers partitions its giver did not own before, which with identical subscriptions makes
   the number of moved partitions the minimum that balance requires. Each search is a BFS over
   members and topics, run at most once per move plus once per member.

   Like Java's, this runs twice: first with chains that only move *free* partitions (ones their
   holder did not own before), then with any. Moving a free partition revokes nothing, and when
   some optimal plan keeps every owned partition in place, the first pass alone reaches an
   optimal plan (its optimum over the free partitions is that plan's cost), so the second finds
   no chain and nothing is revoked. This is what makes the cooperative second round settle: the
   first round's target keeps everything its members still own, so the second round gives out
   the handed-over partitions without disturbing anything else.

``_sticky_plan`` is kept separate from :class:`StickyAssignor` so a cooperative variant can
reuse it and only change how previous ownership is read and how the plan is staged.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from consumergroup.balance.protocol import MemberSubscription, WireReader, WireWriter
from consumergroup.balance.strategy import BalanceStrategy, Plan, build_plan

_log = logging.getLogger(__name__)

_TopicPartition = tuple[str, int]
_Hop = tuple[str, str, str]  # (giver, topic, taker)


@dataclass(frozen=True, slots=True)
class PreviousAssignment:
    """The partitions a member reports owning, and the generation it got them in (-1: unknown)."""

    partitions: Mapping[str, Sequence[int]]
    generation: int = -1


def encode_sticky_user_data(owned: Mapping[str, Sequence[int]], generation: int) -> bytes:
    """Java's StickyAssignorUserData v1: array(topic string, array int32), int32 generation."""
    out = WireWriter()
    out.topic_partitions({topic: sorted(owned[topic]) for topic in sorted(owned)})
    out.int32(generation)
    return out.getvalue()


def decode_sticky_user_data(data: bytes) -> PreviousAssignment:
    """Parse StickyAssignorUserData v1, or v0 (no generation); raises ValueError if malformed.

    The data carries no version, so like Java this reads v1 when a whole int32 follows the
    partitions and v0 otherwise.
    """
    reader = WireReader(data, "StickyAssignorUserData")
    partitions = reader.topic_partitions("previous_assignment")
    generation = reader.int32("generation") if reader.remaining >= 4 else -1
    return PreviousAssignment(partitions, generation)


def _resolve_owners(
    subscribed: Mapping[str, frozenset[str]],
    partitions: Mapping[str, Sequence[int]],
    previous: Mapping[str, PreviousAssignment],
) -> dict[_TopicPartition, str]:
    """Map each validly claimed partition to the member that keeps it (step 1)."""
    existing = {topic: frozenset(partitions[topic]) for topic in partitions}
    # partition -> (highest generation seen, its claimant, or None if that generation is contested)
    best: dict[_TopicPartition, tuple[int, str | None]] = {}
    for member in sorted(previous):
        if member not in subscribed:
            continue
        claim = previous[member]
        for topic, ids in claim.partitions.items():
            if topic not in subscribed[member]:
                continue
            for partition in existing[topic].intersection(ids):
                key = (topic, partition)
                current = best.get(key)
                if current is None or claim.generation > current[0]:
                    best[key] = (claim.generation, member)
                elif claim.generation == current[0]:
                    best[key] = (claim.generation, None)
    return {key: owner for key, (_, owner) in best.items() if owner is not None}


class _Balancer:
    """Mutable assignment state for steps 2 and 3 of the sticky plan."""

    def __init__(self, members: list[str], subscribers: dict[str, list[str]]) -> None:
        self._members = members  # sorted
        self._subscribers = subscribers  # topic -> sorted subscriber ids
        # member -> topic -> partitions; topics whose set empties are deleted, so the keys are
        # exactly the topics a member can hand over.
        self._held: dict[str, dict[str, set[int]]] = {m: {} for m in members}
        self._load = dict.fromkeys(members, 0)
        # member -> topic -> the held partitions the member owned before this rebalance
        self._kept: dict[str, dict[str, set[int]]] = {m: {} for m in members}

    def keep(self, member: str, topic: str, partition: int) -> None:
        """Leave a previously owned partition with its owner."""
        self._add(member, topic, partition)
        self._kept[member].setdefault(topic, set()).add(partition)

    def _add(self, member: str, topic: str, partition: int) -> None:
        self._held[member].setdefault(topic, set()).add(partition)
        self._load[member] += 1

    def assign_unowned(self, unowned: Iterable[_TopicPartition]) -> None:
        """Step 2: each partition to its least-loaded subscriber (lowest id on ties)."""
        by_constraint = sorted(unowned, key=lambda tp: (len(self._subscribers[tp[0]]), tp))
        for topic, partition in by_constraint:
            self._add(min(self._subscribers[topic], key=self._load.__getitem__), topic, partition)

    def balance(self) -> None:
        """Step 3: apply improving chains, first moving only free partitions, until none is left."""
        self._balance(free_only=True)
        self._balance(free_only=False)

    def _balance(self, free_only: bool) -> None:
        # Members whose whole reachable set has loads >= top - 1 for the current top can never
        # again be part of an improving chain (later chains start lower), so they are skipped.
        settled: set[str] = set()
        while True:
            active = [m for m in self._members if m not in settled]
            if not active:
                return
            top = max(self._load[m] for m in active)
            floor = min(self._load[m] for m in active)
            if top - floor < 2:
                return
            sources = [m for m in active if self._load[m] == top]
            chain, reached = self._find_chain(sources, top - 2, floor, settled, free_only)
            if chain is None:
                settled.update(reached)
            else:
                for giver, topic, taker in chain:
                    self._move(giver, topic, taker)

    def _find_chain(
        self,
        sources: list[str],
        limit: int,
        floor: int,
        settled: set[str],
        free_only: bool,
    ) -> tuple[list[_Hop] | None, Iterable[str]]:
        """Breadth-first search from `sources` for the least-loaded member with load <= limit.

        With `free_only` a member only hands over a topic it holds a free partition of.
        Returns the chain of hops (or None) and every member the search reached.
        """
        parent: dict[str, tuple[str, str] | None] = dict.fromkeys(sources)
        queue = deque(sources)
        topics_seen: set[str] = set()
        sink: str | None = None
        while queue:
            giver = queue.popleft()
            for topic, held in self._held[giver].items():
                if topic in topics_seen:
                    continue
                if free_only and len(held) == len(self._kept[giver].get(topic, ())):
                    continue
                topics_seen.add(topic)
                for taker in self._subscribers[topic]:
                    if taker in parent or taker in settled:
                        continue
                    parent[taker] = (giver, topic)
                    load = self._load[taker]
                    if load <= limit and (sink is None or load < self._load[sink]):
                        sink = taker
                        if load == floor:  # nobody can be lower: stop searching
                            return _trace(parent, sink), parent.keys()
                    queue.append(taker)
        return (None if sink is None else _trace(parent, sink)), parent.keys()

    def _move(self, giver: str, topic: str, taker: str) -> None:
        held = self._held[giver][topic]
        kept = self._kept[giver].get(topic, set())
        # Prefer a partition the giver did not own before the rebalance: moving it is free.
        partition = min(held, key=lambda p: (p in kept, p))
        held.remove(partition)
        if not held:
            del self._held[giver][topic]
        self._load[giver] -= 1
        kept.discard(partition)
        self._add(taker, topic, partition)

    def assignment(self) -> dict[str, list[_TopicPartition]]:
        """The current member -> (topic, partition) pairs."""
        return {
            member: [(topic, p) for topic, ids in held.items() for p in ids]
            for member, held in self._held.items()
        }


def _trace(parent: Mapping[str, tuple[str, str] | None], sink: str) -> list[_Hop]:
    """The hops from a search source to `sink`, source first."""
    hops: list[_Hop] = []
    node = sink
    while (step := parent[node]) is not None:
        giver, topic = step
        hops.append((giver, topic, node))
        node = giver
    hops.reverse()
    return hops


def _sticky_plan(
    subscriptions: Mapping[str, Iterable[str]],
    partitions: Mapping[str, Sequence[int]],
    previous: Mapping[str, PreviousAssignment],
) -> Plan:
    """A balanced plan keeping as much of each member's previous assignment as possible.

    `subscriptions` maps every member to its topics, `previous` maps (some) members to what they
    report owning. See the module docstring for the algorithm.
    """
    members = sorted(subscriptions)
    subscribed = {
        member: frozenset(t for t in subscriptions[member] if t in partitions) for member in members
    }
    subscribers: dict[str, list[str]] = {}
    for member in members:
        for topic in sorted(subscribed[member]):
            subscribers.setdefault(topic, []).append(member)

    owners = _resolve_owners(subscribed, partitions, previous)
    balancer = _Balancer(members, subscribers)
    unowned: list[_TopicPartition] = []
    for topic in sorted(subscribers):
        for partition in sorted(set(partitions[topic])):
            owner = owners.get((topic, partition))
            if owner is None:
                unowned.append((topic, partition))
            else:
                balancer.keep(owner, topic, partition)
    balancer.assign_unowned(unowned)
    balancer.balance()
    return build_plan(members, balancer.assignment())


class StickyAssignor(BalanceStrategy):
    """KIP-54 sticky assignor, wire-compatible with Java's StickyAssignor.

    Plans are as balanced as the subscriptions allow (loads within one of each other when all
    subscriptions are identical) and keep as many previously owned partitions in place as that
    balance permits. Previous ownership comes from Java-format StickyAssignorUserData, which
    this member also publishes, or else from the subscription's owned partitions and generation.
    """

    name = "sticky"

    def subscription_user_data(
        self, topics: list[str], owned: dict[str, list[int]], generation_id: int
    ) -> bytes | None:
        """StickyAssignorUserData v1 for the current assignment; None before the first one."""
        if generation_id < 0 and not owned:
            return None
        return encode_sticky_user_data(owned, generation_id)

    def previous_assignment(self, subscription: MemberSubscription) -> PreviousAssignment:
        """What `subscription`'s member reports owning, by Java's precedence.

        Eager members revoke everything before they rejoin, so their subscription's owned
        partitions are empty and the history lives in the user data: like Java's
        StickyAssignor this reads the user data first, and only without it the v1+ owned
        partitions (with the v2+ generation, -1 if absent).
        """
        if subscription.user_data:
            try:
                return decode_sticky_user_data(subscription.user_data)
            except ValueError as exc:
                # Like Java: a member whose history is unreadable simply starts fresh.
                _log.warning("ignoring unparseable sticky assignor user data: %s", exc)
                return PreviousAssignment({})
        return PreviousAssignment(subscription.owned_partitions, subscription.generation_id)

    def plan(
        self, members: Mapping[str, MemberSubscription], partitions: Mapping[str, Sequence[int]]
    ) -> Plan:
        """Balanced, sticky plan; see the module docstring."""
        return _sticky_plan(
            {member: sub.topics for member, sub in members.items()},
            partitions,
            {member: self.previous_assignment(sub) for member, sub in members.items()},
        )
