"""Partition assignors and the "consumer" embedded protocol they exchange through the broker."""

from __future__ import annotations

from consumergroup.balance.cooperative import CooperativeStickyAssignor
from consumergroup.balance.protocol import MemberAssignment, MemberSubscription
from consumergroup.balance.range import RangeAssignor
from consumergroup.balance.roundrobin import RoundRobinAssignor
from consumergroup.balance.sticky import StickyAssignor
from consumergroup.balance.strategy import BalanceStrategy

__all__ = [
    "BalanceStrategy",
    "CooperativeStickyAssignor",
    "MemberAssignment",
    "MemberSubscription",
    "RangeAssignor",
    "RoundRobinAssignor",
    "StickyAssignor",
]
