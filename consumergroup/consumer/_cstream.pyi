"""Type stub of the C extension ``_cstream.c``: ``PartitionConsumer.messages()``,
``PartitionConsumer.batches()`` and ``session.mark_message`` in C."""

from collections.abc import AsyncIterator, Generator
from typing import Any, Protocol

from consumergroup.consumer.partition import PartitionConsumer
from consumergroup.message import ConsumerMessage

class MessageStream(AsyncIterator[ConsumerMessage]):
    """The messages of ``pc`` from its current position; its own ``__anext__`` awaitable."""

    def __init__(self, pc: PartitionConsumer, /) -> None: ...
    def __anext__(self) -> MessageStream: ...  # its own awaitable
    def __await__(self) -> Generator[Any, None, ConsumerMessage]: ...
    def send(self, value: Any, /) -> Any:
        """Send a value into the pending await."""
    def throw(self, typ: Any, val: Any = ..., tb: Any = ..., /) -> Any:
        """Raise in the pending await."""
    def close(self) -> None:
        """Abandon the pending await."""

class BatchStream(AsyncIterator[list[ConsumerMessage]]):
    """The lists of ``pc`` (its ``batches()``); its own ``__anext__`` awaitable."""

    def __init__(self, pc: PartitionConsumer, /) -> None: ...
    def __anext__(self) -> BatchStream: ...  # its own awaitable
    def __await__(self) -> Generator[Any, None, list[ConsumerMessage]]: ...
    def send(self, value: Any, /) -> Any:
        """Send a value into the pending await."""
    def throw(self, typ: Any, val: Any = ..., tb: Any = ..., /) -> Any:
        """Raise in the pending await."""
    def close(self) -> None:
        """Abandon the pending await."""

class _Position(Protocol):
    topic: str
    partition: int
    last: int
    metadata: str

class Marks:
    """``OffsetManager.mark_message`` over its ``positions`` (``position_type`` instances,
    keyed by (topic, partition)), with the position marked last cached."""

    def __init__(
        self,
        positions: dict[tuple[str, int], Any],
        position_type: type[_Position],
        message_type: type[ConsumerMessage],
        /,
    ) -> None: ...
    def mark_message(self, msg: ConsumerMessage, metadata: str = "") -> None:
        """Move the position of ``msg``'s partition to ``msg.offset`` if that is forward."""
    def forget(self) -> None:
        """Drop the cached position (after the positions dict changed)."""
