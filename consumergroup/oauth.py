"""OAUTHBEARER token providers: OIDC client credentials (KIP-768) and Amazon MSK IAM.

Each is an async callable for ``config.net.sasl.token_provider``: it returns
``(token, lifetime_s)``, caches the token and gets a new one once 80-85 % of its
lifetime has passed (Kafka's ``sasl.login.refresh.window.factor`` 0.8 and
``...window.jitter`` 0.05), one fetch at a time however many connections ask. A
failed refresh is tried again with backoff; while the current token is still valid
it is served (with a warning), so a short identity-provider outage costs nothing.

Not imported by ``import consumergroup`` (``cg.OIDCTokenProvider`` loads it); the
HTTP client (``httpx``, extra ``[oidc]``) and AWS's signer (extra ``[msk]``) are
imported on the first fetch.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import random
import ssl
import time
import urllib.parse
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

import anyio

from .errors import ConfigurationError, SaslAuthenticationFailedError
from .net.sasl import jwt_claims
from .retry import Backoff

__all__ = ["MSKIAMTokenProvider", "OIDCTokenProvider", "TokenProviderError"]

log = logging.getLogger(__name__)

# Kafka's sasl.login.refresh.window.factor and .jitter.
_REFRESH_FACTOR = 0.8
_REFRESH_JITTER = 0.05


class TokenProviderError(SaslAuthenticationFailedError):
    """A token provider could not get a token."""

    # Not retriable when the identity provider refused the credentials; retriable when it
    # could not be reached or failed (a running group keeps trying). The message names
    # the endpoint and what to check.

    def __init__(self, context: str, *, retriable: bool = False) -> None:
        super().__init__(context)
        self.retriable = retriable


class RefreshingTokenProvider(ABC):
    """A cached token, fetched again at 80-85 % of its lifetime (see the module).

    Subclasses implement :meth:`fetch`. Shared by every connection of the clients it
    is configured on: ``_lock`` lets one caller fetch while the others wait for it;
    the cached token and its times are written only under it.
    """

    #: The clock the token's times are read on (tests move it instead of sleeping).
    _clock: Callable[[], float] = staticmethod(time.monotonic)

    def __init__(self, *, retries: int = 3, retry_backoff: float = 0.5) -> None:
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ConfigurationError(f"retries={retries!r} must be an int >= 0: use e.g. 3")
        if not isinstance(retry_backoff, (int, float)) or not retry_backoff > 0:
            raise ConfigurationError(
                f"retry_backoff={retry_backoff!r} must be a number of seconds > 0: use e.g. 0.5"
            )
        self.retries = retries
        self.retry_backoff = float(retry_backoff)
        self._lock = asyncio.Lock()
        self._token: str | None = None
        # When the token expires, and when to fetch the next one (on _clock).
        self._expires = 0.0
        self._refresh_at = 0.0
        #: Tokens fetched so far (for logs and tests).
        self.fetches = 0

    async def __call__(self) -> tuple[str, float]:
        """The current token and its remaining lifetime in seconds."""
        if self._token is None or self._clock() >= self._refresh_at:
            async with self._lock:
                if self._token is None or self._clock() >= self._refresh_at:
                    await self._refresh()
        assert self._token is not None
        return self._token, self._expires - self._clock()

    async def _refresh(self) -> None:
        backoff = Backoff(self.retry_backoff)
        for attempt in range(self.retries + 1):
            try:
                token, lifetime = await self.fetch()
                break
            except TokenProviderError as exc:
                left = self._expires - self._clock()
                if self._token is not None and left > 0:
                    # Serve the current token; the next caller after a backoff tries again.
                    log.warning("%s; the current token stays in use (%.0f s left)", exc, left)
                    self._refresh_at = self._clock() + min(backoff.next(), left / 2)
                    return
                if not exc.retriable or attempt == self.retries:
                    raise
                log.info("%s; trying again", exc)
                await asyncio.sleep(backoff.next())
        if lifetime <= 0:
            raise TokenProviderError(f"{self!r} got a token that has already expired")
        now = self._clock()
        self._token = token
        self._expires = now + lifetime
        self._refresh_at = now + lifetime * (_REFRESH_FACTOR + random.uniform(0, _REFRESH_JITTER))
        self.fetches += 1

    @abstractmethod
    async def fetch(self) -> tuple[str, float]:
        """A fresh token and its lifetime in seconds; raises :class:`TokenProviderError`."""


class OIDCTokenProvider(RefreshingTokenProvider):
    """Tokens from an OAuth 2 / OIDC token endpoint by the client credentials grant
    (RFC 6749 4.4; Kafka's KIP-768 ``OAuthBearerLoginCallbackHandler``).

    ``scope``, if given, is asked for. The client authenticates with HTTP Basic
    (id and secret form-encoded, RFC 6749 2.3.1), as Kafka's client does. The token's
    lifetime is the answer's ``expires_in``, else the JWT's ``exp``. ``ssl_context``
    verifies an HTTPS endpoint (default: ``ssl.create_default_context()``, the system's
    CAs, as ``net.tls``); ``HTTPS_PROXY``/``NO_PROXY`` are honoured; ``timeout`` bounds each
    HTTP request; an unreachable endpoint or a 5xx/429 answer is tried ``retries`` more
    times with backoff from ``retry_backoff`` seconds; refused credentials fail at once.
    Needs ``pip install 'consumergroup[oidc]'`` (httpx).

    Example (Keycloak)::

        config.net.sasl.mechanism = "OAUTHBEARER"
        config.net.sasl.token_provider = cg.OIDCTokenProvider(
            "https://keycloak.example.com/realms/kafka/protocol/openid-connect/token",
            client_id="orders-consumer", client_secret=os.environ["CLIENT_SECRET"],
        )
    """

    def __init__(
        self,
        token_endpoint_url: str,
        client_id: str,
        client_secret: str,
        scope: str | None = None,
        *,
        ssl_context: ssl.SSLContext | None = None,
        timeout: float = 10.0,
        retries: int = 3,
        retry_backoff: float = 0.5,
    ) -> None:
        super().__init__(retries=retries, retry_backoff=retry_backoff)
        parsed = urllib.parse.urlsplit(
            token_endpoint_url if isinstance(token_endpoint_url, str) else ""
        )
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ConfigurationError(
                f"token_endpoint_url={token_endpoint_url!r} must be an http(s) URL: give the "
                "identity provider's token endpoint (its OIDC discovery document's "
                "'token_endpoint')"
            )
        for name, value in (("client_id", client_id), ("client_secret", client_secret)):
            if not isinstance(value, str) or not value:
                shown = "<hidden>" if name == "client_secret" else repr(value)
                raise ConfigurationError(
                    f"{name}={shown} must be a non-empty str: give the client's {name} "
                    "registered with the identity provider"
                )
        if scope is not None and not isinstance(scope, str):
            raise ConfigurationError(f"scope={scope!r} must be a str (space-separated) or None")
        if not isinstance(timeout, (int, float)) or not timeout > 0:
            raise ConfigurationError(f"timeout={timeout!r} must be seconds > 0: use e.g. 10.0")
        self.token_endpoint_url = token_endpoint_url
        self.client_id = client_id
        self._client_secret = client_secret
        self.scope = scope
        self._ssl_context = ssl_context
        self.timeout = float(timeout)

    def __repr__(self) -> str:
        return f"OIDCTokenProvider({self.token_endpoint_url!r}, client_id={self.client_id!r})"

    async def fetch(self) -> tuple[str, float]:
        """One client credentials request to the token endpoint."""
        httpx = _import_httpx()
        quote = urllib.parse.quote_plus
        basic = base64.b64encode(f"{quote(self.client_id)}:{quote(self._client_secret)}".encode())
        form = {"grant_type": "client_credentials"}
        if self.scope:
            form["scope"] = self.scope
        url = self.token_endpoint_url
        try:
            verify = self._ssl_context or ssl.create_default_context()
            async with httpx.AsyncClient(timeout=self.timeout, verify=verify) as client:
                resp = await client.post(
                    url,
                    data=form,
                    headers={
                        "Authorization": f"Basic {basic.decode()}",
                        "Accept": "application/json",
                    },
                )
        except httpx.HTTPError as exc:
            check = "check the URL and that the identity provider is up"
            if "CERTIFICATE_VERIFY_FAILED" in str(exc):
                check = (
                    "pass ssl_context=ssl.create_default_context(cafile=...) trusting the "
                    "identity provider's CA"
                )
            raise TokenProviderError(
                f"could not reach the OIDC token endpoint {url}: {type(exc).__name__}: "
                f"{exc or 'no detail'}: {check}",
                retriable=True,
            ) from exc
        return _token_answer(url, self.client_id, resp.status_code, resp.content)


def _token_answer(url: str, client_id: str, status: int, body: bytes) -> tuple[str, float]:
    """The (token, lifetime) of a token endpoint's answer, or a clear error."""
    try:
        answer = json.loads(body)
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        answer = {}
    if status != 200:
        reason = ": ".join(
            str(answer[k]) for k in ("error", "error_description") if answer.get(k)
        ) or body[:200].decode("utf-8", "replace")
        if status in (400, 401, 403):
            raise TokenProviderError(
                f"the OIDC token endpoint {url} refused client {client_id!r} (HTTP {status}: "
                f"{reason}): check client_id, client_secret and scope"
            )
        raise TokenProviderError(
            f"the OIDC token endpoint {url} failed (HTTP {status}: {reason})",
            retriable=status >= 500 or status == 429,
        )
    token = answer.get("access_token")
    if not isinstance(token, str) or not token:
        raise TokenProviderError(
            f"the OIDC token endpoint {url} answered without an access_token: is it the "
            "token endpoint?"
        )
    expires_in = answer.get("expires_in")
    if isinstance(expires_in, (int, float)) and not isinstance(expires_in, bool):
        return token, float(expires_in)
    exp = (jwt_claims(token) or {}).get("exp")
    if isinstance(exp, (int, float)):
        return token, exp - time.time()
    raise TokenProviderError(
        f"the OIDC token endpoint {url} gave a token without a lifetime (no expires_in, and "
        "not a JWT with an exp claim)"
    )


def _import_httpx() -> Any:
    try:
        import httpx
    except ImportError as exc:
        raise ConfigurationError(
            f"OIDCTokenProvider needs httpx: pip install 'consumergroup[oidc]' ({exc})"
        ) from None
    return httpx


class MSKIAMTokenProvider(RefreshingTokenProvider):
    """Tokens for Amazon MSK's IAM access control over SASL/OAUTHBEARER, signed by AWS's
    own ``aws-msk-iam-sasl-signer-python`` (a SigV4-presigned ``kafka-cluster:Connect``
    URL, base64url; valid 15 minutes, refreshed at 80-85 % of that).

    Credentials come from the standard AWS chain (environment, ``~/.aws``, container
    or instance role), or from the named ``profile``, or by assuming ``role_arn``.
    ``region`` is the cluster's (default: ``$AWS_REGION``, ``$AWS_DEFAULT_REGION``).
    Signing is local; fetching credentials may not be, so it runs in a worker thread.
    Needs ``pip install 'consumergroup[msk]'``. Use with TLS (MSK's IAM listener is
    SASL_SSL, port 9098)::

        config.net.tls.enable = True
        config.net.sasl.enable = True
        config.net.sasl.mechanism = "OAUTHBEARER"
        config.net.sasl.token_provider = cg.MSKIAMTokenProvider(region="eu-west-1")
    """

    def __init__(
        self,
        region: str | None = None,
        *,
        profile: str | None = None,
        role_arn: str | None = None,
        retries: int = 3,
        retry_backoff: float = 0.5,
    ) -> None:
        super().__init__(retries=retries, retry_backoff=retry_backoff)
        region = region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
        if not isinstance(region, str) or not region:
            raise ConfigurationError(
                f"region={region!r}: give the MSK cluster's AWS region (e.g. 'eu-west-1'), "
                "or set AWS_REGION"
            )
        if profile is not None and role_arn is not None:
            raise ConfigurationError("give profile or role_arn, not both")
        self.region = region
        self.profile = profile
        self.role_arn = role_arn

    def __repr__(self) -> str:
        return f"MSKIAMTokenProvider(region={self.region!r})"

    async def fetch(self) -> tuple[str, float]:
        """A freshly signed token (in a worker thread)."""
        token, expiry_ms = await anyio.to_thread.run_sync(self._sign)
        return token, expiry_ms / 1000 - time.time()

    def _sign(self) -> tuple[str, int]:
        try:
            from aws_msk_iam_sasl_signer import MSKAuthTokenProvider as signer
            from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError
        except ImportError as exc:
            raise ConfigurationError(
                f"MSKIAMTokenProvider needs AWS's signer: pip install 'consumergroup[msk]' ({exc})"
            ) from None
        try:
            if self.profile is not None:
                result = signer.generate_auth_token_from_profile(self.region, self.profile)
            elif self.role_arn is not None:
                result = signer.generate_auth_token_from_role_arn(self.region, self.role_arn)
            else:
                result = signer.generate_auth_token(self.region)
        except (NoCredentialsError, AttributeError, ValueError) as exc:
            # The chain found nothing (the signer then trips over None or empty keys).
            raise TokenProviderError(
                "no AWS credentials for MSK IAM: set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, "
                "an AWS profile (~/.aws), or run with an IAM role "
                f"({type(exc).__name__}: {exc})"
            ) from exc
        except (BotoCoreError, ClientError) as exc:
            raise TokenProviderError(
                f"getting AWS credentials for MSK IAM failed: {type(exc).__name__}: {exc}",
                retriable=True,
            ) from exc
        token, expiry_ms = result
        return str(token), int(expiry_ms)
