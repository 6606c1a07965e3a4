"""``dataclass`` with one shared ``__repr__``, ``__eq__`` and ``__hash__`` for every class.

The standard library (before Python 3.13) writes each dataclass's ``__init__``,
``__repr__``, ``__eq__`` (and a frozen one's ``__hash__``) as source text and compiles it:
~1.3 M instructions per class for the repr and eq alone, ~60 M of the consumer path's
start-up over the package's dataclasses. Here the standard library still builds the class
(fields, ``__init__``, slots, frozen) and these three methods are shared functions reading
the class's fields: same results, same ``NotImplemented`` for another class, same ``...``
for a recursive repr, same hash. Not on any per-message path (a repr, a config compare).
Classes with ``order``/``unsafe_hash`` or their own ``__repr__``/``__eq__``/``__hash__``
go to the standard library unchanged. mypy sees the standard library's ``dataclass``.
"""

from __future__ import annotations

import dataclasses
from _thread import get_ident
from operator import attrgetter
from typing import TYPE_CHECKING, Any

__all__ = ["dataclass"]

# Per class: the names its repr shows, and getters of its compared and hashed fields as
# tuples. Filled on first use, from any thread (a race computes the same value twice).
_REPR_NAMES: dict[type, tuple[str, ...]] = {}
_COMPARED: dict[type, Any] = {}
_HASHED: dict[type, Any] = {}
# (id(object), thread) of the reprs running: a recursive repr shows "...".
_REPR_RUNNING: set[tuple[int, int]] = set()


def _getter(names: tuple[str, ...]) -> Any:
    """A function returning the tuple of ``names``' values (attrgetter's is no tuple for
    fewer than two names)."""
    if len(names) > 1:
        return attrgetter(*names)
    if names:
        one = attrgetter(names[0])
        return lambda obj: (one(obj),)
    return lambda obj: ()


def _repr(self: Any) -> str:
    key = (id(self), get_ident())
    if key in _REPR_RUNNING:
        return "..."
    _REPR_RUNNING.add(key)
    try:
        cls: Any = type(self)
        names = _REPR_NAMES.get(cls)
        if names is None:
            names = _REPR_NAMES[cls] = tuple(f.name for f in dataclasses.fields(self) if f.repr)
        body = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
        return f"{cls.__qualname__}({body})"
    finally:
        _REPR_RUNNING.discard(key)


def _eq(self: Any, other: object) -> Any:
    cls: Any = type(self)
    if other.__class__ is not cls:
        return NotImplemented
    get = _COMPARED.get(cls)
    if get is None:
        get = _COMPARED[cls] = _getter(tuple(f.name for f in dataclasses.fields(self) if f.compare))
    return get(self) == get(other)


def _hash(self: Any) -> int:
    cls: Any = type(self)
    get = _HASHED.get(cls)
    if get is None:
        names = tuple(
            f.name for f in dataclasses.fields(self) if (f.compare if f.hash is None else f.hash)
        )
        get = _HASHED[cls] = _getter(names)
    return hash(get(self))


if TYPE_CHECKING:
    from dataclasses import dataclass as dataclass
else:

    def dataclass(cls=None, /, *, repr=True, eq=True, frozen=False, **kwargs):
        """:func:`dataclasses.dataclass`, its ``__repr__``/``__eq__``/``__hash__`` shared."""

        def wrap(cls):
            own = cls.__dict__
            if (
                kwargs.get("order")
                or kwargs.get("unsafe_hash")
                or ("__repr__" in own or "__eq__" in own or "__hash__" in own)
            ):
                return dataclasses.dataclass(cls, repr=repr, eq=eq, frozen=frozen, **kwargs)
            new = dataclasses.dataclass(cls, repr=False, eq=False, frozen=frozen, **kwargs)
            if repr:
                new.__repr__ = _repr
            if eq:
                # The standard library's rule: eq and frozen hash the fields; eq alone
                # makes instances unhashable.
                new.__eq__ = _eq
                new.__hash__ = _hash if frozen else None
            return new

        return wrap if cls is None else wrap(cls)
