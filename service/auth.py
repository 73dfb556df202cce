"""Bearer-token authentication and scope checks. Tokens are stored only as sha256 hashes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Annotated

from fastapi import Depends, Request
from sqlmodel import Session, select

from schemas.audit import AuditEvent
from schemas.common import utcnow
from schemas.token import ApiToken, Scope, effective_scopes, parse_scopes
from service.crypto import new_secret, sha256_hex
from service.problems import ProblemError

TOKEN_PREFIX = "gs_"
BOOTSTRAP_TOKEN_NAME = "bootstrap-admin"
LAST_USED_RESOLUTION = timedelta(minutes=1)


@dataclass(frozen=True)
class Principal:
    """Who is calling: the token's id and name, and its effective scopes."""

    token_id: int
    name: str
    scopes: frozenset[str]

    @property
    def actor(self) -> str:
        return f"token:{self.name}"


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


def _unauthorized(detail: str) -> ProblemError:
    return ProblemError(401, "Unauthorized", detail, headers={"WWW-Authenticate": 'Bearer realm="goldenset"'})


def authenticate(request: Request) -> Principal:
    """The principal behind the request's bearer token; 401 when it is missing, unknown or revoked."""
    header = request.headers.get("authorization", "")
    scheme, _, credentials = header.partition(" ")
    if not header:
        raise _unauthorized("this endpoint needs a bearer token: send 'Authorization: Bearer <token>' (create one with `goldenset token create`)")
    if scheme.lower() != "bearer" or not credentials.strip():
        raise _unauthorized("the Authorization header must be 'Bearer <token>'")
    digest = sha256_hex(credentials.strip())
    engine = request.app.state.engine
    with Session(engine, expire_on_commit=False) as session:
        token = session.exec(select(ApiToken).where(ApiToken.token_hash == digest)).first()
        if token is None or token.id is None:
            raise _unauthorized("the bearer token is not valid")
        if token.revoked_at is not None:
            raise _unauthorized("the bearer token was revoked")
        now = utcnow()
        if token.last_used_at is None or now - token.last_used_at > LAST_USED_RESOLUTION:
            token.last_used_at = now
            session.add(token)
            session.commit()
        principal = Principal(token_id=token.id, name=token.name, scopes=frozenset(effective_scopes(token.scopes)))
    request.state.principal = principal
    return principal


def require(scope: Scope) -> Callable[[Request], Principal]:
    """A dependency that authenticates the request and insists on `scope` (403 naming it otherwise)."""

    def dependency(request: Request) -> Principal:
        principal = authenticate(request)
        if scope.value not in principal.scopes:
            raise ProblemError(403, "Forbidden", f"this endpoint needs the '{scope.value}' scope; the token has: {', '.join(sorted(principal.scopes)) or 'none'}")
        return principal

    dependency.__name__ = f"require_{scope.value}"
    return dependency


IngestPrincipal = Annotated[Principal, Depends(require(Scope.INGEST))]
ReadPrincipal = Annotated[Principal, Depends(require(Scope.READ))]
CuratePrincipal = Annotated[Principal, Depends(require(Scope.CURATE))]
AdminPrincipal = Annotated[Principal, Depends(require(Scope.ADMIN))]
