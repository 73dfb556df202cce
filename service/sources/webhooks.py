"""Webhook signatures: HMAC-SHA256 over `"<timestamp>." + raw body` with the source's secret.

Header: `Goldenset-Signature: t=<unix seconds>,v1=<hex digest>` (several `v1=` entries allowed, so
a sender can sign with an old and a new secret while rotating). A signature older or newer than
the tolerance is refused, so a captured request cannot be replayed later; within the tolerance,
each accepted delivery is recorded (`claim_delivery`), so the same signed message is accepted
once per source.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import secrets
from datetime import UTC, datetime, timedelta

from sqlalchemy import delete
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col

from schemas.source import Source, WebhookDelivery
from service.sources.definitions import get_source, webhook_secret

SIGNATURE_HEADER = "Goldenset-Signature"
MAX_HEADER_LENGTH = 1024
"""The longest signature header read: a timestamp and eight signatures fit in 600 characters."""
MAX_PARTS = 16
SHAPE = f"the {SIGNATURE_HEADER} header must look like 't=<unix seconds>,v1=<64 hex digits>' (at most {MAX_HEADER_LENGTH} characters)"
_TIMESTAMP = re.compile(r"[0-9]{1,12}")
_DIGEST = re.compile(r"[0-9a-f]{64}")
MISMATCH = "the signature does not match the body and the source's secret"
# Checked instead of a real secret when the source is unknown or has none, so that the answer is
# the same as for a wrong signature and source names cannot be probed.
DECOY_SECRET = secrets.token_hex(32)
logger = logging.getLogger("goldenset.webhooks")


class SignatureError(ValueError):
    """The signature is missing, malformed, stale or wrong; the message says which."""


def sign(body: bytes, *, secret: str, timestamp: int) -> str:
    """The header value that signs `body` at `timestamp` with `secret`."""
    digest = hmac.new(secret.encode("utf-8"), f"{timestamp}.".encode("ascii") + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={digest}"


def parse_header(header: str | None) -> tuple[int, list[str]]:
    """The timestamp and the `v1` signatures of a signature header; raise `SignatureError` when it
    is missing or malformed. Only its shape is judged (a few characters of work, whatever was
    sent), so a request can be refused before its body is read; entries other than `t` and `v1`
    are ignored, so a sender may add new schemes."""
    if not header:
        raise SignatureError(f"the {SIGNATURE_HEADER} header is missing")
    if len(header) > MAX_HEADER_LENGTH or header.count(",") >= MAX_PARTS:
        raise SignatureError(SHAPE)
    timestamp: int | None = None
    signatures: list[str] = []
    for part in header.split(","):
        key, _, value = part.strip().partition("=")
        if key == "t":
            if timestamp is not None or _TIMESTAMP.fullmatch(value) is None:
                raise SignatureError(SHAPE)
            timestamp = int(value)
        elif key == "v1":
            if _DIGEST.fullmatch(value) is None:
                raise SignatureError(SHAPE)
            signatures.append(value)
    if timestamp is None or not signatures:
        raise SignatureError(SHAPE)
    return timestamp, signatures


def verify(body: bytes, header: str | None, *, secret: str, now: float, tolerance_seconds: int) -> int:
    """The signature's timestamp if `header` is a valid, fresh signature of `body`; raise
    `SignatureError` otherwise (`parse_header` for its shape)."""
    timestamp, signatures = parse_header(header)
    if abs(now - timestamp) > tolerance_seconds:
        raise SignatureError(f"the signature timestamp is more than {tolerance_seconds} s away from the server's clock")
    expected = sign(body, secret=secret, timestamp=timestamp).split("v1=", 1)[1]
    if not any(hmac.compare_digest(expected, candidate) for candidate in signatures):
        raise SignatureError(MISMATCH)
    return timestamp


def authenticate(*, session: Session, name: str, body: bytes, header: str | None, secret_key: str, now: float, tolerance_seconds: int) -> tuple[Source, int]:
    """The source called `name` and the signature's timestamp when `header` signs `body` with its
    secret; raises `SignatureError` otherwise. An unknown source, or one without a secret, is
    checked against `DECOY_SECRET`: it fails exactly like a wrong signature (same message, same
    work), so a caller without a secret cannot tell which source names exist."""
    source = get_source(session=session, name=name)
    secret = webhook_secret(source, secret_key=secret_key) if source is not None else None
    if source is not None and secret is None:
        logger.warning("webhook for source %s refused: it has no webhook secret; recreate it to receive webhooks", name)
    timestamp = verify(body, header, secret=secret or DECOY_SECRET, now=now, tolerance_seconds=tolerance_seconds)
    if source is None or secret is None:  # pragma: no cover - nobody knows the decoy secret
        raise SignatureError(MISMATCH)
    return source, timestamp


def delivery_digest(body: bytes, timestamp: int) -> str:
    """sha256 of the signed message: the same for a delivery signed with any of a source's secrets."""
    return hashlib.sha256(f"{timestamp}.".encode("ascii") + body).hexdigest()


def claim_delivery(*, session: Session, source_id: int, digest: str, timestamp: int, now: datetime, tolerance_seconds: int) -> bool:
    """Record a delivery to `source_id` in the caller's unit of work; False when it was already
    recorded (a replay).

    Rows whose signature is older than the tolerance are pruned first: such a signature is
    refused as stale anyway, so the table holds at most the deliveries of one tolerance window.
    The unique (source, digest) key makes two concurrent copies of a delivery claim it once: the
    row is written in a savepoint, so a copy that finds it taken leaves the prune in place.
    """
    session.exec(delete(WebhookDelivery).where(col(WebhookDelivery.signed_at) < now - timedelta(seconds=tolerance_seconds)))
    try:
        with session.begin_nested():
            session.add(WebhookDelivery(source_id=source_id, digest=digest, signed_at=datetime.fromtimestamp(timestamp, tz=UTC), received_at=now))
            session.flush()
    except IntegrityError:
        return False
    return True


def forget_delivery(*, session: Session, source_id: int, digest: str) -> None:
    """Drop a claimed delivery that was not processed (the server failed), so its sender may retry
    it; written in the caller's unit of work."""
    session.exec(delete(WebhookDelivery).where(col(WebhookDelivery.source_id) == source_id, col(WebhookDelivery.digest) == digest))
