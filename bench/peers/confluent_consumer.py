"""Peer: confluent-kafka ``consume()`` with ``group.protocol=consumer`` (KIP-848)."""

from __future__ import annotations

from .confluent import main

if __name__ == "__main__":
    main(consumer_protocol=True)
