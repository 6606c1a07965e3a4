"""Peer: confluent-kafka ``consume()`` with ``partition.assignment.strategy=cooperative-sticky``."""

from __future__ import annotations

from .confluent import main

if __name__ == "__main__":
    main(cooperative=True)
