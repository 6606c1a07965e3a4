"""consumergroup.consumer.gcpolicy: decoded messages skip the young collections; the
user's cyclic garbage is still collected; a process's own gc.freeze() is left alone."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from consumergroup.consumer import gcpolicy
from consumergroup.message import ConsumerMessage


@pytest.fixture(autouse=True)
def fresh_state(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test starts with no promoted objects counted and gc enabled, unfrozen."""
    monkeypatch.setattr(gcpolicy, "_state", gcpolicy._Promotion())
    gc.unfreeze()
    gc.enable()
    yield
    gc.unfreeze()
    gc.enable()


def _messages(n: int) -> list[ConsumerMessage]:
    return [ConsumerMessage("t", 0, i, None, b"v", (), 0, 0) for i in range(n)]


def _in_generation(obj: object, generation: int) -> bool:
    return any(o is obj for o in gc.get_objects(generation))


def test_decoded_messages_go_to_the_oldest_generation() -> None:
    chunk = gcpolicy.decode_step(lambda: _messages(1000))
    assert gc.isenabled()
    assert gc.get_count()[0] == 0  # nothing left for a young pass to scan
    assert _in_generation(chunk[-1], 2)
    assert not _in_generation(chunk[-1], 0)


def test_without_the_step_messages_are_young() -> None:
    # The check above is meaningful: plain allocation leaves them in generation 0.
    gc.collect()
    chunk = _messages(10)
    assert _in_generation(chunk[-1], 0)


def test_user_cyclic_garbage_is_still_collected() -> None:
    class Node:
        __slots__ = ("__weakref__", "me")

        def __init__(self) -> None:
            self.me = self

    # decode_step collects once the promoted user objects pass a quarter of the heap,
    # so make enough garbage for several collections whatever this process's heap is.
    heap = len(gc.get_objects())
    per_step = 600  # fewer than the young threshold (700): no young pass sees them
    steps = max(100, heap // per_step)
    refs = []
    for _ in range(steps):
        for _ in range(per_step):  # the user's young objects, garbage cycles at each step
            node = Node()
            refs.append(weakref.ref(node))
        del node
        gcpolicy.decode_step(lambda: _messages(100))
    dead = sum(r() is None for r in refs)
    # Freed by the full collections decode_step ran; at most the last budget's worth
    # (a quarter of the heap plus the messages promoted, at least 10,000) waits.
    budget = max(10_000, (heap + 100 * steps) // 4)
    assert dead >= len(refs) - budget - per_step, (dead, len(refs), budget)


def test_a_processs_own_freeze_is_respected() -> None:
    keep = [object() for _ in range(10)]  # noqa: F841 - something to freeze
    gc.freeze()
    frozen = gc.get_freeze_count()
    assert frozen > 0
    chunk = gcpolicy.decode_step(lambda: _messages(10))
    assert gc.get_freeze_count() >= frozen
    assert _in_generation(chunk[-1], 0)


def test_disabled_collector_is_left_disabled() -> None:
    gc.disable()
    chunk = gcpolicy.decode_step(lambda: _messages(10))
    assert not gc.isenabled()
    assert len(chunk) == 10


def test_collector_restored_when_build_raises() -> None:
    def boom() -> list[ConsumerMessage]:
        raise ValueError("bad payload")

    with pytest.raises(ValueError):
        gcpolicy.decode_step(boom)
    assert gc.isenabled()
