"""The web UI's entry: `/` (to `/ui`), signing in and out, the overview, and the mounting of every
page module's router (each behind the CSRF check of `service.ui.pages`) and of the assets.

The sign-in form, which comes before any session, carries the value of its own short-lived cookie
instead of the session's CSRF value.
"""

from __future__ import annotations

from functools import partial
from typing import Annotated
from urllib.parse import urlsplit

from fastapi import Depends, FastAPI, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from sqlmodel import Session

from schemas.audit import AuditAction, AuditEvent
from service.core.admission import small_body
from service.core.db import write_transaction
from service.core.deps import WriteSessionDep
from service.core.metrics import Metrics
from service.core.sessions import COOKIE, COOKIE_PATH, LOGIN_CSRF_COOKIE, LOGIN_CSRF_SECONDS, csrf_matches, new_login_csrf, sign_in, sign_out
from service.core.settings import Settings
from service.ui import (
    audit,
    eval_actions,
    evals,
    evidence,
    evidence_reports,
    items,
    models,
    overview,
    questions,
    registry,
    registry_forms,
    review,
    review_team,
    run_compare,
    runs,
    sources,
    team,
    tokens,
    upload,
)
from service.ui.pages import STATIC, UiRefused, page, signed, ui_router
from service.ui.refusals import Refusal, install_refusal_pages, shows_refusal

SIGN_IN_BODY_BYTES = 8 * 1024
"""The sign-in form's largest body: a token, the form's CSRF value and the page to return to."""
PAGES = (
    review, review_team, team, questions, items, eval_actions, evals, sources, registry, registry_forms,
    evidence, evidence_reports, run_compare, runs, models, audit, tokens, upload,
)  # fmt: skip
"""The page modules, each with a `router` from `service.ui.pages.ui_router`."""

router = ui_router()


def _settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def _secure(request: Request) -> bool:
    return request.url.scheme == "https" or request.headers.get("x-forwarded-proto", "").lower() == "https"


def _next_page(value: str | None) -> str:
    """Where to go after signing in: a page of this UI only (never another site)."""
    if not value:
        return "/ui"
    parts = urlsplit(value)
    if parts.scheme or parts.netloc or not parts.path.startswith("/ui") or parts.path.startswith("/ui/login"):
        return "/ui"
    return value


@router.get("/")
def root() -> RedirectResponse:
    return RedirectResponse("/ui", status_code=303)


@router.get("/ui/login")
def login_form(request: Request, next: str | None = None, error: str | None = None) -> HTMLResponse:
    value = new_login_csrf()
    response = page(request, "login.html", {"login_csrf": value, "next": _next_page(next), "error": error})
    response.set_cookie(LOGIN_CSRF_COOKIE, value, max_age=LOGIN_CSRF_SECONDS, path="/ui/login", httponly=True, samesite="strict", secure=_secure(request))
    return response


@router.post("/ui/login", dependencies=[Depends(small_body(SIGN_IN_BODY_BYTES))])
def login(
    request: Request,
    session: WriteSessionDep,
    token: Annotated[str, Form(max_length=512)] = "",
    csrf: Annotated[str, Form(max_length=128)] = "",
    next: Annotated[str, Form(max_length=2000)] = "",
) -> Response:
    """Open a session for the token; a token that opens nothing (`TokenRefused`) shows the form
    again with why (`_sign_in_refused`)."""
    settings = _settings(request)
    if not csrf_matches(request.cookies.get(LOGIN_CSRF_COOKIE, ""), csrf):
        raise UiRefused(403, "Form refused", "The sign-in form is out of date. Reload the page and sign in again.")
    if not token.strip():
        return login_form(request, next=next, error="Paste an API token (create one with `goldenset token create`).")
    shows_refusal(request, partial(_sign_in_refused, request, next))
    cookie, _ = sign_in(session, token=token, secret_key=settings.secret_key.get_secret_value(), hours=settings.ui_session_hours)
    response = RedirectResponse(_next_page(next), status_code=303)
    response.set_cookie(COOKIE, cookie, max_age=settings.ui_session_hours * 3600, path=COOKIE_PATH, httponly=True, samesite="strict", secure=_secure(request))
    response.delete_cookie(LOGIN_CSRF_COOKIE, path="/ui/login")
    return response


def _sign_in_refused(request: Request, next: str, refusal: Refusal) -> Response:
    """The sign-in form again, saying why the token opens nothing. A burst of wrong tokens from
    one address leaves a trace, not a row each: the first are audited (`ui.sign_in_refused`, in a
    unit of work of its own, the sign-in's having rolled back), the rest counted."""
    metrics: Metrics = request.app.state.metrics
    address = request.app.state.rate_limits.client_address(request.scope)
    audited = request.app.state.rate_limits.audits_refused_sign_in(address)
    metrics.sign_ins_refused.labels(str(audited).lower()).inc()
    if audited:
        with write_transaction(request.app.state.engine) as session:
            session.add(AuditEvent(actor="ui", action=AuditAction.UI_SIGN_IN_REFUSED, object_type="ui_session", object_id="", details={"why": refusal.detail}))
    return login_form(request, next=next, error=refusal.detail.replace("the bearer token", "This token").capitalize())


@router.post("/ui/logout")
def logout(request: Request, session: WriteSessionDep) -> RedirectResponse:
    sign_out(session, signed(request))
    response = RedirectResponse("/ui/login", status_code=303)
    response.delete_cookie(COOKIE, path=COOKIE_PATH)
    return response


@router.get("/ui")
def home(request: Request) -> HTMLResponse:
    with Session(request.app.state.engine) as session:
        return page(request, "overview.html", overview.overview(session, _settings(request)))


def install(app: FastAPI) -> None:
    """Mount the UI on `app`: its routes, its assets under `/ui/static`, and its error pages
    (`service.ui.refusals`)."""
    app.include_router(router)
    for module in PAGES:
        app.include_router(module.router)
    app.mount("/ui/static", StaticFiles(directory=STATIC), name="ui-static")
    install_refusal_pages(app)
