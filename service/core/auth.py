"""Bearer-token authentication and scope checks for the HTTP API (tokens themselves: service.core.tokens)."""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import timedelta
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy import update
from sqlmodel import Session, col, select

from schemas.common import utcnow
from schemas.evals import Split
from schemas.token import ApiToken, Scope, effective_scopes
from service.core.admission import needs_scopes
from service.core.crypto import sha256_hex
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


class TokenRefused(ValueError):
    """A token that opens nothing: unknown, revoked or expired (the message says which)."""


def principal_of(session: Session, token: ApiToken | None) -> Principal:
    """The principal of a stored token, or TokenRefused when it is missing, revoked or expired;
    its `last_used_at` is moved on (at most once a minute; the session is committed then)."""
    if token is None or token.id is None:
        raise TokenRefused("the bearer token is not valid")
    if token.revoked_at is not None:
        raise TokenRefused("the bearer token was revoked")
    now = utcnow()
    if token.expired(now):
        raise TokenRefused(f"the bearer token expired on {format_expiry(token.expires_at)}; create a new one with `goldenset token create`")
    principal = Principal(token_id=token.id, name=token.name, scopes=frozenset(effective_scopes(token.scopes)))
    if token.last_used_at is None or now - token.last_used_at > LAST_USED_RESOLUTION:
        # End the read first: a write in a fresh transaction waits for SQLite's lock politely.
        session.commit()
        session.exec(update(ApiToken).where(col(ApiToken.id) == token.id).values(last_used_at=now))
        session.commit()
    return principal


def token_principal(session: Session, plaintext: str) -> Principal:
    """The principal of a token given in plain text (`principal_of`)."""
    return principal_of(session, session.exec(select(ApiToken).where(ApiToken.token_hash == sha256_hex(plaintext))).first())


def _unauthorized(detail: str) -> ProblemError:
    return ProblemError(401, "Unauthorized", detail, headers={"WWW-Authenticate": 'Bearer realm="goldenset"'})


def authenticate(request: Request) -> Principal:
    """The principal behind the request's bearer token; 401 when it is missing, unknown, revoked or
    expired (each with its own detail). Looked up once per request: the guard in front of the
    routes (`service.core.guard`) authenticates first, and routes reuse its answer."""
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
        try:
            principal = token_principal(session, credentials.strip())
        except TokenRefused as exc:
            raise _unauthorized(str(exc)) from exc
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
