"""consumergroup: an asyncio runtime for Kafka consumer groups.

Public API (re-exports only; see docs/architecture.md for where each lives)::

    import consumergroup as cg

    class Handler(cg.ConsumerGroupHandler):
        async def consume_claim(self, session, claim):
            async for msg in claim.messages():
                session.mark_message(msg)

    async with cg.ConsumerGroup(["127.0.0.1:9092"], "my-group", cg.Config()) as group:
        await group.run(["topic-a"], Handler())
"""

import importlib
from types import ModuleType

from .balance import (
    BalanceStrategy,
    CooperativeStickyAssignor,
    RangeAssignor,
    RoundRobinAssignor,
    StickyAssignor,
)
from .client import Client
from .config import OFFSET_NEWEST, OFFSET_OLDEST, Config
from .consumer import Consumer, PartitionConsumer
from .errors import (
    ClosedError,
    ConfigurationError,
    ConsumerError,
    ConsumerGroupError,
    KafkaConnectionError,
    KafkaError,
    ListenerMismatchError,
    NoBrokersAvailableError,
    SilentListenerError,
)
from .group import (
    ConsumerGroup,
    ConsumerGroupClaim,
    ConsumerGroupHandler,
    ConsumerGroupSession,
    GroupObserver,
    GroupState,
    GroupStats,
    PartitionStats,
)
from .message import ConsumerMessage, RecordHeader

__version__ = "0.1.0"

__all__ = [
    "OFFSET_NEWEST",
    "OFFSET_OLDEST",
    "BalanceStrategy",
    "Client",
    "ClosedError",
    "Config",
    "ConfigurationError",
    "Consumer",
    "ConsumerError",
    "ConsumerGroup",
    "ConsumerGroupClaim",
    "ConsumerGroupError",
    "ConsumerGroupHandler",
    "ConsumerGroupSession",
    "ConsumerMessage",
    "CooperativeStickyAssignor",
    "GroupObserver",
    "GroupState",
    "GroupStats",
    "KafkaConnectionError",
    "KafkaError",
    "ListenerMismatchError",
    "NoBrokersAvailableError",
    "PartitionConsumer",
    "PartitionStats",
    "RangeAssignor",
    "RecordHeader",
    "RoundRobinAssignor",
    "SilentListenerError",
    "StickyAssignor",
    "__version__",
]


def __getattr__(name: str) -> ModuleType:
    """``cg.testing`` without importing it (and the broker launcher) on ``import consumergroup``."""
    if name == "testing":
        return importlib.import_module(f"{__name__}.testing")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
