"""Marks (OffsetManager.mark, session.mark_message): the one-entry cache never marks a
position the manager let go of. session.mark_message runs in C (``_cstream.Marks``) when
the extension is built; every test of it runs on that and on its Python twin."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from consumergroup.config import Config
from consumergroup.group import offsets as offsets_module
from consumergroup.group.membership import Generation
from consumergroup.group.offsets import OffsetManager, _PyMarks
from consumergroup.group.session import ConsumerGroupSession
from consumergroup.message import NO_TIMESTAMP_TYPE, ConsumerMessage


def _manager() -> OffsetManager:
    # No I/O here: marking is local; the client is only used by fetch and commit.
    return OffsetManager(None, "g", Config())  # type: ignore[arg-type]


def test_marks_move_forward_only() -> None:
    om = _manager()
    om.assign({}, {("t", 0): 0, ("t", 1): 0})
    om.mark("t", 0, 5)
    om.mark("t", 0, 3)
    om.mark("t", 1, 7)
    om.mark("t", 0, 6)
    assert (om.marked("t", 0), om.marked("t", 1)) == (6, 7)


def test_mark_after_release_and_reassign_reaches_the_new_position() -> None:
    om = _manager()
    om.assign({}, {("t", 0): 0})
    om.mark("t", 0, 10)  # caches t/0
    om.release([("t", 0)])
    om.assign({("t", 0): (10, "")}, {("t", 0): 10})
    om.mark("t", 0, 12)
    assert om.marked("t", 0) == 12


def test_mark_of_an_unowned_partition_then_owned() -> None:
    om = _manager()
    om.mark("t", 3, 4)  # not owned: ignored (and cached as such)
    assert om.marked("t", 3) == -1
    om.assign({}, {("t", 3): 0})
    om.mark("t", 3, 4)
    assert om.marked("t", 3) == 4


def test_same_partition_number_other_topic() -> None:
    om = _manager()
    om.assign({}, {("a", 0): 0, ("b", 0): 0})
    om.mark("a", 0, 5)
    om.mark("b", 0, 9)
    assert (om.marked("a", 0), om.marked("b", 0)) == (5, 9)


# ------------------------------------------------- session.mark_message (the hot path)
# The session hands out its manager's mark_message bound directly (one call per message);
# these pin that the fold keeps mark()'s guarantees on that path.


@pytest.fixture(autouse=True, params=["c", "python"])
def impl(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Run each test with the C marks and with the Python twin."""
    if request.param == "python":
        monkeypatch.setattr(offsets_module, "_Marks", _PyMarks)
    elif offsets_module._Marks is _PyMarks:
        pytest.skip("the C extension _cstream is not built (or CONSUMERGROUP_PURE_PYTHON)")
    yield request.param


def _message(topic: str, partition: int, offset: int) -> ConsumerMessage:
    return ConsumerMessage(topic, partition, offset, None, b"v", (), -1, NO_TIMESTAMP_TYPE)


def _session(offsets: OffsetManager) -> ConsumerGroupSession:
    """A session of ``offsets`` (marking is local: nothing here talks to a broker)."""
    return ConsumerGroupSession(
        group_id="g",
        generation=Generation(1, "m", "m", "range", {}),
        consumers={},
        partition_counts={},
        client=None,  # type: ignore[arg-type]
        consumer=None,  # type: ignore[arg-type]
        membership=None,  # type: ignore[arg-type]
        offsets=offsets,
        config=Config(),
        on_error=lambda err: None,
        notify=lambda *args: None,
        hooks={},
        on_end=lambda cause: None,
    )


async def test_mark_message_commits_the_next_offset_forward_only_with_metadata() -> None:
    om = _manager()
    om.assign({}, {("t", 0): 0, ("t", 1): 0})
    session = _session(om)
    session.mark_message(_message("t", 0, 4), "four")
    session.mark_message(_message("t", 0, 2), "two")  # lower: the mark stays
    session.mark_message(_message("t", 1, 8))
    assert (om.marked("t", 0), om.marked("t", 1)) == (5, 9)
    session.mark_message(_message("t", 0, 4), "again")  # equal: no move, metadata kept
    assert om._positions[("t", 0)].metadata == "four"
    session.mark_message(_message("t", 0, 6))
    assert om.marked("t", 0) == 7 and om._positions[("t", 0)].metadata == ""


