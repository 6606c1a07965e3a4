"""The "cooperative-sticky" assignor (KIP-429): the sticky plan, handed over in two rounds.

A partition may only change owner once its old owner has stopped consuming it. So the
leader computes the sticky target plan and then *withholds* every partition that some
other member still reports owning: its new owner does not get it in this generation.
Each member that finds partitions missing from its assignment revokes just those and
rejoins; in that second rebalance nobody claims them any more, so the sticky plan gives
them out (to the members the first round meant, since everything else stays put). Members
keep the partitions they keep throughout: nothing is revoked "just in case".

Withholding goes by every claim, not only the claims the sticky planner trusts (the
highest generation's): a member with a stale claim is still consuming the partition until
it learns otherwise, and handing the partition to a third member meanwhile would let two
members own it in one generation.

Wire compatibility: previous ownership is the subscription's owned partitions (v1+), with
the generation from the v2+ field, else from Java's CooperativeStickyAssignor user data (a
single int32), else from the sticky user data librdkafka publishes for both of its sticky
assignors. This member publishes Java's user data, which Java reads and which librdkafka
ignores for a subscription that carries the generation itself.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from consumergroup.balance.protocol import MemberSubscription, WireReader, WireWriter
from consumergroup.balance.sticky import (
    PreviousAssignment,
    StickyAssignor,
    _sticky_plan,
    decode_sticky_user_data,
)
from consumergroup.balance.strategy import Plan, Racks, member_racks

_log = logging.getLogger(__name__)

_JAVA_USER_DATA_SIZE = 4  # CooperativeStickyAssignor user data v0: int32 generation


def encode_cooperative_user_data(generation: int) -> bytes:
    """Java's CooperativeStickyAssignor user data: the member's generation as an int32."""
    out = WireWriter()
    out.int32(generation)
    return out.getvalue()


def decode_cooperative_user_data(data: bytes) -> int:
    """The generation in Java's CooperativeStickyAssignor user data; ValueError if malformed."""
    reader = WireReader(data, "CooperativeStickyAssignor user data")
    generation = reader.int32("generation")
    if reader.remaining:
        raise reader.error(f"{reader.remaining} unexpected trailing bytes")
    return generation


class CooperativeStickyAssignor(StickyAssignor):
    """KIP-429 cooperative-sticky assignor, compatible with Java's and librdkafka's.

    Plans are the sticky assignor's (balanced, minimal movement) except that a partition
    moving between members reaches its new owner only in the following rebalance, after the
    old owner revoked it. See the module docstring.
    """

    name = "cooperative-sticky"
    rebalance_protocol = "cooperative"

    def subscription_user_data(
        self, topics: list[str], owned: dict[str, list[int]], generation_id: int
    ) -> bytes | None:
        """Java's user data: this member's generation (-1 before its first assignment)."""
        return encode_cooperative_user_data(generation_id)

    def previous_assignment(self, subscription: MemberSubscription) -> PreviousAssignment:
        """The subscription's owned partitions, at the generation the member reports."""
        owned = subscription.owned_partitions
        if subscription.generation_id >= 0 or not subscription.user_data:
            return PreviousAssignment(owned, subscription.generation_id)
        data = subscription.user_data
        try:
            if len(data) == _JAVA_USER_DATA_SIZE:
                return PreviousAssignment(owned, decode_cooperative_user_data(data))
            return PreviousAssignment(owned, decode_sticky_user_data(data).generation)
        except ValueError as exc:
            # Like Java: an unreadable generation is an unknown one; the claims still count.
            _log.warning("ignoring unparseable cooperative-sticky user data: %s", exc)
            return PreviousAssignment(owned)

    def plan_with_racks(
        self,
        members: Mapping[str, MemberSubscription],
        partitions: Mapping[str, Sequence[int]],
        racks: Racks,
    ) -> Plan:
        """The sticky plan (rack-aware when racks can help) minus the partitions another
        member still reports owning."""
        previous = {member: self.previous_assignment(sub) for member, sub in members.items()}
        target = _sticky_plan(
            {member: sub.topics for member, sub in members.items()},
            partitions,
            previous,
            member_racks(members),
            racks,
        )
        return withhold_claimed(target, previous)


def withhold_claimed(target: Plan, previous: Mapping[str, PreviousAssignment]) -> Plan:
    """``target`` without the partitions whose new owner does not claim them but another does.

    A new owner that already claims a partition keeps it even if a stale member claims it too:
    that one sees the partition missing from its assignment and revokes it.
    """
    claimants: dict[tuple[str, int], set[str]] = {}
    for member, claim in previous.items():
        for topic, ids in claim.partitions.items():
            for partition in ids:
                claimants.setdefault((topic, partition), set()).add(member)
    plan: Plan = {}
    for member, assignment in target.items():
        share: dict[str, list[int]] = {}
        for topic, ids in assignment.items():
            kept = [p for p in ids if member in claimants.get((topic, p), {member})]
            if kept:
                share[topic] = kept
        plan[member] = share
    return plan
