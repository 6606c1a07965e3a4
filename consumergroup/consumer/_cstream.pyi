"""Type stub of the C extension ``_cstream.c``: ``PartitionConsumer.messages()`` in C."""

from collections.abc import AsyncIterator, Generator
from typing import Any

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
