"""Partition assignors and the "consumer" embedded protocol they exchange through the broker.

Each name loads its module on first use (``consumergroup._lazy``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import _lazy

__all__ = [
    "BalanceStrategy",
    "CooperativeStickyAssignor",
    "MemberAssignment",
    "MemberSubscription",
    "RangeAssignor",
    "RoundRobinAssignor",
    "StickyAssignor",
]

_LAZY: dict[str, tuple[str, str]] = {
    "BalanceStrategy": (f"{__name__}.strategy", "BalanceStrategy"),
    "CooperativeStickyAssignor": (f"{__name__}.cooperative", "CooperativeStickyAssignor"),
    "MemberAssignment": (f"{__name__}.protocol", "MemberAssignment"),
    "MemberSubscription": (f"{__name__}.protocol", "MemberSubscription"),
    "RangeAssignor": (f"{__name__}.range", "RangeAssignor"),
    "RoundRobinAssignor": (f"{__name__}.roundrobin", "RoundRobinAssignor"),
    "StickyAssignor": (f"{__name__}.sticky", "StickyAssignor"),
}

if TYPE_CHECKING:
    from .cooperative import CooperativeStickyAssignor as CooperativeStickyAssignor
    from .protocol import MemberAssignment as MemberAssignment
    from .protocol import MemberSubscription as MemberSubscription
    from .range import RangeAssignor as RangeAssignor
    from .roundrobin import RoundRobinAssignor as RoundRobinAssignor
    from .sticky import StickyAssignor as StickyAssignor
    from .strategy import BalanceStrategy as BalanceStrategy

__getattr__, __dir__ = _lazy.exports(globals(), _LAZY)
