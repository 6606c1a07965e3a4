"""SASL GSSAPI: Kerberos V5 (RFC 4752) through the ``gssapi`` package (MIT Kerberos).

Kafka's framing: after SaslHandshake("GSSAPI"), each GSSAPI token travels in a
SaslAuthenticate request and the broker's in the answer. Once the security
context is established the broker offers its security layers in a wrapped
4-byte message; we take "no security layer" (TLS, not GSSAPI, protects the
bytes, as in Kafka) and answer with our principal as the authorization id.

The ``gssapi`` package is an optional extra, imported on the first GSSAPI
authentication. Its calls may talk to the KDC (a TGS request on the first step):
they run in a worker thread, never on the event loop.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import anyio

from ..errors import ConfigurationError, ConsumerGroupError, SaslAuthenticationFailedError

if TYPE_CHECKING:
    from ..config import SASLConfig
    from .sasl import SaslExchange

T = TypeVar("T")
# RFC 4752 3.3: the security layer bit for "no security layer".
_NO_SECURITY_LAYER = 1


class _Wrapped(Protocol):
    message: bytes


class SecurityContext(Protocol):
    """What the exchange uses of ``gssapi.SecurityContext`` (an initiator's)."""

    @property
    def complete(self) -> bool: ...

    @property
    def initiator_name(self) -> object: ...

    def step(self, token: bytes | None = None) -> bytes | None: ...

    def unwrap(self, message: bytes) -> _Wrapped: ...

    def wrap(self, message: bytes, encrypt: bool) -> _Wrapped: ...


def _import_gssapi() -> Any:
    try:
        import gssapi
    except ImportError as exc:
        raise ConfigurationError(
            "net.sasl.mechanism='GSSAPI' needs the gssapi package: pip install "
            "'consumergroup[gssapi]' (it builds against MIT Kerberos: on Debian/Ubuntu "
            f"apt-get install libkrb5-dev first) ({exc})"
        ) from None
    return gssapi


def security_context(host: str, sasl: SASLConfig) -> SecurityContext:
    """An initiator's context for ``<kerberos_service_name>@<host>`` with the configured
    credentials: the keytab's (kept in a memory ticket cache of this process, so a TGT is
    fetched once, not per connection, and the user's own cache is never touched), else the
    ticket cache's."""
    gssapi = _import_gssapi()
    target = gssapi.Name(f"{sasl.kerberos_service_name}@{host}", gssapi.NameType.hostbased_service)
    creds = None
    if sasl.kerberos_principal:
        principal = gssapi.Name(sasl.kerberos_principal, gssapi.NameType.kerberos_principal)
        store = None
        if sasl.kerberos_keytab:
            key = f"{sasl.kerberos_principal}\0{sasl.kerberos_keytab}".encode()
            ccache = f"MEMORY:consumergroup-{hashlib.sha256(key).hexdigest()[:16]}"
            store = {"client_keytab": sasl.kerberos_keytab, "ccache": ccache}
        creds = gssapi.Credentials(name=principal, usage="initiate", store=store)
    context: SecurityContext = gssapi.SecurityContext(name=target, creds=creds, usage="initiate")
    return context


async def authenticate_gssapi(exchange: SaslExchange, host: str, sasl: SASLConfig) -> None:
    """The GSSAPI exchange with the broker at ``host`` (as dialed: its Kerberos host name)."""
    context = await _off_loop(exchange, security_context, host, sasl)
    await gssapi_exchange(exchange, context)


async def gssapi_exchange(exchange: SaslExchange, context: SecurityContext) -> None:
    """Tokens until the context is established, then RFC 4752's security-layer step."""
    token = await _off_loop(exchange, context.step, None)
    while not context.complete:
        token = await _off_loop(exchange, context.step, await exchange(token or b""))
    # Established; an empty answer to our last token (if any) brings the broker's offer.
    offer = await _off_loop(exchange, context.unwrap, await exchange(token or b""))
    layers = offer.message
    if len(layers) != 4 or not layers[0] & _NO_SECURITY_LAYER:
        raise SaslAuthenticationFailedError(
            f"SASL GSSAPI with {exchange.address}: the broker offers no 'no security layer' "
            f"option (offer {layers.hex()}): Kafka brokers always do; is this a Kafka listener?"
        )
    reply = bytes((_NO_SECURITY_LAYER, 0, 0, 0)) + str(context.initiator_name).encode()
    wrapped = await _off_loop(exchange, context.wrap, reply, False)
    await exchange(wrapped.message)


async def _off_loop(exchange: SaslExchange, call: Callable[..., T], *args: Any) -> T:
    """``call(*args)`` in a worker thread; a GSSAPI failure is an authentication error
    naming the broker, what Kerberos said and what to check."""
    try:
        return await anyio.to_thread.run_sync(call, *args)
    except ConsumerGroupError:
        raise
    except Exception as exc:  # gssapi's GSSError family, whatever the binding raises
        raise SaslAuthenticationFailedError(
            f"SASL GSSAPI with {exchange.address} failed: Kerberos said: {exc}: {exchange.hint}"
        ) from exc
