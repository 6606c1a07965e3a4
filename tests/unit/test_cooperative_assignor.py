"""The cooperative-sticky assignor (KIP-429): two-round hand-over, stickiness, Java wire format.

The property tests replay rebalances the way cooperative members live them: each member
sends what it owns, the leader plans, each member keeps what it keeps, revokes what it
lost and takes what it got; a member that revoked something makes the group rebalance
again.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Mapping, Sequence

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import consumergroup as cg
from consumergroup.balance import CooperativeStickyAssignor, MemberSubscription, StickyAssignor
from consumergroup.balance.cooperative import (
    decode_cooperative_user_data,
    encode_cooperative_user_data,
)
from consumergroup.balance.sticky import PreviousAssignment, encode_sticky_user_data
from consumergroup.group.membership import Membership
from tests.fuzz import examples

from .test_assignors import assert_valid, groups, load, minimal_moves, pairs

Owned = dict[str, set[tuple[str, int]]]
Plan = dict[str, dict[str, list[int]]]
FAST = settings(max_examples=examples(150), deadline=None)


def by_topic(owned: set[tuple[str, int]]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for topic, partition in sorted(owned):
        out.setdefault(topic, []).append(partition)
    return out


def subscriptions(
    topics: Mapping[str, Sequence[str]], owned: Owned, generation: int
) -> dict[str, MemberSubscription]:
    return {
        m: MemberSubscription(
            list(topics[m]),
            owned_partitions=by_topic(owned.get(m, set())),
            generation_id=generation if owned.get(m) is not None else -1,
            version=3,
        )
        for m in topics
    }


def one_round(
    topics: Mapping[str, Sequence[str]],
    partitions: Mapping[str, Sequence[int]],
    owned: Owned,
    generation: int,
) -> tuple[Plan, Owned, int]:
    """Plan one generation and apply it; returns (plan, what each member owns after, revoked).

    Asserts the KIP-429 safety rule on the way: nobody is given a partition that another
    member still owns when the plan is made.
    """
    plan = CooperativeStickyAssignor().plan(subscriptions(topics, owned, generation), partitions)
    after: Owned = {}
    revoked = 0
    for member in topics:
        before = owned.get(member, set())
        got = pairs(plan[member])
        others = set().union(*(owned.get(o, set()) for o in topics if o != member))
        assert not (got - before) & others, f"{member} given partitions another member owns"
        revoked += len(before - got)
        after[member] = got
    given_out = [tp for member in plan for tp in pairs(plan[member])]
    assert len(given_out) == len(set(given_out)), "a partition given to two members"
    return plan, after, revoked


def converge(
    topics: Mapping[str, Sequence[str]],
    partitions: Mapping[str, Sequence[int]],
    owned: Owned,
) -> tuple[list[Plan], int]:
    """Rebalance until a round revokes nothing; returns the plans and all partitions revoked."""
    plans: list[Plan] = []
    total_revoked = 0
    for generation in range(1, 6):
        plan, owned, revoked = one_round(topics, partitions, owned, generation)
        plans.append(plan)
        total_revoked += revoked
        if not revoked:
            return plans, total_revoked
    raise AssertionError(f"no convergence after {len(plans)} rounds")


@st.composite
def starting_states(
    draw: st.DrawFn, identical: bool = False
) -> tuple[dict[str, list[str]], dict[str, list[int]], Owned]:
    """A group whose members own disjoint subscribed partitions (some own nothing: new)."""
    members, partitions = draw(groups(identical=identical))
    topics = {m: sub.topics for m, sub in members.items()}
    owned: Owned = {m: set() for m in members}
    for topic in sorted(partitions):
        for p in partitions[topic]:
            holders = [m for m in sorted(members) if topic in topics[m]]
            owner = draw(st.sampled_from([None, *holders]))
            if owner is not None:
                owned[owner].add((topic, p))
    return topics, partitions, owned


# Found by Hypothesis: round 2's sticky plan moved partitions round 1 had let members keep
# (it rebalanced them instead of the partitions handed over), so a third round was needed.
THREE_ROUNDS_BEFORE_THE_FIX = (
    {
        "0": ["t0", "t1", "t2"],
        "000": ["t0", "t1"],
        "1": ["t0", "t1", "t2"],
        "9": ["t0"],
        "00": ["t1", "t2"],
    },
    {"t0": list(range(4)), "t1": list(range(4)), "t2": list(range(7))},
    {"0": {("t1", 3)}, "000": set(), "1": {("t0", 2), ("t0", 3)}, "9": set(), "00": set()},
)


# --- properties ----------------------------------------------------------------------------------


@FAST
@given(starting_states())
@example(THREE_ROUNDS_BEFORE_THE_FIX)
def test_converges_in_at_most_two_rounds_to_a_valid_balanced_plan(
    state: tuple[dict[str, list[str]], dict[str, list[int]], Owned],
) -> None:
    topics, partitions, owned = state
    plans, _ = converge(topics, partitions, owned)
    assert len(plans) <= 2
    final = plans[-1]
    members = {m: MemberSubscription(ts) for m, ts in topics.items()}
    assert_valid(final, members, partitions)
    # As balanced as the eager sticky assignor gets from the same start.
    eager = StickyAssignor().plan(subscriptions(topics, owned, 1), partitions)
    assert sorted(load(final, m) for m in topics) == sorted(load(eager, m) for m in topics)


@FAST
@given(starting_states(identical=True))
def test_identical_subscriptions_balance_within_one_and_move_the_minimum(
    state: tuple[dict[str, list[str]], dict[str, list[int]], Owned],
) -> None:
    topics, partitions, owned = state
    plans, revoked = converge(topics, partitions, owned)
    loads = [load(plans[-1], m) for m in topics]
    assert max(loads) - min(loads) <= 1
    shared = set(next(iter(topics.values()))) & set(partitions)
    total = sum(len(partitions[t]) for t in shared)
    assert revoked == minimal_moves([len(o) for o in owned.values()], total, len(topics))


@FAST
@given(starting_states())
@example(THREE_ROUNDS_BEFORE_THE_FIX)
def test_a_converged_group_is_stable(
    state: tuple[dict[str, list[str]], dict[str, list[int]], Owned],
) -> None:
    topics, partitions, owned = state
    plans, _ = converge(topics, partitions, owned)
    final = {m: pairs(plans[-1][m]) for m in topics}
    _, after, revoked = one_round(topics, partitions, final, 9)
    assert revoked == 0
    assert after == final


# --- the scenarios -----------------------------------------------------------------------


def test_two_to_three_members_over_twelve_partitions_moves_four() -> None:
    partitions = {"t": list(range(12))}
    topics = {"a": ["t"], "b": ["t"], "c": ["t"]}
    first = CooperativeStickyAssignor().plan(
        subscriptions({"a": ["t"], "b": ["t"]}, {}, 0), partitions
    )
    owned: Owned = {"a": pairs(first["a"]), "b": pairs(first["b"]), "c": set()}
    assert [len(owned[m]) for m in "ab"] == [6, 6]

    round1, after1, revoked1 = one_round(topics, partitions, owned, 1)
    assert revoked1 == 4
    assert round1["c"] == {}  # withheld until a and b have let go
    assert after1["a"] <= owned["a"] and after1["b"] <= owned["b"]

    _, after2, revoked2 = one_round(topics, partitions, after1, 2)
    assert revoked2 == 0
    assert after2["a"] == after1["a"] and after2["b"] == after1["b"]
    assert len(after2["c"]) == 4
    assert after2["c"] == (owned["a"] | owned["b"]) - after1["a"] - after1["b"]


def test_a_member_leaving_hands_over_in_one_round() -> None:
    partitions = {"t": list(range(9))}
    owned: Owned = {"a": {("t", p) for p in (0, 1, 2)}, "b": {("t", p) for p in (3, 4, 5)}}
    # c left: its partitions are claimed by nobody, so they go out at once.
    plans, revoked = converge({"a": ["t"], "b": ["t"]}, partitions, owned)
    assert len(plans) == 1 and revoked == 0
    assert sorted(load(plans[0], m) for m in "ab") == [4, 5]


def test_stale_claim_does_not_take_a_partition_from_its_current_owner() -> None:
    members = {
        "a": MemberSubscription(["t"], owned_partitions={"t": [0, 1]}, generation_id=3, version=3),
        "b": MemberSubscription(["t"], owned_partitions={"t": [1]}, generation_id=5, version=3),
        "c": MemberSubscription(["t"], owned_partitions={"t": [2]}, generation_id=5, version=3),
    }
    plan = CooperativeStickyAssignor().plan(members, {"t": [0, 1, 2]})
    # b's claim is the newer one, so b keeps t-1 although a still claims it; a revokes it.
    assert plan == {"a": {"t": [0]}, "b": {"t": [1]}, "c": {"t": [2]}}


def test_same_generation_conflict_goes_to_nobody_in_the_first_round() -> None:
    members = {
        "a": MemberSubscription(["t"], owned_partitions={"t": [0, 1]}, generation_id=4, version=3),
        "b": MemberSubscription(["t"], owned_partitions={"t": [1, 2]}, generation_id=4, version=3),
        "c": MemberSubscription(["t"], version=3),
    }
    plan = CooperativeStickyAssignor().plan(members, {"t": [0, 1, 2]})
    # The sticky target gives t-1 to c; both claimants still hold it, so c waits a round.
    assert plan == {"a": {"t": [0]}, "b": {"t": [2]}, "c": {}}


# --- protocol and wire format --------------------------------------------------------------------


def test_name_protocol_and_public_export() -> None:
    assignor = cg.CooperativeStickyAssignor()
    assert (assignor.name, assignor.rebalance_protocol) == ("cooperative-sticky", "cooperative")
    assert isinstance(assignor, cg.BalanceStrategy)


def test_user_data_is_javas_int32_generation() -> None:
    assignor = CooperativeStickyAssignor()
    assert assignor.subscription_user_data(["t"], {"t": [1]}, 7) == struct.pack(">i", 7)
    assert assignor.subscription_user_data(["t"], {}, -1) == struct.pack(">i", -1)
    assert decode_cooperative_user_data(encode_cooperative_user_data(123)) == 123
    with pytest.raises(ValueError, match="trailing"):
        decode_cooperative_user_data(struct.pack(">ih", 1, 2))


def test_previous_assignment_sources() -> None:
    assignor = CooperativeStickyAssignor()
    owned = {"t": [1, 2]}
    # v2+: the generation field wins over any user data.
    v3 = MemberSubscription(["t"], struct.pack(">i", 1), owned, generation_id=6, version=3)
    assert assignor.previous_assignment(v3) == PreviousAssignment(owned, 6)
    # v1 from Java: the generation comes from its user data.
    java = MemberSubscription(["t"], struct.pack(">i", 4), owned, version=1)
    assert assignor.previous_assignment(java) == PreviousAssignment(owned, 4)
    # v1 from librdkafka: sticky user data; the owned partitions still come from the protocol.
    rdkafka = MemberSubscription(["t"], encode_sticky_user_data({"t": [9]}, 5), owned, version=1)
    assert assignor.previous_assignment(rdkafka) == PreviousAssignment(owned, 5)
    garbage = MemberSubscription(["t"], b"\x00\x00\x00\x09\x00", owned, version=1)
    assert assignor.previous_assignment(garbage) == PreviousAssignment(owned, -1)
    bare = MemberSubscription(["t"], None, owned, version=1)
    assert assignor.previous_assignment(bare) == PreviousAssignment(owned, -1)


def test_java_subscription_bytes_are_read() -> None:
    # ConsumerProtocolSubscription v1 exactly as Java 2.4-3.x writes it for cooperative-sticky:
    # version, topics, user data (int32 generation), owned partitions.
    raw = (
        struct.pack(">hi", 1, 1)
        + struct.pack(">h", 6)
        + b"orders"
        + struct.pack(">ii", 4, 3)
        + struct.pack(">i", 1)
        + struct.pack(">h", 6)
        + b"orders"
        + struct.pack(">iii", 2, 0, 5)
    )
    sub = MemberSubscription.decode(raw)
    assert sub == MemberSubscription(
        ["orders"], struct.pack(">i", 3), {"orders": [0, 5]}, version=1
    )
    assert CooperativeStickyAssignor().previous_assignment(sub) == PreviousAssignment(
        {"orders": [0, 5]}, 3
    )


@pytest.mark.parametrize("count", [1, 2, 5])
def test_eager_and_cooperative_targets_agree(count: int) -> None:
    # Once nothing is withheld (nobody else claims anything), both assignors plan the same.
    partitions = {"t0": list(range(7)), "t1": list(range(4))}
    members = {f"m{i}": MemberSubscription(list(partitions), version=3) for i in range(count)}
    assert CooperativeStickyAssignor().plan(members, partitions) == StickyAssignor().plan(
        members, partitions
    )


def test_every_pair_of_members_owns_disjoint_partitions_in_every_round() -> None:
    # Exhaustive over small joins: 1..4 members grow to 2..5 over 10 partitions.
    partitions = {"t": list(range(10))}
    for before, after in itertools.product(range(1, 5), range(2, 6)):
        old = {f"m{i}": ["t"] for i in range(before)}
        start = CooperativeStickyAssignor().plan(subscriptions(old, {}, 0), partitions)
        owned: Owned = {m: pairs(start[m]) for m in old}
        plans, _ = converge({f"m{i}": ["t"] for i in range(after)}, partitions, owned)
        assert len(plans) <= 2


@pytest.mark.parametrize(
    ("strategies", "cooperative"),
    [
        ([CooperativeStickyAssignor()], True),
        ([CooperativeStickyAssignor(), cg.RangeAssignor()], False),  # mid-upgrade: still eager
        ([cg.RangeAssignor(), CooperativeStickyAssignor()], False),
        ([StickyAssignor()], False),
    ],
)
def test_a_member_is_cooperative_only_if_every_strategy_is(
    strategies: list[cg.BalanceStrategy], cooperative: bool
) -> None:
    config = cg.Config()
    config.consumer.group.rebalance.strategies = strategies
    membership = Membership(cg.Client(["127.0.0.1:9"], config), "g", config)
    assert membership.cooperative is cooperative
