"""Range, round-robin and sticky assignors: exact plans, Java/aiokafka parity and properties."""

from __future__ import annotations

import itertools
import random
import struct
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from aiokafka.coordinator.assignors.range import RangePartitionAssignor
from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from aiokafka.coordinator.assignors.sticky.sticky_assignor import (
    StickyAssignorUserDataV1,
    StickyPartitionAssignor,
)
from aiokafka.coordinator.protocol import ConsumerProtocolMemberMetadata
from aiokafka.structs import TopicPartition
from hypothesis import given, settings
from hypothesis import strategies as st

from consumergroup.balance import (
    BalanceStrategy,
    MemberSubscription,
    RangeAssignor,
    RoundRobinAssignor,
    StickyAssignor,
)
from consumergroup.balance.sticky import (
    PreviousAssignment,
    decode_sticky_user_data,
    encode_sticky_user_data,
)
from tests.fuzz import examples

Members = dict[str, MemberSubscription]
Partitions = dict[str, list[int]]
Plan = dict[str, dict[str, list[int]]]

ASSIGNORS: list[BalanceStrategy] = [RangeAssignor(), RoundRobinAssignor(), StickyAssignor()]
FAST = settings(max_examples=examples(100), deadline=None)


def subs(**topics: list[str]) -> Members:
    return {member: MemberSubscription(list(ts)) for member, ts in topics.items()}


def load(plan: Plan, member: str) -> int:
    return sum(len(ids) for ids in plan[member].values())


def pairs(assignment: Mapping[str, Sequence[int]]) -> set[tuple[str, int]]:
    return {(topic, p) for topic, ids in assignment.items() for p in ids}


def assert_valid(plan: Plan, members: Members, partitions: Mapping[str, Sequence[int]]) -> None:
    """Every subscribed partition goes to exactly one of its subscribers; nothing else is given."""
    assert set(plan) == set(members)
    given_out: list[tuple[str, int]] = []
    for member, assignment in plan.items():
        assert list(assignment) == sorted(assignment)
        for topic, ids in assignment.items():
            assert topic in members[member].topics
            assert ids and ids == sorted(ids)
            given_out.extend((topic, p) for p in ids)
    wanted = {t for sub in members.values() for t in sub.topics if t in partitions}
    assert sorted(given_out) == sorted((t, p) for t in wanted for p in set(partitions[t]))


# --- hypothesis strategies -----------------------------------------------------------------------

member_ids = st.lists(
    st.text(alphabet="abcXYZ-019", min_size=1, max_size=5), min_size=1, max_size=6, unique=True
)


@st.composite
def groups(
    draw: st.DrawFn, identical: bool = False, max_partitions: int = 8
) -> tuple[Members, Partitions]:
    """(members, partitions); subscriptions may name a topic missing from the metadata."""
    topics = [f"t{i}" for i in range(draw(st.integers(1, 3)))]
    partitions = {
        t: draw(st.lists(st.integers(0, 40), unique=True, max_size=max_partitions)) for t in topics
    }
    choice = st.lists(st.sampled_from([*topics, "missing"]), unique=True)
    shared = draw(choice)
    members = {
        m: MemberSubscription(shared if identical else draw(choice)) for m in draw(member_ids)
    }
    return members, partitions


# --- range ---------------------------------------------------------------------------------------


def test_range_matches_java_example() -> None:
    plan = RangeAssignor().plan(
        subs(C0=["t0", "t1"], C1=["t0", "t1"]), {"t0": [0, 1, 2], "t1": [0, 1, 2]}
    )
    assert plan == {"C0": {"t0": [0, 1], "t1": [0, 1]}, "C1": {"t0": [2], "t1": [2]}}


def test_range_is_per_topic_and_skips_unknown_topics() -> None:
    members = subs(a=["t0"], b=["t0", "t1", "gone"], c=["t1"], d=[])
    plan = RangeAssignor().plan(members, {"t0": [4, 0, 1, 2, 3], "t1": [0]})
    assert plan == {"a": {"t0": [0, 1, 2]}, "b": {"t0": [3, 4], "t1": [0]}, "c": {}, "d": {}}


