"""Fetch path: partition consumers, per-broker fetch tasks, record decoding.

Each name loads its module on first use (``consumergroup._lazy``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import _lazy

__all__ = ["Consumer", "PartitionConsumer"]

_LAZY: dict[str, tuple[str, str]] = {
    "Consumer": (f"{__name__}.consumer", "Consumer"),
    "PartitionConsumer": (f"{__name__}.partition", "PartitionConsumer"),
}

if TYPE_CHECKING:
    from .consumer import Consumer as Consumer
    from .partition import PartitionConsumer as PartitionConsumer

__getattr__, __dir__ = _lazy.exports(globals(), _LAZY)
