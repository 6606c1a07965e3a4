"""Share groups (KIP-932, "queues for Kafka"; Apache Kafka 4.2+): records, not partitions,
handed to the members of a group, each acknowledged on its own.

Not imported by ``import consumergroup``: ``cg.ShareGroup``, ``cg.ShareGroupHandler`` and
``cg.AckType`` load this package on first use. The layers, top down: :mod:`.group` (the
user's :class:`ShareGroup`), :mod:`.run` (one ``run()``: workers, router, heartbeats),
:mod:`.membership` (ShareGroupHeartbeat), :mod:`.broker` (one share session per leader:
ShareFetch / ShareAcknowledge), :mod:`.inflight` (the records held), :mod:`.acquired`
(the acquired records of an answer), :mod:`.acks` (acknowledgement ranges),
:mod:`.record`, :mod:`.handler`; :mod:`.admin` for the operators' side.
"""

from .group import ShareGroup, ShareGroupStats, SharePartitionStats
from .handler import ShareGroupHandler, ShareSession
from .record import AckType, ShareRecord

__all__ = [
    "AckType",
    "ShareGroup",
    "ShareGroupHandler",
    "ShareGroupStats",
    "SharePartitionStats",
    "ShareRecord",
    "ShareSession",
]
