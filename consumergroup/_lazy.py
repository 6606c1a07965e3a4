"""Public names of a package that load on first use (PEP 562 module ``__getattr__``).

``import consumergroup`` costs only what every program needs (the configuration, the
errors, the message type); the network stack, the group runtime and everything behind
them load when a program first touches a name that lives there (``cg.ConsumerGroup``,
``cg.Client``, ...). A name, once loaded, is stored in the package's namespace, so later
lookups are plain attribute reads. The packages' tables are the ``_LAZY`` dicts of
``consumergroup/__init__.py`` and of the subpackages.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def exports(
    namespace: dict[str, Any], table: Mapping[str, tuple[str, str]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of the package whose globals are ``namespace``.

    ``table``: public name -> (absolute module, attribute; ``""`` for the module itself).
    """
    package = namespace["__name__"]

    def __getattr__(name: str) -> Any:
        try:
            module, attribute = table[name]
        except KeyError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        loaded = importlib.import_module(module)
        value = getattr(loaded, attribute) if attribute else loaded
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *table})

    return __getattr__, __dir__
