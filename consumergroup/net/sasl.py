"""SASL authentication: PLAIN and SCRAM-SHA-256/512 (RFC 5802, RFC 7677).

The mechanisms are ours; the SaslHandshake/SaslAuthenticate codecs are
aiokafka's (through :mod:`.protocol`). Runs once per connection, right after
ApiVersions and before any other request.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from typing import TYPE_CHECKING

import anyio

from ..errors import (
    SaslAuthenticationFailedError,
    UnsupportedSaslMechanismError,
    raise_for_code,
)
from .protocol import SaslAuthenticateRequest, SaslHandShakeRequest

if TYPE_CHECKING:
    from ..config import SASLConfig
    from .connection import BrokerConnection

_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
# The iteration counts a SCRAM server may ask for, as Kafka's ScramMechanism bounds them
# (a broker stores no credential outside them). Below: a cheap hash of the password for
# whoever runs the "broker"; above: a hostile broker burning our CPU (PBKDF2 is linear).
SCRAM_MIN_ITERATIONS = 4096
SCRAM_MAX_ITERATIONS = 16384


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


async def _exchange(conn: BrokerConnection, payload: bytes) -> bytes:
    resp = await conn.send(SaslAuthenticateRequest(payload))
    if resp.error_code:
        raise SaslAuthenticationFailedError(
            f"SASL authentication to {conn.address} failed: {resp.error_message}: "
            "check net.sasl.user / net.sasl.password and the mechanism"
        )
    auth_bytes: bytes = resp.sasl_auth_bytes
    return auth_bytes


async def authenticate(conn: BrokerConnection, sasl: SASLConfig) -> None:
    """Run SaslHandshake (unless ``sasl.handshake`` is off) + SaslAuthenticate on ``conn``."""
    if sasl.handshake:  # off only for proxies that expect SaslAuthenticate straight away
        resp = await conn.send(SaslHandShakeRequest(sasl.mechanism))
        if resp.error_code == UnsupportedSaslMechanismError.errno:
            raise UnsupportedSaslMechanismError(
                f"broker {conn.address} does not enable SASL mechanism {sasl.mechanism}; it "
                f"offers {list(resp.enabled_mechanisms)}: set net.sasl.mechanism to one of them"
            )
        raise_for_code(resp.error_code, f"SaslHandshake with {conn.address}")
    if sasl.mechanism == "PLAIN":
        await _exchange(conn, f"\0{sasl.user}\0{sasl.password}".encode())
        return
    scram = ScramClient(sasl.mechanism, sasl.user, sasl.password)
    server_first = await _exchange(conn, scram.first_message())
    # PBKDF2 (4,096+ HMAC rounds) would stall heartbeats and fetches on the loop.
    final = await anyio.to_thread.run_sync(scram.final_message, server_first)
    server_final = await _exchange(conn, final)
    scram.verify_server_final(server_final)
