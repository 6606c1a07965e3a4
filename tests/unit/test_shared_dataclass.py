"""``consumergroup._dataclass.dataclass`` behaves as the standard library's: the same repr,
equality, hashing, fields and ``__init__``, for every option the package uses."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle
import typing
from dataclasses import field
from typing import Any

import pytest

from consumergroup._dataclass import _repr, dataclass

OPTIONS: list[dict[str, Any]] = [
    {},
    {"frozen": True},
    {"frozen": True, "slots": True},
    {"slots": True},
    {"eq": False},
    {"slots": True, "eq": False},
    {"repr": False},
    {"order": True},
]


def _make(deco: Any, options: dict[str, Any]) -> tuple[type, type, type]:
    """A class of each shape, built by ``deco(**options)``: fields left out of repr,
    compare and hash; no field; one field; a decorated and an undecorated subclass."""

    @deco(**options)
    class A:
        a: int
        b: Any = None
        hidden: int = field(default=0, repr=False)
        ignored: int = field(default=0, compare=False)
        unhashed: int = field(default=0, hash=False)
        items: tuple[int, ...] = field(default_factory=tuple)

    @deco(**options)
    class B(A):
        c: str = "c"

    class C(B):
        pass

    return A, B, C


@pytest.mark.parametrize("options", OPTIONS, ids=str)
def test_same_as_the_standard_library(options: dict[str, Any]) -> None:
    ours, theirs = _make(dataclass, options), _make(dataclasses.dataclass, options)
    for mine, std in zip(ours, theirs, strict=True):
        assert [f.name for f in dataclasses.fields(mine)] == [
            f.name for f in dataclasses.fields(std)
        ]
        assert (mine.__hash__ is None) == (std.__hash__ is None)
        cases = [
            ((1,), (1,)),
            ((1, "x"), (1, "x")),
            ((1,), (2,)),
            ((1,), {"a": 1, "hidden": 5}),
            ((1,), {"a": 1, "ignored": 5}),
            ((1,), {"a": 1, "unhashed": 5}),
            ((float("nan"),), (float("nan"),)),
        ]
        for left, right in cases:
            pairs = []
            for cls in (mine, std):
                x = cls(*left) if isinstance(left, tuple) else cls(**left)
                y = cls(*right) if isinstance(right, tuple) else cls(**right)
                hashes = (hash(x) == hash(y)) if cls.__hash__ is not None else None
                shown = repr(x).replace(cls.__qualname__, "Q") if options.get("repr", True) else ""
                pairs.append((shown, x == y, x != y, hashes))
                assert x.__eq__(object()) is NotImplemented or not options.get("eq", True)
            assert pairs[0] == pairs[1], (mine, left, right)


def test_recursive_repr_and_other_class() -> None:
    @dataclass
    class Node:
        child: Any = None

    @dataclasses.dataclass
    class StdNode:
        child: Any = None

    node, std = Node(), StdNode()
    node.child, std.child = node, std
    assert repr(node) == repr(std).replace("StdNode", "Node")
    assert repr(node).endswith(".Node(child=...)")
    assert Node(1) != StdNode(1) and Node(1) == Node(1)
    assert Node.__repr__ is _repr


def test_own_methods_kept() -> None:
    @dataclass(frozen=True)
    class Own:
        a: int

        def __repr__(self) -> str:
            return "own"

        def __hash__(self) -> int:
            return 7

    assert repr(Own(1)) == "own" and hash(Own(1)) == 7 and Own(1) == Own(1)


@pytest.mark.parametrize("options", OPTIONS, ids=str)
def test_init_same_as_the_standard_library(options: dict[str, Any]) -> None:
    """The shared ``__init__``: the same signature, docstring, argument errors, factory
    calls and annotations as the standard library's compiled one."""
    ours, theirs = _make(dataclass, options), _make(dataclasses.dataclass, options)
    for mine, std in zip(ours, theirs, strict=True):
        assert str(inspect.signature(mine)) == str(inspect.signature(std))
        assert mine.__init__.__annotations__ == std.__init__.__annotations__
        assert typing.get_type_hints(mine.__init__) == typing.get_type_hints(std.__init__)
        assert mine.__init__.__qualname__ == std.__init__.__qualname__.replace(
            std.__qualname__, mine.__qualname__
        )
        calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
            ((), {}),
            ((1, 2, 3, 4, 5, (6,), "c", 8), {}),
            ((1,), {"nope": 2}),
            ((1,), {"a": 2}),
        ]
        for args, kwargs in calls:
            errors = []
            for cls in (mine, std):
                with pytest.raises(TypeError) as caught:
                    cls(*args, **kwargs)
                errors.append(str(caught.value).replace(cls.__qualname__, "Q"))
            assert errors[0] == errors[1]
        x, y = mine(1), mine(2)
        assert x.items == () and (x.a, x.b, x.hidden) == (1, None, 0)
        assert mine(1, b=[]).b == [] and mine(a=3).a == 3
        if options.get("frozen"):
            with pytest.raises(dataclasses.FrozenInstanceError):
                x.a = 5
        del y


