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
from typing import TYPE_CHECKING, Any

from ._run import run
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
    "GroupMetadata",
    "GroupObserver",
    "GroupState",
    "GroupStats",
    "KafkaConnectionError",
    "KafkaError",
    "ListenerMismatchError",
    "MSKIAMTokenProvider",
    "NoBrokersAvailableError",
    "OIDCTokenProvider",
    "PartitionConsumer",
    "PartitionStats",
    "Producer",
    "RangeAssignor",
    "RecordHeader",
    "RecordMetadata",
    "RoundRobinAssignor",
    "SilentListenerError",
    "StickyAssignor",
    "__version__",
    "run",
]


# Public names whose modules load on first use, not on ``import consumergroup``: a path a
# program may never take (the broker launcher, ...) costs nothing until it is taken. Each
# entry: public name -> (module, attribute; "" for the module itself). A name added here
# goes in ``__all__`` and in the TYPE_CHECKING block below too.
_LAZY: dict[str, tuple[str, str]] = {
    "testing": (f"{__name__}.testing", ""),
    "OIDCTokenProvider": (f"{__name__}.oauth", "OIDCTokenProvider"),
    "MSKIAMTokenProvider": (f"{__name__}.oauth", "MSKIAMTokenProvider"),
    "GroupMetadata": (f"{__name__}.producer", "GroupMetadata"),
    "Producer": (f"{__name__}.producer", "Producer"),
    "RecordMetadata": (f"{__name__}.producer", "RecordMetadata"),
}

if TYPE_CHECKING:  # what type checkers and IDEs see for the lazy names
    from . import testing as testing
    from .oauth import MSKIAMTokenProvider as MSKIAMTokenProvider
    from .oauth import OIDCTokenProvider as OIDCTokenProvider
    from .producer import GroupMetadata as GroupMetadata
    from .producer import Producer as Producer
    from .producer import RecordMetadata as RecordMetadata


def __getattr__(name: str) -> Any:
    """Load a lazy public name (``_LAZY``) on first use and keep it in the module."""
    try:
        module, attribute = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    loaded = importlib.import_module(module)
    value = getattr(loaded, attribute) if attribute else loaded
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
