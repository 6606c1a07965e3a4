"""Peer: consumergroup, ``claim.messages()`` + mark, with ``cg.CooperativeStickyAssignor()``."""

from __future__ import annotations

from ._cg import main

if __name__ == "__main__":
    main("messages", cooperative=True)
