"""FetchSession bookkeeping (KIP-227): what each planned Fetch request names."""

from __future__ import annotations

from io import BytesIO

import pytest
from aiokafka.protocol.fetch import FetchRequest_v4, FetchRequest_v7, FetchRequest_v11

from consumergroup.consumer.fetch_session import FetchSession, next_epoch
from consumergroup.consumer.partition import PartitionConsumer
from consumergroup.net.fetch import FetchRequest


def pcs(topic: str, n: int, offset: int = 0) -> list[PartitionConsumer]:
    """``n`` partition consumers of ``topic`` at ``offset``."""
    return [
        PartitionConsumer(topic, p, offset, buffer_size=8, fetch_size=1024, on_close=lambda _: None)
        for p in range(n)
    ]


def named(topics: list[tuple[str, list[tuple[int, ...]]]]) -> dict[tuple[str, int], int]:
    """``{(topic, partition): fetch offset}`` of a plan's topics."""
    return {(t, e[0]): e[1] for t, parts in topics for e in parts}


def opened(parts: list[PartitionConsumer], session_id: int = 7) -> FetchSession:
    """A session opened by a full request for ``parts``."""
    session = FetchSession()
    first = session.plan(parts)
    session.on_response(session_id, 0, first.full)
    return session


def test_first_request_opens_a_session_with_every_partition() -> None:
    session = FetchSession()
    parts = pcs("a", 3) + pcs("b", 2)
    plan = session.plan(parts)
    assert (plan.session_id, plan.epoch, plan.full) == (0, 0, True)
    assert named(plan.topics) == {("a", 0): 0, ("a", 1): 0, ("a", 2): 0, ("b", 0): 0, ("b", 1): 0}
    assert plan.forgotten == []


def test_incremental_requests_name_only_changed_added_and_removed_partitions() -> None:
    parts = pcs("a", 5)
    session = opened(parts)
    assert session.incremental and session.epoch == 1
    plan = session.plan(parts)  # nothing changed: names nothing, fetches the session
    assert (plan.session_id, plan.epoch, plan.full) == (7, 1, False)
    assert plan.topics == [] and plan.forgotten == []
    session.on_response(7, 0, plan.full)

    parts[1]._offset = 40  # data delivered
    parts[3]._fetch_size = 2048  # fetch size grew
    extra = pcs("b", 1, offset=9)
    plan = session.plan([parts[0], parts[1], parts[3], parts[4], *extra])  # a/2 left
    assert plan.epoch == 2
    assert named(plan.topics) == {("a", 1): 40, ("a", 3): 0, ("b", 0): 9}
    assert plan.forgotten == [("a", [2])]
    session.on_response(7, 0, plan.full)

    plan = session.plan(parts)  # a/2 back (named again), b/0 gone
    assert named(plan.topics) == {("a", 2): 0}
    assert plan.forgotten == [("b", [0])]


def test_epochs_increment_and_wrap_to_one() -> None:
    assert next_epoch(1) == 2
    assert next_epoch(2**31 - 1) == 1  # 0 would mean "open a new session"
    session = opened(pcs("a", 1))
    session.epoch = 2**31 - 1
    plan = session.plan(pcs("a", 1))
    assert plan.epoch == 2**31 - 1
    session.on_response(7, 0, plan.full)
    assert session.epoch == 1


def test_session_id_not_found_forgets_the_session() -> None:
    parts = pcs("a", 3)
    session = opened(parts)
    plan = session.plan(parts)
    session.on_response(0, 70, plan.full)
    plan = session.plan(parts)
    assert (plan.session_id, plan.epoch, plan.full) == (0, 0, True)
    assert named(plan.topics) == {("a", 0): 0, ("a", 1): 0, ("a", 2): 0}


@pytest.mark.parametrize("code", [71, 1])
def test_other_errors_close_the_session_with_a_full_request(code: int) -> None:
    parts = pcs("a", 3)
    session = opened(parts)
    session.on_response(7, 0, session.plan(parts).full)
    parts[0]._offset = 5
    plan = session.plan(parts)
    session.on_response(7, code, plan.full)
    plan = session.plan(parts)  # the old id at epoch 0: the broker replaces that session
    assert (plan.session_id, plan.epoch, plan.full) == (7, 0, True)
    assert named(plan.topics) == {("a", 0): 5, ("a", 1): 0, ("a", 2): 0}
    session.on_response(8, 0, plan.full)
    assert (session.session_id, session.epoch) == (8, 1)


def test_a_broker_without_sessions_gets_full_requests_every_time() -> None:
    parts = pcs("a", 3)
    session = FetchSession()
    for _ in range(3):
        plan = session.plan(parts)
        assert (plan.session_id, plan.epoch, plan.full) == (0, 0, True)
        assert len(named(plan.topics)) == 3
        session.on_response(0, 0, plan.full)  # Tansu: session id 0 = no session


def test_a_broker_closing_the_session_in_an_incremental_response() -> None:
    parts = pcs("a", 2)
    session = opened(parts)
    session.on_response(0, 0, session.plan(parts).full)
    assert session.plan(parts).full


