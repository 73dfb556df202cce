"""Web UI sessions: signing in with an API token, the session cookie, and CSRF values.

Signing in checks the token as the API does (`service.core.auth.admitted`) and opens a
`schemas.token.UiSession`. The browser gets one cookie, `COOKIE`: the session's id and a random
secret, signed with `GOLDENSET_SECRET_KEY` (itsdangerous, with the time it was signed), HttpOnly,
SameSite=Strict, scoped to `/ui`, Secure when the request came over HTTPS. Only the secret's
sha256 is stored. A session is valid while it has not ended (sign-out), `GOLDENSET_UI_SESSION_HOURS`
have not passed, and its token is neither revoked nor expired; the token's scopes apply to every
page.

CSRF: every session has a random `csrf` value, which every form sends back (a hidden field) and
every state-changing request must carry (`csrf_matches`). The sign-in form, which comes before
any session, uses a double-submitted value instead: a random value in a short-lived cookie
(`LOGIN_CSRF_COOKIE`) that the form must repeat.
"""

from __future__ import annotations

import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from itsdangerous import BadSignature, TimestampSigner
from sqlalchemy.engine import Engine
from sqlmodel import Session

from schemas.audit import AuditAction, AuditEvent
from schemas.common import utcnow
from schemas.token import ApiToken, UiSession
from service.core.auth import Principal, TokenRefused, admitted, record_use, token_principal
from service.core.crypto import sha256_hex

COOKIE = "goldenset_ui"
LOGIN_CSRF_COOKIE = "goldenset_login_csrf"
COOKIE_PATH = "/ui"
LOGIN_CSRF_SECONDS = 3600
_SALT = "goldenset.ui.session"


@dataclass(frozen=True)
class SignedIn:
    """A valid session: who (the token's principal), its CSRF value and when it ends."""

    session_id: int
    principal: Principal
    csrf: str
    expires_at: datetime


def _signer(secret_key: str) -> TimestampSigner:
    return TimestampSigner(secret_key, salt=_SALT)


def sign_in(session: Session, *, token: str, secret_key: str, hours: int) -> tuple[str, SignedIn]:
    """Open a session for the token given in plain text; returns the cookie value and the session.
    Raises `TokenRefused` (unknown, revoked or expired) before writing anything. Audited
    (`ui.sign_in`); the caller's unit of work commits."""
    principal = token_principal(session, token.strip())
    secret = secrets.token_urlsafe(32)
    row = UiSession(token_id=principal.token_id, secret_hash=sha256_hex(secret), csrf=secrets.token_urlsafe(32), expires_at=utcnow() + timedelta(hours=hours))
    session.add(row)
    session.flush()
    assert row.id is not None
    session.add(
        AuditEvent(actor=principal.actor, action=AuditAction.UI_SIGN_IN, object_type="ui_session", object_id=str(row.id), details={"expires_at": row.expires_at.isoformat()})
    )
    cookie = _signer(secret_key).sign(f"{row.id}.{secret}").decode()
    return cookie, SignedIn(row.id, principal, row.csrf, row.expires_at)


def signed_in(engine: Engine, cookie: str | None, *, secret_key: str, hours: int) -> SignedIn | None:
    """The session a cookie opens, or None: a bad signature, an unknown, ended or expired
    session, or a token that no longer opens anything. Read in one transaction; the token's use is
    recorded after it, in a unit of work of its own (`service.core.auth.record_use`)."""
    if not cookie:
        return None
    try:
        value = _signer(secret_key).unsign(cookie, max_age=hours * 3600).decode()
    except (BadSignature, UnicodeDecodeError):
        return None
    session_id, _, secret = value.partition(".")
    if not session_id.isdigit() or not secret:
        return None
    with Session(engine, expire_on_commit=False) as session:
        row = session.get(UiSession, int(session_id))
        if row is None or row.ended_at is not None or row.expires_at <= utcnow() or not hmac.compare_digest(row.secret_hash, sha256_hex(secret)):
            return None
        token = session.get(ApiToken, row.token_id)
    principal = admitted(token)
    if isinstance(principal, TokenRefused):
        return None  # a revoked or expired token ends its sessions
    assert row.id is not None and token is not None
    record_use(engine, token)
    return SignedIn(row.id, principal, row.csrf, row.expires_at)


def sign_out(session: Session, signed: SignedIn) -> None:
    """End a session (audited `ui.sign_out`); the caller's unit of work commits."""
    row = session.get(UiSession, signed.session_id)
    if row is not None and row.ended_at is None:
        row.ended_at = utcnow()
        session.add(row)
        session.add(AuditEvent(actor=signed.principal.actor, action=AuditAction.UI_SIGN_OUT, object_type="ui_session", object_id=str(signed.session_id), details={}))


def csrf_matches(expected: str, given: str | None) -> bool:
    """Whether a request's CSRF value is the expected one (constant time)."""
    return bool(given) and hmac.compare_digest(expected.encode(), (given or "").encode())


def new_login_csrf() -> str:
    return secrets.token_urlsafe(32)
