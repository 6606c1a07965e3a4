"""A Kafka-aware loopback proxy that hides partitions from Metadata answers.

Tansu has no CreatePartitions, so "a topic gains partitions" is staged here: the
topic is created with its final count, and the proxy shows the members (by
client id) only the first ``visible`` partitions until the test reveals more.
It parses frames with aiokafka's codecs and forwards everything else untouched.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct

from aiokafka.protocol import metadata

_METADATA_RESPONSES = {v: getattr(metadata, f"MetadataResponse_v{v}") for v in range(6)}


class MetadataFilterProxy:
    """Forwards to ``target``; trims ``topic`` to ``visible`` partitions for ``client_id``."""

    def __init__(self, target_port: int, listen_port: int, topic: str, client_id: str) -> None:
        self.target_port = target_port
        self.port = listen_port
        self.topic = topic
        self.client_id = client_id
        self.visible: int | None = None
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> MetadataFilterProxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        pending: dict[int, tuple[int, int, str]] = {}
        for coro in (
            self._requests(reader, up_writer, pending),
            self._responses(up_reader, writer, pending),
        ):
            task = asyncio.create_task(coro)
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    @staticmethod
    async def _frame(reader: asyncio.StreamReader) -> bytes:
        size = struct.unpack(">i", await reader.readexactly(4))[0]
        return await reader.readexactly(size)

    async def _requests(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        pending: dict[int, tuple[int, int, str]],
    ) -> None:
        try:
            while True:
                frame = await self._frame(reader)
                key, version, cid, id_len = struct.unpack_from(">hhih", frame, 0)
                client_id = frame[10 : 10 + max(id_len, 0)].decode()
                pending[cid] = (key, version, client_id)
                writer.write(struct.pack(">i", len(frame)) + frame)
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    async def _responses(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        pending: dict[int, tuple[int, int, str]],
    ) -> None:
        try:
            while True:
                frame = await self._frame(reader)
                (cid,) = struct.unpack_from(">i", frame, 0)
                key, version, client_id = pending.pop(cid, (-1, -1, ""))
                if key == 3 and client_id == self.client_id and self.visible is not None:
                    frame = frame[:4] + self._trim(version, frame[4:])
                writer.write(struct.pack(">i", len(frame)) + frame)
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    def _trim(self, version: int, body: bytes) -> bytes:
        cls = _METADATA_RESPONSES[version]
        resp = cls.decode(body)
        topics = []
        for t in resp.topics:
            name_at = 1
            if t[name_at] == self.topic:
                parts = [p for p in t[-1] if p[1] < (self.visible or 0)]
                t = (*t[:-1], parts)
            topics.append(t)
        resp.topics = topics
        encoded: bytes = resp.encode()
        return encoded
