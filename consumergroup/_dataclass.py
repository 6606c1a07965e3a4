"""``dataclass`` with one shared ``__repr__``, ``__eq__`` and ``__hash__`` for every class,
and an ``__init__`` that is not compiled.

The standard library (before Python 3.13) writes each dataclass's ``__init__``,
``__repr__``, ``__eq__`` (and a frozen one's ``__hash__``) as source text and compiles it:
~1.3 M instructions per class for the repr and eq alone, ~60 M of the consumer path's
start-up over the package's dataclasses. Here the standard library still builds the class
(fields, slots, frozen) and these three methods are shared functions reading the class's
fields: same results, same ``NotImplemented`` for another class, same ``...`` for a
recursive repr, same hash. Not on any per-message path (a repr, a config compare).
Classes with ``order``/``unsafe_hash`` or their own ``__repr__``/``__eq__``/``__hash__``
go to the standard library unchanged. mypy sees the standard library's ``dataclass``.

``__init__`` (~0.9 M instructions a class compiled from source, ~25 M over the consumer
path's classes): one code object per count of parameters, compiled once per process
(``def __init__(self, a0, a1): fill(self, (a0, a1))``), is given each class's parameter
names (:meth:`types.CodeType.replace`), defaults and annotations, so Python itself binds
the arguments (the same signature, the same ``TypeError`` for a missing or unknown
argument) and a per-class closure stores them in field order, calling a field's
``default_factory`` when its argument was left out: ``self.name = value``, or
``object.__setattr__`` for a frozen class, as the standard library's ``__init__`` does.
A call costs ~1 us more than the compiled one's: the classes made per fetch answer
(``RecordSet``, ``FetchPlan``: per record or two on a caught-up partition) pass
``init=True`` and keep the compiled one. Classes with ``init`` or ``kw_only`` given,
an ``InitVar``, a field out of ``__init__`` or keyword-only, a ``__post_init__`` or an
``__init__`` of their own keep the standard library's.

A frozen class's ``__setattr__``/``__delattr__`` (two more compiled methods, ~1.2 M) are
closures too (:func:`_freeze`), where no other class of its hierarchy is a dataclass:
the same :class:`dataclasses.FrozenInstanceError`, ``__dataclass_params__.frozen``, and,
with ``slots``, the library's ``__getstate__``/``__setstate__`` for pickle and ``copy``.
"""

from __future__ import annotations

import dataclasses
import inspect
import sys
from _thread import get_ident
from operator import attrgetter
from types import CellType, CodeType, FunctionType
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


