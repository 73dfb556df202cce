"""Rendering pages: the templates, what every page is given, scope checks and HTML refusals.

Every page gets `me` (the signed-in principal), `csrf` (the session's CSRF value, which every form
sends back as the `csrf` field), `can(scope)`, `when(datetime)`, `notice` (what the action
before the page did, carried over its redirect in a one-shot cookie) and `notice_tone` (`ok` or
`error` when the action said how it went, so a page can style them apart; else ""). A notice, like any message
shown through the `code_spans` filter, is escaped and its `backtick-quoted` parts (a command, a
setting) shown as code. Pages are never cached (`no-store`): they show what this person may see now.

Every page module builds its router with `ui_router()`, whose CSRF check runs before any handler
of a state-changing request (anything but GET and HEAD): the request must carry the session's CSRF
value, as the form field `csrf` or the `X-CSRF-Token` header, or it is refused with 403. An action
answers with `done(url, notice)`: a 303 to the page that shows its result.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.templating import Jinja2Templates
from markupsafe import Markup, escape
from pydantic import ValidationError

from schemas.token import Scope
from service.core.auth import Principal
from service.core.sessions import COOKIE_PATH, SignedIn, csrf_matches

TEMPLATES = Jinja2Templates(directory=str(Path(__file__).parent / "templates"))
STATIC = Path(__file__).parent / "static"
NO_STORE = {"Cache-Control": "no-store"}
NOTICE_COOKIE = "goldenset_notice"
NOTICE_TONE_COOKIE = "goldenset_notice_tone"
NOTICE_TONES = ("ok", "error")
NOTICE_LENGTH = 600
UNSAFE = {"POST", "PUT", "PATCH", "DELETE"}
CODE_SPAN = re.compile(r"`([^`\n]+)`")


class UiRefused(Exception):
    """A page or action this person cannot have: shown as an HTML page with `status`."""

    def __init__(self, status: int, title: str, message: str) -> None:
        super().__init__(message)
        self.status, self.title, self.message = status, title, message


def signed(request: Request) -> SignedIn:
    """The request's session (the guard admitted only signed-in requests to `/ui` pages)."""
    session = getattr(request.state, "ui_session", None)
    if not isinstance(session, SignedIn):
        raise UiRefused(401, "Not signed in", "Sign in with an API token to use goldenset.")
    return session


def principal(request: Request) -> Principal:
    return signed(request).principal


def secret_key(request: Request) -> str:
    """The service's secret key (seal keys, cursors), for pages that decide what is sealed."""
    key: str = request.app.state.settings.secret_key.get_secret_value()
    return key


def need(request: Request, scope: Scope, doing: str) -> Principal:
    """The principal, when its token has `scope`; otherwise a 403 page saying what is missing."""
    who = principal(request)
    if scope.value not in who.scopes:
        raise UiRefused(403, "Not allowed", f"{doing} needs a token with the '{scope.value}' scope; yours has {', '.join(sorted(who.scopes)) or 'none'}.")
    return who


def field_errors(error: ValidationError) -> dict[str, str]:
    """A form's validation errors by field name (the first of each), worded for a person."""
    found: dict[str, str] = {}
    for problem in error.errors():
        field = str(problem["loc"][0]) if problem["loc"] else "form"
        found.setdefault(field, problem["msg"].removeprefix("Value error, "))
    return found


def when(value: datetime | None) -> str:
    """A time as pages show it: UTC, to the minute."""
    if value is None:
        return "never"
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def code_spans(text: str) -> Markup:
    """`text` escaped, each part between a pair of backticks shown as `<code>` (without the
    backticks). A lone backtick stays as it is; nothing in `text` becomes markup of its own."""
    parts = CODE_SPAN.split(text)
    return Markup("").join(Markup("<code>{}</code>").format(part) if index % 2 else escape(part) for index, part in enumerate(parts))


TEMPLATES.env.filters["code_spans"] = code_spans


def unbroken_when(value: datetime | None) -> Markup:
    """`when(value)` kept on one line (a narrow column would break it at its hyphens)."""
    return Markup('<span class="nowrap">{}</span>').format(when(value))


async def check_csrf(request: Request) -> None:
    """Refuse a state-changing request without the session's CSRF value (403). The sign-in form
    checks its own value (`service.ui.routes`)."""
    if request.method not in UNSAFE or request.url.path == "/ui/login":
        return
    given = request.headers.get("x-csrf-token")
    if given is None and request.headers.get("content-type", "").startswith(("application/x-www-form-urlencoded", "multipart/form-data")):
        value = (await request.form()).get("csrf")
        given = value if isinstance(value, str) else None
    if not csrf_matches(signed(request).csrf, given):
        raise UiRefused(403, "Form refused", "This form is out of date or did not come from a goldenset page. Reload the page and try again.")


def ui_router() -> APIRouter:
    """A router for pages: left out of the API's OpenAPI document, behind the CSRF check."""
    return APIRouter(include_in_schema=False, dependencies=[Depends(check_csrf)])


def done(url: str, notice: str = "", *, tone: str = "") -> RedirectResponse:
    """A 303 to `url` after an action; `notice` (what was done) is shown once on that page, with
    its `tone` (`ok` or `error`: how it went, for a page that styles them apart)."""
    response = RedirectResponse(url, status_code=303)
    if notice:
        response.set_cookie(NOTICE_COOKIE, quote(notice[:NOTICE_LENGTH]), max_age=60, path=COOKIE_PATH, httponly=True, samesite="strict")
        if tone in NOTICE_TONES:
            response.set_cookie(NOTICE_TONE_COOKIE, tone, max_age=60, path=COOKIE_PATH, httponly=True, samesite="strict")
    return response


def page(request: Request, template: str, context: Mapping[str, Any] | None = None, *, status: int = 200) -> HTMLResponse:
    """Render `template` with the common context."""
    session = getattr(request.state, "ui_session", None)
    me = session.principal if isinstance(session, SignedIn) else None
    common: dict[str, Any] = {
        "me": me,
        "csrf": session.csrf if isinstance(session, SignedIn) else "",
        "can": (lambda scope: me is not None and scope in me.scopes),
        "path": request.url.path,
        "when": unbroken_when,
        "notice": code_spans(_notice(request)),
        "notice_tone": _notice_tone(request),
    }
    response = TEMPLATES.TemplateResponse(request, template, {**common, **(context or {})}, status_code=status)
    response.headers.update(NO_STORE)
    for cookie in (NOTICE_COOKIE, NOTICE_TONE_COOKIE):
        if cookie in request.cookies:
            response.delete_cookie(cookie, path=COOKIE_PATH)
    return response


def _notice(request: Request) -> str:
    return unquote(request.cookies.get(NOTICE_COOKIE, ""))[:NOTICE_LENGTH]


def _notice_tone(request: Request) -> str:
    tone = request.cookies.get(NOTICE_TONE_COOKIE, "")
    return tone if tone in NOTICE_TONES and NOTICE_COOKIE in request.cookies else ""


def refusal_page(request: Request, refused: UiRefused) -> HTMLResponse:
    return page(request, "error.html", {"title": refused.title, "message": refused.message}, status=refused.status)
