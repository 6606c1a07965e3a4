"""The bytes ``tests/unit/test_share_protocol.py`` checks our share-group codecs against are
still what Apache Kafka's client encodes.

``tests/unit/share_wire_vectors.json`` was written by ``WireVectors`` (in the Java peer's
sources, on kafka-clients 4.4.0): this runs it again and compares, so a change of the
client's version or of the program cannot leave the unit test checking stale bytes. No
broker: needs Java and Maven (skipped with the reason where they are missing).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from tests.peers import PeerUnavailable, tool_command

VECTORS = Path(__file__).parents[1] / "unit" / "share_wire_vectors.json"


async def test_the_stored_vectors_are_the_java_clients_bytes() -> None:
    try:
        command = await asyncio.to_thread(tool_command, "peer.WireVectors")
    except PeerUnavailable as exc:
        pytest.skip(str(exc))
    proc = await asyncio.create_subprocess_exec(
        *command,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, stderr.decode()
    assert json.loads(stdout) == json.loads(VECTORS.read_text())
