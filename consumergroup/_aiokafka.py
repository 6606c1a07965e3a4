"""aiokafka's wire codecs without aiokafka's clients.

This package uses aiokafka for its codecs only (``aiokafka.protocol``, ``aiokafka.record``,
``aiokafka.codec``, ``aiokafka.errors``). Any ``import aiokafka.<submodule>`` runs the
package's ``__init__`` first, and aiokafka's ``__init__`` imports its clients (consumer,
producer, client, connection, coordinator, admin's dependencies): about a sixth of what a
consumer process imports, for code this package never runs.

:func:`install` (called by ``consumergroup/__init__.py`` before anything imports aiokafka)
puts the ``aiokafka`` package into ``sys.modules`` without running its ``__init__``: a
module made from aiokafka's own import spec, so ``__path__``, ``__spec__``, ``__file__``
are the real ones and every submodule imports as usual (Python imports a submodule given
its parent's ``__path__``; it never needs the parent's other names). Whoever needs more of
the package gets it, through the module's ``__getattr__``, on the first lookup of a name
the ``__init__`` would have set:

* a submodule's name (``aiokafka.errors``, ``from aiokafka import errors``): that
  submodule is imported, nothing else (as with the real package);
* ``__version__``: read from the ``__init__``'s source (aiokafka's own modules take it
  at import: ``client.py``, ``consumer/consumer.py``, ``admin/client.py``), so importing
  one of those directly does not run the ``__init__`` half-way through their own import;
* anything else (``aiokafka.AIOKafkaProducer``, ``from aiokafka import TopicPartition``,
  ``__all__``): the real ``__init__`` runs, once, in this very module object, and the
  name is served from it; ``__getattr__`` then leaves the module.

So a program (or a test) that uses aiokafka's clients beside this package works as if
nothing happened; it just pays their import when it asks for them.

Why this holds across aiokafka versions: it relies on (1) the import system's documented
behaviour (a package in ``sys.modules`` with a ``__path__`` is a package; submodule
imports consult only ``__path__``), and (2) aiokafka's submodules taking nothing from the
package namespace but ``__version__`` and submodules. (2) is checked, for the installed
version, by ``tests/unit/test_import_cost.py``, which imports every aiokafka module with
this in place, then the package's public names, and by the codecs-only check that the
consumer path leaves aiokafka's clients unimported. A program that imported aiokafka
before this package keeps the real module: :func:`install` changes nothing then.
"""

from __future__ import annotations

import _thread
import importlib.util
import re
import sys
from types import ModuleType
from typing import Any

NAME = "aiokafka"


def install() -> None:
    """Put the un-initialised aiokafka package in ``sys.modules`` (see the module doc).

    Does nothing when aiokafka is already imported or not installed (its absence is
    reported where its codecs are imported, as before).
    """
    if NAME in sys.modules:
        return
    spec = importlib.util.find_spec(NAME)
    if spec is None or spec.loader is None or not spec.submodule_search_locations:
        return
    module = importlib.util.module_from_spec(spec)
    module.__getattr__ = _Completion(module)  # type: ignore[method-assign]
    sys.modules[NAME] = module


class _Completion:
    """The package's ``__getattr__`` until its real ``__init__`` has run."""

    def __init__(self, module: ModuleType) -> None:
        # Touched by any thread that looks a missing name up; ``_lock`` orders them.
        self._module = module
        self._lock = _thread.RLock()
        self._running = False

    def __call__(self, name: str) -> Any:
        module = self._module
        if not name.startswith("__") and importlib.util.find_spec(f"{NAME}.{name}"):
            return importlib.import_module(f"{NAME}.{name}")
        if name == "__version__":
            with open(module.__file__ or "", encoding="utf-8") as source:
                found = re.search(r"^__version__\s*=\s*[\"']([^\"']+)[\"']", source.read(), re.M)
            if found:
                module.__dict__["__version__"] = found.group(1)
                return found.group(1)
        with self._lock:
            if self._running:  # a lookup made by the __init__ itself: not set yet
                raise AttributeError(f"module {NAME!r} has no attribute {name!r}")
            if module.__dict__.get("__getattr__") is self:
                self._running = True
                try:
                    module.__spec__.loader.exec_module(module)  # type: ignore[union-attr]
                finally:
                    self._running = False
                del module.__getattr__
        try:
            return module.__dict__[name]
        except KeyError:
            raise AttributeError(f"module {NAME!r} has no attribute {name!r}") from None