def test_init_factories_run_per_instance_and_undocumented_classes() -> None:
    @dataclass(slots=True)
    class Undocumented:
        items: list[int] = field(default_factory=list)

    @dataclasses.dataclass(slots=True)
    class StdUndocumented:
        items: list[int] = field(default_factory=list)

    assert "__dataclass_fill__" in Undocumented.__init__.__code__.co_freevars  # the shared one
    first, second = Undocumented(), Undocumented()
    first.items.append(1)
    assert second.items == [] and Undocumented([2]).items == [2]
    assert Undocumented.__doc__ == StdUndocumented.__doc__.replace(
        "StdUndocumented", "Undocumented"
    )


def test_init_left_to_the_standard_library() -> None:
    """A field out of ``__init__``, ``kw_only``, an ``InitVar``, a ``__post_init__`` or an
    own ``__init__``: the library's ``__init__``, as before; a field without a default
    after one with: the library's error."""

    @dataclass
    class Post:
        a: int
        seen: int = field(default=0, init=False)
        extra: dataclasses.InitVar[int] = 1

        def __post_init__(self, extra: int) -> None:
            self.seen = self.a + extra

    @dataclass(kw_only=True)
    class KwOnly:
        a: int

    @dataclass
    class Own:
        a: int

        def __init__(self) -> None:
            self.a = 7

    assert Post(1, 2).seen == 3 and KwOnly(a=1).a == 1 and Own().a == 7
    for cls in (Post, KwOnly, Own):
        assert "__dataclass_fill__" not in cls.__init__.__code__.co_freevars
    with pytest.raises(TypeError, match="non-default argument 'b' follows default argument"):

        @dataclass
        class Bad:
            a: int = 0
            b: int  # type: ignore[misc]


@dataclass(frozen=True)
class FrozenOurs:
    a: int
    b: Any = None
    items: tuple[int, ...] = field(default_factory=tuple)


@dataclasses.dataclass(frozen=True)
class FrozenStd:
    a: int
    b: Any = None
    items: tuple[int, ...] = field(default_factory=tuple)


@dataclass(frozen=True, slots=True)
class FrozenSlotsOurs:
    a: int
    b: Any = None
    items: tuple[int, ...] = field(default_factory=tuple)


@dataclasses.dataclass(frozen=True, slots=True)
class FrozenSlotsStd:
    a: int
    b: Any = None
    items: tuple[int, ...] = field(default_factory=tuple)


@pytest.mark.parametrize(
    ("mine", "std"),
    [(FrozenOurs, FrozenStd), (FrozenSlotsOurs, FrozenSlotsStd)],
    ids=["dict", "slots"],
)
def test_frozen_same_as_the_standard_library(mine: Any, std: Any) -> None:
    """A frozen class's shared ``__setattr__``/``__delattr__``: the same refusals, and it
    copies, pickles, hashes and subclasses as the library's frozen class does."""
    assert "__dataclass_fill__" in mine.__init__.__code__.co_freevars  # the shared path
    assert "<string>" not in mine.__setattr__.__code__.co_filename
    assert mine.__dataclass_params__.frozen and std.__dataclass_params__.frozen
    for cls in (mine, std):
        x = cls(1, [2], items=(3,))
        with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'a'"):
            x.a = 5
        with pytest.raises(dataclasses.FrozenInstanceError, match="cannot delete field 'b'"):
            del x.b
        for again in (copy.copy(x), copy.deepcopy(x), pickle.loads(pickle.dumps(x))):
            assert again == x and again is not x
        assert hash(cls(1, 2)) == hash(cls(1, 2)) and dataclasses.replace(x, a=9).a == 9
    # Not a field, on the dataclass itself: refused (Python 3.11's own slotted frozen class
    # raises a TypeError from its super() call there instead).
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'new'"):
        mine(1).new = 1
    with pytest.raises(TypeError, match="cannot inherit non-frozen dataclass from a frozen one"):

        @dataclass
        class Thawed(mine):  # type: ignore[misc,valid-type]
            d: int = 0

    @dataclass(frozen=True)
    class Deeper(mine):  # type: ignore[misc,valid-type]
        d: int = 0

    with pytest.raises(dataclasses.FrozenInstanceError):
        Deeper(1).d = 2


def test_the_classes_made_per_fetch_answer_keep_the_compiled_init() -> None:
    """A RecordSet (per partition per answer) and a FetchPlan (per round) are made per
    record or two on a caught-up partition: they keep the standard library's compiled
    ``__init__`` (init=True), ~1.2 us a call less than the shared one."""
    from consumergroup.consumer.fetch_session import FetchPlan
    from consumergroup.consumer.records import RecordSet

    for cls in (RecordSet, FetchPlan):
        assert "__dataclass_fill__" not in cls.__init__.__code__.co_freevars, cls
