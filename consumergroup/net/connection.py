"""BrokerConnection: one TCP (optionally TLS) connection to one Kafka broker.

Layering, httpcore-style: this module frames bytes and matches responses to
requests; it knows nothing of metadata, groups or fetching. Requests are
pipelined: any number of callers may ``await send(...)`` at once, up to
``config.net.max_open_requests`` frames are on the wire, and each response is
routed to its caller by correlation id. A dropped connection fails every
waiting caller with :class:`KafkaConnectionError` (retriable) at once; so does
a request timeout, which retires the connection (a silent peer is presumed
gone; TCP keepalive catches the idle half-open ones). Nothing waits forever.
A connection with one request at a time (a fetch task's) uses :meth:`exchange`
instead: no slot, and its answer may be handled in the callback that reads it.

With SASL, the connection also owns its authentication: :meth:`open` authenticates
it, and when the broker granted a session that expires (``connections.max.reauth.ms``,
KIP-368) the connection authenticates again, on the same socket, once 85-95 % of the
session has passed: the next request starts it and waits, as do the others
(requests already in flight are answered before it: a broker answers a connection's
requests in order), for the one SaslHandshake + SaslAuthenticate exchange.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import random
import socket
import ssl
import struct
import sys
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, cast

from ..config import Config
from ..consumer._native import load_extension
from ..errors import (
    ClosedError,
    ConsumerGroupError,
    CorruptMessageError,
    KafkaConnectionError,
    ListenerMismatchError,
    RequestTimedOutError,
    SilentListenerError,
    UnsupportedVersionError,
    raise_for_code,
)
from .protocol import (
    API_NAMES,
    AnyRequest,
    AnyRequestStruct,
    ApiVersionRequest_v0,
    ApiVersionsRequest,
    Features,
    FetchRequest,
    VersionRanges,
    codec_versions,
    common_version,
    decode_response,
    features_of,
    prepare,
    sized_request,
)
from .quirks import BrokerQuirks, detect_quirks

log = logging.getLogger(__name__)

_T = TypeVar("_T")

_SIZE = struct.Struct(">i")
_UNSUPPORTED_VERSION = 35
# A frame larger than this is not a Kafka response: the peer speaks another protocol.
_MAX_FRAME = 1 << 30
# Until the connection is open (ApiVersions, SASL) answers are small: a larger frame
# means the peer is not a Kafka listener (a TLS alert reads as ~350 MB; "HTTP" as 1.2 GB).
_MAX_HANDSHAKE_FRAME = 1 << 20
# Reads land here first; a frame longer than this gets a buffer of its own.
_HEAD_BUFFER = 1 << 16
# A large frame's buffer is allocated (and zeroed) this much at a time past what came in.
_FRAME_STEP = 1 << 24
# While a large frame comes in, wake for this much of it at once (SO_RCVLOWAT).
_READ_AT_ONCE = 1 << 18
#: A response frame: ``bytes``, or the ``bytearray`` a large one was read into.
Frame = bytes | bytearray
# Makes a large frame's buffer; set on the first one (_frame_buffer).
_new_frame: Callable[[int], bytearray] | None = None
# TCP keepalive: probe an idle connection after 30 s, every 10 s, give up after 3 misses,
# so a half-open connection (peer gone without a FIN) dies in about a minute.
_KEEPALIVE = (("TCP_KEEPIDLE", 30), ("TCP_KEEPINTVL", 10), ("TCP_KEEPCNT", 3))
# A TLS handshake not done after this long is checked for a plaintext listener; each
# diagnosis probe (plaintext ApiVersions, or a TLS handshake) is bounded by the second.
_PROBE_AFTER = 1.0
_PROBE_TIMEOUT = 2.0


def _diagnose_frame(address: str, head: bytes, size: int) -> str:
    """What a nonsensical first answer most likely means, in words."""
    seen = f"broker {address} sent a frame of {size} bytes"
    if head[:1] in (b"\x15", b"\x16") and head[1:2] == b"\x03":
        return (
            f"{seen} (a TLS record): the listener expects TLS; set net.tls.enable = True "
            "or use the plaintext listener's port"
        )
    text = head.decode("ascii", "replace")
    if head.isascii() and text.isprintable():
        return (
            f"{seen} (it starts with {text!r}): is this a Kafka listener? Another service "
            "(HTTP, SSH, ...) answers on this port; or TLS where the listener expects plaintext?"
        )
    return (
        f"{seen}: is this a Kafka listener? (or TLS where the listener expects plaintext, "
        "or plaintext where it expects TLS?)"
    )


def _frame_buffer(size: int) -> bytearray:
    """A large frame's buffer. Not zeroed where the C extension is built: the socket
    writes every byte of it before the frame is handed out, and ``bytearray(size)``
    zeroes it first (~3 % of a fetching member's CPU at 8 MiB answers). The extension is
    looked up at the first large frame, so a process that reads none never loads it."""
    global _new_frame
    if _new_frame is None:
        _new_frame = getattr(load_extension("_crecords"), "frame_buffer", bytearray)
    return _new_frame(size)


def _set_keepalive(sock: socket.socket | None) -> None:
    """SO_KEEPALIVE (and the probe timing where the platform has the knobs)."""
    if sock is None:
        return
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for name, value in _KEEPALIVE:
        option = getattr(socket, name, None)
        if option is not None:
            sock.setsockopt(socket.IPPROTO_TCP, option, value)


class _Expired(Exception):
    """Set on a request's future when its deadline passes (see BrokerConnection._expire)."""


class _FrameProtocol(asyncio.BufferedProtocol):
    """Splits the byte stream into size-prefixed frames for the connection.

    Runs inside the event loop's transport callbacks, so it never awaits: each
    complete frame is handed to ``on_frame`` synchronously.

    The socket is read into our own buffers (a buffered protocol): sizes and small
    frames land in a reusable head buffer and are copied out of it; a frame that does
    not fit there (a Fetch response, megabytes) gets a ``bytearray`` of its own, which
    the socket then fills directly. So a fetched byte is copied once, by the kernel,
    not three times (into a fresh ``bytes`` per read, onto a ``bytearray`` backlog, out
    into the frame), which cost a third of the fetch path's CPU per message.
    """

    def __init__(self, conn: BrokerConnection) -> None:
        self._conn = conn
        # head[start:end]: bytes read and not yet framed (at most one partial frame).
        self._head = bytearray(_HEAD_BUFFER)
        self._head_view = memoryview(self._head)
        self._start = self._end = 0
        # A large frame being read straight into its own buffer, how much is in, and
        # its size (its buffer grows to that as the bytes come).
        self._frame: bytearray | None = None
        self._frame_view = self._head_view
        self._got = self._size = 0
        # The plain TCP socket (None with TLS) and its SO_RCVLOWAT: while a large frame
        # comes in, the loop is woken only once this much of it can be read.
        self._sock: Any = None
        self._lowat = 1
        self.transport: asyncio.Transport | None = None
        # Raised to _MAX_FRAME once the connection is open (see _MAX_HANDSHAKE_FRAME).
        self.max_frame = _MAX_HANDSHAKE_FRAME
        # Cleared while the transport's send buffer is over its high-water mark.
        self.writable = asyncio.Event()
        self.writable.set()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # Not isinstance(): uvloop's transports (uvicorn's default loop when installed)
        # implement asyncio.Transport without deriving from it.
        self.transport = cast(asyncio.Transport, transport)
        sock = transport.get_extra_info("socket")
        _set_keepalive(sock)
        # Linux only: it grows the receive buffer to the mark; elsewhere a mark above the
        # buffer could leave the rest of a frame waiting for a window that never opens.
        if transport.get_extra_info("sslcontext") is None and sys.platform == "linux":
            self._sock = sock

    def pause_writing(self) -> None:
        self.writable.clear()

    def resume_writing(self) -> None:
        self.writable.set()

    def get_buffer(self, sizehint: int) -> memoryview:
        frame = self._frame
        if frame is not None:
            if self._got == len(frame):
                # Grown step by step: a size field read as a gigabyte costs memory only
                # as the bytes arrive. (Here, not in buffer_updated: the transport holds
                # the view it read into until that returns, and a viewed buffer cannot
                # be resized.)
                self._frame_view.release()
                frame += bytes(min(_FRAME_STEP, self._size - len(frame)))
                self._frame_view = memoryview(frame)
            return self._frame_view[self._got :]
        return self._head_view[self._end :]  # never empty: see buffer_updated

    def buffer_updated(self, nbytes: int) -> None:
        frame = self._frame
        if frame is not None:
            self._got += nbytes
            if self._got == self._size:
                self._frame = None
                self._frame_view.release()
                self._frame_view = self._head_view
                self._wake_at(1)
                self._conn._on_frame(frame)
                return
            self._wake_at(self._size - self._got)
            return
        self._end += nbytes
        head, start, end = self._head, self._start, self._end
        # Hand over every complete frame; keep a partial one for the next read.
        while end - start >= 4:
            (size,) = _SIZE.unpack_from(head, start)
            if size < 4 or size > self.max_frame:
                diagnosis = _diagnose_frame(
                    self._conn.address, bytes(head[start : start + 16]), size
                )
                # Before the connection is open this is the wrong service, not line noise.
                opening = self.max_frame == _MAX_HANDSHAKE_FRAME
                error = ListenerMismatchError if opening else CorruptMessageError
                self._conn._fail(error(diagnosis))
                return
            if 4 + size > len(head):
                # Too large for the head buffer: its own buffer, which the next reads fill.
                have = end - start - 4
                frame = _frame_buffer(min(size, have + _FRAME_STEP))
                frame[:have] = self._head_view[start + 4 : end]
                self._start = self._end = 0
                self._frame, self._frame_view, self._got = frame, memoryview(frame), have
                self._size = size
                self._wake_at(size - have)
                return
            stop = start + 4 + size
            if stop > end:
                break
            out = bytes(self._head_view[start + 4 : stop])
            start = stop
            self._conn._on_frame(out)
        if start == end:
            start = end = 0
        elif start:
            # Move the partial frame (shorter than the head buffer) to the front, so the
            # next read has room: what is left in the buffer is never empty.
            head[: end - start] = self._head_view[start:end]
            end -= start
            start = 0
        self._start, self._end = start, end

    def _wake_at(self, missing: int) -> None:
        """Wake the loop for this socket once ``missing`` bytes (capped) can be read: a
        megabyte frame then takes a few reads, not one per TCP segment batch. Never more
        than the frame still misses, so it cannot wait for bytes that are not coming
        (and a closed connection wakes it regardless)."""
        want = min(missing, _READ_AT_ONCE)
        if self._sock is not None and want != self._lowat:
            try:
                self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, want)
            except OSError:  # closed meanwhile: nothing left to wait for
                self._sock = None
                return
            self._lowat = want

    def connection_lost(self, exc: Exception | None) -> None:
        self.writable.set()  # a writer waiting for room sees the failure instead
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
        self._inflight: dict[int, asyncio.Future[Frame]] = {}
        # When each waiting request times out (loop time), by correlation id; _request
        # adds and removes its own entry. One timer serves them all (_expire): armed for
        # the earliest deadline, moved only when a request's deadline comes sooner, so a
        # request pays a dict entry, not a timer scheduled and cancelled in the loop's
        # heap (a Fetch answered every millisecond paid that for a 30 s bound that
        # almost never fires). _expire and _fail clear it.
        self._deadlines: dict[int, float] = {}
        self._deadline_timer: asyncio.TimerHandle | None = None
        self._next_id = 0
        self._slots = asyncio.Semaphore(config.net.max_open_requests)
        # The request of exchange(at_frame=True) in flight: its correlation id, request
        # struct and answer callback, run by _on_frame. Set and cleared by _request
        # (one such request at a time: exchange's caller has no other in flight).
        self._at_frame: tuple[int, AnyRequestStruct, Callable[[Any], Any]] | None = None
        self._protocol: _FrameProtocol | None = None
        # Set once, by _fail() or close(); every later send() raises it.
        self._error: BaseException | None = None
        # The broker's advertised (min, max) per API; filled by _negotiate().
        self.broker_versions: VersionRanges = {}
        # The Fetch version prepare() picks with them (None: none in common); by _negotiate().
        self._fetch_version: int | None = None
        # The features the cluster finalized, as this broker said (ApiVersions v3+); set
        # once, by _negotiate().
        self.features = Features()
        # SASL re-authentication (KIP-368). Owned by the event loop: _authenticate() arms
        # _reauth_timer, which sets _reauth_due when the session should be renewed (so a
        # request reads a flag, not the clock); _authenticated() then starts one (_reauth,
        # done when it ends, and _reauth_task, which runs it) and no request is written
        # while _reauth is set; _fail() cancels the timer and the task.
        self._reauth_due = False
        self._reauth_timer: asyncio.TimerHandle | None = None
        self._reauth: asyncio.Future[None] | None = None
        self._reauth_task: asyncio.Task[None] | None = None
        #: Re-authentications completed on this connection (for logs and tests).
        self.reauthentications = 0

    @property
    def quirks(self) -> BrokerQuirks:
        """The broker's departures from Apache Kafka's protocol, from its ApiVersions answer."""
        return detect_quirks(self.broker_versions)

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
        authenticating = False
        try:
            async with asyncio.timeout(config.net.dial_timeout):
                await conn._connect()
                try:
                    await conn._negotiate()
                except KafkaConnectionError:
                    # Closed without a word: a TLS listener does that to plaintext bytes.
                    if not config.net.tls.enable and await conn._speaks_tls():
                        raise ListenerMismatchError(
                            f"{conn.address} is a TLS listener but net.tls.enable is False: "
                            "set net.tls.enable = True, or use the plaintext listener's port"
                        ) from None
                    raise
                if config.net.sasl.enable:
                    authenticating = True
                    await conn._authenticate()
        except TimeoutError:
            conn.abort()
            if authenticating:
                # The broker answered: what ran out is SASL (a token provider's first
                # call, which may import a signer or ask an identity provider, included).
                raise KafkaConnectionError(
                    f"SASL {config.net.sasl.mechanism} authentication with {conn.address} did "
                    f"not finish within net.dial_timeout={config.net.dial_timeout}s (the "
                    "token provider's or Kerberos' own calls count against it): raise "
                    "net.dial_timeout, or check the identity provider and the broker's log"
                ) from None
            if conn._silent():
                raise conn._silent_listener(config.net.dial_timeout) from None
            raise KafkaConnectionError(
                f"could not connect to {conn.address} within net.dial_timeout="
                f"{config.net.dial_timeout}s: check the address and that the broker is up"
            ) from None
        except RequestTimedOutError as exc:
            # read_timeout < dial_timeout: still a failed dial, not a failed request.
            conn.abort()
            if conn._silent():
                raise conn._silent_listener(config.net.read_timeout) from exc
            raise KafkaConnectionError(
                f"could not connect to {conn.address}: it accepted the connection but "
                f"{exc.context}: check that this is a Kafka listener and the broker is healthy"
            ) from exc
        except KafkaConnectionError as exc:
            conn.abort()
            if conn._protocol is None:  # the dial itself failed
                raise
            raise KafkaConnectionError(
                f"{exc}, while the connection was being opened: if this persists, check that "
                f"{conn.address} is a Kafka listener and that net.tls.enable matches it"
            ) from exc
        except BaseException:
            conn.abort()
            raise
        assert conn._protocol is not None
        conn._protocol.max_frame = _MAX_FRAME
        return conn

    async def _connect(self) -> None:
        tls = self._config.net.tls
        if not tls.enable:
            await self._dial(None)
            return
        # A TLS handshake with a plaintext listener is never answered (the broker waits
        # for a 350 MB "request"): if the handshake is slow, ask the port in plaintext.
        dial = asyncio.create_task(self._dial(tls.context or ssl.create_default_context()))
        try:
            done, _ = await asyncio.wait({dial}, timeout=_PROBE_AFTER)
            if not done and await self._speaks_plaintext_kafka():
                raise self._plaintext_listener()
            await dial
        except (ssl.SSLError, ConnectionError) as exc:
            if isinstance(exc, ssl.SSLCertVerificationError):
                raise ListenerMismatchError(
                    f"TLS with {self.address} failed: {exc.verify_message}: pass an "
                    "ssl.SSLContext that trusts the broker's CA as net.tls.context"
                ) from exc
            if await self._speaks_plaintext_kafka():
                raise self._plaintext_listener() from exc
            if isinstance(exc, ssl.SSLError):
                raise ListenerMismatchError(
                    f"TLS handshake with {self.address} failed ({exc}): is this a Kafka "
                    "TLS listener?"
                ) from exc
            raise self._dial_failed(exc) from exc
        finally:
            dial.cancel()

    async def _dial(self, ctx: ssl.SSLContext | None) -> None:
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
            if ctx is not None and isinstance(exc, (ssl.SSLError, ConnectionError)):
                raise  # _connect tells a plaintext listener from a broken TLS one
            raise self._dial_failed(exc) from exc
        self._protocol = protocol

    def _silent(self) -> bool:
        """Connected, and no ApiVersions answer came (not a timeout of the dial or SASL)."""
        return self._protocol is not None and not self.broker_versions

    def _silent_listener(self, timeout: float) -> SilentListenerError:
        return SilentListenerError(
            f"{self.address} accepted the connection but did not answer the Kafka "
            f"ApiVersions request within {timeout:g} s: is this a Kafka listener?"
        )

    def _dial_failed(self, exc: OSError) -> KafkaConnectionError:
        # The errno's text ("Connection refused"): asyncio's message repeats the address.
        reason = os.strerror(exc.errno) if exc.errno else str(exc)
        return KafkaConnectionError(
            f"could not connect to {self.address}: {reason}: check the address "
            "and that the broker is up"
        )

    def _plaintext_listener(self) -> ListenerMismatchError:
        return ListenerMismatchError(
            f"{self.address} is a plaintext Kafka listener but net.tls.enable is True: "
            "set net.tls.enable = False, or use the broker's TLS listener port"
        )

    async def _speaks_plaintext_kafka(self) -> bool:
        """Does the address answer ApiVersions without TLS (a diagnosis probe)?"""
        probe = Config(client_id=self._config.client_id)
        probe.net.dial_timeout = probe.net.read_timeout = _PROBE_TIMEOUT
        try:
            conn = await BrokerConnection.open(self.host, self.port, probe)
        except (ConsumerGroupError, OSError):
            return False
        await conn.close()
        return True

    async def _speaks_tls(self) -> bool:
        """Does the address complete a TLS handshake (a diagnosis probe)?"""
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE  # only "is it TLS at all?" is asked
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(_PROBE_TIMEOUT):
                transport, _ = await loop.create_connection(
                    asyncio.Protocol, self.host, self.port, ssl=ctx
                )
        except (TimeoutError, OSError):  # ssl.SSLError is an OSError
            return False
        transport.close()
        return True

    async def _negotiate(self) -> None:
        """ApiVersions: learn the broker's ranges and finalized features (v3 first, v0 if the
        broker refuses v3)."""
        latest = ApiVersionsRequest().prepare({18: codec_versions()[18]})
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
            self.broker_versions = {k: (lo, hi) for k, lo, hi, *_ in resp.api_versions}
            self._fetch_version = self.version(FetchRequest.API_KEY)
            self.features = features_of(resp)
            return
        raise UnsupportedVersionError(
            f"broker {self.address} accepts no ApiVersions version we know"
        )

    def version(self, api_key: int) -> int | None:
        """The version :meth:`send` will use for ``api_key`` (None if no common version)."""
        return common_version(codec_versions().get(api_key), self.broker_versions.get(api_key))

    def negotiated(self) -> dict[str, int | None]:
        """API name -> version used with this broker, for every API this package speaks."""
        return {
            name: self.version(key) for key, name in API_NAMES.items() if key in codec_versions()
        }

    async def send(self, request: AnyRequest, timeout: float | None = None) -> Any:
        """Send ``request`` at the highest common version and return the decoded response.

        ``timeout`` defaults to ``net.read_timeout``. Raises
        :class:`RequestTimedOutError` on timeout (the connection stays usable; a
        late answer is dropped), :class:`KafkaConnectionError` if the connection
        drops, :class:`UnsupportedVersionError` if no version is common.
        """
        struct_ = prepare(request, self.broker_versions, self.address)
        payload = await self._roundtrip(struct_, timeout or self._config.net.read_timeout)
        return self._decode(struct_, payload)

    def exchange(
        self,
        request: AnyRequest,
        timeout: float,
        on_answer: Callable[[Any], _T],
        *,
        at_frame: bool,
    ) -> Awaitable[_T]:
        """:meth:`send` ``request`` and give its decoded answer to ``on_answer``; awaiting
        the result returns what ``on_answer`` returned (it raises as :meth:`send` does).

        For a connection whose one caller has one request in flight at a time (a fetch
        task's own connection): the request takes no slot of ``net.max_open_requests``
        and is awaited through one coroutine, not three. With ``at_frame``, ``on_answer``
        runs in the loop callback that read the answer's last byte, so what it wakes (a
        reader) runs before the awaiting task, whose wake-up is scheduled after it; an
        exception it raises is the awaiting task's. Without, it runs in the awaiting task.
        While a SASL re-authentication is due or runs, this waits for it as :meth:`send`.
        """
        if self._error is not None or self._reauth_due or self._reauth is not None:
            return self._gated(request, timeout, on_answer)
        if type(request) is FetchRequest and self._fetch_version is not None:
            struct_: AnyRequestStruct = request.build(self._fetch_version)  # prepare()'s, known
        else:
            struct_ = prepare(request, self.broker_versions, self.address)
        return self._request(struct_, timeout, on_answer, at_frame)

    async def _gated(
        self, request: AnyRequest, timeout: float, on_answer: Callable[[Any], _T]
    ) -> _T:
        return on_answer(await self.send(request, timeout))

    async def _sasl_send(self, request: AnyRequest) -> Any:
        """A SASL request of an (re-)authentication: written at once, past the gate that
        holds every other request while a re-authentication runs, and without a slot
        (one at a time; the requests holding the slots may be waiting for it)."""
        struct_ = prepare(request, self.broker_versions, self.address)
        return self._decode(struct_, await self._request(struct_, self._config.net.read_timeout))

    def _decode(self, struct_: AnyRequestStruct, payload: Frame) -> Any:
        try:
            return decode_response(struct_, payload)
        except Exception as exc:  # the codec raises ValueError/struct.error/IndexError
            raise CorruptMessageError(
                f"malformed {type(struct_).__name__} response from {self.address}: {exc}"
            ) from exc

    def post(self, request: AnyRequest) -> None:
        """Send ``request`` without waiting for its answer (dropped when it comes).

        For a request that must reach the broker *after* those already in flight here
        (a broker answers a connection's requests in order) when nobody can wait for it.
        During a re-authentication it is written when that ends.
        """
        if self._error is not None:
            raise self._reraisable()
        struct_ = prepare(request, self.broker_versions, self.address)
        if self._reauth is None:
            self._write(struct_)
            return

        def write_after(_: object) -> None:
            if self._error is None:
                self._write(struct_)

        self._reauth.add_done_callback(write_after)

    def _write(self, struct_: AnyRequestStruct) -> int:
        """Frame ``struct_`` under the next correlation id and write it; returns the id."""
        assert self._protocol is not None and self._protocol.transport is not None
        cid = self._next_id
        self._next_id = (cid + 1) & 0x7FFFFFFF
        self._protocol.transport.write(sized_request(struct_, cid, self._config.client_id))
        return cid

    async def _roundtrip(self, struct_: AnyRequestStruct, timeout: float) -> Frame:
        if self._error is not None:
            raise self._reraisable()
        async with self._slots:
            if self._reauth_due or self._reauth is not None:
                await self._authenticated()
            frame: Frame = await self._request(struct_, timeout)
            return frame

    async def _request(
        self,
        struct_: AnyRequestStruct,
        timeout: float,
        on_answer: Callable[[Any], Any] | None = None,
        at_frame: bool = False,
    ) -> Any:
        """Write ``struct_`` and wait for its answer, the frame (the caller holds a slot,
        or is the authentication), or what ``on_answer`` made of it decoded (see
        :meth:`exchange`)."""
        if self._error is not None:
            raise self._reraisable()
        assert self._protocol is not None
        protocol = self._protocol
        cid = self._write(struct_)
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()
        self._inflight[cid] = fut  # no callback runs before the next await
        if at_frame:
            self._at_frame = (cid, struct_, on_answer)  # type: ignore[assignment]
        try:
            if not protocol.writable.is_set():
                await self._drain(protocol)
            deadline = self._deadlines[cid] = loop.time() + timeout
            timer = self._deadline_timer
            if timer is None or deadline < timer.when():
                self._arm_deadline(loop, deadline)
            answer = await fut
            if on_answer is None or at_frame:
                return answer
            return on_answer(self._decode(struct_, answer))
        except _Expired:
            # No answer: the peer or the path may be gone without a FIN (half-open).
            # Retire the connection so the next request redials instead of waiting
            # out the same silence; the other waiters fail retriably now.
            self._inflight.pop(cid, None)
            error = RequestTimedOutError(
                f"{type(struct_).__name__} to {self.address} got no answer within "
                f"{timeout}s (net.read_timeout)"
            )
            self.retire(f"a request on it got no answer within {timeout}s")
            raise error from None
        finally:
            self._inflight.pop(cid, None)
            self._deadlines.pop(cid, None)
            if at_frame and self._at_frame is not None and self._at_frame[0] == cid:
                self._at_frame = None

    def _arm_deadline(self, loop: asyncio.AbstractEventLoop, when: float) -> None:
        if self._deadline_timer is not None:
            self._deadline_timer.cancel()
        self._deadline_timer = loop.call_at(when, self._expire)

    def _expire(self) -> None:
        """The deadline timer: fail the requests whose time is up (their callers raise
        RequestTimedOutError) and re-arm for the earliest one still waiting."""
        self._deadline_timer = None
        loop = asyncio.get_running_loop()
        now = loop.time()
        earliest = math.inf
        for cid, deadline in self._deadlines.items():
            if deadline <= now:
                fut = self._inflight.get(cid)
                if fut is not None and not fut.done():
                    fut.set_exception(_Expired())
            else:
                earliest = min(earliest, deadline)
        if earliest < math.inf:
            self._arm_deadline(loop, earliest)

    # ------------------------------------------------------------ authentication

    async def _authenticate(self, *, reauth: bool = False) -> None:
        """Authenticate with SASL (again, if ``reauth``) and note when to do it next."""
        from .sasl import authenticate

        sasl = self._config.net.sasl
        lifetime = await authenticate(self._sasl_send, self.host, self.address, sasl, reauth=reauth)
        if lifetime is None or self._error is not None:
            return
        # As Kafka's client: at 85-95 % of the session, for the latency and clock drift
        # between the broker's clock and ours, and so that connections spread out.
        self._reauth_timer = asyncio.get_running_loop().call_later(
            lifetime * random.uniform(0.85, 0.95), self._session_due
        )

    def _session_due(self) -> None:
        self._reauth_timer = None
        self._reauth_due = True

    async def _authenticated(self) -> None:
        """Return when a request may be written: not while a re-authentication is on the
        wire (the broker would take the request for a SASL token and close). A request
        finding the session due starts the re-authentication; every request waits for it.
        Nothing may await between this returning and the request being written."""
        while True:
            reauth = self._reauth
            if reauth is None:
                if self._error is not None or not self._reauth_due:
                    return
                reauth = self._start_reauthentication()
            await asyncio.shield(reauth)  # one waiter cancelled leaves it to the others

    def _start_reauthentication(self) -> asyncio.Future[None]:
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._reauth = done
        self._reauth_due = False
        self._reauth_task = asyncio.create_task(
            self._reauthenticate(done), name=f"reauthenticate {self.address}"
        )
        return done

    async def _reauthenticate(self, done: asyncio.Future[None]) -> None:
        """One re-authentication, bounded by ``net.dial_timeout``. If it fails the
        connection is retired: the requests waiting for it fail retriably (none of them
        was written) and the next one dials afresh, whose authentication then says
        clearly what is wrong if it is the credentials."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            async with asyncio.timeout(self._config.net.dial_timeout):
                await self._authenticate(reauth=True)
            self.reauthentications += 1
            timer = self._reauth_timer
            log.debug(
                "re-authenticated %s in %.3fs; next in %.1fs",
                self.address,
                loop.time() - started,
                timer.when() - loop.time() if timer is not None else math.inf,
            )
        except Exception as exc:  # TimeoutError included
            self._reauth_task = None  # retire() must not cancel this very task
            reason = "it timed out (net.dial_timeout)" if isinstance(exc, TimeoutError) else exc
            log.warning("re-authentication with %s failed: %s", self.address, reason)
            self.retire(f"re-authenticating its SASL session failed: {reason}")
        finally:
            self._reauth = None
            self._reauth_task = None
            if not done.done():  # _fail() resolves it when it closes the connection
                done.set_result(None)

    async def _drain(self, protocol: _FrameProtocol) -> None:
        """Wait for room in a full send buffer, up to ``net.write_timeout``."""
        limit = self._config.net.write_timeout
        try:
            async with asyncio.timeout(limit):
                await protocol.writable.wait()
        except TimeoutError:
            self._fail(
                KafkaConnectionError(
                    f"connection to {self.address} dropped: the broker read nothing for "
                    f"{limit}s (net.write_timeout) while requests waited to be sent"
                )
            )
        if self._error is not None:
            raise self._reraisable()

    def _on_frame(self, frame: Frame) -> None:
        (cid,) = _SIZE.unpack_from(frame, 0)
        fut = self._inflight.pop(cid, None)
        if fut is None or fut.done():
            return
        at_frame = self._at_frame
        if at_frame is None or at_frame[0] != cid:
            fut.set_result(frame)
            return
        self._at_frame = None
        try:
            result = at_frame[2](self._decode(at_frame[1], frame))
        except Exception as exc:  # the awaiting task's, as if raised there
            if not fut.done():
                fut.set_exception(exc)
            return
        if not fut.done():
            fut.set_result(result)

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
        if self._reauth_timer is not None:
            self._reauth_timer.cancel()
            self._reauth_timer = None
        if self._deadline_timer is not None:
            self._deadline_timer.cancel()
            self._deadline_timer = None
        if self._reauth_task is not None:
            self._reauth_task.cancel()
        reauth, self._reauth = self._reauth, None
        if reauth is not None and not reauth.done():
            reauth.set_result(None)  # its waiters resume and see the error
        if self._protocol is not None and self._protocol.transport is not None:
            self._protocol.transport.close()

    def retire(self, reason: str) -> None:
        """Close now because of ``reason``: requests in flight fail with a retriable
        :class:`KafkaConnectionError` and the client dials afresh for the next one.

        For a connection whose answers can no longer be trusted to come in time: a
        request timed out, or one the broker holds was cancelled (the broker answers a
        connection's requests in order, so whatever is sent next would wait behind it).
        """
        self._fail(KafkaConnectionError(f"connection to {self.address} retired: {reason}"))

    def abort(self) -> None:
        """Close now, failing in-flight requests with :class:`ClosedError`."""
        self._fail(ClosedError(f"connection to {self.address} was closed by this client"))

    async def close(self) -> None:
        """Close the connection; waiting requests fail with :class:`ClosedError`."""
        self.abort()
        # Let the transport's close callbacks run before returning.
        await asyncio.sleep(0)
