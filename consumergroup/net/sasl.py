"""SASL authentication: PLAIN, SCRAM-SHA-256/512 (RFC 5802, RFC 7677), OAUTHBEARER
(RFC 7628, KIP-255, extensions KIP-342) and GSSAPI (RFC 4752, in :mod:`.kerberos`).

The mechanisms are ours; the SaslHandshake/SaslAuthenticate codecs are
aiokafka's (through :mod:`.protocol`). :func:`authenticate` runs once per
connection, right after ApiVersions and before any other request, and again on
the same connection before the session the broker granted expires
(re-authentication, KIP-368: the connection decides when; see
:class:`~.connection.BrokerConnection`).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import hmac
import json
import math
import re
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio

from ..errors import (
    ConsumerGroupError,
    SaslAuthenticationFailedError,
    UnsupportedSaslMechanismError,
    raise_for_code,
)
from .protocol import AnyRequest, SaslAuthenticateRequest, SaslHandShakeRequest

if TYPE_CHECKING:
    from ..config import SASLConfig, TokenProvider

#: Sends one request on the connection being authenticated and returns the answer.
Send = Callable[[AnyRequest], Awaitable[Any]]

_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
# The iteration counts a SCRAM server may ask for, as Kafka's ScramMechanism bounds them
# (a broker stores no credential outside them). Below: a cheap hash of the password for
# whoever runs the "broker"; above: a hostile broker burning our CPU (PBKDF2 is linear).
SCRAM_MIN_ITERATIONS = 4096
SCRAM_MAX_ITERATIONS = 16384
# An RFC 6750 b64token: what Kafka's broker accepts after "auth=Bearer ".
_BEARER_TOKEN = re.compile(r"[-_~+/.a-zA-Z0-9]+=*")
_HINTS = {
    "PLAIN": "check net.sasl.user / net.sasl.password and the mechanism",
    "OAUTHBEARER": "check the token net.sasl.token_provider returns",
    "GSSAPI": "check net.sasl.kerberos_principal, its keytab or ticket cache, and "
    "net.sasl.kerberos_service_name",
}


class ScramClient:
    """The client side of one SCRAM exchange (client-first, client-final, verify)."""

    def __init__(self, mechanism: str, user: str, password: str, nonce: str | None = None) -> None:
        self._hash = _HASHES[mechanism]
        self._user = user.replace("=", "=3D").replace(",", "=2C")
        self._password = password.encode()
        self._nonce = nonce or secrets.token_urlsafe(24)
        self._client_first_bare = f"n={self._user},r={self._nonce}"
        self._server_signature = b""

    def first_message(self) -> bytes:
        """client-first-message (no channel binding)."""
        return f"n,,{self._client_first_bare}".encode()

    def final_message(self, server_first: bytes) -> bytes:
        """client-final-message with the proof, given the server-first-message."""
        fields = _parse(server_first, "server-first-message")
        if "e" in fields:
            raise SaslAuthenticationFailedError(f"SCRAM: the broker refused: {fields['e']}")
        try:
            nonce = fields["r"]
            salt = base64.b64decode(fields["s"], validate=True)
            iterations = int(fields["i"])
        except (KeyError, ValueError) as exc:
            raise SaslAuthenticationFailedError(
                f"SCRAM: malformed server-first-message from the broker ({exc!r})"
            ) from None
        if not SCRAM_MIN_ITERATIONS <= iterations <= SCRAM_MAX_ITERATIONS:
            raise SaslAuthenticationFailedError(
                f"SCRAM: the broker asked for {iterations} iterations, outside the "
                f"{SCRAM_MIN_ITERATIONS}-{SCRAM_MAX_ITERATIONS} a Kafka broker stores "
                "credentials with (as Kafka's own client checks): refused, this is not a "
                "Kafka broker's answer"
            )
        if not nonce.startswith(self._nonce):
            raise SaslAuthenticationFailedError("SCRAM: the server nonce does not extend ours")
        salted = hashlib.pbkdf2_hmac(self._hash, self._password, salt, iterations)
        client_key = hmac.digest(salted, b"Client Key", self._hash)
        stored_key = hashlib.new(self._hash, client_key).digest()
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._client_first_bare},{server_first.decode()},{without_proof}".encode()
        signature = hmac.digest(stored_key, auth_message, self._hash)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        server_key = hmac.digest(salted, b"Server Key", self._hash)
        self._server_signature = hmac.digest(server_key, auth_message, self._hash)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify_server_final(self, server_final: bytes) -> None:
        """Check the server's signature: proves the broker knows the password too."""
        fields = _parse(server_final, "server-final-message")
        if "e" in fields:
            raise SaslAuthenticationFailedError(f"SCRAM: the broker refused: {fields['e']}")
        try:
            signature = base64.b64decode(fields.get("v", ""), validate=True)
        except ValueError:
            signature = b""
        if not self._server_signature or not hmac.compare_digest(signature, self._server_signature):
            raise SaslAuthenticationFailedError("SCRAM: the broker's signature does not match")