class _Factory:
    """The default an ``__init__`` signature shows for a field with a ``default_factory``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<factory>"  # as the standard library's signature shows it


_FACTORY = _Factory()


def _init_code(count: int) -> CodeType:
    """The code shared by every ``__init__`` of ``count`` parameters (after ``self``),
    compiled once per process: it hands the arguments, bound by Python, to the class's
    filler as a tuple. A class renames the parameters (``co_varnames``) and gives its
    defaults, annotations and filler (a free variable: a class's ``__init__`` keeps its
    module's globals, for ``typing.get_type_hints``, and no field or global shadows it)."""
    code = _INIT_CODES.get(count)
    if code is None:
        params = "".join(f", __dataclass_arg{i}__" for i in range(count))
        source = (
            "def make(__dataclass_fill__):\n"
            f" def __init__(self{params}):\n"
            f"  __dataclass_fill__(self, ({params[2:]}{',' if count else ''}))\n"
            " return __init__\n"
        )
        namespace: dict[str, Any] = {}
        exec(source, namespace)
        code = _INIT_CODES[count] = namespace["make"](None).__code__
    return code


# Parameter count -> the code of :func:`_init_code`. Filled by whichever thread defines a
# class first (a race compiles the same code twice).
_INIT_CODES: dict[int, CodeType] = {}


def _filler(names: tuple[str, ...], factories: dict[str, Any], frozen: bool) -> Any:
    """Stores the arguments (``values``, in field order) as the fields, as the standard
    library's ``__init__`` does: ``self.name = value``, or ``object.__setattr__`` for a
    frozen class; a field's ``default_factory`` is called when its argument was left out."""
    store: Any = object.__setattr__ if frozen else setattr
    if not factories:

        def fill(self: Any, values: tuple[Any, ...]) -> None:
            for name, value in zip(names, values, strict=True):
                store(self, name, value)

        return fill

    def fill_made(self: Any, values: tuple[Any, ...]) -> None:
        for name, value in zip(names, values, strict=True):
            if value is _FACTORY:
                value = factories[name]()
            store(self, name, value)

    return fill_made


def _freeze(cls: Any, slots: bool) -> None:
    """Make ``cls`` (built by the library as not frozen) frozen as the library does: its
    ``__setattr__``/``__delattr__`` refuse the fields (and any attribute of the class
    itself) with :class:`dataclasses.FrozenInstanceError`, closures rather than methods
    compiled per class; ``__dataclass_params__.frozen`` set, as subclasses check it; with
    ``slots``, the library's ``__getstate__``/``__setstate__``, with which pickle and
    ``copy`` restore the fields past ``__setattr__``."""
    names = frozenset(f.name for f in dataclasses.fields(cls))

    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is cls or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    def __delattr__(self: Any, name: str) -> None:
        if type(self) is cls or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    for method in (__setattr__, __delattr__):
        method.__qualname__ = f"{cls.__qualname__}.{method.__name__}"
        setattr(cls, method.__name__, method)
    cls.__dataclass_params__.frozen = True
    if slots:
        cls.__getstate__ = _slots_getstate
        cls.__setstate__ = _slots_setstate


def _slots_getstate(self: Any) -> list[Any]:
    return [getattr(self, f.name) for f in dataclasses.fields(self)]


def _slots_setstate(self: Any, state: list[Any]) -> None:
    for f, value in zip(dataclasses.fields(self), state, strict=False):
        object.__setattr__(self, f.name, value)  # past the frozen __setattr__


def _plain(cls: type) -> bool:
    """True when ``cls``'s ``__init__`` can be :func:`_shared_init`'s: no ``__init__`` or
    ``__post_init__`` of its own, no ``InitVar`` or ``KW_ONLY`` annotation, no field (of
    its own or a base's) left out of ``__init__`` or keyword-only, no field named ``self``
    or as the shared code's free variables. Otherwise the standard library's (a
    ``False`` for a class that would do is only slower to define)."""
    if "__init__" in cls.__dict__ or hasattr(cls, "__post_init__"):
        return False
    reserved = {"self", "__dataclass_fill__"}
    for klass in cls.__mro__:
        if klass is not cls and not hasattr(klass, "__dataclass_fields__"):
            continue
        for name, annotation in inspect.get_annotations(klass).items():
            text = annotation if isinstance(annotation, str) else repr(annotation)
            if name in reserved or "InitVar" in text or "KW_ONLY" in text:
                return False
            value = klass.__dict__.get(name)
            if isinstance(value, dataclasses.Field) and (not value.init or value.kw_only is True):
                return False
        if klass is not cls and any(not f.init or f.kw_only for f in dataclasses.fields(klass)):
            return False
    return True


def _shared_init(cls: type, frozen: bool) -> Any:
    """``cls``'s ``__init__`` made from :func:`_init_code` (``cls`` is :func:`_plain`)."""
    fields = dataclasses.fields(cls)
    names = tuple(f.name for f in fields)
    defaults: list[Any] = []
    factories: dict[str, Any] = {}
    for f in fields:
        if f.default_factory is not dataclasses.MISSING:
            factories[f.name] = f.default_factory
            defaults.append(_FACTORY)
        elif f.default is not dataclasses.MISSING:
            defaults.append(f.default)
        elif defaults:  # the standard library's error, word for word
            raise TypeError(f"non-default argument {f.name!r} follows default argument")
    qualname = f"{cls.__qualname__}.__init__"
    code = _init_code(len(names)).replace(co_varnames=("self", *names), co_qualname=qualname)
    module = sys.modules.get(cls.__module__)
    init = FunctionType(
        code,
        module.__dict__ if module is not None else {},
        "__init__",
        tuple(defaults) or None,
        (CellType(_filler(names, factories, frozen)),),
    )
    init.__qualname__ = qualname
    init.__annotations__ = {f.name: f.type for f in fields} | {"return": None}
    return init


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
            plain = not kwargs.keys() & {"init", "kw_only"} and _plain(cls)
            undocumented = plain and not own.get("__doc__")
            if undocumented:
                # The library would write the docstring from the signature of an __init__
                # not made yet (the class has none): written below, once it is.
                cls.__doc__ = "-"
            options = {**kwargs, "init": False} if plain else kwargs
            # A frozen class's __setattr__/__delattr__ shared too, where nothing else in
            # its hierarchy is a dataclass (the library checks frozen against the bases)
            # and it has none of its own (the library's error for those).
            shared_frozen = (
                frozen
                and plain
                and not any(hasattr(base, "__dataclass_fields__") for base in cls.__mro__[1:])
                and "__setattr__" not in own
                and "__delattr__" not in own
            )
            new = dataclasses.dataclass(
                cls, repr=False, eq=False, frozen=frozen and not shared_frozen, **options
            )
            if shared_frozen:
                _freeze(new, slots=bool(kwargs.get("slots")))
            if plain:
                new.__init__ = _shared_init(new, frozen)
                if undocumented:  # the library's docstring: the name and the signature
                    new.__doc__ = new.__name__ + str(inspect.signature(new)).replace(" -> None", "")
            if repr:
                new.__repr__ = _repr
            if eq:
                # The standard library's rule: eq and frozen hash the fields; eq alone
                # makes instances unhashable.
                new.__eq__ = _eq
                new.__hash__ = _hash if frozen else None
            return new

        return wrap if cls is None else wrap(cls)
