"""Webhook signatures: HMAC-SHA256 over `"<timestamp>." + raw body` with the source's secret.

Header: `Goldenset-Signature: t=<unix seconds>,v1=<hex digest>` (several `v1=` entries allowed, so
a sender can sign with an old and a new secret while rotating). A signature older or newer than
the tolerance is refused, so a captured request cannot be replayed later.
"""

from __future__ import annotations

import hashlib
import hmac

SIGNATURE_HEADER = "Goldenset-Signature"


class SignatureError(ValueError):
    """The signature is missing, malformed, stale or wrong; the message says which."""


def sign(body: bytes, *, secret: str, timestamp: int) -> str:
    """The header value that signs `body` at `timestamp` with `secret`."""
    digest = hmac.new(secret.encode("utf-8"), f"{timestamp}.".encode("ascii") + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={digest}"


def verify(body: bytes, header: str | None, *, secret: str, now: float, tolerance_seconds: int) -> None:
    """Return if `header` is a valid, fresh signature of `body`; raise `SignatureError` otherwise."""
    if not header:
        raise SignatureError(f"the {SIGNATURE_HEADER} header is missing")
    timestamp: int | None = None
    signatures: list[str] = []
    for part in header.split(","):
        key, _, value = part.strip().partition("=")
        if key == "t" and value.isdigit():
            timestamp = int(value)
        elif key == "v1" and value:
            signatures.append(value)
    if timestamp is None or not signatures:
        raise SignatureError(f"the {SIGNATURE_HEADER} header must look like 't=<unix seconds>,v1=<hex hmac-sha256>'")
    if abs(now - timestamp) > tolerance_seconds:
        raise SignatureError(f"the signature timestamp is more than {tolerance_seconds} s away from the server's clock")
    expected = sign(body, secret=secret, timestamp=timestamp).split("v1=", 1)[1]
    if not any(hmac.compare_digest(expected, candidate) for candidate in signatures):
        raise SignatureError("the signature does not match the body and the source's secret")
