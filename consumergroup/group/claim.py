"""ConsumerGroupClaim: one partition a session owns, and its message stream."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..consumer.partition import PartitionConsumer
    from ..message import ConsumerMessage


class ConsumerGroupClaim:
    """A claimed partition (sarama's ``ConsumerGroupClaim``).

    Its iterators end when the session ends; they raise
    :class:`~consumergroup.ConsumerError` if the partition fails for good.
    """

    def __init__(self, pc: PartitionConsumer, initial_offset: int) -> None:
        self._pc = pc
        self.topic = pc.topic
        self.partition = pc.partition
        self.initial_offset = initial_offset

    def __repr__(self) -> str:
        return f"<ConsumerGroupClaim {self.topic}/{self.partition} from {self.initial_offset}>"

    @property
    def high_water_mark_offset(self) -> int:
        """The partition's high watermark as of the latest fetch (-1 before the first)."""
        return self._pc.high_water_mark_offset

    def messages(self) -> AsyncIterator[ConsumerMessage]:
        """One message at a time, in offset order."""
        return self._pc.messages()

    def batches(self) -> AsyncIterator[list[ConsumerMessage]]:
        """Decoded chunks as fetched: the fast path (the list is yours; no copy is made)."""
        return self._pc.batches()
