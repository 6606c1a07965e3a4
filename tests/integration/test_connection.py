"""BrokerConnection on the wire: negotiation, pipelining, timeouts, dropped and bad peers, SASL.

The real broker (the ``bootstrap`` fixture) covers the happy paths; faults come
from a :class:`TcpProxy` in front of a broker or from :class:`ScriptedBroker`, a
loopback server that frames and encodes with aiokafka's codecs and answers
exactly what a test scripts (sarama's ``MockBroker`` idea).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import hmac
import os
import struct
import threading
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from io import BytesIO
from types import SimpleNamespace
from typing import Any

import pytest
from aiokafka.protocol.admin import (
    ApiVersionResponse_v0,
    ApiVersionResponse_v1,
    ApiVersionResponse_v2,
    SaslAuthenticateRequest_v0,
    SaslAuthenticateRequest_v1,
    SaslAuthenticateResponse_v0,
    SaslAuthenticateResponse_v1,
    SaslHandShakeRequest_v0,
    SaslHandShakeRequest_v1,
    SaslHandShakeResponse_v0,
    SaslHandShakeResponse_v1,
)
from aiokafka.protocol.metadata import MetadataRequest_v1, MetadataResponse_v1
from aiokafka.protocol.struct import Struct

from consumergroup.config import Config
from consumergroup.consumer._native import load_extension
from consumergroup.errors import (
    ClosedError,
    CorruptMessageError,
    KafkaConnectionError,
    ListenerMismatchError,
    RequestTimedOutError,
    SaslAuthenticationFailedError,
    SilentListenerError,
    UnsupportedSaslMechanismError,
    UnsupportedVersionError,
)
from consumergroup.net import connection as connection_module
from consumergroup.net.connection import BrokerConnection
from consumergroup.net.protocol import (
    API_NAMES,
    JoinGroupRequest,
    MetadataRequest,
    codec_versions,
)
from consumergroup.testing import find_tansu, free_port
from tests.conftest import TopicFactory
from tests.helpers import TcpProxy

# Every test here is bounded well below pytest's global timeout.
pytestmark = pytest.mark.timeout(60)


def net_config(**net: Any) -> Config:
    """A Config with short network timeouts (overridable per test)."""
    config = Config(client_id="test-connection")
    config.net.dial_timeout = 5.0
    config.net.read_timeout = 5.0
    for name, value in net.items():
        setattr(config.net, name, value)
    config.validate()
    return config


def split(address: str) -> tuple[str, int]:
    """``"host:port"`` -> (host, port)."""
    host, _, port = address.rpartition(":")
    return host, int(port)


# ------------------------------------------------------------------ scripted broker


@dataclass
class Received:
    """One request frame the scripted broker read."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: bytes
    writer: asyncio.StreamWriter

    def decode(self, struct_cls: type[Struct]) -> Any:
        """The request body decoded with an aiokafka request struct."""
        return struct_cls.decode(BytesIO(self.body))


Script = Callable[["ScriptedBroker", Received], Awaitable[None]]

#: What the scripted broker advertises by default: Metadata v0-v1 only.
DEFAULT_VERSIONS: dict[int, tuple[int, int]] = {3: (0, 1), 18: (0, 2)}


@dataclass
class ScriptedBroker:
    """A loopback Kafka peer: frames, request headers and codecs are real; answers are scripted.

    ApiVersions is answered automatically with ``versions`` unless
    ``answer_api_versions`` is False (then it is handed to the script too).
    Every other request goes to ``script``, which may ``reply()``, close the
    connection, or do nothing (the request then never gets an answer).
    """

    script: Script | None = None
    versions: dict[int, tuple[int, int]] = field(default_factory=lambda: dict(DEFAULT_VERSIONS))
    answer_api_versions: bool = True
    received: list[Received] = field(default_factory=list)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    _server: asyncio.Server | None = None
    _writers: set[asyncio.StreamWriter] = field(default_factory=set)
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)
    port: int = 0

    @property
    def address(self) -> str:
        """``127.0.0.1:PORT``."""
        return f"127.0.0.1:{self.port}"

    async def __aenter__(self) -> ScriptedBroker:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        self.close_connections()  # handlers see EOF and return
        await settle(self._tasks)
        await self._server.wait_closed()

    def close_connections(self) -> None:
        """Close every accepted connection (the client sees EOF)."""
        for writer in list(self._writers):
            writer.close()
        self._writers.clear()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._writers.add(writer)
        try:
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                frame = await reader.readexactly(size)
                req = self._parse(frame, writer)
                self.received.append(req)
                self.arrived.set()
                if req.api_key == 18 and self.answer_api_versions:
                    self.reply(req, self.api_versions_response(req.api_version))
                elif self.script is not None:
                    await self.script(self, req)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()
            self._writers.discard(writer)
            self._tasks.discard(task)

    @staticmethod
    def _parse(frame: bytes, writer: asyncio.StreamWriter) -> Received:
        # Request header v1 (every request our tests script is non-flexible).
        api_key, api_version, cid, id_len = struct.unpack_from(">hhih", frame, 0)
        offset = 10
        client_id = None
        if id_len >= 0:
            client_id = frame[offset : offset + id_len].decode()
            offset += id_len
        return Received(api_key, api_version, cid, client_id, frame[offset:], writer)

    def api_versions_response(self, version: int) -> Struct:
        """An ApiVersions response at ``version`` advertising ``self.versions``; for a
        version above the advertised ones, what Kafka answers: UNSUPPORTED_VERSION in a v0
        body (the client asks again at a version it knows)."""
        ranges = [(k, lo, hi) for k, (lo, hi) in sorted(self.versions.items())]
        if version > self.versions.get(18, (0, 0))[1]:
            return ApiVersionResponse_v0(35, ranges)
        if version == 0:
            return ApiVersionResponse_v0(0, ranges)
        cls = ApiVersionResponse_v1 if version == 1 else ApiVersionResponse_v2
        return cls(0, ranges, 0)

    @staticmethod
    def reply(req: Received, response: Struct | bytes) -> None:
        """Send ``response`` (a struct, or raw body bytes) for ``req``."""
        body = response if isinstance(response, bytes) else response.encode()
        data = struct.pack(">i", req.correlation_id) + body
        req.writer.write(struct.pack(">i", len(data)) + data)

    async def wait_for(self, count: int, api_key: int | None = None) -> list[Received]:
        """Wait (bounded) until ``count`` requests (of ``api_key``) arrived; return them."""
        async with asyncio.timeout(5):
            while True:
                got = [r for r in self.received if api_key is None or r.api_key == api_key]
                if len(got) >= count:
                    return got
                self.arrived.clear()
                await self.arrived.wait()


