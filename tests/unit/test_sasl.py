"""ScramClient against RFC 7677's SCRAM-SHA-256 test vector, and its refusals; the
OAUTHBEARER client message as Kafka's broker parses it, and the token checks."""

from __future__ import annotations

import base64
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from consumergroup.errors import ConfigurationError, SaslAuthenticationFailedError
from consumergroup.net.sasl import (
    SCRAM_MAX_ITERATIONS,
    ScramClient,
    describe_token,
    fetch_token,
    oauthbearer_first_message,
)
from tests.sasl_wire import parse_oauthbearer, unsigned_jwt

# RFC 7677, section 3.
CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
SERVER_FIRST = (
    b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
)
CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def rfc_client() -> ScramClient:
    """The RFC's client: user "user", password "pencil", the RFC's nonce."""
    return ScramClient("SCRAM-SHA-256", "user", "pencil", nonce=CLIENT_NONCE)


def test_rfc7677_scram_sha_256_vector() -> None:
    scram = rfc_client()
    assert scram.first_message() == CLIENT_FIRST
    assert scram.final_message(SERVER_FIRST) == CLIENT_FINAL
    scram.verify_server_final(SERVER_FINAL)  # raises if the signature does not match


def test_wrong_server_signature_is_refused() -> None:
    scram = rfc_client()
    scram.final_message(SERVER_FIRST)
    forged = bytearray(base64.b64decode(SERVER_FINAL[2:]))
    forged[0] ^= 1
    with pytest.raises(SaslAuthenticationFailedError, match="signature"):
        scram.verify_server_final(b"v=" + base64.b64encode(bytes(forged)))


def test_missing_server_signature_is_refused() -> None:
    scram = rfc_client()
    scram.final_message(SERVER_FIRST)
    with pytest.raises(SaslAuthenticationFailedError):
        scram.verify_server_final(b"")


def test_server_final_before_client_final_is_refused() -> None:
    # No proof was computed yet: even the RFC's genuine signature must not be accepted.
    with pytest.raises(SaslAuthenticationFailedError):
        rfc_client().verify_server_final(SERVER_FINAL)


def test_server_error_in_server_final_is_reported() -> None:
    scram = rfc_client()
    scram.final_message(SERVER_FIRST)
    with pytest.raises(SaslAuthenticationFailedError, match="invalid-proof"):
        scram.verify_server_final(b"e=invalid-proof")


def test_server_nonce_must_extend_the_client_nonce() -> None:
    other = SERVER_FIRST.replace(b"r=rOprNGfwEbeRWgbNEkqO", b"r=somebodyElsesNonce")
    with pytest.raises(SaslAuthenticationFailedError, match="nonce"):
        rfc_client().final_message(other)


@pytest.mark.parametrize(
    "server_first",
    [
        b"e=unknown-user",
        b"garbage",
        b"r=rOprNGfwEbeRWgbNEkqOxyz,i=4096",  # no salt
        b"r=rOprNGfwEbeRWgbNEkqOxyz,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=many",
        b"r=rOprNGfwEbeRWgbNEkqOxyz,s=!!!notbase64,i=4096",
    ],
    ids=["server-error", "garbage", "no-salt", "bad-iterations", "bad-salt"],
)
def test_malformed_server_first_is_an_authentication_failure(server_first: bytes) -> None:
    with pytest.raises(SaslAuthenticationFailedError):
        rfc_client().final_message(server_first)


def test_user_names_are_escaped() -> None:
    scram = ScramClient("SCRAM-SHA-512", "a=b,c", "pw", nonce="abc")
    assert scram.first_message() == b"n,,n=a=3Db=2Cc,r=abc"


def test_random_nonces_differ() -> None:
    first = ScramClient("SCRAM-SHA-256", "u", "p").first_message()
    second = ScramClient("SCRAM-SHA-256", "u", "p").first_message()
    assert first != second
    assert first.startswith(b"n,,n=u,r=")


# ----------------------------------------------------------------------- SCRAM iterations