def test_reset_after_a_new_connection_names_everything() -> None:
    parts = pcs("a", 2)
    session = opened(parts)
    session.reset()
    plan = session.plan(parts)
    assert (plan.session_id, plan.epoch, plan.full) == (7, 0, True)
    assert len(named(plan.topics)) == 2


def test_request_carries_the_session_fields_from_v7_and_none_below() -> None:
    request = FetchRequest(
        500, 1, 1 << 20, 0, [("a", [(1, 40, 1024)])], session_id=7, epoch=3, forgotten=[("a", [2])]
    )
    for cls in (FetchRequest_v7, FetchRequest_v11):
        decoded = cls.decode(BytesIO(request.build(cls.API_VERSION).body)).to_object()
        assert (decoded["session_id"], decoded["session_epoch"]) == (7, 3)
        assert decoded["forgotten_topics_data"] == [{"topic": "a", "partitions": [2]}]
        assert decoded["topics"][0]["partitions"][0]["fetch_offset"] == 40
    v4 = FetchRequest_v4.decode(BytesIO(request.build(4).body)).to_object()
    assert "session_id" not in v4 and v4["topics"][0]["partitions"][0]["offset"] == 40


def test_last_fetched_epochs_are_named_while_the_position_is_where_they_were_learnt() -> None:
    parts = pcs("a", 3, offset=10)
    # Partition 0 fetched up to 10 in epoch 4; partition 1's epoch is for an older position.
    epochs = {parts[0]: (10, 4), parts[1]: (5, 3)}
    full = FetchSession().plan(parts, epochs)
    assert sorted(full.topics[0][1]) == [(0, 10, 1024, 4), (1, 10, 1024, -1), (2, 10, 1024, -1)]
    session = opened(parts)
    parts[2]._offset = 12
    incremental = session.plan(parts, {parts[2]: (12, 5)})
    assert incremental.topics == [("a", [(2, 12, 1024, 5)])]
    assert FetchSession().plan(parts).topics[0][1][0] == (0, 10, 1024)  # below v12: no epochs


def test_a_change_of_the_last_fetched_epoch_alone_is_named() -> None:
    """After a diverging-epoch answer only the epoch changes (same offset, same size):
    the incremental request must carry it, or the broker keeps comparing the old one."""
    parts = pcs("a", 2, offset=70)
    epochs = {parts[0]: (70, 2), parts[1]: (70, 2)}
    session = FetchSession()
    session.on_response(7, 0, session.plan(parts, epochs).full)
    unchanged = session.plan(parts, epochs)
    assert unchanged.topics == []
    session.on_response(7, 0, unchanged.full)
    epochs[parts[0]] = (70, 1)  # the leader's answer: epoch 1 ends at 70
    plan = session.plan(parts, epochs)
    assert plan.topics == [("a", [(0, 70, 1024, 1)])]
    session.on_response(7, 0, plan.full)
    assert session.plan(parts, epochs).topics == []  # sent once, then held by the broker


def test_a_partition_that_left_and_came_back_is_named_again() -> None:
    """Its content was forgotten by the broker when it left (a full buffer, a move to a
    replica and back): named again on its return, even at the same position."""
    parts = pcs("a", 3)
    session = opened(parts)
    assert session.plan(parts).topics == []  # unchanged: nothing named
    session.on_response(7, 0, False)
    plan = session.plan(parts[:2])
    assert plan.forgotten == [("a", [2])]
    session.on_response(7, 0, False)
    plan = session.plan(parts)
    assert named(plan.topics) == {("a", 2): 0} and plan.forgotten == []
    session.on_response(7, 0, False)
    assert session.plan(parts).topics == []


def test_a_new_consumer_of_a_partition_is_compared_with_what_the_session_holds() -> None:
    """A partition's consumer replaced by a new one (same topic and partition): named
    only if its position differs from what the broker holds, never left unnamed because
    the old consumer's position was named."""
    parts = pcs("a", 2)
    session = opened(parts)
    assert session.plan(parts).topics == []
    session.on_response(7, 0, False)
    same = pcs("a", 1)[0]  # partition 0 again, at offset 0: what the broker holds
    assert session.plan([same, parts[1]]).topics == []
    session.on_response(7, 0, False)
    moved = pcs("a", 1, offset=30)[0]
    plan = session.plan([moved, parts[1]])
    assert named(plan.topics) == {("a", 0): 30} and plan.forgotten == []
    session.on_response(7, 0, False)
    # The first consumer, back at its old position (never in practice: it is closed):
    # the broker holds 30 now, so offset 0 is named.
    plan = session.plan([parts[0], parts[1]])
    assert named(plan.topics) == {("a", 0): 0}


def test_a_full_request_renames_everything_after_a_reset() -> None:
    parts = pcs("a", 2)
    session = opened(parts)
    assert session.plan(parts).topics == []
    session.on_response(7, 0, False)
    session.reset()
    plan = session.plan(parts)
    assert plan.full and named(plan.topics) == {("a", 0): 0, ("a", 1): 0}
    session.on_response(7, 0, True)
    assert session.plan(parts).topics == []
