"""``consumergroup._dataclass.dataclass`` behaves as the standard library's: the same repr,
equality, hashing and fields, for every option the package uses."""

from __future__ import annotations

import dataclasses
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
