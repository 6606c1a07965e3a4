"""OffsetManager.mark: the one-entry cache never marks a position the manager let go of."""

from __future__ import annotations

from consumergroup.config import Config
from consumergroup.group.offsets import OffsetManager


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
