"""Group protocol: membership (join/sync/heartbeat), sessions, claims, the group itself.

Each name loads its module on first use (``consumergroup._lazy``): the handler base class
and the state types cost no network stack.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import _lazy

__all__ = [
    "ConsumerGroup",
    "ConsumerGroupClaim",
    "ConsumerGroupHandler",
    "ConsumerGroupSession",
    "GroupObserver",
    "GroupState",
    "GroupStats",
    "PartitionStats",
]

_LAZY: dict[str, tuple[str, str]] = {
    "ConsumerGroup": (f"{__name__}.consumer_group", "ConsumerGroup"),
    "ConsumerGroupClaim": (f"{__name__}.claim", "ConsumerGroupClaim"),
    "ConsumerGroupHandler": (f"{__name__}.handler", "ConsumerGroupHandler"),
    "ConsumerGroupSession": (f"{__name__}.session", "ConsumerGroupSession"),
    "GroupObserver": (f"{__name__}.state", "GroupObserver"),
    "GroupState": (f"{__name__}.state", "GroupState"),
    "GroupStats": (f"{__name__}.stats", "GroupStats"),
    "PartitionStats": (f"{__name__}.stats", "PartitionStats"),
}

if TYPE_CHECKING:
    from .claim import ConsumerGroupClaim as ConsumerGroupClaim
    from .consumer_group import ConsumerGroup as ConsumerGroup
    from .handler import ConsumerGroupHandler as ConsumerGroupHandler
    from .session import ConsumerGroupSession as ConsumerGroupSession
    from .state import GroupObserver as GroupObserver
    from .state import GroupState as GroupState
    from .stats import GroupStats as GroupStats
    from .stats import PartitionStats as PartitionStats

__getattr__, __dir__ = _lazy.exports(globals(), _LAZY)