class _Cluster:
    """Just enough of aiokafka's ClusterMetadata for its assignors."""

    def __init__(self, partitions: Partitions) -> None:
        self._partitions = partitions

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        ids = self._partitions.get(topic)
        return None if ids is None else set(ids)


def aiokafka_plan(assignor: Any, members: Members, partitions: Partitions) -> Plan:
    metadata = {m: ConsumerProtocolMemberMetadata(0, s.topics, b"") for m, s in members.items()}
    result = assignor.assign(_Cluster(partitions), metadata)
    return {
        member: {topic: sorted(ids) for topic, ids in assignment.assignment if ids}
        for member, assignment in result.items()
    }


@FAST
@given(groups())
def test_range_equals_aiokafka_range(group: tuple[Members, Partitions]) -> None:
    members, partitions = group
    assert RangeAssignor().plan(members, partitions) == aiokafka_plan(
        RangePartitionAssignor, members, partitions
    )


@FAST
@given(groups(identical=True))
def test_range_balances_each_topic(group: tuple[Members, Partitions]) -> None:
    members, partitions = group
    plan = RangeAssignor().plan(members, partitions)
    for topic in set(next(iter(members.values())).topics) & set(partitions):
        counts = [len(plan[m].get(topic, [])) for m in members]
        assert max(counts) - min(counts) <= 1


# --- round robin ---------------------------------------------------------------------------------


def test_roundrobin_matches_java_examples() -> None:
    same = subs(C0=["t0", "t1"], C1=["t0", "t1"])
    assert RoundRobinAssignor().plan(same, {"t0": [0, 1, 2], "t1": [0, 1, 2]}) == {
        "C0": {"t0": [0, 2], "t1": [1]},
        "C1": {"t0": [1], "t1": [0, 2]},
    }
    nested = subs(C0=["t0"], C1=["t0", "t1"], C2=["t0", "t1", "t2"])
    assert RoundRobinAssignor().plan(nested, {"t0": [0], "t1": [0, 1], "t2": [0, 1, 2]}) == {
        "C0": {"t0": [0]},
        "C1": {"t1": [0]},
        "C2": {"t1": [1], "t2": [0, 1, 2]},
    }


@FAST
@given(groups())
def test_roundrobin_equals_aiokafka_roundrobin(group: tuple[Members, Partitions]) -> None:
    members, partitions = group
    assert RoundRobinAssignor().plan(members, partitions) == aiokafka_plan(
        RoundRobinPartitionAssignor, members, partitions
    )


# --- properties shared by all assignors ----------------------------------------------------------


@pytest.mark.parametrize("assignor", ASSIGNORS, ids=lambda a: a.name)
@FAST
@given(group=groups())
def test_plans_are_valid(assignor: BalanceStrategy, group: tuple[Members, Partitions]) -> None:
    members, partitions = group
    assert_valid(assignor.plan(members, partitions), members, partitions)


@pytest.mark.parametrize("assignor", [RoundRobinAssignor(), StickyAssignor()], ids=lambda a: a.name)
@FAST
@given(group=groups(identical=True))
def test_identical_subscriptions_balance_within_one(
    assignor: BalanceStrategy, group: tuple[Members, Partitions]
) -> None:
    members, partitions = group
    plan = assignor.plan(members, partitions)
    loads = [load(plan, m) for m in members]
    assert max(loads) - min(loads) <= 1


@pytest.mark.parametrize("assignor", ASSIGNORS, ids=lambda a: a.name)
@FAST
@given(group=groups(), shuffle=st.randoms(use_true_random=False))
def test_plans_do_not_depend_on_input_order(
    assignor: BalanceStrategy, group: tuple[Members, Partitions], shuffle: random.Random
) -> None:
    members, partitions = group
    reordered: Members = {}
    for member in shuffle.sample(list(members), len(members)):
        topics = members[member].topics
        reordered[member] = MemberSubscription(shuffle.sample(topics, len(topics)))
    shuffled_partitions = {t: shuffle.sample(ids, len(ids)) for t, ids in partitions.items()}
    assert assignor.plan(reordered, shuffled_partitions) == assignor.plan(members, partitions)


