"""Peer: consumergroup, ``claim.messages()`` + mark, on the consumer group protocol (KIP-848)."""

from __future__ import annotations

from ._cg import main

if __name__ == "__main__":
    main("messages", consumer=True)
