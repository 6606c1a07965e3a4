"""Fetch path: partition consumers, per-broker fetch tasks, record decoding."""

from .consumer import Consumer
from .partition import PartitionConsumer

__all__ = ["Consumer", "PartitionConsumer"]
