"""Finding the consumer's optional C extensions (``_crecords``, ``_cstream``).

``setup.py`` builds them when a C compiler is there; without one, or with
``CONSUMERGROUP_PURE_PYTHON`` set (to anything but empty or ``0``), their callers use
the pure-Python paths, which give the same results.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

__all__ = ["load_extension"]


def load_extension(name: str) -> ModuleType | None:
    """``consumergroup.consumer.<name>``, or None: not built, or disabled with
    ``CONSUMERGROUP_PURE_PYTHON``."""
    if os.environ.get("CONSUMERGROUP_PURE_PYTHON", "") not in ("", "0"):
        return None
    try:
        return importlib.import_module(f"{__package__}.{name}")
    except ImportError:
        return None