def test_strategy_names_and_protocols() -> None:
    assert [(a.name, a.rebalance_protocol) for a in ASSIGNORS] == [
        ("range", "eager"),
        ("roundrobin", "eager"),
        ("sticky", "eager"),
    ]
    assert RangeAssignor().subscription_user_data(["t"], {}, -1) is None
    assert RangeAssignor().assignment_user_data("m", {"t": [0]}, 3) is None


# --- sticky: balance ----------------------------------------------------------------------------


def best_sum_of_squares(members: Members, partitions: Partitions) -> int:
    """Brute force: the lowest sum of squared loads any valid plan reaches."""
    items = [t for t in sorted(partitions) for _ in partitions[t]]
    choices = [[m for m in members if t in members[m].topics] for t in items]
    choices = [c for c in choices if c]
    return min(sum(n * n for n in Counter(combo).values()) for combo in itertools.product(*choices))


@st.composite
def owned_groups(
    draw: st.DrawFn, identical: bool = False, max_partitions: int = 8
) -> tuple[Members, Partitions]:
    """A group whose members report owning random, disjoint subscribed partitions (generation 1)."""
    members, partitions = draw(groups(identical=identical, max_partitions=max_partitions))
    ids = sorted(members)
    owned: dict[str, dict[str, list[int]]] = {m: {} for m in ids}
    for topic in sorted(partitions):
        for p in partitions[topic]:
            owner = draw(st.sampled_from([None, *(m for m in ids if topic in members[m].topics)]))
            if owner is not None:
                owned[owner].setdefault(topic, []).append(p)
    rejoined = {
        m: MemberSubscription(
            members[m].topics, owned_partitions=owned[m], generation_id=1, version=2
        )
        for m in ids
    }
    return rejoined, partitions


@FAST
@given(owned_groups(max_partitions=3))
def test_sticky_is_as_balanced_as_subscriptions_allow(group: tuple[Members, Partitions]) -> None:
    members, partitions = group
    # Keep the brute force small: at most 4 members.
    members = dict(itertools.islice(members.items(), 4))
    plan = StickyAssignor().plan(members, partitions)
    assert_valid(plan, members, partitions)
    assert sum(load(plan, m) ** 2 for m in members) == best_sum_of_squares(members, partitions)


@FAST
@given(owned_groups())
def test_sticky_leaves_no_single_improving_move(group: tuple[Members, Partitions]) -> None:
    members, partitions = group
    plan = StickyAssignor().plan(members, partitions)
    assert_valid(plan, members, partitions)
    for giver, taker in itertools.permutations(members, 2):
        if load(plan, giver) - load(plan, taker) >= 2:
            assert not set(plan[giver]) & set(members[taker].topics)


def test_sticky_unequal_subscriptions_use_chains_of_moves() -> None:
    # a and b own everything; c only takes t1, which only b holds; balancing needs a -> b -> c.
    members = {
        "a": MemberSubscription(
            ["t0", "t1"], owned_partitions={"t0": [0, 1, 2, 3]}, generation_id=1, version=2
        ),
        "b": MemberSubscription(
            ["t0", "t1"], owned_partitions={"t1": [0, 1]}, generation_id=1, version=2
        ),
        "c": MemberSubscription(["t1"]),
    }
    plan = StickyAssignor().plan(members, {"t0": [0, 1, 2, 3], "t1": [0, 1]})
    assert [load(plan, m) for m in "abc"] == [2, 2, 2]
    assert plan["c"] == {"t1": [0, 1]}


# --- sticky: stickiness --------------------------------------------------------------------------

THREE_TOPICS = {"t0": list(range(7)), "t1": list(range(5)), "t2": list(range(11))}


def owning(plan: Plan, generation: int) -> Members:
    """Every member of `plan` rejoining THREE_TOPICS with what it owns, as a v2 subscription."""
    return {
        member: MemberSubscription(
            list(THREE_TOPICS), owned_partitions=owned, generation_id=generation, version=2
        )
        for member, owned in plan.items()
    }


def minimal_moves(owned_counts: Sequence[int], total: int, members: int) -> int:
    """Fewest previously owned partitions that must change owner to balance `total` partitions."""
    share, extra = divmod(total, members)
    targets = [share + 1] * extra + [share] * (members - extra)
    return sum(
        max(0, o - t) for o, t in zip(sorted(owned_counts, reverse=True), targets, strict=False)
    )


