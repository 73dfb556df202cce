"""API tokens: creation (the plaintext is shown once), revocation and the bootstrap admin token.
Only sha256 hashes are stored."""

from __future__ import annotations

from sqlmodel import Session, select

from schemas.audit import AuditEvent
from schemas.common import utcnow
from schemas.token import ApiToken, Scope, parse_scopes
from service.core.crypto import new_secret, sha256_hex

TOKEN_PREFIX = "gs_"
BOOTSTRAP_TOKEN_NAME = "bootstrap-admin"


def create_token(*, session: Session, name: str, scopes: str | list[str], actor: str = "cli") -> tuple[str, ApiToken]:
    """Create a token; returns the plaintext (shown once, never stored) and the stored row."""
    parsed = parse_scopes(scopes)
    if not name.strip():
        raise ValueError("a token needs a name saying who or what uses it")
    plaintext = new_secret(TOKEN_PREFIX)
    token = ApiToken(name=name.strip(), token_hash=sha256_hex(plaintext), prefix=plaintext[:10], scopes=parsed)
    session.add(token)
    session.flush()
    session.add(AuditEvent(actor=actor, action="token.create", object_type="token", object_id=str(token.id), details={"name": token.name, "scopes": parsed}))
    session.commit()
    return plaintext, token


def revoke_token(*, session: Session, token_id: int, actor: str = "cli") -> ApiToken:
    """Revoke a token by id; raises LookupError when there is none."""
    token = session.get(ApiToken, token_id)
    if token is None:
        raise LookupError(f"no token with id {token_id}")
    if token.revoked_at is None:
        token.revoked_at = utcnow()
        session.add(token)
        session.add(AuditEvent(actor=actor, action="token.revoke", object_type="token", object_id=str(token_id)))
        session.commit()
    return token


def ensure_bootstrap_admin(*, session: Session, admin_token: str) -> None:
    """Make `admin_token` (from GOLDENSET_ADMIN_TOKEN) a valid admin token, replacing an older value."""
    digest = sha256_hex(admin_token)
    existing = session.exec(select(ApiToken).where(ApiToken.name == BOOTSTRAP_TOKEN_NAME)).first()
    if existing is not None and existing.token_hash == digest and existing.revoked_at is None:
        return
    if existing is None:
        existing = ApiToken(name=BOOTSTRAP_TOKEN_NAME, token_hash=digest, prefix=admin_token[:4] + "…", scopes=[Scope.ADMIN.value])
    else:
        existing.token_hash = digest
        existing.prefix = admin_token[:4] + "…"
        existing.revoked_at = None
    session.add(existing)
    session.add(AuditEvent(actor="settings", action="token.bootstrap", object_type="token", object_id=BOOTSTRAP_TOKEN_NAME))
    session.commit()
