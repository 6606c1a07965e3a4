"""Group protocol: membership (join/sync/heartbeat), sessions, claims, the group itself."""

from .claim import ConsumerGroupClaim
from .consumer_group import ConsumerGroup
from .handler import ConsumerGroupHandler
from .session import ConsumerGroupSession
from .state import GroupObserver, GroupState, GroupStats, PartitionStats

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
