"""Peer: consumergroup ``claim.batches()``, keeping every message in a list until the end."""

from __future__ import annotations

from ._cg import main

if __name__ == "__main__":
    main("batches_keep")