def metadata_response(topic: str) -> MetadataResponse_v1:
    """A Metadata v1 answer naming one (partitionless) topic: tells answers apart."""
    return MetadataResponse_v1([(1, "127.0.0.1", 1, None)], 1, [(0, topic, False, [])])


def topics_of(response: Any) -> list[str]:
    """Topic names in a decoded Metadata response."""
    return [t["topic"] for t in response.to_object()["topics"]]


async def settle(tasks: set[asyncio.Task[None]]) -> None:
    """Wait for server handler tasks to return; cancel stragglers after 5 s.

    Cancelling a ``start_server`` handler makes asyncio log an error, so the
    servers here end their handlers by closing the sockets (EOF) instead.
    """
    pending = list(tasks)
    if not pending:
        return
    _, late = await asyncio.wait(pending, timeout=5)
    for task in late:
        task.cancel()
    if late:
        await asyncio.wait(late)


@contextlib.asynccontextmanager
async def raw_server(
    on_connect: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]],
) -> AsyncIterator[str]:
    """A loopback server running ``on_connect`` per connection; yields its address.

    On exit every connection is closed, so an ``on_connect`` waiting on its
    reader sees EOF and returns.
    """
    tasks: set[asyncio.Task[None]] = set()
    writers: set[asyncio.StreamWriter] = set()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        tasks.add(task)
        writers.add(writer)
        try:
            await on_connect(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
            tasks.discard(task)

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    try:
        yield f"127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        server.close()
        for writer in writers:
            writer.close()
        await settle(tasks)
        await server.wait_closed()


# ------------------------------------------------------------------ negotiation


async def test_api_versions_negotiation_with_the_broker(bootstrap: str) -> None:
    conn = await BrokerConnection.open(*split(bootstrap), net_config())
    try:
        assert not conn.closed
        for key in (1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 18):
            assert key in conn.broker_versions, f"broker does not advertise {API_NAMES[key]}"
        ours = codec_versions()
        for key in (1, 3, 10, 11, 12, 14):  # Fetch, Metadata, FindCoordinator, group APIs
            lo_ours, hi_ours = ours[key]
            lo_theirs, hi_theirs = conn.broker_versions[key]
            chosen = conn.version(key)
            assert chosen == min(hi_ours, hi_theirs), API_NAMES[key]
            assert chosen >= max(lo_ours, lo_theirs)
        negotiated = conn.negotiated()
        assert set(negotiated) == {API_NAMES[k] for k in ours if k in API_NAMES}
        for key, name in API_NAMES.items():
            if key in ours:
                assert negotiated[name] == conn.version(key)
        assert conn.version(9999) is None
        # The negotiated Metadata version is what goes on the wire, and the broker answers it.
        response = await conn.send(MetadataRequest([], False))
        assert type(response).__name__.endswith(f"_v{conn.version(3)}")
    finally:
        await conn.close()


async def test_negotiation_picks_the_common_range_and_refuses_without_one() -> None:
    async with ScriptedBroker(versions={1: (4, 4), 3: (0, 1), 18: (0, 2), 11: (30, 40)}) as fake:
        conn = await BrokerConnection.open(*split(fake.address), net_config())
        try:
            assert conn.version(1) == 4  # Fetch: the broker's only version
            assert conn.version(3) == 1  # Metadata: the broker's highest
            assert conn.version(11) is None  # JoinGroup: no overlap
            assert conn.version(12) is None  # Heartbeat: not advertised
            assert conn.negotiated()["JoinGroup"] is None
            before = len(fake.received)
            with pytest.raises(UnsupportedVersionError, match="JoinGroup"):
                await conn.send(JoinGroupRequest("g", 6000, 6000, "", "", "consumer", []))
            assert len(fake.received) == before, "an unsendable request must not hit the wire"
            assert not conn.closed
        finally:
            await conn.close()


async def test_api_versions_falls_back_to_v0_when_the_broker_refuses_v3() -> None:
    async def old_broker(fake: ScriptedBroker, req: Received) -> None:
        if req.api_key == 18 and req.api_version > 0:
            # What Kafka does for a too-new ApiVersions: a v0 body with UNSUPPORTED_VERSION.
            fake.reply(req, ApiVersionResponse_v0(35, [(18, 0, 0)]))
        elif req.api_key == 18:
            fake.reply(req, ApiVersionResponse_v0(0, [(3, 0, 1), (18, 0, 0)]))

    async with ScriptedBroker(script=old_broker, answer_api_versions=False) as fake:
        conn = await BrokerConnection.open(*split(fake.address), net_config())
        try:
            assert [r.api_version for r in fake.received if r.api_key == 18] == [3, 0]
            assert conn.broker_versions == {3: (0, 1), 18: (0, 0)}
            assert conn.version(3) == 1
        finally:
            await conn.close()


# ------------------------------------------------------------------ pipelining


class PeakDict(dict[int, "asyncio.Future[bytes]"]):
    """The in-flight table, remembering the most entries it ever held."""

    peak = 0

    def __setitem__(self, key: int, value: asyncio.Future[bytes]) -> None:
        super().__setitem__(key, value)
        self.peak = max(self.peak, len(self))


async def test_one_connection_pipelines_100_requests(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    topic = await new_topic(partitions=2)
    conn = await BrokerConnection.open(*split(bootstrap), net_config(max_open_requests=100))
    inflight = PeakDict()
    conn._inflight = inflight
    try:
        # Every request names a different topic, so each answer proves it reached its caller.
        names = [topic if i % 2 == 0 else f"missing-{i}-{uuid.uuid4().hex[:8]}" for i in range(100)]
        async with asyncio.timeout(30):
            answers = await asyncio.gather(*(conn.send(MetadataRequest([n], False)) for n in names))
        for name, answer in zip(names, answers, strict=True):
            topics = answer.to_object()["topics"]
            assert [t["topic"] for t in topics] == [name]
            if name == topic:
                assert topics[0]["error_code"] == 0
                assert sorted(p["partition"] for p in topics[0]["partitions"]) == [0, 1]
            else:
                assert topics[0]["error_code"] == 3  # UNKNOWN_TOPIC_OR_PARTITION
        assert inflight.peak > 1, "requests were not pipelined"
        assert inflight.peak <= 100
        assert not conn._inflight
    finally:
        await conn.close()


async def test_max_open_requests_caps_the_pipeline(bootstrap: str) -> None:
    conn = await BrokerConnection.open(*split(bootstrap), net_config(max_open_requests=3))
    inflight = PeakDict()
    conn._inflight = inflight
    try:
        async with asyncio.timeout(30):
            answers = await asyncio.gather(
                *(conn.send(MetadataRequest([], False)) for _ in range(20))
            )
        assert len(answers) == 20
        assert 1 < inflight.peak <= 3
    finally:
        await conn.close()


# ------------------------------------------------------------------ exchange (a fetch task's)


async def test_an_exchange_at_frame_hands_the_answer_over_before_its_caller_resumes(
    bootstrap: str,
) -> None:
    """exchange(at_frame=True): the answer callback runs in the loop callback that read the
    answer (no task current), so a waiter it wakes runs before the awaiting caller; the
    caller gets the callback's result. Without at_frame it runs in the caller's task."""
    conn = await BrokerConnection.open(*split(bootstrap), net_config(max_open_requests=1))
    order: list[str] = []
    try:
        for at_frame in (True, False):
            order.clear()
            woken = asyncio.get_running_loop().create_future()

            async def reader(woken: asyncio.Future[None] = woken) -> None:
                await woken
                order.append("reader")

            reading = asyncio.create_task(reader())
            await asyncio.sleep(0)  # the reader waits

            def on_answer(resp: Any, woken: asyncio.Future[None] = woken) -> list[str]:
                order.append("answer in a task" if asyncio.current_task() else "answer at frame")
                woken.set_result(None)
                return topics_of(resp)

            async with asyncio.timeout(30):
                # The one slot stays taken meanwhile: an exchange does not need it.
                async with conn._slots:
                    got = await conn.exchange(
                        MetadataRequest([], False), 10.0, on_answer, at_frame=at_frame
                    )
                order.append("caller")
                await reading
            assert isinstance(got, list)
            if at_frame:
                assert order == ["answer at frame", "reader", "caller"]
            else:
                assert order == ["answer in a task", "caller", "reader"]
            assert not conn._inflight and conn._at_frame is None
    finally:
        await conn.close()


async def test_an_exchange_raises_what_its_answer_callback_raised(bootstrap: str) -> None:
    """An exception of the callback run at the frame is the caller's, and the connection
    stays usable (a bug in the caller's handling is not a broken connection)."""

    def broken(resp: Any) -> None:
        raise ValueError("the handler broke")

    conn = await BrokerConnection.open(*split(bootstrap), net_config())
    try:
        async with asyncio.timeout(30):
            with pytest.raises(ValueError, match="the handler broke"):
                await conn.exchange(MetadataRequest([], False), 10.0, broken, at_frame=True)
            assert not conn.closed
            assert isinstance(topics_of(await conn.send(MetadataRequest([], False))), list)
    finally:
        await conn.close()


async def test_an_exchange_with_a_malformed_answer_is_a_corrupt_message() -> None:
    async def script(fake: ScriptedBroker, req: Received) -> None:
        fake.reply(req, b"\x00\x00\x00\x05ab")  # an array of 5 brokers, then nothing

    called: list[Any] = []
    async with ScriptedBroker(script=script) as fake:
        conn = await BrokerConnection.open(*split(fake.address), net_config())
        try:
            for at_frame in (True, False):
                with pytest.raises(CorruptMessageError, match="Metadata"):
                    await conn.exchange(
                        MetadataRequest([], False), 5.0, called.append, at_frame=at_frame
                    )
            assert called == []
        finally:
            await conn.close()


async def test_an_exchange_without_an_answer_in_time_retires_the_connection() -> None:
    async def script(fake: ScriptedBroker, req: Received) -> None:
        pass  # never answered

    async with ScriptedBroker(script=script) as fake:
        conn = await BrokerConnection.open(*split(fake.address), net_config(read_timeout=10.0))
        try:
            start = time.monotonic()
            with pytest.raises(RequestTimedOutError, match=r"0\.3s") as info:
                await conn.exchange(MetadataRequest([], False), 0.3, print, at_frame=True)
            assert time.monotonic() - start < 5
            assert info.value.retriable and conn.closed
            assert not conn._inflight and conn._at_frame is None
            with pytest.raises(KafkaConnectionError, match="retired"):
                await conn.exchange(MetadataRequest([], False), 0.3, print, at_frame=True)
        finally:
            await conn.close()


async def test_a_cancelled_exchange_leaves_no_answer_callback_behind(bootstrap: str) -> None:
    """The caller cancelled (a fetch task closing): its answer, when it comes, is dropped
    and the callback never runs; the next exchange is answered."""
    called: list[Any] = []
    conn = await BrokerConnection.open(*split(bootstrap), net_config())
    try:
        waiting = asyncio.create_task(
            conn.exchange(MetadataRequest([], False), 10.0, called.append, at_frame=True)
        )
        await asyncio.sleep(0)  # written
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert conn._at_frame is None and not conn._inflight
        async with asyncio.timeout(30):
            got = await conn.exchange(MetadataRequest([], False), 10.0, topics_of, at_frame=True)
        assert isinstance(got, list) and called == []
    finally:
        await conn.close()


# ------------------------------------------------------------------ timeouts and drops


async def test_request_timeout_retires_the_connection() -> None:
    held: list[Received] = []

    async def script(fake: ScriptedBroker, req: Received) -> None:
        held.append(req)  # never answered in time

    async with ScriptedBroker(script=script) as fake:
        conn = await BrokerConnection.open(*split(fake.address), net_config(read_timeout=10.0))
        try:
            other = asyncio.create_task(conn.send(MetadataRequest(["b"], False)))
            start = time.monotonic()
            with pytest.raises(RequestTimedOutError, match=r"0\.3s") as info:
                await conn.send(MetadataRequest(["a"], False), timeout=0.3)
            assert time.monotonic() - start < 5
            assert info.value.retriable
            assert fake.address in str(info.value)
            # A silent peer is presumed gone: the connection is retired and the request
            # sharing it fails at once, retriably, instead of waiting out its own timeout.
            assert conn.closed
            async with asyncio.timeout(5):
                with pytest.raises(KafkaConnectionError, match="retired") as other_info:
                    await other
            assert other_info.value.retriable
            assert not conn._inflight
            assert sorted(r.decode(MetadataRequest_v1).topics[0] for r in held) == ["a", "b"]
        finally:
            await conn.close()


async def test_peer_closing_fails_every_inflight_request() -> None:
    async def script(fake: ScriptedBroker, req: Received) -> None:
        if len([r for r in fake.received if r.api_key == 3]) == 5:
            fake.close_connections()

    async with ScriptedBroker(script=script) as fake:
        conn = await BrokerConnection.open(*split(fake.address), net_config(max_open_requests=5))
        start = time.monotonic()
        async with asyncio.timeout(5):
            results = await asyncio.gather(
                *(conn.send(MetadataRequest([f"t{i}"], False)) for i in range(5)),
                return_exceptions=True,
            )
        assert time.monotonic() - start < 5
        for result in results:
            assert isinstance(result, KafkaConnectionError), result
            assert result.retriable
            assert fake.address in str(result)
        assert conn.closed
        with pytest.raises(KafkaConnectionError):
            await conn.send(MetadataRequest([], False))
        await conn.close()


async def test_proxy_cut_fails_inflight_requests_on_a_real_broker(bootstrap: str) -> None:
    async with TcpProxy(*split(bootstrap)) as proxy:
        conn = await BrokerConnection.open(*split(proxy.address), net_config(max_open_requests=10))
        try:
            assert (await conn.send(MetadataRequest([], False))).to_object()["brokers"]
            proxy.pause()
            tasks = [
                asyncio.create_task(conn.send(MetadataRequest([], False), timeout=30))
                for _ in range(10)
            ]
            async with asyncio.timeout(5):
                while True:
                    if len(conn._inflight) == 10:
                        break
                    await asyncio.sleep(0.01)
            proxy.cut()
            start = time.monotonic()
            async with asyncio.timeout(5):
                results = await asyncio.gather(*tasks, return_exceptions=True)
            assert time.monotonic() - start < 5
            assert all(isinstance(r, KafkaConnectionError) and r.retriable for r in results)
            assert conn.closed
        finally:
            proxy.resume()
            await conn.close()


async def test_close_fails_waiting_requests_with_closed_error() -> None:
    async with ScriptedBroker() as fake:  # never answers Metadata
        conn = await BrokerConnection.open(*split(fake.address), net_config())
        task = asyncio.create_task(conn.send(MetadataRequest([], False)))
        await fake.wait_for(1, api_key=3)
        await conn.close()
        async with asyncio.timeout(5):
            with pytest.raises(ClosedError):
                await task
        with pytest.raises(ClosedError):
            await conn.send(MetadataRequest([], False))


# ------------------------------------------------------------------ dialing


async def test_dial_timeout_when_the_peer_never_answers_api_versions() -> None:
    async with ScriptedBroker(answer_api_versions=False) as fake:
        start = time.monotonic()
        with pytest.raises(SilentListenerError) as info:
            await BrokerConnection.open(
                *split(fake.address), net_config(dial_timeout=0.5, read_timeout=30.0)
            )
        assert time.monotonic() - start < 5
        assert str(info.value) == (
            f"{fake.address} accepted the connection but did not answer the Kafka ApiVersions "
            "request within 0.5 s: is this a Kafka listener?"
        )
        assert info.value.retriable  # maybe a stalled broker
        assert [r.api_key for r in fake.received] == [18]


async def test_silent_peer_with_read_timeout_below_dial_timeout_is_a_connection_error() -> None:
    async with ScriptedBroker(answer_api_versions=False) as fake:
        start = time.monotonic()
        with pytest.raises(SilentListenerError) as info:
            await BrokerConnection.open(
                *split(fake.address), net_config(dial_timeout=10.0, read_timeout=0.3)
            )
        assert time.monotonic() - start < 5
        assert f"{fake.address} accepted the connection" in str(info.value)
        assert "within 0.3 s: is this a Kafka listener?" in str(info.value)


async def test_connecting_to_a_closed_port_fails_fast() -> None:
    port = free_port()
    start = time.monotonic()
    with pytest.raises(KafkaConnectionError) as info:
        await BrokerConnection.open("127.0.0.1", port, net_config(dial_timeout=10.0))
    assert time.monotonic() - start < 5
    assert f"127.0.0.1:{port}" in str(info.value)
    assert info.value.retriable


@pytest.mark.parametrize(
    "garbage",
    [
        b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        b"SSH-2.0-OpenSSH_9.6\r\n",
        struct.pack(">i", -7) + b"xxxx",
    ],
    ids=["http", "ssh", "negative-size"],
)
async def test_a_non_kafka_peer_is_a_listener_mismatch_not_a_hang(garbage: bytes) -> None:
    async def talker(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1024)
        writer.write(garbage)
        await writer.drain()
        await reader.read()  # keep the socket open (until EOF): only the bytes may end the dial

    async with raw_server(talker) as address:
        start = time.monotonic()
        with pytest.raises(ListenerMismatchError, match="Kafka listener") as info:
            await BrokerConnection.open(*split(address), net_config(dial_timeout=10.0))
        assert time.monotonic() - start < 5
        assert address in str(info.value)


async def test_a_malformed_api_versions_answer_is_a_corrupt_message() -> None:
    async def script(fake: ScriptedBroker, req: Received) -> None:
        fake.reply(req, b"\x00")  # the correlation id is right, the body is cut short

    async with ScriptedBroker(script=script, answer_api_versions=False) as fake:
        with pytest.raises(CorruptMessageError) as info:
            await BrokerConnection.open(*split(fake.address), net_config())
        assert fake.address in str(info.value)


async def test_a_malformed_response_is_a_corrupt_message() -> None:
    async def script(fake: ScriptedBroker, req: Received) -> None:
        fake.reply(req, b"\x00\x00\x00\x05ab")  # an array of 5 brokers, then nothing

    async with ScriptedBroker(script=script) as fake:
        conn = await BrokerConnection.open(*split(fake.address), net_config())
        try:
            with pytest.raises(CorruptMessageError, match="Metadata"):
                await conn.send(MetadataRequest([], False))
        finally:
            await conn.close()


def _sized_metadata(frame_size: int, tag: int) -> bytes:
    """A Metadata v1 answer body whose frame (correlation id + body) is ``frame_size``
    bytes: topics named ``t<tag>-...``, the names padded to the size."""
    names: list[str] = []
    body = MetadataResponse_v1([], 1, []).encode()
    while 4 + len(body) < frame_size:
        room = frame_size - 4 - len(body) - 9  # a topic entry: 9 bytes + its name
        names.append(f"t{tag}-" + "x" * max(0, min(room - len(f"t{tag}-"), 30_000)))
        body = MetadataResponse_v1([], 1, [(0, n, False, []) for n in names]).encode()
    assert 4 + len(body) == frame_size, (frame_size, 4 + len(body))
    return body


@pytest.mark.parametrize("buffer", ["not zeroed", "bytearray"])
@pytest.mark.parametrize("step", [1 << 24, 100_000])
async def test_frames_of_every_size_split_anywhere_reach_their_callers(
    step: int, buffer: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Answers below, at and above the reader's 64 KiB head buffer (the larger ones are
    read straight into their own buffer, which grows by ``step``), several in one write
    and each write cut at odd places, including inside a size prefix: every caller gets
    its own answer. A large frame's buffer is not zeroed where the C extension is built
    (every byte must come from the socket), ``bytearray`` without it."""
    monkeypatch.setattr(connection_module, "_FRAME_STEP", step)
    if buffer == "bytearray":
        monkeypatch.setattr(connection_module, "_new_frame", bytearray)
    else:
        c = load_extension("_crecords")
        if c is None:
            pytest.skip("the C extension _crecords is not built (or CONSUMERGROUP_PURE_PYTHON)")
        monkeypatch.setattr(connection_module, "_new_frame", c.frame_buffer)
    sizes = [40, 1_000, 65_532, 65_536, 65_537, 200_000, 3_000_000, 60, 70_000, 50]
    bodies = {i: _sized_metadata(size, i) for i, size in enumerate(sizes)}
    held: list[Received] = []

    async def script(fake: ScriptedBroker, req: Received) -> None:
        if len(held) < len(sizes) - 1:
            held.append(req)  # answered all at once with the last one
            return
        data = b""
        for i, r in enumerate([*held, req]):
            frame = struct.pack(">i", r.correlation_id) + bodies[i]
            data += struct.pack(">i", len(frame)) + frame
        cuts = [1, 2, 3, 5, 997, 65_539, 70_001, 131_071]
        pos = 0
        for n in cuts * 40:
            if pos >= len(data):
                break
            req.writer.write(data[pos : pos + n])
            await req.writer.drain()
            pos += n
        req.writer.write(data[pos:])

    async with ScriptedBroker(script=script) as fake:
        conn = await BrokerConnection.open(*split(fake.address), net_config(max_open_requests=20))
        try:
            answers = []
            for i in range(len(sizes)):  # sent in order: the i-th request gets body i
                answers.append(asyncio.ensure_future(conn.send(MetadataRequest([f"{i}"], False))))
                await fake.wait_for(i + 1, api_key=3)
            for i, answer in enumerate(answers):
                topics = topics_of(await answer)
                assert topics and all(t.startswith(f"t{i}-") for t in topics), i
        finally:
            await conn.close()


async def test_peer_closing_inside_a_large_frame_fails_the_request() -> None:
    """The reader waits for a large frame in big reads (SO_RCVLOWAT); the peer closing
    after part of it still ends the wait at once, with a connection error."""
    # Built before the timed wait: 0.5 s of CPU on a quiet machine, several at CI's load.
    body = _sized_metadata(3_000_000, 0)

    async def script(fake: ScriptedBroker, req: Received) -> None:
        frame = struct.pack(">i", req.correlation_id) + body
        req.writer.write((struct.pack(">i", len(frame)) + frame)[:100_000])
        await req.writer.drain()
        fake.close_connections()

    async with ScriptedBroker(script=script) as fake:
        conn = await BrokerConnection.open(*split(fake.address), net_config(read_timeout=30.0))
        try:
            async with asyncio.timeout(5):
                with pytest.raises(KafkaConnectionError):
                    await conn.send(MetadataRequest([], False))
        finally:
            await conn.close()


# ------------------------------------------------------------------ SASL on the wire

SASL_VERSIONS = {3: (0, 1), 17: (0, 1), 18: (0, 2), 36: (0, 1)}


class ScramServer:
    """The server side of SCRAM (RFC 5802), written from the RFC, for the scripted broker."""

    def __init__(self, mechanism: str, user: str, password: str) -> None:
        self.hash = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mechanism]
        self.user = user
        self.salt = os.urandom(16)
        self.iterations = 4096
        salted = hashlib.pbkdf2_hmac(self.hash, password.encode(), self.salt, self.iterations)
        self.stored_key = hashlib.new(
            self.hash, hmac.digest(salted, b"Client Key", self.hash)
        ).digest()
        self.server_key = hmac.digest(salted, b"Server Key", self.hash)
        self.first_bare = ""
        self.server_first = ""

    def step(self, message: bytes) -> tuple[bytes, str | None]:
        """Answer one client message: (server bytes, error message or None)."""
        text = message.decode()
        if text.startswith("n,,"):
            self.first_bare = text[3:]
            attrs = dict(kv.split("=", 1) for kv in self.first_bare.split(","))
            if attrs["n"] != self.user:
                return b"", "Authentication failed: Invalid username or password"
            nonce = attrs["r"] + base64.b64encode(os.urandom(12)).decode()
            salt = base64.b64encode(self.salt).decode()
            self.server_first = f"r={nonce},s={salt},i={self.iterations}"
            return self.server_first.encode(), None
        without_proof, _, proof_b64 = text.rpartition(",p=")
        auth = f"{self.first_bare},{self.server_first},{without_proof}".encode()
        signature = hmac.digest(self.stored_key, auth, self.hash)
        client_key = bytes(
            a ^ b for a, b in zip(base64.b64decode(proof_b64), signature, strict=True)
        )
        if hashlib.new(self.hash, client_key).digest() != self.stored_key:
            return b"", "Authentication failed: Invalid username or password"
        verifier = base64.b64encode(hmac.digest(self.server_key, auth, self.hash)).decode()
        return f"v={verifier}".encode(), None


@dataclass
class SaslScript:
    """Scripted broker behaviour for SASL: the mechanisms it offers and the one account."""

    mechanisms: list[str]
    user: str = "alice"
    password: str = "alice-secret"
    scram: ScramServer | None = None
    authenticated: bool = False
    log: list[str] = field(default_factory=list)

    async def __call__(self, fake: ScriptedBroker, req: Received) -> None:
        if req.api_key == 17:
            hs_cls = SaslHandShakeRequest_v1 if req.api_version else SaslHandShakeRequest_v0
            mechanism = req.decode(hs_cls).mechanism
            self.log.append(f"handshake:{mechanism}")
            hs_resp = SaslHandShakeResponse_v1 if req.api_version else SaslHandShakeResponse_v0
            code = 0 if mechanism in self.mechanisms else 33
            if mechanism.startswith("SCRAM-") and code == 0:
                self.scram = ScramServer(mechanism, self.user, self.password)
            fake.reply(req, hs_resp(code, self.mechanisms))
        elif req.api_key == 36:
            au_cls = SaslAuthenticateRequest_v1 if req.api_version else SaslAuthenticateRequest_v0
            token = req.decode(au_cls).sasl_auth_bytes
            self.log.append("authenticate")
            if (
                self.scram is None
                and "SCRAM-SHA-256" in self.mechanisms
                and token.startswith(b"n,,")
            ):
                self.scram = ScramServer("SCRAM-SHA-256", self.user, self.password)  # no handshake
            if self.scram is not None:
                answer, error = self.scram.step(token)
            else:
                _, user, password = token.split(b"\0")
                ok = (user.decode(), password.decode()) == (self.user, self.password)
                answer, error = b"", None if ok else "Authentication failed: Invalid credentials"
            self.authenticated = error is None and (self.scram is None or answer.startswith(b"v="))
            if req.api_version:
                fake.reply(req, SaslAuthenticateResponse_v1(58 if error else 0, error, answer, 0))
            else:
                fake.reply(req, SaslAuthenticateResponse_v0(58 if error else 0, error, answer))
        elif req.api_key == 3:
            self.log.append("metadata")
            if self.authenticated:
                fake.reply(req, metadata_response("secret-topic"))
            else:
                fake.close_connections()


def sasl_config(mechanism: str, user: str = "alice", password: str = "alice-secret") -> Config:
    """A Config that authenticates with ``mechanism``."""
    config = net_config()
    config.net.sasl.enable = True
    config.net.sasl.mechanism = mechanism  # type: ignore[assignment]
    config.net.sasl.user = user
    config.net.sasl.password = password
    config.validate()
    return config


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
async def test_sasl_authenticates_before_any_other_request(mechanism: str) -> None:
    script = SaslScript(mechanisms=[mechanism])
    async with ScriptedBroker(script=script, versions=dict(SASL_VERSIONS)) as fake:
        conn = await BrokerConnection.open(*split(fake.address), sasl_config(mechanism))
        try:
            assert script.authenticated
            assert topics_of(await conn.send(MetadataRequest([], False))) == ["secret-topic"]
            rounds = 1 if mechanism == "PLAIN" else 2
            assert script.log == [f"handshake:{mechanism}"] + ["authenticate"] * rounds + [
                "metadata"
            ]
        finally:
            await conn.close()


async def test_scram_key_derivation_runs_off_the_event_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Issue 8 #13: PBKDF2 (thousands of HMAC rounds) ran on the loop and stalled it.
    from consumergroup.net import sasl

    threads: list[int] = []

    def pbkdf2_hmac(*args: Any) -> bytes:
        threads.append(threading.get_ident())
        return hashlib.pbkdf2_hmac(*args)

    shim = SimpleNamespace(pbkdf2_hmac=pbkdf2_hmac, new=hashlib.new)
    monkeypatch.setattr(sasl, "hashlib", shim)
    script = SaslScript(mechanisms=["SCRAM-SHA-256"])
    async with ScriptedBroker(script=script, versions=dict(SASL_VERSIONS)) as fake:
        conn = await BrokerConnection.open(*split(fake.address), sasl_config("SCRAM-SHA-256"))
        await conn.close()
    assert script.authenticated
    assert len(threads) == 1
    assert threads[0] != threading.get_ident()


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
async def test_sasl_wrong_password_fails_with_the_brokers_reason(mechanism: str) -> None:
    script = SaslScript(mechanisms=[mechanism])
    async with ScriptedBroker(script=script, versions=dict(SASL_VERSIONS)) as fake:
        config = sasl_config(mechanism, password="wrong")
        with pytest.raises(SaslAuthenticationFailedError, match="Authentication failed") as info:
            await BrokerConnection.open(*split(fake.address), config)
        assert fake.address in str(info.value)
        assert "wrong" not in str(info.value), "the password must not leak into errors"


async def test_sasl_unsupported_mechanism_lists_what_the_broker_offers() -> None:
    script = SaslScript(mechanisms=["SCRAM-SHA-512"])
    async with ScriptedBroker(script=script, versions=dict(SASL_VERSIONS)) as fake:
        with pytest.raises(UnsupportedSaslMechanismError, match="SCRAM-SHA-512"):
            await BrokerConnection.open(*split(fake.address), sasl_config("PLAIN"))


async def test_sasl_handshake_false_goes_straight_to_authenticate() -> None:
    script = SaslScript(mechanisms=["SCRAM-SHA-256"])
    async with ScriptedBroker(script=script, versions=dict(SASL_VERSIONS)) as fake:
        config = sasl_config("SCRAM-SHA-256")
        config.net.sasl.handshake = False
        conn = await BrokerConnection.open(*split(fake.address), config)
        try:
            assert script.log == ["authenticate", "authenticate"]
            assert script.authenticated
        finally:
            await conn.close()


# ------------------------------------------------------------------ SASL against Tansu


@contextlib.asynccontextmanager
async def tansu_with_authentication() -> AsyncIterator[str]:
    """A Tansu broker started with ``--authentication`` on a free loopback port."""
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    proc = await asyncio.create_subprocess_exec(
        find_tansu(),
        "broker",
        "--listener-url",
        url,
        "--advertised-listener-url",
        url,
        "--storage-engine",
        "memory://tansu/",
        "--authentication",
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
        env={**os.environ, "RUST_LOG": "off"},
    )
    try:
        async with asyncio.timeout(20):
            while True:  # ApiVersions is served before authentication
                try:
                    conn = await BrokerConnection.open(
                        "127.0.0.1", port, net_config(dial_timeout=1.0)
                    )
                except KafkaConnectionError:
                    assert proc.returncode is None, "tansu --authentication exited"
                    await asyncio.sleep(0.05)
                    continue
                await conn.close()
                break
        yield f"127.0.0.1:{port}"
    finally:
        if proc.returncode is None:
            proc.terminate()
            try:
                await asyncio.wait_for(proc.wait(), 5)
            except TimeoutError:
                proc.kill()
                await proc.wait()


async def test_tansu_with_authentication_runs_the_scram_exchange() -> None:
    """What Tansu 0.6 allows: SCRAM on the wire up to its credential check.

    Tansu keeps SCRAM users in its storage and creates them only through an
    authenticated AlterUserScramCredentials, so a memory-storage broker started
    with --authentication has no user anyone can log in as; it offers no PLAIN.
    The test proves what can be proved: both SCRAM rounds travel and are
    understood (the broker's verdict is "unknown-user" in server-final), and
    unauthenticated requests are refused.
    """
    async with tansu_with_authentication() as address:
        for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            with pytest.raises(SaslAuthenticationFailedError, match="unknown-user"):
                await BrokerConnection.open(*split(address), sasl_config(mechanism))
        # Without SASL, the broker drops the connection at the first real request.
        conn = await BrokerConnection.open(*split(address), net_config())
        try:
            assert 36 in conn.broker_versions and 17 in conn.broker_versions
            with pytest.raises(KafkaConnectionError):
                await conn.send(MetadataRequest([], False))
        finally:
            await conn.close()
