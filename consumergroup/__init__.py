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

from typing import TYPE_CHECKING

from . import _aiokafka, _lazy
from .config import OFFSET_NEWEST, OFFSET_OLDEST, Config
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
from .message import ConsumerMessage, RecordHeader

_aiokafka.install()  # before anything imports aiokafka's codecs: see _aiokafka.py

__version__ = "0.1.0"

__all__ = [
    "OFFSET_NEWEST",
    "OFFSET_OLDEST",
    "AckType",
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
    "ShareGroup",
    "ShareGroupHandler",
    "ShareGroupStats",
    "ShareRecord",
    "ShareSession",
    "SilentListenerError",
    "StickyAssignor",
    "__version__",
    "run",
]


# Public names whose modules load on first use, not on ``import consumergroup``
# (``_lazy.py``): ``import consumergroup`` costs the configuration, the errors and the
# message type; the network stack, the group runtime, the assignors and every optional
# path (producer, OAuth, the broker launcher, ...) load when a program first touches a
# name that lives there. Each entry: public name -> (module, attribute; "" for the module
# itself). A name added here goes in ``__all__`` and in the TYPE_CHECKING block below too;
# tests/unit/test_import_cost.py lists what ``import consumergroup`` must not load.
_LAZY: dict[str, tuple[str, str]] = {
    "run": (f"{__name__}._run", "run"),
    "BalanceStrategy": (f"{__name__}.balance.strategy", "BalanceStrategy"),
    "CooperativeStickyAssignor": (f"{__name__}.balance.cooperative", "CooperativeStickyAssignor"),
    "RangeAssignor": (f"{__name__}.balance.range", "RangeAssignor"),
    "RoundRobinAssignor": (f"{__name__}.balance.roundrobin", "RoundRobinAssignor"),
    "StickyAssignor": (f"{__name__}.balance.sticky", "StickyAssignor"),
    "Client": (f"{__name__}.client", "Client"),
    "Consumer": (f"{__name__}.consumer.consumer", "Consumer"),
    "PartitionConsumer": (f"{__name__}.consumer.partition", "PartitionConsumer"),
    "ConsumerGroup": (f"{__name__}.group.consumer_group", "ConsumerGroup"),
    "ConsumerGroupClaim": (f"{__name__}.group.claim", "ConsumerGroupClaim"),
    "ConsumerGroupHandler": (f"{__name__}.group.handler", "ConsumerGroupHandler"),
    "ConsumerGroupSession": (f"{__name__}.group.session", "ConsumerGroupSession"),
    "GroupObserver": (f"{__name__}.group.state", "GroupObserver"),
    "GroupState": (f"{__name__}.group.state", "GroupState"),
    "GroupStats": (f"{__name__}.group.state", "GroupStats"),
    "PartitionStats": (f"{__name__}.group.state", "PartitionStats"),
    "testing": (f"{__name__}.testing", ""),
    "OIDCTokenProvider": (f"{__name__}.oauth", "OIDCTokenProvider"),
    "MSKIAMTokenProvider": (f"{__name__}.oauth", "MSKIAMTokenProvider"),
    "GroupMetadata": (f"{__name__}.producer", "GroupMetadata"),
    "Producer": (f"{__name__}.producer", "Producer"),
    "RecordMetadata": (f"{__name__}.producer", "RecordMetadata"),
    "AckType": (f"{__name__}.share.record", "AckType"),
    "ShareGroup": (f"{__name__}.share.group", "ShareGroup"),
    "ShareGroupHandler": (f"{__name__}.share.handler", "ShareGroupHandler"),
    "ShareGroupStats": (f"{__name__}.share.group", "ShareGroupStats"),
    "ShareRecord": (f"{__name__}.share.record", "ShareRecord"),
    "ShareSession": (f"{__name__}.share.handler", "ShareSession"),
}

if TYPE_CHECKING:  # what type checkers and IDEs see for the lazy names
    from . import testing as testing
    from ._run import run as run
    from .balance import BalanceStrategy as BalanceStrategy
    from .balance import CooperativeStickyAssignor as CooperativeStickyAssignor
    from .balance import RangeAssignor as RangeAssignor
    from .balance import RoundRobinAssignor as RoundRobinAssignor
    from .balance import StickyAssignor as StickyAssignor
    from .client import Client as Client
    from .consumer import Consumer as Consumer
    from .consumer import PartitionConsumer as PartitionConsumer
    from .group import ConsumerGroup as ConsumerGroup
    from .group import ConsumerGroupClaim as ConsumerGroupClaim
    from .group import ConsumerGroupHandler as ConsumerGroupHandler
    from .group import ConsumerGroupSession as ConsumerGroupSession
    from .group import GroupObserver as GroupObserver
    from .group import GroupState as GroupState
    from .group import GroupStats as GroupStats
    from .group import PartitionStats as PartitionStats
    from .oauth import MSKIAMTokenProvider as MSKIAMTokenProvider
    from .oauth import OIDCTokenProvider as OIDCTokenProvider
    from .producer import GroupMetadata as GroupMetadata
    from .producer import Producer as Producer
    from .producer import RecordMetadata as RecordMetadata
    from .share import AckType as AckType
    from .share import ShareGroup as ShareGroup
    from .share import ShareGroupHandler as ShareGroupHandler
    from .share import ShareGroupStats as ShareGroupStats
    from .share import ShareRecord as ShareRecord
    from .share import ShareSession as ShareSession

__getattr__, __dir__ = _lazy.exports(globals(), _LAZY)