def moved(before: Members, plan: Plan) -> int:
    return sum(len(pairs(sub.owned_partitions) - pairs(plan[m])) for m, sub in before.items())


@FAST
@given(st.integers(2, 12), st.data())
def test_sticky_member_leaving_moves_only_its_partitions(count: int, data: st.DataObject) -> None:
    ids = [f"m{i:02}" for i in range(count)]
    first = StickyAssignor().plan(subs(**{m: list(THREE_TOPICS) for m in ids}), THREE_TOPICS)
    leaver = data.draw(st.sampled_from(ids))
    rejoined = {m: sub for m, sub in owning(first, 1).items() if m != leaver}
    plan = StickyAssignor().plan(rejoined, THREE_TOPICS)
    assert_valid(plan, rejoined, THREE_TOPICS)
    for member in rejoined:
        assert pairs(first[member]) <= pairs(plan[member])
    loads = [load(plan, m) for m in rejoined]
    assert max(loads) - min(loads) <= 1


@FAST
@given(st.integers(1, 30))
def test_sticky_member_joining_moves_the_minimum(count: int) -> None:
    ids = [f"m{i:02}" for i in range(count)]
    first = StickyAssignor().plan(subs(**{m: list(THREE_TOPICS) for m in ids}), THREE_TOPICS)
    rejoined = owning(first, 1)
    rejoined["new"] = MemberSubscription(list(THREE_TOPICS))
    plan = StickyAssignor().plan(rejoined, THREE_TOPICS)
    assert_valid(plan, rejoined, THREE_TOPICS)
    loads = [load(plan, m) for m in rejoined]
    assert max(loads) - min(loads) <= 1
    total = sum(map(len, THREE_TOPICS.values()))
    assert moved(rejoined, plan) == minimal_moves([load(first, m) for m in ids], total, count + 1)


@FAST
@given(owned_groups(identical=True))
def test_sticky_moves_the_minimum_from_any_previous_state(
    group: tuple[Members, Partitions],
) -> None:
    members, partitions = group
    plan = StickyAssignor().plan(members, partitions)
    topics = set(next(iter(members.values())).topics) & set(partitions)
    owned = [len(pairs(sub.owned_partitions)) for sub in members.values()]
    total = sum(len(partitions[t]) for t in topics)
    assert moved(members, plan) == minimal_moves(owned, total, len(members))


def test_sticky_keeps_partitions_that_stay_subscribed_and_exist() -> None:
    members = {
        "a": MemberSubscription(
            ["t0"], owned_partitions={"t0": [0, 9], "t1": [0]}, generation_id=2, version=2
        ),
        "b": MemberSubscription(["t0", "t1"]),
    }
    plan = StickyAssignor().plan(members, {"t0": [0, 1], "t1": [0]})
    # t0-9 no longer exists and a dropped t1, so only t0-0 stays; t1-0 can only go to b, which
    # then ties with a for t0-1 (lower id wins).
    assert plan == {"a": {"t0": [0, 1]}, "b": {"t1": [0]}}


def test_sticky_conflicting_claims_go_to_the_higher_generation() -> None:
    members = {
        "a": MemberSubscription(["t"], owned_partitions={"t": [0, 1]}, generation_id=3, version=2),
        "b": MemberSubscription(["t"], owned_partitions={"t": [1, 2]}, generation_id=5, version=2),
    }
    plan = StickyAssignor().plan(members, {"t": [0, 1, 2, 3]})
    assert plan == {"a": {"t": [0, 3]}, "b": {"t": [1, 2]}}


def test_sticky_same_generation_conflict_is_kept_by_nobody() -> None:
    # Both claim t-1 in generation 4: neither report is trusted for it, so the least-loaded
    # member gets it (c), not whichever claimant happens to sort first.
    members = {
        "a": MemberSubscription(["t"], owned_partitions={"t": [0, 1]}, generation_id=4, version=2),
        "b": MemberSubscription(["t"], owned_partitions={"t": [1, 2]}, generation_id=4, version=2),
        "c": MemberSubscription(["t"]),
    }
    plan = StickyAssignor().plan(members, {"t": [0, 1, 2]})
    assert plan == {"a": {"t": [0]}, "b": {"t": [2]}, "c": {"t": [1]}}