def _parse(message: bytes, what: str) -> dict[str, str]:
    """``a=1,b=2`` -> ``{"a": "1", "b": "2"}``; a malformed message fails authentication."""
    try:
        return dict(item.split("=", 1) for item in message.decode().split(","))
    except (UnicodeDecodeError, ValueError):
        raise SaslAuthenticationFailedError(
            f"SCRAM: malformed {what} from the broker: {message[:80]!r}"
        ) from None


class SaslExchange:
    """SaslAuthenticate round trips of one authentication, and the session they granted.

    Raises :class:`SaslAuthenticationFailedError` with the broker's reason and ``hint``
    when the broker refuses. ``lifetime`` is the session lifetime the last answer gave
    (SaslAuthenticate v1+, KIP-368) in seconds; None when the session never expires.
    """

    def __init__(self, send: Send, address: str, hint: str) -> None:
        self._send = send
        self.address = address
        self.hint = hint
        self.lifetime: float | None = None

    async def __call__(self, payload: bytes) -> bytes:
        """Send ``payload``; the broker's answer bytes."""
        resp = await self._send(SaslAuthenticateRequest(payload))
        if resp.error_code:
            raise SaslAuthenticationFailedError(
                f"SASL authentication to {self.address} failed: {resp.error_message}: {self.hint}"
            )
        lifetime_ms: int = getattr(resp, "session_lifetime_ms", 0)
        self.lifetime = lifetime_ms / 1000 if lifetime_ms > 0 else None
        auth_bytes: bytes = resp.sasl_auth_bytes
        return auth_bytes


async def authenticate(
    send: Send, host: str, address: str, sasl: SASLConfig, *, reauth: bool = False
) -> float | None:
    """Authenticate the connection ``send`` writes to (``host`` as dialed, ``address``
    for messages): SaslHandshake, then the mechanism's SaslAuthenticate rounds.

    The handshake is skipped when ``sasl.handshake`` is off, except for a
    re-authentication (``reauth``): the broker starts one only on a SaslHandshake.
    Returns the session lifetime the broker granted in seconds (None: no expiry).
    """
    if sasl.handshake or reauth:  # off only for proxies that expect SaslAuthenticate at once
        resp = await send(SaslHandShakeRequest(sasl.mechanism))
        if resp.error_code == UnsupportedSaslMechanismError.errno:
            raise UnsupportedSaslMechanismError(
                f"broker {address} does not enable SASL mechanism {sasl.mechanism}; it "
                f"offers {list(resp.enabled_mechanisms)}: set net.sasl.mechanism to one of them"
            )
        raise_for_code(resp.error_code, f"SaslHandshake with {address}")
    mechanism = sasl.mechanism
    exchange = SaslExchange(send, address, _HINTS.get(mechanism, _HINTS["PLAIN"]))
    if mechanism == "PLAIN":
        await exchange(f"\0{sasl.user}\0{sasl.password}".encode())
    elif mechanism == "OAUTHBEARER":
        assert sasl.token_provider is not None  # Config.validate() checks it
        await _oauthbearer(exchange, sasl.token_provider, sasl.extensions)
    elif mechanism == "GSSAPI":
        from .kerberos import authenticate_gssapi

        await authenticate_gssapi(exchange, host, sasl)
    else:
        await _scram(exchange, mechanism, sasl.user, sasl.password)
    return exchange.lifetime