@pytest.mark.parametrize("iterations", [1, 4095, 16385, 2**31 - 1, 10**12])
@pytest.mark.timeout(10)  # uncapped, PBKDF2 with 2**31 rounds would run for half an hour
def test_iteration_counts_outside_kafkas_bounds_are_refused(iterations: int) -> None:
    """Issue 27: a hostile broker could ask for any count and burn our CPU (or ask for one
    round and get a cheap hash of the password): Kafka's client and brokers keep to
    4096-16384 (ScramMechanism), so do we."""
    server_first = SERVER_FIRST.replace(b"i=4096", b"i=%d" % iterations)
    with pytest.raises(SaslAuthenticationFailedError, match=f"asked for {iterations} iter"):
        rfc_client().final_message(server_first)


def test_the_highest_iteration_count_kafka_stores_is_accepted() -> None:
    server_first = SERVER_FIRST.replace(b"i=4096", b"i=%d" % SCRAM_MAX_ITERATIONS)
    assert rfc_client().final_message(server_first).startswith(b"c=biws,r=")


# ----------------------------------------------------------------------- OAUTHBEARER


def test_oauthbearer_first_message_is_what_kafka_parses() -> None:
    message = oauthbearer_first_message(
        "eyJ.abc-_.x~+/=", {"logicalCluster": "lkc-1", "identityPoolId": "pool-Ab"}
    )
    assert message == (
        b"n,,\x01auth=Bearer eyJ.abc-_.x~+/=\x01logicalCluster=lkc-1"
        b"\x01identityPoolId=pool-Ab\x01\x01"
    )
    assert parse_oauthbearer(message) == (
        "eyJ.abc-_.x~+/=",
        {"logicalCluster": "lkc-1", "identityPoolId": "pool-Ab"},
    )


def test_oauthbearer_first_message_without_extensions() -> None:
    assert oauthbearer_first_message("t0k", {}) == b"n,,\x01auth=Bearer t0k\x01\x01"


def provider(result: object) -> Callable[[], Awaitable[Any]]:
    async def provide() -> Any:
        if isinstance(result, Exception):
            raise result
        return result

    return provide


@pytest.mark.parametrize(
    ("result", "message"),
    [
        (RuntimeError("vault sealed"), "token_provider failed: RuntimeError: vault sealed"),
        ("just-a-token", "returned str, not \\(token: str, lifetime_s: float\\)"),
        (("tok", "60"), "returned tuple, not"),
        ((b"tok", 60.0), "returned tuple, not"),
        (("Bearer tok", 60.0), "characters a bearer token cannot have"),
        (('{"access_token": "x"}', 60.0), "characters a bearer token cannot have"),
        (("tok", float("nan")), "expired token"),
    ],
    ids=["raises", "no-tuple", "str-lifetime", "bytes-token", "header", "json", "nan"],
)
async def test_a_bad_token_provider_is_a_clear_error(result: object, message: str) -> None:
    with pytest.raises(SaslAuthenticationFailedError, match=message):
        await fetch_token(provider(result))


async def test_an_expired_token_is_refused_before_it_is_sent() -> None:
    expired = unsigned_jwt(sub="app", exp=time.time() - 30)
    with pytest.raises(SaslAuthenticationFailedError, match=r"expired token .*expired 3[01] s"):
        await fetch_token(provider((expired, 0.0)))


async def test_a_token_providers_own_error_passes_through() -> None:
    error = ConfigurationError("OIDCTokenProvider needs httpx")
    with pytest.raises(ConfigurationError) as info:
        await fetch_token(provider(error))
    assert info.value is error


def test_describe_token_shows_claims_never_the_token() -> None:
    token = unsigned_jwt(sub="orders", iss="https://idp", aud="kafka", exp=time.time() + 300)
    text = describe_token(token)
    assert "sub='orders'" in text and "aud='kafka'" in text and "iss='https://idp'" in text
    assert re.search(r"expires in (299|300) s", text)
    assert token not in text
    assert describe_token("opaque-token") == "the token is not a JWT"