async def test_mark_message_of_an_unclaimed_partition_is_ignored() -> None:
    om = _manager()
    om.assign({}, {("t", 0): 0})
    session = _session(om)
    session.mark_message(_message("t", 0, 3))
    session.mark_message(_message("t", 1, 9))  # same topic, not claimed
    session.mark_message(_message("u", 0, 9))  # same partition number, other topic
    assert om.owned() == [("t", 0)]
    assert (om.marked("t", 0), om.marked("t", 1), om.marked("u", 0)) == (4, -1, -1)


async def test_mark_message_on_an_ended_session_reaches_nothing() -> None:
    """A handler's late mark on the old session after the next one started: the old
    session released the partition (its cached position too), the new one owns it."""
    old = _manager()
    old.assign({}, {("t", 0): 0})
    old_session = _session(old)
    old_session.mark_message(_message("t", 0, 9))  # caches t/0
    old_session.reconciler._release([("t", 0)])  # how a session's end releases its partitions
    new = _manager()
    new.assign({("t", 0): (10, "")}, {("t", 0): 10})
    new_session = _session(new)
    new_session.mark_message(_message("t", 0, 11))
    old_session.mark_message(_message("t", 0, 999))
    assert old.owned() == [] and old.marked("t", 0) == -1
    assert new.marked("t", 0) == 12


async def test_mark_message_after_release_and_reassign_in_one_manager() -> None:
    """A cooperative session keeps its manager across generations: a partition revoked
    then assigned again gets a fresh position, which the next marks must reach."""
    om = _manager()
    om.assign({}, {("t", 0): 0})
    session = _session(om)
    session.mark_message(_message("t", 0, 9))  # caches t/0
    om.release([("t", 0)])
    session.mark_message(_message("t", 0, 20))  # released: ignored
    assert om.marked("t", 0) == -1
    om.assign({("t", 0): (10, "")}, {("t", 0): 10})
    session.mark_message(_message("t", 0, 11))
    assert om.marked("t", 0) == 12


class _Duck:
    """Not a ConsumerMessage, but has its fields (read by getattr, not by slot offset)."""

    def __init__(self, topic: str, partition: int, offset: int) -> None:
        self.topic, self.partition, self.offset = topic, partition, offset


class _Sub(ConsumerMessage):
    __slots__ = ()


async def test_mark_message_of_other_message_types() -> None:
    om = _manager()
    om.assign({}, {("t", 0): 0, ("t", 1): 0, ("t", 1000): 0})
    session = _session(om)
    session.mark_message(_Duck("t", 0, 3))  # type: ignore[arg-type]
    session.mark_message(_Sub("t", 1, 5, None, b"v", (), -1, NO_TIMESTAMP_TYPE))
    session.mark_message(_message("t", 1000, 1))
    # Equal but distinct topic and partition objects reach the cached position too.
    session.mark_message(_message("".join(["t", ""]), int("1000"), 7))
    assert (om.marked("t", 0), om.marked("t", 1), om.marked("t", 1000)) == (4, 6, 8)


async def test_mark_message_arguments() -> None:
    om = _manager()
    om.assign({}, {("t", 0): 0})
    session = _session(om)
    session.mark_message(_message("t", 0, 1), metadata="kw")
    assert om._positions[("t", 0)].metadata == "kw"
    with pytest.raises(TypeError):
        session.mark_message()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        session.mark_message(_message("t", 0, 3), "a", "b")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        session.mark_message(_message("t", 0, 3), meta="x")  # type: ignore[call-arg]
    with pytest.raises(AttributeError):
        session.mark_message(object())  # type: ignore[arg-type]
    assert om.marked("t", 0) == 2
