"""A fault-injecting loopback proxy in front of the embedded broker, one per member.

A RoutingProxy: a member that bootstraps through its proxy reaches the broker only
through it (and every fault hits it).
"""

from __future__ import annotations

import asyncio
import struct

from tests.helpers import ProxyLink, RoutingProxy


class FaultProxy(RoutingProxy):
    """A member's private path to the broker, with switchable faults.

    * :meth:`cut` closes every live connection (inherited);
    * :meth:`stop_listening` / :meth:`listen` refuse / accept new connections;
    * :attr:`latency` delays every response by that many seconds;
    * :meth:`drop_mid_response` forwards half of the next responses and closes;
    * :meth:`blackhole` makes live and new connections forward nothing while
      staying open; a black-holed connection never recovers (a half-open peer),
      only connections opened after :meth:`heal` work.
    """

    def __init__(self, target_port: int, listen_port: int = 0) -> None:
        super().__init__(target_port, listen_port)
        self.latency = 0.0
        self._drops = 0
        self._blackholing = False

    async def open_upstream(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        """No broker connection for a client accepted into the black hole."""
        if self._blackholing:
            return None
        return await super().open_upstream()

    async def forward_request(self, link: ProxyLink, frame: bytes) -> None:
        """Forward unless black-holed (then the request is read and dropped)."""
        if self._blackholing:
            link.blackholed = True
        if not link.blackholed:
            await super().forward_request(link, frame)

    async def forward_response(self, link: ProxyLink, frame: bytes) -> None:
        """Forward after :attr:`latency`; half of it and a close when a drop is armed."""
        if self._blackholing:
            link.blackholed = True
        if link.blackholed:
            return
        if self.latency:
            await asyncio.sleep(self.latency)
        if self._drops and len(frame) > 8:
            self._drops -= 1
            link.client_writer.write(struct.pack(">i", len(frame)) + frame[: len(frame) // 2])
            await link.client_writer.drain()
            raise ConnectionResetError("chaos: dropped mid-response")
        await super().forward_response(link, frame)

    def drop_mid_response(self, count: int = 1) -> None:
        """The next ``count`` responses are cut in half and their connections closed."""
        self._drops += count

    def blackhole(self) -> None:
        """From now until :meth:`heal`, every connection goes silent (and stays so)."""
        self._blackholing = True
        for link in self.links:
            link.blackholed = True

    async def heal(self) -> None:
        """End every switchable fault (black-holed connections stay dead, as half-open ones)."""
        self.latency = 0.0
        self._drops = 0
        self._blackholing = False
        await self.listen()
