"""A scripted broker that keeps KIP-227 fetch sessions, on aiokafka's codecs.

Tansu answers every request for a session with session id 0 (no session), so the
incremental path is driven here: one topic held in memory, Metadata v1 and Fetch
v5-v11 (aiokafka's codecs) and v12 (tests/fetch_v12_wire.py) answered as a Kafka
broker would (sessions per id with epochs, partitions
named in incremental requests updated or added, forgotten ones removed, the
partitions served moved to the back of the session, incremental responses
leaving out partitions with no records and no new high watermark), plus faults a
test injects: FETCH_SESSION_ID_NOT_FOUND or INVALID_FETCH_SESSION_EPOCH on the
next incremental request, and a log truncation (KIP-320: v12 answers a fetch past
the truncation point with ``diverging_epoch``). Every Fetch is recorded as the
broker saw it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from aiokafka.protocol import fetch as wire
from aiokafka.protocol.metadata import MetadataResponse_v1

from consumergroup.consumer.fetch_session import next_epoch
from tests import fetch_v12_wire
from tests.helpers import build_batch
from tests.integration.test_connection import Received, ScriptedBroker

Key = tuple[str, int]
_REQUESTS: dict[int, Any] = {v: getattr(wire, f"FetchRequest_v{v}") for v in range(5, 12)}
_RESPONSES: dict[int, Any] = {v: getattr(wire, f"FetchResponse_v{v}") for v in range(5, 12)}
TS = 1_700_000_000_000


@dataclass
class Fetch:
    """One Fetch request as the broker saw it, and what it answered."""

    session_id: int
    epoch: int
    #: (topic, partition) -> fetch offset named in the request
    named: dict[Key, int]
    forgotten: list[Key]
    #: Named partitions whose offset and max bytes equal what the session held.
    unchanged: list[Key]
    #: Bytes of the request body.
    size: int
    #: (topic, partition) -> last_fetched_epoch named (v12; absent below).
    epochs: dict[Key, int] = field(default_factory=dict)
    error: int = 0
    #: The session id of the answer (0: none).
    answer_session: int = 0
    #: Partitions in the answer, and the ones that carried records.
    answered: list[Key] = field(default_factory=list)
    served: list[Key] = field(default_factory=list)

    @property
    def full(self) -> bool:
        """A full request (epoch 0 opens a session, -1 is sessionless)."""
        return self.epoch <= 0


@dataclass
class _Session:
    epoch: int
    # key -> [fetch offset, max bytes, high watermark last answered, last fetched epoch];
    # order = serving order
    parts: dict[Key, list[int]]


class SessionBroker:
    """One node leading every partition of ``topic``, with ``records[p]`` records in partition p.

    ``per_response`` partitions at most get records per answer, ``per_partition``
    records each (a small byte budget, so a run takes many rounds). ``sessions``
    False answers every session request with session id 0 (as Tansu does);
    ``fetch_versions`` is the Fetch range advertised.
    """

    def __init__(
        self,
        topic: str,
        partitions: int,
        records: int,
        *,
        sessions: bool = True,
        per_response: int = 4,
        per_partition: int = 7,
        fetch_versions: tuple[int, int] = (5, 11),
    ) -> None:
        self.topic = topic
        self.log_end = dict.fromkeys(range(partitions), records)
        self.sessions_enabled = sessions
        self.per_response = per_response
        self.per_partition = per_partition
        self.sessions: dict[int, _Session] = {}
        self._next_id = 1000
        self.fetches: list[Fetch] = []
        #: partition -> (leader epoch, first offset) of its records; epoch 1 from offset 0.
        self.epochs: dict[int, list[tuple[int, int]]] = {p: [(1, 0)] for p in range(partitions)}
        #: Error code (70 or 71) to answer the next incremental request with.
        self.fail_next: int | None = None
        self.arrived = asyncio.Event()
        self.wire = ScriptedBroker(
            self._script, versions={1: fetch_versions, 3: (0, 1), 18: (0, 2)}
        )

    @property
    def address(self) -> str:
        """``127.0.0.1:PORT``."""
        return self.wire.address

    async def __aenter__(self) -> SessionBroker:
        await self.wire.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.wire.__aexit__(*exc)

    def produce(self, partition: int, count: int) -> None:
        """Append ``count`` records to ``partition``."""
        self.log_end[partition] += count

    def truncate(self, partition: int, at: int, count: int) -> None:
        """A new leader's log: ``partition`` cut at offset ``at``, then ``count`` records
        appended in a new leader epoch (their values end in ``:e<epoch>``)."""
        epochs = [(e, start) for e, start in self.epochs[partition] if start < at]
        epochs.append((epochs[-1][0] + 1, at))
        self.epochs[partition] = epochs
        self.log_end[partition] = at + count

    def epoch_of(self, partition: int, offset: int) -> int:
        """The leader epoch of the record at ``offset``."""
        return max(e for e, start in self.epochs[partition] if start <= offset)

    def diverging(self, partition: int, offset: int, last_epoch: int) -> tuple[int, int] | None:
        """KIP-320, Kafka's rule: (the largest epoch <= ``last_epoch``, where it ends) when
        that end is below ``offset`` or that epoch is below ``last_epoch`` (the log
        diverged from the fetcher's), else None."""
        if last_epoch < 0:
            return None
        known = [(e, start) for e, start in self.epochs[partition] if e <= last_epoch]
        epoch = known[-1][0]
        later = [start for e, start in self.epochs[partition] if e > epoch]
        end = later[0] if later else self.log_end[partition]
        return (epoch, end) if end < offset or epoch < last_epoch else None

    async def wait_fetches(self, count: int) -> None:
        """Wait (bounded) until ``count`` Fetch requests arrived."""
        async with asyncio.timeout(10):
            while len(self.fetches) < count:
                self.arrived.clear()
                await self.arrived.wait()

    async def _script(self, broker: ScriptedBroker, req: Received) -> None:
        if req.api_key == 3:
            parts = [(0, p, 0, [0], [0]) for p in self.log_end]
            node = (0, "127.0.0.1", broker.port, None)
            broker.reply(req, MetadataResponse_v1([node], 0, [(0, self.topic, False, parts)]))
        elif req.api_key == 1:
            await self._fetch(broker, req)
        else:
            raise AssertionError(f"unexpected request {req.api_key}")

    async def _fetch(self, broker: ScriptedBroker, req: Received) -> None:
        version = req.api_version
        if version >= 12:
            r = fetch_v12_wire.decode_request(req.body)
        else:
            r = req.decode(_REQUESTS[version]).to_object()
        sid, epoch = r.get("session_id", 0), r.get("session_epoch", -1)
        named = {
            (t["topic"], p["partition"]): (
                p["fetch_offset"],
                p["max_bytes"],
                p.get("last_fetched_epoch", -1),  # v12+
            )
            for t in r["topics"]
            for p in t["partitions"]
        }
        forgotten = [
            (t["topic"], p) for t in r.get("forgotten_topics_data", []) for p in t["partitions"]
        ]
        seen = Fetch(sid, epoch, {k: v[0] for k, v in named.items()}, forgotten, [], len(req.body))
        if version >= 12:
            seen.epochs = {k: v[2] for k, v in named.items()}
        self.fetches.append(seen)
        self.arrived.set()
        full = epoch <= 0
        session: _Session | None = None
        if full:
            self.sessions.pop(sid, None)
            order = {k: [off, size, -1, last] for k, (off, size, last) in named.items()}
            if epoch == 0 and version >= 7 and self.sessions_enabled:
                self._next_id += 1
                sid = self._next_id
                session = self.sessions[sid] = _Session(1, order)
            else:
                sid = 0
            parts = order
        else:
            session = self.sessions.get(sid)
            error = 0
            if session is None or self.fail_next == 70:
                error = 70
                self.sessions.pop(sid, None)
            elif epoch != session.epoch or self.fail_next == 71:
                error = 71
            if error:
                self.fail_next = None
                seen.error = error
                self._reply(broker, req, (0, error, 0), [])
                return
            assert session is not None
            for key, (off, size, last) in named.items():
                held = session.parts.get(key)
                if held is not None and held[:2] == [off, size]:
                    seen.unchanged.append(key)
                if held is None:
                    session.parts[key] = [off, size, -1, last]
                else:
                    held[:2] = [off, size]
                    held[3] = last
            for key in forgotten:
                session.parts.pop(key, None)
            session.epoch = next_epoch(epoch)
            parts = session.parts
        if not any(self.log_end[p] > held[0] for (_, p), held in parts.items()):
            await asyncio.sleep(r["max_wait_time"] / 1000)  # long poll, then answer
        seen.answer_session = sid
        topics = self._answer(parts, version, full, session, seen)
        head = (0, 0, sid) if version >= 7 else (0,)  # throttle[, error, session id]
        self._reply(broker, req, head, topics)

    @staticmethod
    def _reply(
        broker: ScriptedBroker, req: Received, head: tuple[int, ...], topics: list[Any]
    ) -> None:
        if req.api_version < 12:
            broker.reply(req, _RESPONSES[req.api_version](*head, topics))
            return
        frame = fetch_v12_wire.encode_response(req.correlation_id, *head, topics)
        req.writer.write(len(frame).to_bytes(4, "big") + frame)

    def _answer(
        self,
        parts: dict[Key, list[int]],
        version: int,
        full: bool,
        session: _Session | None,
        seen: Fetch,
    ) -> list[tuple[str, list[tuple[Any, ...]]]]:
        out: list[tuple[Any, ...]] = []
        for key, held in list(parts.items()):
            offset, _, answered_hwm, last_epoch = held
            hwm = self.log_end[key[1]]
            records = b""
            diverged = None
            if version >= 12:
                # Kafka compares a named last_fetched_epoch with its log (KIP-320).
                diverged = self.diverging(key[1], offset, last_epoch)
            if diverged is not None:
                pass  # no records: the fetcher must move back first
            elif offset < hwm and len(seen.served) < self.per_response:
                end = min(hwm, offset + self.per_partition)
                records = batch(key[1], offset, end, self.epoch_of(key[1], end - 1))
                seen.served.append(key)
                if session is not None:  # Kafka: served partitions go to the back
                    del session.parts[key]
                    session.parts[key] = held
            elif not full and hwm == answered_hwm:
                continue  # incremental: nothing new for this partition
            held[2] = hwm
            seen.answered.append(key)
            fields: tuple[Any, ...] = (key[1], 0, hwm, hwm, 0, [])
            if version >= 12:
                out.append((*fields, -1, diverged, None, None, records))
            else:
                out.append((*fields, -1, records) if version >= 11 else (*fields, records))
        return [(self.topic, out)] if out else []


def batch(partition: int, start: int, end: int, epoch: int = 1) -> bytes:
    """One record batch of offsets ``start..end-1`` in leader epoch ``epoch``; each value
    is ``b"partition:offset"``, with ``:e<epoch>`` after it from epoch 2 on."""
    suffix = f":e{epoch}" if epoch > 1 else ""
    values = [(None, f"{partition}:{offset}{suffix}".encode()) for offset in range(start, end)]
    data = bytearray(build_batch(values, TS))
    data[0:8] = start.to_bytes(8, "big", signed=True)  # the broker assigns the base offset
    data[12:16] = epoch.to_bytes(4, "big", signed=True)  # partitionLeaderEpoch (not in the CRC)
    return bytes(data)
