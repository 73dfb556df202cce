"""API tokens: creation (the plaintext is shown once), expiry, revocation and the bootstrap admin
token. Only sha256 hashes are stored."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from sqlalchemy import text
from sqlmodel import Session, col, select

from schemas.audit import AuditAction, AuditEvent
from schemas.common import utcnow
from schemas.token import ApiToken, Scope, parse_scopes
from service.core.crypto import new_secret, sha256_hex

TOKEN_PREFIX = "gs_"
BOOTSTRAP_TOKEN_NAME = "bootstrap-admin"
_DURATION = re.compile(r"(?i)\s*(\d+)\s*([dh])\s*")
_DURATION_UNITS = {"d": "days", "h": "hours"}
TOKEN_NAMES_LOCK = 0x601D70C
"""The advisory lock (PostgreSQL) that serialises token creation, so a name is checked and taken at once."""


def format_expiry(expires_at: datetime | None) -> str:
    """How an expiry is shown to people: `YYYY-MM-DD HH:MM UTC`, or `never`."""
    return "never" if expires_at is None else f"{expires_at.astimezone(UTC):%Y-%m-%d %H:%M} UTC"


def parse_expiry(*, expires_in: str | None = None, expires: str | None = None, now: datetime | None = None) -> datetime | None:
    """The expiry instant (tz-aware UTC) asked for by at most one of `expires_in` (`90d` days or
    `12h` hours from `now`) and `expires` (an ISO 8601 date or date-time; without a zone it is UTC,
    and a date alone is that day's midnight UTC). None when neither is given.

    Raises ValueError, saying what to give instead, for both at once, an unreadable value, or an
    instant that is not after `now` (default: the current time)."""
    if expires_in is not None and expires is not None:
        raise ValueError("give --expires-in or --expires, not both")
    now = now or utcnow()
    if expires_in is not None:
        match = _DURATION.fullmatch(expires_in)
        if match is None:
            raise ValueError(f"--expires-in {expires_in!r} is not a duration; give days or hours, e.g. 90d or 12h")
        try:
            moment = now + timedelta(**{_DURATION_UNITS[match.group(2).lower()]: int(match.group(1))})
        except OverflowError as exc:
            raise ValueError(f"--expires-in {expires_in!r} reaches past the year 9999; give a shorter duration") from exc
    elif expires is not None:
        try:
            moment = datetime.fromisoformat(expires.strip())
        except ValueError as exc:
            raise ValueError(f"--expires {expires!r} is not an ISO 8601 date or date-time; give e.g. 2027-03-01 or 2027-03-01T12:00:00Z") from exc
        moment = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    else:
        return None
    if moment <= now:
        raise ValueError(f"the expiry {format_expiry(moment)} is not in the future (it is now {format_expiry(now)}); give a later date, or --expires-in such as 90d")
    return moment


def active_token_named(*, session: Session, name: str, now: datetime | None = None) -> ApiToken | None:
    """The active (neither revoked nor expired) token called `name`, if any."""
    now = now or utcnow()
    query = select(ApiToken).where(ApiToken.name == name, col(ApiToken.revoked_at).is_(None))
    return next((token for token in session.exec(query.order_by(col(ApiToken.id))).all() if not token.expired(now)), None)


def create_token(*, session: Session, name: str, scopes: str | list[str], actor: str = "cli", expires_at: datetime | None = None) -> tuple[str, ApiToken]:
    """Create a token; returns the plaintext (shown once, never stored) and the stored row.

    Names are unique among active tokens: a name is a label people read in the audit trail and
    in refusals, while a token's identity is its id. A name frees up once its token is revoked or
    expired. `expires_at` (tz-aware, in the future) makes the token refused from that instant on;
    None: it never expires. Raises ValueError for a blank, reserved or active name, bad scopes or a
    past expiry; the token is written (flushed) before its name is checked, so the caller's unit of
    work must roll back when it raises (`service.core.db.write_transaction` does). Concurrent
    creations are serialised (an advisory lock on PostgreSQL; on SQLite, pass a `write_session`),
    so two active tokens never share a name. Audited (`token.create`); the caller's unit of work
    commits."""
    parsed = parse_scopes(scopes)
    if not name.strip():
        raise ValueError("a token needs a name saying who or what uses it")
    if name.strip() == BOOTSTRAP_TOKEN_NAME:
        # GOLDENSET_ADMIN_TOKEN's row is found by this name; a second row with it could take its place.
        raise ValueError(f"the name {BOOTSTRAP_TOKEN_NAME!r} is reserved for GOLDENSET_ADMIN_TOKEN; choose another")
    if expires_at is not None:
        if expires_at.tzinfo is None:
            raise ValueError("a token's expiry needs a time zone")
        if expires_at <= utcnow():
            raise ValueError(f"the expiry {format_expiry(expires_at)} is not in the future; give a later one")
    if session.get_bind().dialect.name == "postgresql":
        session.exec(text("SELECT pg_advisory_xact_lock(:key)").bindparams(key=TOKEN_NAMES_LOCK))  # type: ignore[call-overload]
    plaintext = new_secret(TOKEN_PREFIX)
    token = ApiToken(name=name.strip(), token_hash=sha256_hex(plaintext), prefix=plaintext[:10], scopes=parsed, expires_at=expires_at)
    session.add(token)
    # Written before the name is checked: on SQLite the insert takes the write lock (waiting for
    # other writers) instead of a read that later fails to upgrade, so the check sees every token
    # committed before it and none can be committed beside it.
    session.flush()
    taken = active_token_named(session=session, name=name.strip())
    if taken is not None and taken.id != token.id:
        raise ValueError(
            f"an active token is already named {name.strip()!r} (id {taken.id}); names tell tokens apart in the audit trail: "
            f"choose another name, or revoke that token first (`goldenset token revoke {taken.id}`)"
        )
    details = {"name": token.name, "scopes": parsed, "expires_at": None if expires_at is None else expires_at.isoformat()}
    session.add(AuditEvent(actor=actor, action=AuditAction.TOKEN_CREATE, object_type="token", object_id=str(token.id), details=details))
    return plaintext, token


def revoke_token(*, session: Session, token_id: int, actor: str = "cli") -> ApiToken:
    """Revoke a token by id (audited `token.revoke`; the caller's unit of work commits); raises
    LookupError when there is none."""
    token = session.get(ApiToken, token_id)
    if token is None:
        raise LookupError(f"no token with id {token_id}")
    if token.revoked_at is None:
        token.revoked_at = utcnow()
        session.add(token)
        session.add(AuditEvent(actor=actor, action=AuditAction.TOKEN_REVOKE, object_type="token", object_id=str(token_id)))
    return token


def ensure_bootstrap_admin(*, session: Session, admin_token: str) -> None:
    """Make `admin_token` (from GOLDENSET_ADMIN_TOKEN) a valid admin token that never expires,
    replacing an older value. The setting is its lifetime: it lasts until the variable changes.
    Audited (`token.bootstrap`) when it changes anything; the caller's unit of work commits."""
    digest = sha256_hex(admin_token)
    existing = session.exec(select(ApiToken).where(ApiToken.name == BOOTSTRAP_TOKEN_NAME)).first()
    if existing is not None and existing.token_hash == digest and existing.revoked_at is None and existing.expires_at is None and existing.scopes == [Scope.ADMIN.value]:
        return
    if existing is None:
        existing = ApiToken(name=BOOTSTRAP_TOKEN_NAME, token_hash=digest, prefix=admin_token[:4] + "…", scopes=[Scope.ADMIN.value])
    else:
        existing.token_hash = digest
        existing.prefix = admin_token[:4] + "…"
        existing.scopes = [Scope.ADMIN.value]
        existing.revoked_at = None
        existing.expires_at = None
    session.add(existing)
    session.add(AuditEvent(actor="settings", action=AuditAction.TOKEN_BOOTSTRAP, object_type="token", object_id=BOOTSTRAP_TOKEN_NAME))
