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

Racks (KIP-881), when members name theirs and some partitions have replicas in only some
racks (Java's rule, :func:`~.strategy.use_rack_aware`): a member is *out of the rack* of a
partition when it names a rack that holds no replica of it. As in Java, balance comes first,
then rack alignment, then stickiness:

* step 2 takes the partitions with the fewest subscribers in their racks first and gives each
  to its least-loaded subscriber in one of its racks while that one is below the even share,
  ``ceil(partitions / members)`` (Java's quota), else to the least-loaded subscriber;
* step 3's moves prefer, among the giver's free partitions of the topic, one the move takes out
  of the wrong rack;
* step 4 (:meth:`_Balancer.align`) moves or swaps partitions, owned ones too, while that takes
  one more partition out of the wrong rack without unbalancing anything. An owned partition in
  the wrong rack therefore moves when some balanced plan has it elsewhere (Java drops it from
  its owner's claim whether or not anyone can take it), and a plan the previous round left
  with no such move stands as it is;
* that search can stop short of where it gets from the rack-blind plan, so the planner also
  runs without racks up to step 3 and keeps whichever outcome has fewer partitions out of
  their rack: never more than the rack-blind plan.

``_sticky_plan`` is kept separate from :class:`StickyAssignor` so a cooperative variant can
reuse it and only change how previous ownership is read and how the plan is staged.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Iterable, Mapping, Sequence

from consumergroup._dataclass import dataclass
from consumergroup.balance.protocol import MemberSubscription, WireReader, WireWriter
from consumergroup.balance.strategy import (
    Plan,
    RackAwareStrategy,
    Racks,
    build_plan,
    member_racks,
    use_rack_aware,
)

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


class _RackInfo:
    """Members' racks and partitions' replica racks, when rack-aware assignment can help."""

    def __init__(
        self, racks_of: Mapping[str, str], partitions: Iterable[_TopicPartition], racks: Racks
    ) -> None:
        replicas = {tp: racks.get(tp, frozenset()) for tp in partitions}
        on = use_rack_aware(racks_of.values(), replicas.values())
        #: member -> its rack; empty when rack-aware assignment is off
        self.racks_of: Mapping[str, str] = racks_of if on else {}
        self._replicas = replicas if on else {}

    def matches(self, member: str, tp: _TopicPartition) -> bool:
        """``member`` names a rack that holds a replica of ``tp``."""
        rack = self.racks_of.get(member)
        return rack is not None and rack in self._replicas.get(tp, ())

    def mismatches(self, member: str, tp: _TopicPartition) -> bool:
        """``member`` names a rack that holds no replica of ``tp`` (Java's ``racksMismatch``)."""
        return member in self.racks_of and not self.matches(member, tp)


_NO_RACKS = _RackInfo({}, (), {})


class _Balancer:
    """Mutable assignment state for steps 2 and 3 of the sticky plan."""

    def __init__(
        self, members: list[str], subscribers: dict[str, list[str]], racks: _RackInfo = _NO_RACKS
    ) -> None:
        self._members = members  # sorted
        self._subscribers = subscribers  # topic -> sorted subscriber ids
        self._racks = racks
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

    def assign_unowned(self, unowned: Iterable[_TopicPartition], total: int) -> None:
        """Step 2: each partition to its least-loaded subscriber (lowest id on ties); with
        racks, to its least-loaded subscriber in one of its racks while that one is below the
        even share of ``total`` partitions, else to the least-loaded subscriber (one it is not
        out of the rack of, on a tie)."""
        racks = self._racks
        if not racks.racks_of:
            by_constraint = sorted(unowned, key=lambda tp: (len(self._subscribers[tp[0]]), tp))
            for topic, partition in by_constraint:
                self._add(
                    min(self._subscribers[topic], key=self._load.__getitem__), topic, partition
                )
            return
        share = -(-total // len(self._members))
        aligned = {
            tp: [m for m in self._subscribers[tp[0]] if racks.matches(m, tp)] for tp in unowned
        }
        for tp in sorted(
            aligned, key=lambda tp: (len(self._subscribers[tp[0]]), len(aligned[tp]), tp)
        ):
            under = [m for m in aligned[tp] if self._load[m] < share]
            if under:
                member = min(under, key=self._load.__getitem__)
            else:
                member = min(
                    self._subscribers[tp[0]],
                    key=lambda m: (self._load[m], racks.mismatches(m, tp)),
                )
            self._add(member, *tp)

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
        # Prefer a partition the giver did not own before the rebalance (moving it is free),
        # then one the move takes out of the wrong rack, then one it puts in none.
        off = self._racks.mismatches
        partition = min(
            held,
            key=lambda p: (p in kept, off(taker, (topic, p)) - off(giver, (topic, p)), p),
        )
        self._transfer(giver, topic, partition, taker)

    def align(self, racks: _RackInfo) -> None:
        """Step 4, with racks: move a partition out of its member's rack to a subscriber it
        is not out of the rack of (in one of its racks, or naming none), alone when the
        taker holds one partition fewer, else by a swap with one of the taker's partitions.
        Loads stay as balanced, and each change takes one more partition out of the wrong
        rack, so it ends: in a plan where no such change is left (the previous round's, when
        nothing else changed), nothing moves. From here on the balancer uses ``racks``."""
        self._racks = racks
        if not racks.racks_of:
            return
        subscribed: dict[str, set[str]] = {m: set() for m in self._members}
        for topic, members in self._subscribers.items():
            for m in members:
                subscribed[m].add(topic)
        changed = True
        while changed:
            changed = False
            for member in self._members:
                if member not in racks.racks_of:
                    continue  # no rack: every partition is as good as another
                for topic in sorted(self._held[member]):
                    for p in sorted(self._held[member].get(topic, ())):
                        if racks.mismatches(member, (topic, p)):
                            changed |= self._realign(member, topic, p, subscribed)

    def _realign(
        self, giver: str, topic: str, partition: int, subscribed: Mapping[str, set[str]]
    ) -> bool:
        """One improving move or swap for ``partition`` (see :meth:`align`); False if none."""
        off = self._racks.mismatches
        tp = (topic, partition)
        for taker in self._subscribers[topic]:
            if taker == giver or off(taker, tp):
                continue
            if self._load[giver] == self._load[taker] + 1:
                self._transfer(giver, topic, partition, taker)
                return True
            # The best partition to swap back: most out of the wrong racks, then free.
            best: tuple[int, bool, str, int] | None = None
            for other, held in self._held[taker].items():
                if other not in subscribed[giver]:
                    continue
                kept = self._kept[taker].get(other, ())
                for q in sorted(held):
                    gain = 1 + off(taker, (other, q)) - off(giver, (other, q))
                    key = (gain, q not in kept, other, q)
                    if gain > 0 and (best is None or key[:2] > best[:2]):
                        best = key
            if best is not None:
                self._transfer(giver, topic, partition, taker)
                self._transfer(taker, best[2], best[3], giver)
                return True
        return False

    def _transfer(self, giver: str, topic: str, partition: int, taker: str) -> None:
        self._kept[giver].get(topic, set()).discard(partition)
        held = self._held[giver][topic]
        held.remove(partition)
        if not held:
            del self._held[giver][topic]
        self._load[giver] -= 1
        self._add(taker, topic, partition)

    def misplaced(self) -> int:
        """How many partitions are out of their member's rack."""
        off = self._racks.mismatches
        return sum(
            off(member, (topic, p))
            for member, held in self._held.items()
            for topic, ids in held.items()
            for p in ids
        )

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
    racks_of: Mapping[str, str] | None = None,
    racks: Racks | None = None,
) -> Plan:
    """A balanced plan keeping as much of each member's previous assignment as possible.

    `subscriptions` maps every member to its topics, `previous` maps (some) members to what they
    report owning, `racks_of` members to their racks and `racks` partitions to their replicas'
    racks (KIP-881). See the module docstring for the algorithm.
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
    everything = [(t, p) for t in sorted(subscribers) for p in sorted(set(partitions[t]))]
    rack_info = _RackInfo(racks_of or {}, everything, racks or {}) if racks_of else _NO_RACKS

    def run(by_rack: bool) -> _Balancer:
        balancer = _Balancer(members, subscribers, rack_info if by_rack else _NO_RACKS)
        unowned: list[_TopicPartition] = []
        for tp in everything:
            owner = owners.get(tp)
            if owner is None:
                unowned.append(tp)
            else:
                balancer.keep(owner, *tp)
        balancer.assign_unowned(unowned, len(everything))
        balancer.balance()
        balancer.align(rack_info)
        return balancer

    best = run(by_rack=True)
    if rack_info.racks_of:
        # Step 4's search can stop short of where it gets from the rack-blind plan: both
        # starts are tried, the one with fewer partitions out of their rack wins (both are
        # as balanced, and a plan no move improves comes out of either unchanged the next
        # time, so the choice stands).
        blind = run(by_rack=False)
        if blind.misplaced() < best.misplaced():
            best = blind
    return build_plan(members, best.assignment())


class StickyAssignor(RackAwareStrategy):
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

    def plan_with_racks(
        self,
        members: Mapping[str, MemberSubscription],
        partitions: Mapping[str, Sequence[int]],
        racks: Racks,
    ) -> Plan:
        """Balanced, sticky plan, rack-aware when racks can help; see the module docstring."""
        return _sticky_plan(
            {member: sub.topics for member, sub in members.items()},
            partitions,
            {member: self.previous_assignment(sub) for member, sub in members.items()},
            member_racks(members),
            racks,
        )
