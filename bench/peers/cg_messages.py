"""Peer: consumergroup, ``claim.messages()`` + ``session.mark_message`` per message."""

from __future__ import annotations

from ._cg import main

if __name__ == "__main__":
    main("messages")
