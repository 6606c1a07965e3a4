"""BrokerConnection: one TCP (optionally TLS) connection to one Kafka broker.

Layering, httpcore-style: this module frames bytes and matches responses to
requests; it knows nothing of metadata, groups or fetching. Requests are
pipelined: any number of callers may ``await send(...)`` at once, up to
``config.net.max_open_requests`` frames are on the wire, and each response is
routed to its caller by correlation id. A dropped connection fails every
waiting caller with :class:`KafkaConnectionError` (retriable) at once; nothing
waits forever.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import struct
from typing import Any

from ..config import Config
from ..errors import (
    ClosedError,
    CorruptMessageError,
    KafkaConnectionError,
    RequestTimedOutError,
    UnsupportedVersionError,
    raise_for_code,
)
from .protocol import (
    API_NAMES,
    ApiVersionRequest,
    ApiVersionRequest_v0,
    Request,
    RequestStruct,
    VersionRanges,
    codec_versions,
    decode_response,
    encode_request,
    prepare,
)

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
_UNSUPPORTED_VERSION = 35
# A frame larger than this is not a Kafka response: the peer speaks another protocol.
_MAX_FRAME = 1 << 30


class _FrameProtocol(asyncio.Protocol):
    """Splits the byte stream into size-prefixed frames for the connection.

    Runs inside the event loop's transport callbacks, so it never awaits: each
    complete frame is handed to ``on_frame`` synchronously.
    """

    def __init__(self, conn: BrokerConnection) -> None:
        self._conn = conn
        self._buf = bytearray()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        buf = self._buf
        buf += data
        # Hand over every complete frame; keep the tail for the next chunk.
        while len(buf) >= 4:
            (size,) = _SIZE.unpack_from(buf, 0)
            if size < 4 or size > _MAX_FRAME:
                self._conn._fail(
                    CorruptMessageError(
                        f"broker {self._conn.address} sent a frame of {size} bytes: "
                        "is this address a Kafka listener (and TLS set as the listener expects)?"
                    )
                )
                return
            end = 4 + size
            if len(buf) < end:
                break
            # One copy out of the buffer (slicing the bytearray first would make two).
            with memoryview(buf) as view:
                frame = bytes(view[4:end])
            del buf[:end]
            self._conn._on_frame(frame)

    def connection_lost(self, exc: Exception | None) -> None:
        reason = f": {exc}" if exc else " by the peer"
        self._conn._fail(KafkaConnectionError(f"connection to {self._conn.address} closed{reason}"))


class BrokerConnection:
    """A pipelined connection to one broker.

    Use :meth:`open` (connect + ApiVersions + SASL) and :meth:`close`. All
    methods must be called from the event loop that opened the connection.
    """

    def __init__(self, host: str, port: int, config: Config, node_id: int | None = None) -> None:
        self.host = host
        self.port = port
        self.node_id = node_id
        self._config = config
        # Owned by the event loop; written by send() (add) and _on_frame/_fail (remove).
        self._inflight: dict[int, asyncio.Future[bytes]] = {}
        self._next_id = 0
        self._slots = asyncio.Semaphore(config.net.max_open_requests)
        self._protocol: _FrameProtocol | None = None
        # Set once, by _fail() or close(); every later send() raises it.
        self._error: BaseException | None = None
        # The broker's advertised (min, max) per API; filled by _negotiate().
        self.broker_versions: VersionRanges = {}

    @property
    def address(self) -> str:
        """``host:port`` for logs and errors."""
        return f"{self.host}:{self.port}"

    @property
    def closed(self) -> bool:
        """True once the connection failed or was closed; it is never reused then."""
        return self._error is not None

    def __repr__(self) -> str:
        return f"<BrokerConnection {self.address} node={self.node_id} closed={self.closed}>"

    @classmethod
    async def open(
        cls, host: str, port: int, config: Config, node_id: int | None = None
    ) -> BrokerConnection:
        """Connect, negotiate API versions and authenticate, within ``net.dial_timeout``."""
        conn = cls(host, port, config, node_id)
        try:
            async with asyncio.timeout(config.net.dial_timeout):
                await conn._connect()
                await conn._negotiate()
                if config.net.sasl.enable:
                    from .sasl import authenticate

                    await authenticate(conn, config.net.sasl)
        except TimeoutError:
            conn.abort()
            raise KafkaConnectionError(
                f"could not connect to {conn.address} within net.dial_timeout="
                f"{config.net.dial_timeout}s: check the address and that the broker is up"
            ) from None
        except RequestTimedOutError as exc:
            # read_timeout < dial_timeout: still a failed dial, not a failed request.
            conn.abort()
            raise KafkaConnectionError(
                f"could not connect to {conn.address}: it accepted the connection but "
                f"{exc.context}: check that this is a Kafka listener and the broker is healthy"
            ) from exc
        except BaseException:
            conn.abort()
            raise
        return conn

    async def _connect(self) -> None:
        tls = self._config.net.tls
        ctx: ssl.SSLContext | None = None
        if tls.enable:
            ctx = tls.context or ssl.create_default_context()
        loop = asyncio.get_running_loop()
        try:
            _, protocol = await loop.create_connection(
                lambda: _FrameProtocol(self),
                self.host,
                self.port,
                ssl=ctx,
                server_hostname=self.host if ctx else None,
            )
        except OSError as exc:
            raise KafkaConnectionError(
                f"could not connect to {self.address}: {exc}: check the address "
                "and that the broker is up"
            ) from exc
        self._protocol = protocol

    async def _negotiate(self) -> None:
        """ApiVersions: learn the broker's ranges (v2 first, v0 if the broker refuses v2)."""
        latest = ApiVersionRequest().prepare({18: codec_versions()[18]})
        for struct_ in (latest, ApiVersionRequest_v0()):
            payload = await self._roundtrip(struct_, self._config.net.read_timeout)
            # Every ApiVersions response version starts with error_code after the header.
            header_len = 4
            if len(payload) >= header_len + 2:
                (code,) = struct.unpack_from(">h", payload, header_len)
                if code == _UNSUPPORTED_VERSION:
                    continue
            try:
                resp = decode_response(struct_, payload)
            except Exception as exc:  # the codec raises ValueError/struct.error/IndexError
                raise CorruptMessageError(
                    f"malformed ApiVersions response from {self.address}: {exc}: is this "
                    "address a Kafka listener?"
                ) from exc
            raise_for_code(resp.error_code, f"ApiVersions from {self.address}")
            self.broker_versions = {k: (lo, hi) for k, lo, hi in resp.api_versions}
            return
        raise UnsupportedVersionError(
            f"broker {self.address} accepts no ApiVersions version we know"
        )

    def version(self, api_key: int) -> int | None:
        """The version :meth:`send` will use for ``api_key`` (None if no common version)."""
        ours = codec_versions().get(api_key)
        theirs = self.broker_versions.get(api_key)
        if ours is None or theirs is None:
            return None
        hi = min(ours[1], theirs[1])
        return hi if hi >= max(ours[0], theirs[0]) else None

    def negotiated(self) -> dict[str, int | None]:
        """API name -> version used with this broker, for every API this package speaks."""
        return {
            name: self.version(key) for key, name in API_NAMES.items() if key in codec_versions()
        }

    async def send(self, request: Request[Any], timeout: float | None = None) -> Any:
        """Send ``request`` at the highest common version and return the decoded response.

        ``timeout`` defaults to ``net.read_timeout``. Raises
        :class:`RequestTimedOutError` on timeout (the connection stays usable; a
        late answer is dropped), :class:`KafkaConnectionError` if the connection
        drops, :class:`UnsupportedVersionError` if no version is common.
        """
        struct_ = prepare(request, self.broker_versions, self.address)
        payload = await self._roundtrip(struct_, timeout or self._config.net.read_timeout)
        try:
            return decode_response(struct_, payload)
        except Exception as exc:  # the codec raises ValueError/struct.error/IndexError
            raise CorruptMessageError(
                f"malformed {type(struct_).__name__} response from {self.address}: {exc}"
            ) from exc

    async def _roundtrip(self, struct_: RequestStruct, timeout: float) -> bytes:
        if self._error is not None:
            raise self._reraisable()
        async with self._slots:
            if self._error is not None:
                raise self._reraisable()
            assert self._protocol is not None and self._protocol.transport is not None
            cid = self._next_id
            self._next_id = (cid + 1) & 0x7FFFFFFF
            fut: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
            self._inflight[cid] = fut
            data = encode_request(struct_, cid, self._config.client_id)
            self._protocol.transport.write(_SIZE.pack(len(data)) + data)
            try:
                async with asyncio.timeout(timeout):
                    return await fut
            except TimeoutError:
                raise RequestTimedOutError(
                    f"{type(struct_).__name__} to {self.address} got no answer within "
                    f"{timeout}s (net.read_timeout)"
                ) from None
            finally:
                self._inflight.pop(cid, None)

    def _on_frame(self, frame: bytes) -> None:
        (cid,) = _SIZE.unpack_from(frame, 0)
        fut = self._inflight.pop(cid, None)
        if fut is not None and not fut.done():
            fut.set_result(frame)

    def _reraisable(self) -> BaseException:
        err = self._error
        assert err is not None
        # A fresh instance per caller: one exception object must not collect many tracebacks.
        return type(err)(*err.args)

    def _fail(self, error: BaseException) -> None:
        """Fail every waiting request with ``error`` and close the transport (idempotent)."""
        if self._error is None:
            self._error = error
            log.debug("connection %s failed: %s", self.address, error)
        inflight, self._inflight = self._inflight, {}
        for fut in inflight.values():
            if not fut.done():
                fut.set_exception(self._reraisable())
        if self._protocol is not None and self._protocol.transport is not None:
            self._protocol.transport.close()

    def abort(self) -> None:
        """Close now, failing in-flight requests with :class:`ClosedError`."""
        self._fail(ClosedError(f"connection to {self.address} was closed by this client"))

    async def close(self) -> None:
        """Close the connection; waiting requests fail with :class:`ClosedError`."""
        self.abort()
        # Let the transport's close callbacks run before returning.
        await asyncio.sleep(0)