def test_sticky_is_fast_enough_for_1000_partitions_and_100_members() -> None:
    partitions = {f"topic-{i}": list(range(100)) for i in range(10)}
    ids = [f"member-{i:03}" for i in range(100)]
    everything = MemberSubscription(
        list(partitions), owned_partitions=partitions, generation_id=1, version=2
    )
    # CPU time: on a machine shared with other tests, wall time measures them too.
    started = time.process_time()
    # Worst case for moves: one member owned everything, 99 join.
    members = {m: MemberSubscription(list(partitions)) for m in ids[1:]} | {ids[0]: everything}
    plan = StickyAssignor().plan(members, partitions)
    rejoined = {
        m: MemberSubscription(
            list(partitions), owned_partitions=plan[m], generation_id=2, version=2
        )
        for m in ids[:-1]
    }
    StickyAssignor().plan(rejoined, partitions)
    assert time.process_time() - started < 1.0
    assert {load(plan, m) for m in ids} == {10}


# --- sticky: Java user data ----------------------------------------------------------------------


def test_sticky_user_data_is_byte_compatible_with_java_v1() -> None:
    owned = {"b": [3, 1], "a": [0]}
    ours = encode_sticky_user_data(owned, 7)
    theirs = StickyAssignorUserDataV1([("a", [0]), ("b", [1, 3])], 7).encode()
    assert ours == theirs
    decoded = StickyAssignorUserDataV1.decode(ours)
    assert (dict(decoded.previous_assignment), decoded.generation) == ({"a": [0], "b": [1, 3]}, 7)
    assert decode_sticky_user_data(theirs) == PreviousAssignment({"a": [0], "b": [1, 3]}, 7)


def test_sticky_user_data_v0_has_no_generation() -> None:
    v0 = struct.pack(">ih1sii", 1, 1, b"t", 1, 4)
    assert decode_sticky_user_data(v0) == PreviousAssignment({"t": [4]}, -1)


def test_sticky_reads_previous_assignment_from_aiokafka_member_metadata() -> None:
    metadata = StickyPartitionAssignor._metadata(
        ["t"], [TopicPartition("t", 2), TopicPartition("t", 3)], 9
    )
    java_style = MemberSubscription.decode(metadata.encode())
    members = {"a": MemberSubscription(["t"]), "z": java_style}
    plan = StickyAssignor().plan(members, {"t": [0, 1, 2, 3]})
    assert plan == {"a": {"t": [0, 1]}, "z": {"t": [2, 3]}}


def test_sticky_subscription_user_data_round_trips() -> None:
    assignor = StickyAssignor()
    assert assignor.subscription_user_data(["t"], {}, -1) is None
    data = assignor.subscription_user_data(["t"], {"t": [2, 0]}, 4)
    assert data is not None
    sub = MemberSubscription(["t"], user_data=data, version=0)
    assert assignor.previous_assignment(sub) == PreviousAssignment({"t": [0, 2]}, 4)


def test_sticky_previous_assignment_precedence() -> None:
    # Java's StickyAssignor: the user data wins (an eager member's owned partitions are empty).
    assignor = StickyAssignor()
    user_data = encode_sticky_user_data({"t": [9]}, 1)
    v2 = MemberSubscription(["t"], user_data, {}, generation_id=3, version=2)
    assert assignor.previous_assignment(v2) == PreviousAssignment({"t": [9]}, 1)
    no_user_data = MemberSubscription(["t"], None, {"t": [1]}, generation_id=3, version=2)
    assert assignor.previous_assignment(no_user_data) == PreviousAssignment({"t": [1]}, 3)
    v1 = MemberSubscription(["t"], None, {"t": [1]}, version=1)
    assert assignor.previous_assignment(v1) == PreviousAssignment({"t": [1]}, -1)
    garbage = MemberSubscription(["t"], b"\x00\x00\x00\x05", {"t": [1]}, version=1)
    assert assignor.previous_assignment(garbage) == PreviousAssignment({}, -1)