async def _scram(exchange: SaslExchange, mechanism: str, user: str, password: str) -> None:
    scram = ScramClient(mechanism, user, password)
    server_first = await exchange(scram.first_message())
    # PBKDF2 (4,096+ HMAC rounds) would stall heartbeats and fetches on the loop.
    final = await anyio.to_thread.run_sync(scram.final_message, server_first)
    server_final = await exchange(final)
    scram.verify_server_final(server_final)


# ----------------------------------------------------------------------------- OAUTHBEARER


def oauthbearer_first_message(token: str, extensions: dict[str, str]) -> bytes:
    """The client's first (and only) message: RFC 7628's GS2 header without an
    authorization id, ``auth=Bearer <token>`` and each extension, ^A-separated, as
    Kafka's OAuthBearerClientInitialResponse writes it."""
    pairs = "".join(f"\x01{key}={value}" for key, value in extensions.items())
    return f"n,,\x01auth=Bearer {token}{pairs}\x01\x01".encode()


async def _oauthbearer(
    exchange: SaslExchange, provider: TokenProvider, extensions: dict[str, str]
) -> None:
    token = await fetch_token(provider)
    answer = await exchange(oauthbearer_first_message(token, extensions))
    if not answer:
        return
    # A refusal comes as a JSON error "challenge"; RFC 7628 3.2.3: acknowledge it with
    # ^A, and the broker then ends the exchange with its own (generic) error.
    with contextlib.suppress(SaslAuthenticationFailedError):
        await exchange(b"\x01")
    raise SaslAuthenticationFailedError(
        f"SASL OAUTHBEARER authentication to {exchange.address} failed: the broker refused "
        f"the token ({_describe_error(answer)}); {describe_token(token)}: check that it is "
        "signed by a key the broker's JWKS endpoint serves and that its audience, issuer "
        "and expiry are what the broker expects (its log says which check failed)"
    )


async def fetch_token(provider: TokenProvider) -> str:
    """``provider()``'s token, checked: a clear error when it fails or returns no usable
    token. Errors of this library (a provider's own) pass through."""
    try:
        result = await provider()
    except ConsumerGroupError:
        raise
    except Exception as exc:
        raise SaslAuthenticationFailedError(
            f"net.sasl.token_provider failed: {type(exc).__name__}: {exc}"
        ) from exc
    try:
        token, lifetime = result
        ok = isinstance(token, str) and isinstance(lifetime, (int, float))
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise SaslAuthenticationFailedError(
            f"net.sasl.token_provider returned {type(result).__name__}, not (token: str, "
            "lifetime_s: float)"
        )
    if not _BEARER_TOKEN.fullmatch(token):
        raise SaslAuthenticationFailedError(
            "net.sasl.token_provider returned a token with characters a bearer token cannot "
            "have (RFC 6750: letters, digits, -._~+/ and trailing =): return the access "
            "token itself, not a JSON document or a header"
        )
    if not (math.isfinite(lifetime) and lifetime > 0):
        raise SaslAuthenticationFailedError(
            f"net.sasl.token_provider returned an expired token (lifetime {lifetime} s); "
            f"{describe_token(token)}: it must return a fresh one"
        )
    return token


def _describe_error(answer: bytes) -> str:
    try:
        error = json.loads(answer)
        return ", ".join(f"{k}={v}" for k, v in error.items())
    except (ValueError, AttributeError):
        return answer[:200].decode("utf-8", "replace")


def jwt_claims(token: str) -> dict[str, Any] | None:
    """The claims of a JWT, unverified (for messages only); None if it is not a JWT."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (ValueError, binascii.Error):
        return None
    return claims if isinstance(claims, dict) else None


def describe_token(token: str) -> str:
    """What a token says of itself, never the token: a JWT's subject, issuer, audience,
    scope and expiry."""
    claims = jwt_claims(token)
    if claims is None:
        return "the token is not a JWT"
    shown = [f"{key}={claims[key]!r}" for key in ("sub", "iss", "aud", "scope") if key in claims]
    exp = claims.get("exp")
    if isinstance(exp, (int, float)):
        left = exp - time.time()
        shown.append(f"expired {-left:.0f} s ago" if left <= 0 else f"expires in {left:.0f} s")
    return f"the token is a JWT with {', '.join(shown) or 'no standard claims'}"
