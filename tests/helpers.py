"""Shared test helpers: producing data with aiokafka's producer, loopback TCP proxies."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
from collections.abc import Coroutine, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Self

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.record.default_records import DefaultRecordBatchBuilder

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey, RSAPublicKey
    from cryptography.x509 import Certificate

Record = tuple[bytes | None, bytes | None]  # (key, value)


def certificate(
    subject: str,
    public_key: RSAPublicKey,
    signer: RSAPrivateKey,
    issuer: str | None = None,
    *,
    ca: bool = False,
    san: Sequence[str] = (),
) -> Certificate:
    """An X.509 certificate for ``CN=subject`` signed by ``signer``, the private key of
    ``CN=issuer`` (default: ``subject``, self-signed), valid from 5 minutes ago for 2 days;
    ``ca``: it may sign others; ``san``: its IP addresses and DNS names."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import NameOID

    def name(common: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])

    def alternative(entry: str) -> x509.GeneralName:
        try:
            return x509.IPAddress(ipaddress.ip_address(entry))
        except ValueError:
            return x509.DNSName(entry)

    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(name(subject))
        .issuer_name(name(issuer or subject))
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
    )
    if san:
        alternatives = x509.SubjectAlternativeName([alternative(e) for e in san])
        builder = builder.add_extension(alternatives, critical=False)
    if ca:
        builder = builder.add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
    return builder.sign(signer, hashes.SHA256())


def build_batch(
    records: Sequence[Record],
    timestamp_ms: int,
    headers: Sequence[tuple[str, bytes | None]] = (),
    compression_type: int = 0,
) -> bytes:
    """``records`` as one v2 record batch (offset deltas 0..n-1), each with ``headers``,
    for scripted brokers; ``compression_type`` is the batch attribute's codec (0: none)."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=compression_type,
        is_transactional=0,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 30,
    )
    for delta, (key, value) in enumerate(records):
        builder.append(delta, timestamp=timestamp_ms, key=key, value=value, headers=list(headers))
    return bytes(builder.build())


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
    acks: int | str = 1,
    batch: int = 0,
) -> None:
    """Produce ``values`` (to ``partition`` when given, else round robin by key).

    ``batch`` > 0: ``batch`` records at a time, each group written before the next is sent,
    so no record batch holds more than ``batch`` records (a share consumer in Kafka's
    default batch-optimized acquire mode acquires whole batches, whatever it asked for)."""
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap.split(","),
        compression_type=compression,
        linger_ms=linger_ms,
        acks=acks,
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
            if batch and len(futures) % batch == 0:
                await asyncio.gather(*futures[-batch:])
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


def record_fetch_order(monkeypatch: Any) -> list[tuple[str, object]]:
    """Events of a consumer's fetch tasks, in order: ``("fetch", None)`` when a Fetch is
    written, ``("answer", backlog)`` when one that fed a reader was handled, ``backlog``
    saying whether a fetchable partition of that task still had records to fetch (its high
    watermark past its position); the test adds its readers' ``("record", offset)``s."""
    from consumergroup.consumer.broker import BrokerConsumer
    from consumergroup.net.connection import BrokerConnection

    events: list[tuple[str, object]] = []
    write, handle = BrokerConnection._write, BrokerConsumer._handle

    def write_(self: BrokerConnection, struct_: Any) -> int:
        if type(struct_).__name__.startswith("Fetch"):
            events.append(("fetch", None))
        return write(self, struct_)

    def handle_(self: BrokerConsumer, resp: Any) -> int | None:
        delivered = handle(self, resp)
        if delivered:
            backlog = any(
                pc.fetchable() and pc.high_water_mark_offset > pc.next_offset
                for pc in self._subs.values()
            )
            events.append(("answer", backlog))
        return delivered

    monkeypatch.setattr(BrokerConnection, "_write", write_)
    monkeypatch.setattr(BrokerConsumer, "_handle", handle_)
    return events


def next_after_answers(events: list[tuple[str, object]]) -> list[tuple[bool, str]]:
    """For each answer of :func:`record_fetch_order` that fed a reader: (backlog left?,
    which came next: a reader's record or the next Fetch), where both followed."""
    out = []
    for i, (kind, backlog) in enumerate(events):
        after = [k for k, _ in events[i + 1 :] if k in ("fetch", "record")]
        if kind == "answer" and "fetch" in after and "record" in after:
            assert isinstance(backlog, bool)
            out.append((backlog, after[0]))
    return out


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
                if dst.is_closing():  # cut meanwhile (uvloop raises on a closed transport)
                    break
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


async def read_committed_values(bootstrap: str, topic: str, partitions: int) -> list[bytes]:
    """Every value a read_committed reader sees in ``topic``, read to the high watermark
    (the reader's last stable offset gets there once every transaction that wrote to
    ``topic`` is decided: committed, aborted, or aborted by the coordinator on timeout)."""
    return [value for _, value in await read_committed_records(bootstrap, topic, partitions)]


