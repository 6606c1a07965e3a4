"""Decoded messages and CPython's cyclic garbage collector (``consumer/_crecords.c``).

The C decoder leaves its messages untracked (they cannot be part of a cycle): keeping
them costs the collector nothing, and the consumer does not steer the collector at all,
so a steady stream causes no full collections beyond CPython's own. An assignment of a
value the collector tracks makes a message tracked again, so a cycle a user builds
through one is still collected. The class's deallocation is the extension's own (what
CPython's does for a class with nothing but object slots): it frees what every field
holds, for subclasses too, and a long chain of messages without exhausting the C stack.
"""

from __future__ import annotations

import gc
import subprocess
import sys
import weakref
from collections.abc import Iterator

import pytest

from consumergroup.consumer import records
from consumergroup.message import ConsumerMessage
from tests.helpers import build_batch

pytestmark = pytest.mark.skipif(
    records._decode_v2 is None, reason="the C decoder is not built (pure-Python fallback)"
)


def _decoded(n: int, limit: int = 0) -> Iterator[list[ConsumerMessage]]:
    batch = build_batch([(b"k%d" % i, b"v" * 20) for i in range(n)], 1_700_000_000_000)
    return records.decode_batch("t", 0, memoryview(batch), 2, 0, limit)


def test_decoded_messages_are_not_tracked() -> None:
    (chunk,) = list(_decoded(100))
    assert len(chunk) == 100
    assert gc.is_tracked(chunk)  # the list is: it holds the messages
    assert not any(gc.is_tracked(m) for m in chunk)
    # What the collector needs to see of a message, it still sees through the list.
    assert chunk[0].value == b"v" * 20 and chunk[0].key == b"k0"


def test_kept_messages_add_nothing_to_the_tracked_heap() -> None:
    gc.collect()
    before = len(gc.get_objects())
    kept = [m for chunk in _decoded(20_000, limit=256) for m in chunk]
    assert len(kept) == 20_000
    # The lists that carried them are gone; the messages are invisible to the collector.
    assert len(gc.get_objects()) - before < 100


def test_assigning_a_tracked_value_tracks_the_message_again() -> None:
    (chunk,) = list(_decoded(2))
    m = chunk[0]
    m.value = b"still atomic"
    assert not gc.is_tracked(m)
    m.headers = [("h", b"x")]  # a list: the collector tracks it
    assert gc.is_tracked(m)
    assert m.headers == [("h", b"x")]


def test_a_cycle_through_a_message_is_collected() -> None:
    class Holder:
        def __init__(self, msg: ConsumerMessage) -> None:
            self.msg = msg

    (chunk,) = list(_decoded(1))
    msg = chunk[0]
    holder = Holder(msg)
    msg.value = holder  # type: ignore[assignment]  # msg -> holder -> msg
    ref = weakref.ref(holder)
    del chunk, msg, holder
    gc.collect()
    assert ref() is None


def test_messages_built_in_python_are_tracked_as_usual() -> None:
    m = ConsumerMessage("t", 0, 1, None, b"v", (), 0, 0)
    assert gc.is_tracked(m)  # CPython's default for a heap type: nothing changes here


def test_decoding_runs_no_full_collection() -> None:
    """The consumer leaves the collector alone: a stream of small decode steps (one or two
    messages each, as at a few thousand records/s), with the transient objects a fetch
    round leaves alive between them, starts no full collection."""
    full: list[float] = []

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and info["generation"] == 2:
            full.append(1.0)

    gc.collect()
    gc.callbacks.append(on_gc)
    try:
        live: list[object] = []
        for i in range(20_000):
            live.append({"round": i})  # what a fetch round keeps alive for a while
            del live[:-30]
            for _ in _decoded(2, limit=2):
                pass
    finally:
        gc.callbacks.remove(on_gc)
    assert full == []


class _Sentinel:
    """A value whose reference count shows whether a freed message let go of it."""


def _fill(msg: ConsumerMessage, values: list[_Sentinel]) -> None:
    for field, value in zip(ConsumerMessage.__slots__, values, strict=False):
        setattr(msg, field, value)


def test_a_freed_message_lets_go_of_every_field() -> None:
    class Sub(ConsumerMessage):
        __slots__ = ("extra",)

    (chunk,) = list(_decoded(1))
    built = ConsumerMessage("t", 0, 1, None, b"v", (), 0, 0)
    sub = Sub("t", 0, 1, None, b"v", (), 0, 0)
    values = [_Sentinel() for _ in range(9)]
    refs = [sys.getrefcount(v) for v in values]
    for msg in (chunk[0], built, sub):
        _fill(msg, values)
    del msg
    sub.extra = values[8]
    assert [sys.getrefcount(v) for v in values] == [r + 3 for r in refs[:8]] + [refs[8] + 1]
    classes = (sys.getrefcount(ConsumerMessage), sys.getrefcount(Sub))
    del chunk, built, sub
    assert [sys.getrefcount(v) for v in values] == refs
    # Each instance held a reference to its class, given back with the instance.
    assert (sys.getrefcount(ConsumerMessage), sys.getrefcount(Sub)) == (
        classes[0] - 2,
        classes[1] - 1,
    )


def test_a_long_chain_of_messages_is_freed() -> None:
    """A message that holds the next one, 1,000,000 deep: freed without a crash (the
    deallocation goes through CPython's trashcan, as its own does). In a child process, so
    an exhausted C stack fails this test rather than the run."""
    code = (
        "from consumergroup.consumer import records\n"
        "from consumergroup.message import ConsumerMessage\n"
        "assert records._decode_v2 is not None\n"
        "head = None\n"
        "for i in range(1_000_000):\n"
        "    head = ConsumerMessage('t', 0, i, None, head, (), 0, 0)\n"
        "del head\n"
        "print('freed')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "freed"
