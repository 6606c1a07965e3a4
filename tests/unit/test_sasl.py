"""ScramClient against RFC 7677's SCRAM-SHA-256 test vector, and its refusals."""

from __future__ import annotations

import base64

import pytest

from consumergroup.errors import SaslAuthenticationFailedError
from consumergroup.net.sasl import ScramClient

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
    server_first = SERVER_FIRST.replace(b"i=4096", b"i=16384")
    assert rfc_client().final_message(server_first).startswith(b"c=biws,r=")
