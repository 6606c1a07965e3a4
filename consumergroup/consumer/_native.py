"""Finding the optional C extensions (the consumer's ``_crecords`` and ``_cstream``, the
producer's ``_cproduce``).

``setup.py`` builds them when a C compiler is there; without one, or with
``CONSUMERGROUP_PURE_PYTHON`` set (to anything but empty or ``0``), their callers use
the pure-Python paths, which give the same results at about 10x the CPU per record.
That fallback is never silent: :func:`warn_if_pure_python` logs it once per process
(when the first partition is opened), and ``group.stats().c_extensions`` says it.
"""

from __future__ import annotations

import importlib
import logging
import os
from types import ModuleType

__all__ = ["c_extensions_in_use", "load_extension", "warn_if_pure_python"]

log = logging.getLogger("consumergroup")

# Written once per extension at import (module level, by load_extension); read by the
# functions below. Name -> why it is not in use ("" when it is).
_MISSING: dict[str, str] = {}
# Set by the first warn_if_pure_python call on the event loop; never reset.
_warned = False


def _disabled() -> bool:
    return os.environ.get("CONSUMERGROUP_PURE_PYTHON", "") not in ("", "0")


def load_extension(name: str, package: str = __package__) -> ModuleType | None:
    """``<package>.<name>`` (a module of ``consumergroup.consumer`` by default), or None:
    not built, or disabled with ``CONSUMERGROUP_PURE_PYTHON``."""
    if _disabled():
        _MISSING[name] = "disabled by CONSUMERGROUP_PURE_PYTHON"
        return None
    try:
        module = importlib.import_module(f"{package}.{name}")
    except ImportError as exc:
        _MISSING[name] = f"not built ({exc})"
        return None
    _MISSING[name] = ""
    return module


def c_extensions_in_use() -> bool:
    """True when every C extension loaded (the fast paths), False on the pure-Python ones."""
    return not any(_MISSING.values())


def warn_if_pure_python() -> None:
    """Log, once per process, that the pure-Python fallback runs because the extensions
    were not built (a chosen ``CONSUMERGROUP_PURE_PYTHON`` is logged at info level)."""
    global _warned
    if _warned or c_extensions_in_use():
        return
    _warned = True
    why = "; ".join(f"{name}: {reason}" for name, reason in sorted(_MISSING.items()) if reason)
    if _disabled():
        log.info("consumergroup runs its pure-Python record decoder (%s)", why)
        return
    log.warning(
        "consumergroup's C extensions are not in use (%s): records are decoded in pure "
        "Python, at about 10x the CPU per record. Install a C compiler and the Python "
        "headers (e.g. apt-get install gcc python3-dev) and reinstall consumergroup; "
        "set CONSUMERGROUP_PURE_PYTHON=1 to choose the fallback without this warning",
        why,
    )
