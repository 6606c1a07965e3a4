"""Peer: consumergroup, one ConsumerGroup member reading ``claim.batches()`` (the fast path)."""

from __future__ import annotations

from ._cg import main

if __name__ == "__main__":
    main("batches")
