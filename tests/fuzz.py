"""How many cases the property-based (hypothesis) and fuzz tests run.

``make test`` and ``make test-quick`` run a quarter of each test's full count (the same
properties, the same strategies; fewer random cases per run). ``make fuzz``
(``CONSUMERGROUP_FUZZ=full``) runs the full counts. The sanitized C build
(``tests/c_sanitized.sh``, every C call about 20 times slower) sets
``CONSUMERGROUP_FUZZ=sanitized``: a tenth. Every count keeps a floor of 10 cases.
"""

from __future__ import annotations

import os

_SCALES = {"full": 1.0, "default": 0.25, "sanitized": 0.1}


def mode() -> str:
    """``full``, ``default`` or ``sanitized`` (from ``CONSUMERGROUP_FUZZ``)."""
    chosen = os.environ.get("CONSUMERGROUP_FUZZ") or "default"
    if chosen not in _SCALES:
        raise ValueError(f"CONSUMERGROUP_FUZZ={chosen!r}: use one of {', '.join(_SCALES)}")
    return chosen


def examples(full: int) -> int:
    """The number of cases to run of a test whose full count is ``full``."""
    return max(10, round(full * _SCALES[mode()]))


def full() -> bool:
    """True under ``make fuzz``: exhaustive loops run every value, not a sample."""
    return mode() == "full"
