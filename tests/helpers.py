"""Shared test helpers: producing data with aiokafka's producer, a loopback TCP proxy."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence

from aiokafka import AIOKafkaProducer

Record = tuple[bytes | None, bytes | None]  # (key, value)


async def produce(
    bootstrap: str,
    topic: str,
    values: Sequence[bytes],
    *,
    partition: int | None = None,
    keys: Sequence[bytes | None] | None = None,
    headers: Sequence[tuple[str, bytes]] = (),
    compression: str | None = None,
    linger_ms: int = 5,
) -> None:
    """Produce ``values`` (to ``partition`` when given, else round robin by key)."""
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, compression_type=compression, linger_ms=linger_ms
    )
    await producer.start()
    try:
        futures = []
        for i, value in enumerate(values):
            key = keys[i] if keys is not None else None
            p = partition if partition is not None else (None if key is not None else i)
            if p is not None and partition is None:
                parts = await producer.partitions_for(topic)
                p = sorted(parts)[i % len(parts)]
            futures.append(
                await producer.send(topic, value, key=key, partition=p, headers=list(headers))
            )
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


class TcpProxy:
    """A loopback TCP proxy in front of one broker, for fault injection.

    ``async with TcpProxy("127.0.0.1", 9092) as proxy:`` then connect to
    ``proxy.address``. ``cut()`` drops every live connection; ``pause()`` stops
    forwarding bytes (a hung peer) until ``resume()``.
    """

    def __init__(self, host: str, port: int, listen_port: int = 0) -> None:
        self.target = (host, port)
        self._server: asyncio.Server | None = None
        self._pipes: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self._flowing = asyncio.Event()
        self._flowing.set()
        self.port = listen_port

    @property
    def address(self) -> str:
        """``127.0.0.1:PORT`` of the proxy."""
        return f"127.0.0.1:{self.port}"

    async def __aenter__(self) -> TcpProxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        self.cut()
        for task in list(self._pipes):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self._server.wait_closed()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        self._writers.update((writer, up_writer))
        for src, dst in ((reader, up_writer), (up_reader, writer)):
            task = asyncio.create_task(self._pipe(src, dst))
            self._pipes.add(task)
            task.add_done_callback(self._pipes.discard)

    async def _pipe(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        try:
            while data := await src.read(65536):
                await self._flowing.wait()
                dst.write(data)
                await dst.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            dst.close()
            self._writers.discard(dst)

    def cut(self) -> None:
        """Close every proxied connection now (both sides see a reset/EOF)."""
        for writer in list(self._writers):
            writer.close()
        self._writers.clear()

    def pause(self) -> None:
        """Hold every byte in flight (the peer looks hung)."""
        self._flowing.clear()

    def resume(self) -> None:
        """Forward bytes again."""
        self._flowing.set()
