"""A loopback proxy in front of one real broker that records (and can corrupt) Fetch requests.

Every connection of the client goes through it (a RoutingProxy: the broker's address in
Metadata answers becomes the proxy's), so the client dials the proxy for the partition
leaders too. Each Fetch v12 request is decoded (session id,
epoch, the partitions named and forgotten, its size on the wire), and each answer's
session id, error and the partitions that carried records are added to it.

Faults, on the next incremental request only: ``corrupt_next = "session"`` replaces its
session id with one the broker never issued (the broker answers
FETCH_SESSION_ID_NOT_FOUND), ``"epoch"`` skips its epoch ahead (INVALID_FETCH_SESSION_EPOCH).
The broker's genuine answer to the altered request goes back to the client.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Literal

from consumergroup.net.fetch import decode_fetch_response
from tests import fetch_v12_wire
from tests.helpers import ProxyLink, RoutingProxy

Key = tuple[str, int]
_FETCH = 1
_SESSION = struct.Struct(">ii")  # session_id, session_epoch
# After the v12 request header's tagged fields: replica_id, max_wait_ms, min_bytes,
# max_bytes, isolation_level, then the session fields.
_SESSION_AT = 17


@dataclass
class SeenFetch:
    """One Fetch request as the broker got it, and its answer."""

    session_id: int
    epoch: int
    #: (topic, partition) -> fetch offset named in the request
    named: dict[Key, int]
    forgotten: list[Key]
    #: The whole request frame (header included, the 4-byte size prefix not).
    size: int
    error: int = -1  # -1: not answered yet
    answer_session: int = 0
    #: Partitions the answer carried records for.
    served: list[Key] = field(default_factory=list)

    @property
    def full(self) -> bool:
        """A full request (epoch 0 opens a session, -1 is sessionless)."""
        return self.epoch <= 0


class FetchProxy(RoutingProxy):
    """Forwards to the broker on ``127.0.0.1:target_port``; ``fetches`` holds what it saw."""

    def __init__(self, target_port: int, routes: dict[int, int] | None = None) -> None:
        super().__init__(target_port, routes=routes)
        self.fetches: list[SeenFetch] = []
        self.corrupt_next: Literal["session", "epoch"] | None = None
        #: correlation id -> the SeenFetch it answers (per link: ids repeat across links)
        self._waiting: dict[tuple[int, int], SeenFetch] = {}

    async def forward_request(self, link: ProxyLink, frame: bytes) -> None:
        """Record a Fetch (corrupting it when asked), then forward it."""
        key, version, cid, id_len = struct.unpack_from(">hhih", frame, 0)
        if key == _FETCH:
            if version != 12:
                raise AssertionError(f"expected Fetch v12 against Kafka 4.x, got v{version}")
            at = 10 + max(id_len, 0)
            frame = self._maybe_corrupt(frame, at + 1 + _SESSION_AT)
            seen = _decode(fetch_v12_wire.decode_request(frame[at:]), len(frame))
            self.fetches.append(seen)
            self._waiting[(id(link), cid)] = seen
        await super().forward_request(link, frame)

    def _maybe_corrupt(self, frame: bytes, at: int) -> bytes:
        session_id, epoch = _SESSION.unpack_from(frame, at)
        if self.corrupt_next is None or epoch <= 0:
            return frame
        if self.corrupt_next == "session":
            session_id ^= 0x5A5A5A5A  # an id this broker never issued
        else:
            epoch += 7
        self.corrupt_next = None
        return frame[:at] + _SESSION.pack(session_id, epoch) + frame[at + _SESSION.size :]

    async def forward_response(self, link: ProxyLink, frame: bytes) -> None:
        """Note a Fetch answer on its request, then forward."""
        (cid,) = struct.unpack_from(">i", frame, 0)
        seen = self._waiting.pop((id(link), cid), None)
        if seen is not None:
            resp = decode_fetch_response(12, frame)
            seen.error, seen.answer_session = resp.error_code, resp.session_id
            seen.served = [
                (topic, p[0])
                for topic, parts in resp.topics or ()
                if topic is not None
                for p in parts or ()
                if p[-1]
            ]
        await super().forward_response(link, frame)


def _decode(request: dict[str, object], size: int) -> SeenFetch:
    topics = request["topics"]
    forgotten = request["forgotten_topics_data"]
    assert isinstance(topics, list) and isinstance(forgotten, list)
    return SeenFetch(
        session_id=int(request["session_id"]),  # type: ignore[call-overload]
        epoch=int(request["session_epoch"]),  # type: ignore[call-overload]
        named={
            (t["topic"], p["partition"]): p["fetch_offset"] for t in topics for p in t["partitions"]
        },
        forgotten=[(t["topic"], p) for t in forgotten for p in t["partitions"]],
        size=size,
    )
