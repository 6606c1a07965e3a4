"""The OAUTHBEARER token providers against a real (loopback) OIDC token endpoint:
the client credentials grant, caching and refresh at 80-85 % of a token's lifetime,
one fetch for many callers, retries of what may pass, clear errors for what will not.

No broker here (the providers only talk to the identity provider); test_sasl_kafka.py
runs them against Apache Kafka's JWT validator, test_sasl_wire.py on the wire.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import subprocess
import sys
import time
from pathlib import Path

import pytest

import consumergroup as cg
from consumergroup.errors import ConfigurationError, SaslAuthenticationFailedError
from consumergroup.net.sasl import jwt_claims
from consumergroup.oauth import TokenProviderError
from consumergroup.testing import free_port
from tests.integration.oidc_support import OIDCServer, self_signed

pytest.importorskip("httpx", reason="OIDCTokenProvider needs consumergroup[oidc]")
pytestmark = pytest.mark.timeout(60)

CLIENT, SECRET = "orders-consumer", "s3cret/with+odd=chars"


async def test_client_credentials_get_a_token_that_is_cached() -> None:
    async with OIDCServer(clients={CLIENT: SECRET}, lifetime=600) as idp:
        provider = cg.OIDCTokenProvider(idp.token_url, CLIENT, SECRET, scope="kafka.read")
        token, lifetime = await provider()
        again, _ = await provider()
    claims = jwt_claims(token)
    assert claims is not None
    assert (claims["sub"], claims["scope"], claims["aud"]) == (CLIENT, "kafka.read", "kafka")
    assert 590 < lifetime <= 600
    assert again == token and idp.requests == 1


class Clock:
    """A monotonic clock the test moves (the provider's ``_clock``): no sleeping."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def clocked(provider: cg.OIDCTokenProvider) -> Clock:
    clock = Clock()
    provider._clock = clock  # type: ignore[method-assign]
    return clock


async def test_a_token_is_refreshed_at_80_to_85_percent_of_its_lifetime() -> None:
    async with OIDCServer(clients={CLIENT: SECRET}, lifetime=100) as idp:
        provider = cg.OIDCTokenProvider(idp.token_url, CLIENT, SECRET)
        clock = clocked(provider)
        first, _ = await provider()
        clock.now += 79.9  # before 80 %: the same token
        assert await provider() == (first, pytest.approx(20.1))
        clock.now += 5.2  # past 85 %: a new one
        second, lifetime = await provider()
    assert second != first and idp.requests == 2
    assert lifetime == 100


async def test_many_callers_share_one_fetch() -> None:
    async with OIDCServer(clients={CLIENT: SECRET}) as idp:
        provider = cg.OIDCTokenProvider(idp.token_url, CLIENT, SECRET)
        tokens = await asyncio.gather(*(provider() for _ in range(20)))
    assert len({token for token, _ in tokens}) == 1
    assert idp.requests == 1


async def test_bad_client_credentials_are_a_clear_error_and_not_retried() -> None:
    async with OIDCServer(clients={CLIENT: SECRET}) as idp:
        provider = cg.OIDCTokenProvider(idp.token_url, CLIENT, "wrong-secret")
        with pytest.raises(SaslAuthenticationFailedError) as info:
            await provider()
    assert isinstance(info.value, TokenProviderError) and not info.value.retriable
    message = str(info.value)
    assert f"refused client '{CLIENT}' (HTTP 401: invalid_client: Invalid client cred" in message
    assert "check client_id, client_secret" in message
    assert "wrong-secret" not in message
    assert idp.requests == 1


async def test_a_failing_token_endpoint_is_tried_again() -> None:
    async with OIDCServer(clients={CLIENT: SECRET}, fail_next=[503, 429]) as idp:
        provider = cg.OIDCTokenProvider(idp.token_url, CLIENT, SECRET, retry_backoff=0.05)
        token, _ = await provider()
    assert token == idp.issued[0] and idp.requests == 3


async def test_an_unreachable_token_endpoint_is_a_retriable_error_in_bounded_time() -> None:
    url = f"http://127.0.0.1:{free_port()}/token"  # nothing listens there
    provider = cg.OIDCTokenProvider(url, CLIENT, SECRET, retries=2, retry_backoff=0.05)
    started = time.monotonic()
    with pytest.raises(TokenProviderError, match="could not reach the OIDC token endpoint") as info:
        await provider()
    assert info.value.retriable
    assert url in str(info.value)
    assert time.monotonic() - started < 5


async def test_a_failed_refresh_keeps_the_current_token_while_it_is_valid(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with OIDCServer(clients={CLIENT: SECRET}, lifetime=100) as idp:
        provider = cg.OIDCTokenProvider(idp.token_url, CLIENT, SECRET, retry_backoff=0.05)
        clock = clocked(provider)
        first, _ = await provider()
        clock.now += 90  # past the refresh point, before expiry
        idp.fail_next = [503] * 10
        with caplog.at_level(logging.WARNING, logger="consumergroup.oauth"):
            token, lifetime = await provider()
        assert (token, lifetime) == (first, 10)
        assert "the current token stays in use (10 s left)" in caplog.text
        assert idp.requests == 2  # one try, then the current token until a backoff passes
        clock.now += 10  # expired: no token to fall back on
        with pytest.raises(TokenProviderError, match="HTTP 503"):
            await provider()


async def test_an_https_endpoint_is_verified_against_the_given_ca(tmp_path: Path) -> None:
    """Identity providers serve HTTPS: a private CA is trusted through ssl_context, and
    without it the certificate is refused, clearly (retriable: a CA bundle may be fixed
    while the group runs)."""
    server_context, ca = self_signed(tmp_path)
    async with OIDCServer(clients={CLIENT: SECRET}, tls=server_context) as idp:
        trusting = ssl.create_default_context(cafile=str(ca))
        provider = cg.OIDCTokenProvider(idp.token_url, CLIENT, SECRET, ssl_context=trusting)
        token, _ = await provider()
        assert token == idp.issued[0]
        untrusting = cg.OIDCTokenProvider(idp.token_url, CLIENT, SECRET, retries=0)
        with pytest.raises(TokenProviderError, match="CERTIFICATE_VERIFY_FAILED") as info:
            await untrusting()
    assert idp.token_url in str(info.value) and "ssl_context=" in str(info.value)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("ftp://idp/token", CLIENT, SECRET), "must be an http\\(s\\) URL"),
        (("https://idp/token", "", SECRET), "client_id='' must be a non-empty str"),
        (("https://idp/token", CLIENT, ""), "client_secret=<hidden> must be a non-empty str"),
    ],
)
def test_bad_arguments_are_configuration_errors(args: tuple[str, str, str], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        cg.OIDCTokenProvider(*args)


def test_the_providers_load_lazily() -> None:
    """``import consumergroup`` imports neither the providers nor their HTTP client."""
    code = (
        "import sys, consumergroup as cg\n"
        "assert 'consumergroup.oauth' not in sys.modules\n"
        "assert 'httpx' not in sys.modules\n"
        "print(cg.OIDCTokenProvider.__name__, cg.MSKIAMTokenProvider.__name__)\n"
        "assert 'httpx' not in sys.modules and 'botocore' not in sys.modules\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["OIDCTokenProvider", "MSKIAMTokenProvider"]
