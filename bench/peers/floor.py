"""Reference row (not a client): the floor of a one-thread asyncio consumer.

What the least a Python consumer on an asyncio event loop does per Fetch answer costs,
measured beside ours (``python -m bench.latency --peers cg_messages,floor,franz``): one
connection to the one broker, a Fetch v11 naming every partition each round (no group,
no fetch session, no commits), and the answer handled in the protocol's own callback,
which decodes it (our codec and C record decoder), stamps every record as a handler would
and writes the next Fetch. No task, queue or future between the socket and the stamp.
Latency mode only; one broker (the bench's), reading from offset 0.
"""

from __future__ import annotations

import asyncio
import socket
import time
from typing import cast

import consumergroup as cg
from consumergroup.consumer.records import scan_records
from consumergroup.net.fetch import FetchRequest, decode_fetch_response

from ._common import LatencyLog, Recorder, emit, parse_args, sent_ns, watch_stdin

_VERSION = 11  # the last Fetch version without a fetch session's bookkeeping to skip


class _Floor(asyncio.Protocol):
    """The whole consumer: frames in, records stamped, the next Fetch out."""

    def __init__(self, topic: str, partitions: list[int], log: LatencyLog) -> None:
        self.topic = topic
        self.log = log
        self.buf = bytearray()
        self.offsets = dict.fromkeys(partitions, 0)
        self.correlation = 0
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.fetch()

    def fetch(self) -> None:
        assert self.transport is not None
        parts = [(p, offset, 1048576) for p, offset in self.offsets.items()]
        request = FetchRequest(500, 1, 52428800, 0, [(self.topic, parts)]).build(_VERSION)
        self.correlation += 1
        self.transport.write(request.frame(self.correlation, "floor", sized=True))

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        while len(buf) >= 4:
            size = int.from_bytes(buf[:4], "big")
            if len(buf) < 4 + size:
                return
            frame = bytes(buf[4 : 4 + size])
            del buf[: 4 + size]
            self.answer(frame)

    def answer(self, frame: bytes) -> None:
        add, now = self.log.add, time.monotonic_ns
        for topic, parts in decode_fetch_response(_VERSION, frame).topics or ():
            for part in parts or ():
                partition, error, records = part[0], part[1], part[-1]
                if error or not records or topic is None:
                    continue
                found = scan_records(topic, partition, records, self.offsets[partition])
                messages = found.decode_whole()
                if messages is None:
                    messages = [m for batch in found.decode_batches() for m in batch]
                for msg in messages:
                    add(sent_ns(msg.value or b""), now())
                self.offsets[partition] = found.next_offset
        self.fetch()


async def _amain() -> None:
    args = parse_args("reference: the floor of an asyncio consumer")
    emit({"ev": "hello", "t": time.monotonic()})
    if args.mode != "latency":
        raise SystemExit("the floor reference runs in latency mode only")
    log = LatencyLog()
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    watch_stdin(lambda: loop.call_soon_threadsafe(stop.set))
    async with cg.Client([args.bootstrap]) as client:
        partitions = await client.partitions(args.topic, refresh=True)
    host, port = args.bootstrap.split(",")[0].rsplit(":", 1)
    emit({"ev": "start", "t": time.monotonic()})
    transport, _ = await loop.create_connection(
        lambda: _Floor(args.topic, partitions, log), host, int(port)
    )
    emit({"ev": "assigned", "t": time.monotonic(), "parts": partitions})
    await stop.wait()
    transport.close()
    Recorder(stream=True).result(records=log.write(args.out))


if __name__ == "__main__":
    asyncio.run(_amain())