async def read_committed_records(
    bootstrap: str, topic: str, partitions: int
) -> list[tuple[int, bytes]]:
    """:func:`read_committed_values` with each value's partition, in each partition's
    order."""
    parts = [TopicPartition(topic, p) for p in range(partitions)]
    peek = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await peek.start()
    try:
        ends = await peek.end_offsets(parts)
    finally:
        await peek.stop()
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, isolation_level="read_committed", enable_auto_commit=False
    )
    await consumer.start()
    try:
        consumer.assign(parts)
        await consumer.seek_to_beginning(*parts)
        records: list[tuple[int, bytes]] = []
        async with asyncio.timeout(90):
            while [tp for tp in parts if await consumer.position(tp) < ends[tp]]:
                for tp, msgs in (await consumer.getmany(timeout_ms=500)).items():
                    records += [(tp.partition, m.value) for m in msgs]
        return records
    finally:
        await consumer.stop()


async def read_frame(reader: asyncio.StreamReader) -> bytes:
    """One Kafka frame's payload (the 4-byte size prefix read and stripped)."""
    size = struct.unpack(">i", await reader.readexactly(4))[0]
    return await reader.readexactly(size)


class ProxyLink:
    """One proxied client connection: the client's streams and (unless refused) the broker's."""

    def __init__(
        self,
        client: tuple[asyncio.StreamReader, asyncio.StreamWriter],
        upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None,
    ) -> None:
        self.client_reader, self.client_writer = client
        self.upstream = upstream
        # correlation id -> (api key, api version, client id) of requests awaiting an answer
        self.pending: dict[int, tuple[int, int, str]] = {}
        # A black-holed link forwards nothing in either direction but stays open.
        self.blackholed = False

    def close(self) -> None:
        """Close both sides (each peer sees EOF/reset)."""
        self.client_writer.close()
        if self.upstream is not None:
            self.upstream[1].close()


