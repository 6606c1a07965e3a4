"""A small OIDC identity provider on loopback, for the OAUTHBEARER tests.

:class:`OIDCServer` serves a JWKS (``/jwks``) and a token endpoint (``/token``,
the client credentials grant with HTTP Basic client authentication, RFC 6749 4.4
and 2.3.1) on 127.0.0.1, and signs RS256 JWTs with a key made when it starts
(``cryptography``). Apache Kafka's ``OAuthBearerValidatorCallbackHandler`` checks
them against the JWKS as it would a real provider's (Keycloak, Okta, Entra ID).
Tests script it: token lifetime and audience, answers to fail with, and
:meth:`OIDCServer.mint` for tokens of their own (expired, wrong audience, signed by
another key).
"""

from __future__ import annotations

import base64
import json
import ssl
import time
import urllib.parse
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from tests.helpers import certificate
from tests.sasl_wire import b64url

if TYPE_CHECKING:  # aiohttp when a server starts: every pytest-xdist worker imports this module
    from aiohttp import web

AUDIENCE = "kafka"


class SigningKey:
    """An RSA key pair, its key id and its JWK."""

    def __init__(self) -> None:
        self.private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.kid = uuid.uuid4().hex[:12]

    def jwk(self) -> dict[str, str]:
        numbers = self.private.public_key().public_numbers()

        def big(n: int) -> str:
            return b64url(n.to_bytes((n.bit_length() + 7) // 8, "big"))

        return {"kty": "RSA", "use": "sig", "alg": "RS256", "kid": self.kid,
                "n": big(numbers.n), "e": big(numbers.e)}  # fmt: skip

    def sign(self, claims: dict[str, Any]) -> str:
        header = {"alg": "RS256", "typ": "JWT", "kid": self.kid}
        signing_input = (
            f"{b64url(json.dumps(header).encode())}.{b64url(json.dumps(claims).encode())}"
        )
        signature = self.private.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
        return f"{signing_input}.{b64url(signature)}"


@dataclass
class OIDCServer:
    """The identity provider; ``async with`` starts and stops it."""

    clients: dict[str, str] = field(default_factory=dict)  # client id -> secret
    lifetime: float = 3600.0
    audience: str = AUDIENCE
    #: HTTP statuses the next token requests are answered with (then tokens again).
    fail_next: list[int] = field(default_factory=list)
    #: Token requests received, and tokens issued.
    requests: int = 0
    issued: list[str] = field(default_factory=list)
    key: SigningKey = field(default_factory=SigningKey)
    #: Serve HTTPS with this context (see :func:`self_signed`), else HTTP.
    tls: ssl.SSLContext | None = None
    port: int = 0
    _runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    @property
    def token_url(self) -> str:
        return f"{self.url}/token"

    @property
    def jwks_url(self) -> str:
        return f"{self.url}/jwks"

    @property
    def issuer(self) -> str:
        return self.url

    async def __aenter__(self) -> Self:
        from aiohttp import web

        app = web.Application()
        app.router.add_get("/jwks", self._jwks)
        app.router.add_post("/token", self._token)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=self.tls)
        await site.start()
        self.port = self._runner.addresses[0][1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._runner is not None
        await self._runner.cleanup()

    def mint(
        self,
        subject: str,
        *,
        lifetime: float | None = None,
        audience: str | None = None,
        key: SigningKey | None = None,
        **claims: Any,
    ) -> str:
        """A signed JWT for ``subject`` (this server's key, audience and issuer unless
        told otherwise; a negative ``lifetime`` makes an expired one)."""
        now = int(time.time())
        exp = now + int(self.lifetime if lifetime is None else lifetime)
        body = {
            "iss": self.issuer,
            "sub": subject,
            "aud": audience or self.audience,
            "iat": min(now, exp - 1),
            "exp": exp,
            "jti": uuid.uuid4().hex,
            **claims,
        }
        return (key or self.key).sign(body)

    async def _jwks(self, request: web.Request) -> web.Response:
        from aiohttp import web

        return web.json_response({"keys": [self.key.jwk()]})

    async def _token(self, request: web.Request) -> web.Response:
        from aiohttp import web

        self.requests += 1
        if self.fail_next:
            status = self.fail_next.pop(0)
            return web.json_response({"error": "temporarily_unavailable"}, status=status)
        form = await request.post()
        client = self._client(request.headers.get("Authorization", ""))
        if client is None:
            body = {"error": "invalid_client", "error_description": "Invalid client credentials"}
            return web.json_response(body, status=401)
        if form.get("grant_type") != "client_credentials":
            return web.json_response({"error": "unsupported_grant_type"}, status=400)
        scope = str(form.get("scope", ""))
        token = self.mint(client, **({"scope": scope} if scope else {}))
        self.issued.append(token)
        body = {"access_token": token, "token_type": "Bearer", "expires_in": int(self.lifetime)}
        return web.json_response(body)

    def _client(self, authorization: str) -> str | None:
        """The client id of valid Basic credentials (id and secret form-encoded)."""
        scheme, _, encoded = authorization.partition(" ")
        if scheme != "Basic":
            return None
        try:
            pair = base64.b64decode(encoded, validate=True).decode()
        except ValueError:
            return None
        client_id, _, secret = (urllib.parse.unquote_plus(p) for p in pair.partition(":"))
        return client_id if self.clients.get(client_id) == secret and secret else None


def self_signed(home: Path) -> tuple[ssl.SSLContext, Path]:
    """A server context with a certificate for 127.0.0.1 signed by itself, and the
    certificate's PEM file (what a client must trust)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    cert = certificate("127.0.0.1", key.public_key(), key, ca=True, san=["127.0.0.1"])
    cert_pem, key_pem = home / "idp.pem", home / "idp.key"
    cert_pem.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_pem.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert_pem, key_pem)
    return context, cert_pem
