"""Bearer-token authentication and scope checks for the HTTP API (tokens themselves: service.core.tokens)."""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy import update
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from curation.refusals import Refused
from schemas.common import utcnow
from schemas.evals import Split
from schemas.token import ApiToken, Scope, effective_scopes
from service.core.admission import needs_scopes
from service.core.crypto import sha256_hex
from service.core.db import write_transaction
from service.core.problems import ProblemError
from service.core.tokens import format_expiry

LAST_USED_RESOLUTION = timedelta(minutes=1)
acting_token_id: ContextVar[int | None] = ContextVar("acting_token_id", default=None)
"""The id of the token behind the request being answered (None outside one, or for the public
routes): set by the guard once it knows the principal, and written on every audit event the
request records (`service.core.audit`), beside the actor's name."""


@dataclass(frozen=True)
class Principal:
    """Who is calling: the token's id and name, and its effective scopes. Identity is the id:
    `actor` (`token:<name>`) is a label for people, unique among active tokens only (a revoked or
    expired token's name may be given again)."""

    token_id: int
    name: str
    scopes: frozenset[str]

    @property
    def actor(self) -> str:
        return f"token:{self.name}"


class TokenRefused(Refused):
    """A token that opens nothing (`curation.refusals.Refused`, status 401): `token_unknown`,
    `token_revoked` or `token_expired`, the detail saying which. The API answers it 401 with
    `WWW-Authenticate` (`authenticate`); the web UI's sign-in form shows it (`service.ui.routes`)."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(reason, detail, 401)


def stored_token(session: Session, plaintext: str) -> ApiToken | None:
    """The stored token whose value is `plaintext` (by its hash), if any."""
    return session.exec(select(ApiToken).where(ApiToken.token_hash == sha256_hex(plaintext))).first()


def admitted(token: ApiToken | None, now: datetime | None = None) -> Principal | TokenRefused:
    """The principal of a stored token, or the refusal saying why it opens nothing: missing,
    revoked, or expired at `now` (default: the current time). The refusal is returned, not raised:
    each caller decides what a refused token means to it (a 401, no session, the sign-in form)."""
    now = now or utcnow()
    if token is None or token.id is None:
        return TokenRefused("token_unknown", "the bearer token is not valid")
    if token.revoked_at is not None:
        return TokenRefused("token_revoked", "the bearer token was revoked")
    if token.expired(now):
        return TokenRefused("token_expired", f"the bearer token expired on {format_expiry(token.expires_at)}; create a new one with `goldenset token create`")
    return Principal(token_id=token.id, name=token.name, scopes=frozenset(effective_scopes(token.scopes)))


def _stale(token: ApiToken, now: datetime) -> bool:
    return token.last_used_at is None or now - token.last_used_at > LAST_USED_RESOLUTION


def mark_used(session: Session, token: ApiToken, now: datetime | None = None) -> None:
    """Move the token's `last_used_at` on to `now`, at most once a minute; the caller's unit of
    work commits."""
    now = now or utcnow()
    if _stale(token, now):
        session.exec(update(ApiToken).where(col(ApiToken.id) == token.id).values(last_used_at=now))


def record_use(engine: Engine, token: ApiToken) -> None:
    """`mark_used` in a unit of work of its own, opened only when `last_used_at` is due to move
    (at most once a minute). The read that found the token has ended by then, so on SQLite the
    write waits for the lock in a fresh transaction instead of failing to upgrade a read."""
    if _stale(token, utcnow()):
        with write_transaction(engine) as session:
            mark_used(session, token)


def token_principal(session: Session, plaintext: str) -> Principal:
    """The principal of a token given in plain text, its use recorded in `session` (`mark_used`;
    the caller's unit of work commits). Raises TokenRefused when it opens nothing."""
    token = stored_token(session, plaintext)
    found = admitted(token)
    if isinstance(found, TokenRefused):
        raise found
    assert token is not None
    mark_used(session, token)
    return found


def _unauthorized(detail: str) -> ProblemError:
    return ProblemError(401, "Unauthorized", detail, headers={"WWW-Authenticate": 'Bearer realm="goldenset"'})


def authenticate(request: Request) -> Principal:
    """The principal behind the request's bearer token; 401 when it is missing, unknown, revoked or
    expired (each with its own detail). Looked up once per request: the guard in front of the
    routes (`service.core.guard`) authenticates first, and routes reuse its answer. The token is
    read in one transaction and its use recorded after it (`record_use`)."""
    known = getattr(request.state, "principal", None)
    if isinstance(known, Principal):
        return known
    header = request.headers.get("authorization", "")
    scheme, _, credentials = header.partition(" ")
    if not header:
        raise _unauthorized("this endpoint needs a bearer token: send 'Authorization: Bearer <token>' (create one with `goldenset token create`)")
    if scheme.lower() != "bearer" or not credentials.strip():
        raise _unauthorized("the Authorization header must be 'Bearer <token>'")
    engine = request.app.state.engine
    with Session(engine, expire_on_commit=False) as session:
        token = stored_token(session, credentials.strip())
    principal = admitted(token)
    if isinstance(principal, TokenRefused):
        raise _unauthorized(principal.detail)
    assert token is not None
    record_use(engine, token)
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
    needs_scopes(dependency, scope.value)
    return dependency


def require_any(*scopes: Scope) -> Callable[[Request], Principal]:
    """A dependency that authenticates the request and insists on one of `scopes` (403 naming
    them otherwise), for routes that decide within which of them the request needs."""
    names = [scope.value for scope in scopes]

    def dependency(request: Request) -> Principal:
        principal = authenticate(request)
        if principal.scopes.isdisjoint(names):
            needed = " or ".join(f"'{name}'" for name in names)
            raise ProblemError(403, "Forbidden", f"this endpoint needs the {needed} scope; the token has: {', '.join(sorted(principal.scopes)) or 'none'}")
        return principal

    dependency.__name__ = f"require_any_{'_'.join(names)}"
    needs_scopes(dependency, *names)
    return dependency


def authorize_split(request: Request, split: Split, *, run: bool = False) -> Principal:
    """Authenticate and check the scope the split's content needs: `read` for dev, `sealed` for
    sealed (403 naming it). `run`: the content asked for is a run's items, not the release's split."""
    principal = authenticate(request)
    needed = Scope.SEALED if split is Split.SEALED else Scope.READ
    if needed.value not in principal.scopes:
        if run:
            raise ProblemError(403, "Forbidden", f"the items of a {split.value} run need the '{needed.value}' scope")
        raise ProblemError(403, "Forbidden", f"the {split.value} split needs the '{needed.value}' scope; the token has: {', '.join(sorted(principal.scopes)) or 'none'}")
    return principal


IngestPrincipal = Annotated[Principal, Depends(require(Scope.INGEST))]
ReadPrincipal = Annotated[Principal, Depends(require(Scope.READ))]
CuratePrincipal = Annotated[Principal, Depends(require(Scope.CURATE))]
AdminPrincipal = Annotated[Principal, Depends(require(Scope.ADMIN))]
