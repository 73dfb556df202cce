"""`/ui/tokens`: API tokens from the browser (admin only): every token with its scopes, expiry,
last use and revocation (never its value), a form that creates one and shows its value once, and
revocation.

A new token's value is shown on the answer to the form that created it, never carried over a
redirect, a cookie or a log, and that answer is not stored by the browser (`no-store`, as every
page). Creating and revoking are audited (`token.create`, `token.revoke`) with the signed-in
person as the actor, by the same functions the `goldenset token` commands use, so a page refuses
exactly what the command refuses (a blank or taken name, unknown scopes, an expiry in the past).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

from fastapi import Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from sqlmodel import Session, col, select

from schemas.common import utcnow
from schemas.token import ApiToken, Scope
from service.core.deps import WriteSessionDep
from service.core.problems import ProblemError
from service.core.tokens import create_token, format_expiry, revoke_token
from service.ui.pages import UiRefused, done, need, page, ui_router
from service.ui.refusals import Refusal, shows_refusal

router = ui_router()

EXPIRY_CHOICES = {"7d": timedelta(days=7), "30d": timedelta(days=30), "90d": timedelta(days=90), "365d": timedelta(days=365)}
"""The form's expiry choices besides `never` and a date."""


def token_rows(session: Session, now: datetime) -> list[dict[str, Any]]:
    """Every token, newest first, as the page lists it: never its value nor its hash."""
    tokens = session.exec(select(ApiToken).order_by(col(ApiToken.id).desc())).all()
    return [
        {
            "id": token.id,
            "name": token.name,
            "prefix": token.prefix,
            "scopes": token.scopes,
            "created_at": token.created_at,
            "last_used_at": token.last_used_at,
            "expires_at": token.expires_at,
            "state": "revoked" if token.revoked else "expired" if token.expired(now) else "active",
        }
        for token in tokens
    ]


def _context(session: Session, **extra: Any) -> dict[str, Any]:
    context = {"tokens": token_rows(session, utcnow()), "scopes": [scope.value for scope in Scope], "expiry_choices": list(EXPIRY_CHOICES)}
    return context | {"errors": {}, "typed": {}, "created": None} | extra


def expiry_from_form(choice: str, date: str, now: datetime) -> datetime | None:
    """The expiry the form asks for: None for `never`, now plus a choice, or the end of a typed
    date (UTC). Raises ValueError naming what is wrong."""
    if choice == "never":
        return None
    if choice in EXPIRY_CHOICES:
        return now + EXPIRY_CHOICES[choice]
    if choice == "date":
        try:
            day = datetime.strptime(date.strip(), "%Y-%m-%d").replace(tzinfo=UTC)
        except ValueError as exc:
            raise ValueError(f"give the expiry date as YYYY-MM-DD, not {date.strip()!r}") from exc
        return day + timedelta(days=1)
    raise ValueError(f"unknown expiry {choice!r}: choose never, {', '.join(EXPIRY_CHOICES)} or a date")


@router.get("/ui/tokens")
def tokens(request: Request) -> HTMLResponse:
    need(request, Scope.ADMIN, "Managing API tokens")
    with Session(request.app.state.engine) as session:
        return page(request, "tokens.html", _context(session))


@router.post("/ui/tokens", response_model=None)
def create(
    request: Request,
    session: WriteSessionDep,
    name: Annotated[str, Form(max_length=128)] = "",
    scopes: Annotated[list[str] | None, Form()] = None,
    expiry: Annotated[str, Form(max_length=16)] = "90d",
    expiry_date: Annotated[str, Form(max_length=32)] = "",
) -> HTMLResponse:
    who = need(request, Scope.ADMIN, "Creating an API token")
    typed = {"name": name, "scopes": scopes or [], "expiry": expiry, "expiry_date": expiry_date}
    engine = request.app.state.engine

    def form_again(refusal: Refusal) -> HTMLResponse:
        with Session(engine) as fresh:
            return page(request, "tokens.html", _context(fresh, errors={"form": refusal.detail}, typed=typed), status=refusal.status)

    shows_refusal(request, form_again)
    try:
        expires_at = expiry_from_form(expiry, expiry_date, utcnow())
        if not scopes:
            raise ValueError("tick at least one scope: what may this token do?")
        plaintext, token = create_token(session=session, name=name, scopes=scopes, actor=who.actor, expires_at=expires_at)
    except ValueError as exc:
        raise ProblemError(422, "Token not created", str(exc)) from exc
    lifetime = "never expires" if token.expires_at is None else f"expires {format_expiry(token.expires_at)}"
    created = {"id": token.id, "name": token.name, "scopes": token.scopes, "lifetime": lifetime, "value": plaintext}
    session.flush()
    return page(request, "tokens.html", _context(session, created=created), status=201)


@router.post("/ui/tokens/{token_id}/revoke")
def revoke(request: Request, token_id: int, session: WriteSessionDep) -> RedirectResponse:
    who = need(request, Scope.ADMIN, "Revoking an API token")
    if who.token_id == token_id:
        raise UiRefused(409, "Not revoked", "This is the token you are signed in with: revoking it would sign you out mid-way. Sign in with another admin token to revoke it.")
    try:
        token = revoke_token(session=session, token_id=token_id, actor=who.actor)
    except LookupError as exc:
        raise UiRefused(404, "No such token", str(exc)) from exc
    return done("/ui/tokens", f"Revoked token {token.id} ({token.name}): requests bearing it are refused from now on.")
