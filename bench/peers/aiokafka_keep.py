"""Peer: aiokafka ``getmany()``, keeping every message in a list until the end."""

from __future__ import annotations

import asyncio

from .aiokafka_getmany import amain

if __name__ == "__main__":
    asyncio.run(amain(keep=True))
