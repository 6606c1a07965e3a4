"""The broker's side of SASL messages, for tests: what Kafka's broker parses.

``KAFKA_CLIENT_FIRST`` is Kafka's ``OAuthBearerClientInitialResponse`` pattern (the
broker's parser of the OAUTHBEARER client message) in Python; :func:`unsigned_jwt`
makes JWT-shaped tokens whose claims a test chooses (the client never checks a
signature; the broker-side tests sign theirs, see integration/oidc_support.py).
"""

from __future__ import annotations

import base64
import json
import re

_KEY, _VALUE, _SEP = "[A-Za-z]+", "[\\x21-\\x7E \t\r\n]+", "\x01"
KAFKA_CLIENT_FIRST = re.compile(
    f"n,(a=(?P<authzid>[^,]+))?,{_SEP}(?P<kvpairs>({_KEY}={_VALUE}{_SEP})*){_SEP}"
)
_AUTH = re.compile(r"(?P<scheme>\w+) +(?P<token>[-_~+/.a-zA-Z0-9]+=*)")


def parse_oauthbearer(message: bytes) -> tuple[str, dict[str, str]]:
    """(token, extensions) of an OAUTHBEARER client message, as Kafka's broker reads it;
    ValueError where the broker would refuse it."""
    match = KAFKA_CLIENT_FIRST.fullmatch(message.decode())
    if match is None:
        raise ValueError(f"not an OAUTHBEARER client first message: {message!r}")
    pairs = dict(kv.split("=", 1) for kv in match["kvpairs"].split(_SEP) if kv)
    auth = _AUTH.fullmatch(pairs.pop("auth", ""))
    if auth is None or auth["scheme"].lower() != "bearer":
        raise ValueError(f"no 'auth=Bearer <token>' in {message!r}")
    return auth["token"], pairs


def b64url(data: bytes) -> str:
    """base64url without padding (JOSE)."""
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def unsigned_jwt(**claims: object) -> str:
    """A JWT-shaped token carrying ``claims``, with a dummy signature."""
    header = b64url(json.dumps({"alg": "RS256", "typ": "JWT"}).encode())
    return f"{header}.{b64url(json.dumps(claims).encode())}.c2lnbmF0dXJl"
