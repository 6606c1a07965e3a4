"""A loopback proxy in front of one real broker for producer faults.

Every connection of the client goes through it (a RoutingProxy). Faults:

* ``lose_answers = N``: the next N Produce answers are swallowed and the client's
  connection is cut right after, so the broker wrote the batches but the client never
  hears it (a lost answer): the client must send them again, and idempotence must keep
  the broker from writing them twice.
* ``stall()``: the proxy stops reading the client's requests (a broker that hangs: the
  client's socket buffer fills and nothing is answered); ``resume()`` lets them through.
* ``hold_answers()``: requests go on to the broker but Produce answers wait in the proxy
  (a slow broker: what the client has in flight piles up); ``release_answers()``.

``produced`` counts the Produce requests forwarded.
"""

from __future__ import annotations

import asyncio
import struct

from tests.helpers import ProxyLink, RoutingProxy

_PRODUCE = 0


class ProduceProxy(RoutingProxy):
    """Forwards to the broker on ``127.0.0.1:target_port``, with the faults above."""

    def __init__(self, target_port: int) -> None:
        super().__init__(target_port)
        self.lose_answers = 0
        self.lost = 0
        self.produced = 0
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._answering = asyncio.Event()
        self._answering.set()
        # The answer rewrite_response just saw is a Produce one (forward_response, which
        # runs right after it on the same link, holds it while answers are held).
        self._produce_answer = False

    def stall(self) -> None:
        """Stop reading requests from the client (they wait in the sockets)."""
        self._flowing.clear()

    def resume(self) -> None:
        """Read and forward requests again."""
        self._flowing.set()

    def hold_answers(self) -> None:
        """Keep Produce answers from the client (requests still go to the broker)."""
        self._answering.clear()

    def release_answers(self) -> None:
        """Deliver the held Produce answers, and the next ones at once."""
        self._answering.set()

    async def forward_request(self, link: ProxyLink, frame: bytes) -> None:
        """Hold the request while stalled (reading stops with it), count Produce ones."""
        await self._flowing.wait()
        (key,) = struct.unpack_from(">h", frame, 0)
        if key == _PRODUCE:
            self.produced += 1
        await super().forward_request(link, frame)

    def rewrite_response(self, key: int, version: int, client_id: str, frame: bytes) -> bytes:
        """Mark a Produce answer to be lost (the response hook below drops it)."""
        frame = super().rewrite_response(key, version, client_id, frame)
        self._produce_answer = key == _PRODUCE
        if key == _PRODUCE and self.lose_answers > 0:
            self.lose_answers -= 1
            self.lost += 1
            return b""
        return frame

    async def forward_response(self, link: ProxyLink, frame: bytes) -> None:
        """Forward, or cut the connection instead of delivering a lost answer."""
        if not frame:
            link.close()
            return
        if self._produce_answer:
            await self._answering.wait()
        await super().forward_response(link, frame)