class KafkaFrameProxy:
    """A loopback proxy to ``127.0.0.1:target_port`` that forwards whole Kafka frames.

    Subclasses read or change traffic through the hooks: :meth:`open_upstream`
    (``None`` accepts the client without dialing the broker), :meth:`forward_request`,
    :meth:`rewrite_response` and :meth:`forward_response`. Responses are matched to
    their request's api key, version and client id by correlation id.
    """

    def __init__(self, target_port: int, listen_port: int = 0) -> None:
        self.target_port = target_port
        self.port = listen_port
        self.links: set[ProxyLink] = set()
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def address(self) -> str:
        """``127.0.0.1:PORT`` of the proxy."""
        return f"127.0.0.1:{self.port}"

    @property
    def listening(self) -> bool:
        """Whether new connections are accepted right now."""
        return self._server is not None

    async def __aenter__(self) -> Self:
        await self.listen()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.stop_listening()
        self.cut()
        for task in list(self._tasks):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def listen(self) -> None:
        """Accept connections (again) on ``port`` (a free one the first time when 0)."""
        if self._server is None:
            self._server = await asyncio.start_server(
                self._accept, "127.0.0.1", self.port, reuse_address=True
            )
            self.port = self._server.sockets[0].getsockname()[1]

    def stop_listening(self) -> None:
        """Close the listening socket: new connections are refused; live ones stay."""
        if self._server is not None:
            self._server.close()
            self._server = None

    def cut(self) -> None:
        """Close every live connection, both sides."""
        for link in list(self.links):
            link.close()
        self.links.clear()

    def _spawn(self, coro: Coroutine[None, None, None]) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def open_upstream(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        """Dial the broker for a new client connection."""
        return await asyncio.open_connection("127.0.0.1", self.target_port)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            upstream = await self.open_upstream()
        except OSError:
            writer.close()
            return
        link = ProxyLink((reader, writer), upstream)
        self.links.add(link)
        self._spawn(self._requests(link))
        if upstream is not None:
            self._spawn(self._responses(link, upstream[0]))

    async def _requests(self, link: ProxyLink) -> None:
        try:
            while True:
                frame = await read_frame(link.client_reader)
                key, version, cid, id_len = struct.unpack_from(">hhih", frame, 0)
                client_id = frame[10 : 10 + max(id_len, 0)].decode()
                link.pending[cid] = (key, version, client_id)
                await self.forward_request(link, frame)
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            pass
        finally:
            link.close()
            self.links.discard(link)

    async def _responses(self, link: ProxyLink, reader: asyncio.StreamReader) -> None:
        try:
            while True:
                frame = await read_frame(reader)
                (cid,) = struct.unpack_from(">i", frame, 0)
                key, version, client_id = link.pending.pop(cid, (-1, -1, ""))
                frame = self.rewrite_response(key, version, client_id, frame)
                await self.forward_response(link, frame)
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            pass
        finally:
            link.close()
            self.links.discard(link)

    async def forward_request(self, link: ProxyLink, frame: bytes) -> None:
        """Send a client's request frame on to the broker."""
        assert link.upstream is not None
        writer = link.upstream[1]
        writer.write(struct.pack(">i", len(frame)) + frame)
        await writer.drain()

    def rewrite_response(self, key: int, version: int, client_id: str, frame: bytes) -> bytes:
        """The response frame (correlation id first) to forward; unchanged by default."""
        return frame

    async def forward_response(self, link: ProxyLink, frame: bytes) -> None:
        """Send a response frame on to the client."""
        link.client_writer.write(struct.pack(">i", len(frame)) + frame)
        await link.client_writer.drain()


class RoutingProxy(KafkaFrameProxy):
    """A KafkaFrameProxy that is the client's only path to its broker.

    The broker advertises its own ``127.0.0.1:<port>`` in Metadata and FindCoordinator
    answers; this proxy rewrites it to its own port (the same bytes but the port, so every
    protocol version works, compact strings too), so a client that bootstraps through it
    reaches the broker only through it. Proxies in front of the nodes of one cluster share
    ``routes`` and rewrite every node's address to its own proxy. ``rewrites`` counts
    them: proof of the routing.
    """

    def __init__(
        self, target_port: int, listen_port: int = 0, routes: dict[int, int] | None = None
    ) -> None:
        super().__init__(target_port, listen_port)
        self.rewrites = 0
        #: broker port -> the port of the proxy in front of it. The proxies in front of
        #: the nodes of one cluster share it, so each answer sends every node's traffic
        #: through that node's proxy; a proxy adds itself when it listens.
        self.routes = routes if routes is not None else {}

    async def listen(self) -> None:
        """Accept connections, and route this broker's address here."""
        await super().listen()
        self.routes[self.target_port] = self.port

    def rewrite_response(self, key: int, version: int, client_id: str, frame: bytes) -> bytes:
        """Point the broker addresses in Metadata/FindCoordinator answers at their proxies."""
        if key not in (3, 10):  # Metadata, FindCoordinator
            return frame
        for target, port in self.routes.items():
            broker = b"127.0.0.1" + struct.pack(">i", target)
            if broker in frame:
                self.rewrites += 1
                frame = frame.replace(broker, b"127.0.0.1" + struct.pack(">i", port))
        return frame


async def delete_topic(bootstrap: str, topic: str) -> None:
    """Delete ``topic`` with aiokafka's admin client (the package has no DeleteTopics)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.delete_topics([topic])
    finally:
        await admin.close()


class ConnectionLog(logging.Handler):
    """Counts re-authentications and connections the broker closed or that were retired."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.reauthenticated = 0
        self.dropped: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if text.startswith("re-authenticated"):
            self.reauthenticated += 1
        elif "closed by the peer" in text or "retired" in text or "re-authentication" in text:
            self.dropped.append(text)


@contextlib.contextmanager
def connection_log() -> Iterator[ConnectionLog]:
    """The connections' debug log, counted (see :class:`ConnectionLog`) while in the block."""
    handler = ConnectionLog()
    logger = logging.getLogger("consumergroup.net.connection")
    level = logger.level
    logger.setLevel(logging.DEBUG)
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def add_scram_user(bootstrap: str, user: str, password: str, mechanisms: Sequence[str]) -> None:
    """SCRAM credentials for ``user`` with each of ``mechanisms`` ("SCRAM-SHA-256", ...),
    through a listener without authentication (confluent-kafka's admin client: ours has
    no AlterUserScramCredentials). Blocks: call it from a thread in async code."""
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for mechanism in mechanisms:  # one request each: Kafka refuses two for a user in one
        info = ScramCredentialInfo(getattr(ScramMechanism, mechanism.replace("-", "_")), 4096)
        upsert = UserScramCredentialUpsertion(user, info, password.encode())
        for future in admin.alter_user_scram_credentials([upsert]).values():
            future.result(timeout=30)


class global_tracer_provider:
    """Set OpenTelemetry's global tracer provider, and put the previous one back after
    (the API sets it once per process; tests must not leave tracing on for the others)."""

    def __init__(self, provider: Any) -> None:
        self.provider = provider

    def __enter__(self) -> None:
        from opentelemetry import trace

        self.saved = (trace._TRACER_PROVIDER, trace._TRACER_PROVIDER_SET_ONCE._done)
        trace._TRACER_PROVIDER = self.provider
        trace._TRACER_PROVIDER_SET_ONCE._done = True

    def __exit__(self, *exc: object) -> None:
        from opentelemetry import trace

        trace._TRACER_PROVIDER, trace._TRACER_PROVIDER_SET_ONCE._done = self.saved


def uvarint(frame: bytes, at: int) -> tuple[int, int]:
    """The unsigned varint of a request or answer ``frame`` at ``at``, and the position after."""
    value = shift = 0
    while True:
        byte = frame[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7


def skip_tags(frame: bytes, at: int) -> int:
    """The position after the tagged fields of a flexible ``frame`` at ``at``."""
    count, at = uvarint(frame, at)
    for _ in range(count):
        _, at = uvarint(frame, at)
        size, at = uvarint(frame, at)
        at += size
    return at
