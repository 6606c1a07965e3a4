"""A fake multi-broker cluster in front of one embedded broker, for fault injection.

Each fake node is a loopback port whose connections are forwarded to the one
real broker. Metadata answers are rewritten (with aiokafka's codecs) so the
client sees the fake nodes and the partition leaders the test chose, and every
route can fail on its own:

* ``blackhole(node)``: every connection to it, live or new, is accepted and then
  never answered (a half-open peer, a dead host behind a NAT); with
  ``live=False`` only new ones;
* ``freeze(node)``: only the connections open now go silent; new ones work (a
  connection that went half-open while the broker lives on);
* ``refuse(node)``: live connections are cut and new ones closed at once;
* ``restore(node)``: forward normally again.

``rewrite_response(api_key, version, frame) -> frame`` may alter any response
frame (after the 4-byte size: correlation id, then the body) before it reaches
the client; ``on_accept(node)``, when set, is awaited before a new connection to
``node`` is forwarded (a dial held while the test changes the cluster).
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from tests.integration.metadata_codec import rewrite_metadata


@dataclass(eq=False)
class _Link:
    """One client connection and its upstream twin."""

    node: int
    writers: tuple[asyncio.StreamWriter, asyncio.StreamWriter]
    flowing: asyncio.Event = field(default_factory=asyncio.Event)

    def close(self) -> None:
        for writer in self.writers:
            writer.close()


class FakeCluster:
    """``nodes`` fake brokers (ids 1..nodes) forwarding to ``127.0.0.1:target_port``."""

    def __init__(self, target_port: int, nodes: int = 2) -> None:
        self.target_port = target_port
        self.node_ids = list(range(1, nodes + 1))
        self.ports: dict[int, int] = {}
        #: (topic, partition) -> leader node id; unset partitions are led by node 1.
        self.leaders: dict[tuple[str, int], int] = {}
        self.rewrite_response: Callable[[int, int, bytes], bytes] | None = None
        self.on_accept: Callable[[int], Awaitable[None]] | None = None
        self._mode: dict[int, str] = dict.fromkeys(self.node_ids, "up")
        self._servers: list[asyncio.Server] = []
        self._links: set[_Link] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    def address(self, node: int = 1) -> str:
        """``127.0.0.1:PORT`` of fake node ``node``."""
        return f"127.0.0.1:{self.ports[node]}"

    async def __aenter__(self) -> FakeCluster:
        for node in self.node_ids:
            server = await asyncio.start_server(
                lambda r, w, node=node: self._accept(node, r, w), "127.0.0.1", 0
            )
            self.ports[node] = server.sockets[0].getsockname()[1]
            self._servers.append(server)
        return self

    async def __aexit__(self, *exc: object) -> None:
        for server in self._servers:
            server.close()
        for link in list(self._links):
            link.flowing.set()
            link.close()
        for task in list(self._tasks):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for server in self._servers:
            await server.wait_closed()

    # ------------------------------------------------------------------ faults

    def blackhole(self, node: int, *, live: bool = True) -> None:
        """New connections to ``node`` go silent, and live ones too unless ``live`` is False."""
        self._mode[node] = "blackhole"
        if live:
            self.freeze(node)

    def freeze(self, node: int) -> None:
        """The connections to ``node`` open now go silent (new ones work)."""
        for link in self._links:
            if link.node == node:
                link.flowing.clear()
                for writer in link.writers:  # stop reading too: the peer's buffers fill up
                    writer.transport.pause_reading()

    def refuse(self, node: int) -> None:
        """Cut ``node``'s connections and close new ones at once."""
        self._mode[node] = "refuse"
        for link in [link for link in self._links if link.node == node]:
            link.flowing.set()
            link.close()
            self._links.discard(link)

    def restore(self, node: int) -> None:
        """``node`` answers again (frozen connections stay frozen: the client must redial)."""
        self._mode[node] = "up"

    # ------------------------------------------------------------------ plumbing

    async def _accept(
        self, node: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        if self._mode[node] == "refuse":
            writer.close()
            return
        if self.on_accept is not None:
            await self.on_accept(node)
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.close()
            return
        link = _Link(node, (writer, up_writer))
        if self._mode[node] == "up":
            link.flowing.set()
        self._links.add(link)
        pending: dict[int, int] = {}
        for coro in (
            self._pipe(link, reader, up_writer, pending, requests=True),
            self._pipe(link, up_reader, writer, pending, requests=False),
        ):
            task = asyncio.create_task(coro)
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _pipe(
        self,
        link: _Link,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        pending: dict[int, int],
        *,
        requests: bool,
    ) -> None:
        try:
            while True:
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                frame = await reader.readexactly(size)
                await link.flowing.wait()
                if requests:
                    key, version, cid = struct.unpack_from(">hhi", frame, 0)
                    pending[cid] = key << 16 | version
                else:
                    (cid,) = struct.unpack_from(">i", frame, 0)
                    tag = pending.pop(cid, -1)
                    frame = self._response(tag >> 16, tag & 0xFFFF, frame)
                writer.write(struct.pack(">i", len(frame)) + frame)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()
            self._links.discard(link)

    def _response(self, key: int, version: int, frame: bytes) -> bytes:
        if key == 3:
            frame = self._metadata(version, frame)
        if self.rewrite_response is not None:
            frame = self.rewrite_response(key, version, frame)
        return frame

    def _metadata(self, version: int, frame: bytes) -> bytes:
        def lead(topic: str, p: dict[str, object]) -> dict[str, object]:
            leader = self.leaders.get((topic, p["partition"]), self.node_ids[0])  # type: ignore[arg-type]
            return p | {"leader": leader, "replicas": [leader], "isr": [leader]}

        return rewrite_metadata(
            version,
            frame,
            brokers=[(n, "127.0.0.1", self.ports[n]) for n in self.node_ids],
            controller_id=self.node_ids[0],
            partition=lead,
        )
