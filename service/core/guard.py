"""The guard in front of every route: what is refused before a handler runs or a body is read.

In order, for every HTTP request:

1. Authentication. Every route but the public ones (`/healthz`, signed webhooks, the API
   documentation when `GOLDENSET_PUBLIC_API_DOCS` is on, `/` and the web UI's sign-in page and
   assets) needs a valid bearer token: 401 before one byte of the body is read or parsed. The
   route then checks the token's scope. The web UI's pages (`/ui/...`) take a signed-in session
   cookie instead (`service.core.sessions`); without a valid one, the browser is sent to the
   sign-in page (303), again before the body is read.
2. Path and query. A NUL character in the path or in a query parameter is refused (422 naming
   it): no id, name or date holds one, and PostgreSQL text cannot store one.
3. Body size. A body declared or growing past `GOLDENSET_MAX_BODY_BYTES` is refused (413) without
   reading the rest.
4. JSON content. The JSON body of a route that takes one object is refused (422 naming the place
   in the document) when it holds a NUL character, a lone surrogate, a number that is not finite
   (`NaN`, `Infinity`, `1e400`) or nesting deeper than `MAX_DEPTH`: values no field accepts and
   no database stores. The batch ingest routes are left to judge each record on its own, so a bad
   record costs only itself.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl, urlencode

from fastapi.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import RedirectResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ingest.sanity import repeated_key
from service.core.admission import Admission, AdmissionTable
from service.core.auth import acting_token_id, authenticate
from service.core.problems import ProblemError, problem_response
from service.core.rate_limits import RateLimits
from service.core.sessions import COOKIE, signed_in
from service.core.settings import Settings

MAX_DEPTH = 32
"""Nesting deeper than this in a request body is refused: no request model goes beyond a few levels."""
PUBLIC = {("GET", "/healthz"), ("GET", "/"), ("HEAD", "/")}
UI = "/ui"
SIGN_IN = "/ui/login"
UI_PUBLIC = (SIGN_IN, "/ui/static/")
API = "/v1/"
KNOWN_PATHS = 4096
"""Paths whose route is remembered (`RequestGuard._admission`); forgotten wholesale past this many."""
DOCS = ("/docs", "/docs/oauth2-redirect", "/redoc", "/openapi.json")
DOC_ASSETS = "/docs/static/"
WEBHOOK = re.compile(r"^/v1/sources/[^/]+/webhook$")
RECORD_BATCHES = (re.compile(r"^/v1/sources/[^/]+/items$"), WEBHOOK)
JSON_TYPES = re.compile(r"^(application/json|application/[\w.+-]+\+json)?$")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


class _Duplicate:
    """Stands for a JSON object that holds `key` more than once."""

    __slots__ = ("key",)

    def __init__(self, key: str) -> None:
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> Any:
    key = repeated_key(pairs)
    return dict(pairs) if key is None else _Duplicate(key)


class _NotJSONValue(ValueError):
    """A constant JSON's grammar does not have (`NaN`, `Infinity`)."""


def _refuse_constant(name: str) -> float:
    raise _NotJSONValue(f"{name} is not a JSON number")


def _flaws(document: Any) -> Iterator[tuple[str, str]]:
    """(location, reason) of every value of `document` no request may carry, depth first."""
    stack: list[tuple[Any, str, int]] = [(document, "body", 0)]
    while stack:
        value, location, depth = stack.pop()
        if depth > MAX_DEPTH:
            yield location, f"is nested deeper than {MAX_DEPTH} levels"
            continue
        if isinstance(value, str):
            if "\x00" in value:
                yield location, "contains a NUL character (\\u0000)"
            elif _SURROGATE.search(value):
                yield location, "contains a lone surrogate (\\ud800-\\udfff), which is not text"
        elif isinstance(value, float) and not math.isfinite(value):
            yield location, "is a number too large to store (or not a number)"
        elif isinstance(value, _Duplicate):
            yield location, f"has the key {value.key!r} more than once; each key of an object must be unique"
        elif isinstance(value, dict):
            for key, item in value.items():
                stack.append((key, f"{location}.{key!s}", depth + 1))
                stack.append((item, f"{location}.{key!s}", depth + 1))
        elif isinstance(value, list):
            stack.extend((item, f"{location}.{index}", depth + 1) for index, item in enumerate(value))


def _invalid(location: str, reason: str, path: str) -> Any:
    errors = [{"location": location, "reason": "value_error", "detail": reason}]
    return problem_response(422, "Invalid request", f"{location}: {reason}", instance=path, errors=errors)


class RequestGuard:
    """ASGI middleware applying the module's checks; `settings` gives the body limit and whether
    the documentation is public."""

    def __init__(self, app: ASGIApp, *, settings: Settings) -> None:
        self.app = app
        self.max_body_bytes = settings.max_body_bytes
        self.secret_key = settings.secret_key.get_secret_value()
        self.ui_session_hours = settings.ui_session_hours
        self.public = set(PUBLIC) | ({("GET", path) for path in DOCS} if settings.public_api_docs else set())
        self.public_doc_assets = settings.public_api_docs
        self._table: AdmissionTable | None = None
        self._known: dict[tuple[str, str], Admission | None] = {}

    def _is_public(self, method: str, path: str) -> bool:
        """Whether the request needs no credentials at all (health, the documentation)."""
        if self.public_doc_assets and method in ("GET", "HEAD") and path.startswith(DOC_ASSETS):
            return True
        return (method, path) in self.public

    def _admission(self, scope: Scope) -> Admission | None:
        """What the route answering `scope` admits (`service.core.admission`), read from the app's
        routes once, and remembered by method and path."""
        if self._table is None:
            self._table = AdmissionTable(scope["app"].router.routes)
        key = (scope["method"], scope["path"])
        if key not in self._known:
            if len(self._known) >= KNOWN_PATHS:
                self._known.clear()
            self._known[key] = self._table.lookup(scope)
        return self._known[key]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        method, path = scope["method"], scope["path"]
        admission = self._admission(scope)
        limits: RateLimits = scope["app"].state.rate_limits
        address = limits.client_address(scope)
        if path == UI or path.startswith(UI + "/"):
            if method == "POST" and path == SIGN_IN and (refusal := limits.hit("sign_in", address)) is not None:
                await _refuse(refusal, scope, receive, send)
                return
            if not path.startswith(UI_PUBLIC) and not await self._signed_in(scope):
                await _to_sign_in(scope)(scope, receive, send)
                return
        elif not self._is_public(method, path):
            # An address refused too often is refused before its credentials cost a look-up.
            if (refusal := limits.exhausted("unauthorized", address)) is not None:
                await _refuse(refusal, scope, receive, send)
                return
            send = _counting_unauthorized(send, limits, address)
            if admission is None or not admission.public:
                try:
                    principal = await run_in_threadpool(authenticate, Request(scope))
                    acting_token_id.set(principal.token_id)
                except ProblemError as exc:
                    await _refuse(exc, scope, receive, send)
                    return
                if admission is not None and admission.scopes is not None and principal.scopes.isdisjoint(admission.scopes):
                    needed = " or ".join(f"'{name}'" for name in sorted(admission.scopes))
                    detail = f"this endpoint needs the {needed} scope; the token has: {', '.join(sorted(principal.scopes)) or 'none'}"
                    await _refuse(ProblemError(403, "Forbidden", detail), scope, receive, send)
                    return
        if "\x00" in path:
            await _invalid("path", "contains a NUL character", path)(scope, receive, send)
            return
        for name, value in parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True):
            if "\x00" in name or "\x00" in value:
                await _invalid(f"query.{name.replace(chr(0), '')}", "contains a NUL character", path)(scope, receive, send)
                return
        if (refusal := _refuse_headers(scope, admission)) is not None:
            await _refuse(refusal, scope, receive, send)
            return
        limit = min(self.max_body_bytes, admission.body_limit) if admission is not None and admission.body_limit is not None else self.max_body_bytes
        declared = dict(scope.get("headers", [])).get(b"content-length", b"")
        # A length of more digits than any limit is too large without reading it as a number.
        if declared.isdigit() and (len(declared) > 18 or int(declared) > limit):
            await self._too_large(scope, receive, send, limit)
            return
        body = await self._read_body(receive, limit)
        if body is None:
            await self._too_large(scope, receive, send, limit)
            return
        if body and not any(batch.match(path) for batch in RECORD_BATCHES) and self._is_json(scope):
            refusal = self._judge_json(body, path)
            if refusal is not None:
                await refusal(scope, receive, send)
                return
        await self.app(scope, _replay(body, receive), send)

    async def _signed_in(self, scope: Scope) -> bool:
        """Whether the request carries a valid UI session; its principal and session are then kept
        on the request's state for the page."""
        request = Request(scope)
        signed = await run_in_threadpool(signed_in, request.app.state.engine, request.cookies.get(COOKIE), secret_key=self.secret_key, hours=self.ui_session_hours)
        if signed is None:
            return False
        state = scope.setdefault("state", {})
        state["principal"], state["ui_session"] = signed.principal, signed
        acting_token_id.set(signed.principal.token_id)
        return True

    async def _too_large(self, scope: Scope, receive: Receive, send: Send, limit: int) -> None:
        detail = f"the body is larger than the limit of {limit} bytes" + ("; split it into smaller batches" if limit == self.max_body_bytes else "")
        await problem_response(413, "Payload Too Large", detail, instance=scope["path"])(scope, receive, send)

    async def _read_body(self, receive: Receive, limit: int) -> bytes | None:
        """The whole body, or None as soon as it grows past the limit (the rest is never read)."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return b"".join(chunks)
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    @staticmethod
    def _is_json(scope: Scope) -> bool:
        content_type = dict(scope.get("headers", [])).get(b"content-type", b"").decode("latin-1").split(";", 1)[0].strip().lower()
        return JSON_TYPES.match(content_type) is not None

    @staticmethod
    def _judge_json(body: bytes, path: str) -> Any:
        try:
            document = json.loads(body, parse_constant=_refuse_constant, object_pairs_hook=_unique_keys)
        except _NotJSONValue as exc:
            return _invalid("body", str(exc), path)
        except RecursionError:
            return _invalid("body", f"is nested deeper than {MAX_DEPTH} levels", path)
        except ValueError:
            return None  # not JSON at all: the route's own validation says so
        for location, reason in _flaws(document):
            return _invalid(location, reason, path)
        return None


async def _refuse(refusal: ProblemError, scope: Scope, receive: Receive, send: Send) -> None:
    await problem_response(refusal.status, refusal.title, refusal.detail, instance=scope["path"], headers=refusal.headers, **refusal.extra)(scope, receive, send)


def _counting_unauthorized(send: Send, limits: RateLimits, address: str) -> Send:
    """A `send` that counts a 401 answer against `address` (`RateLimits`), whoever answered it."""

    async def counting(message: Message) -> None:
        if message["type"] == "http.response.start" and message["status"] == 401:
            limits.count("unauthorized", address)
        await send(message)

    return counting


def _media_type(headers: Headers) -> str:
    return headers.get("content-type", "").split(";", 1)[0].strip().lower()


def _refuse_headers(scope: Scope, admission: Admission | None) -> ProblemError | None:
    """The refusal the headers alone earn, before the body is read: the route's own header checks
    (a webhook's signature must be well formed), then an encoded body (415: it is read as sent, and
    a decoded size would not be the size limited), then a media type the route does not read
    (415, on API routes)."""
    headers = Headers(scope=scope)
    if admission is not None:
        try:
            for check in admission.checks:
                check(headers)
        except ProblemError as exc:
            return exc
    encoding = headers.get("content-encoding", "").strip().lower()
    if encoding not in ("", "identity"):
        shown = encoding[:40].encode("ascii", "replace").decode("ascii")
        return ProblemError(415, "Unsupported Media Type", f"the body is sent with Content-Encoding {shown!r}; send it unencoded (identity), within the body limit")
    has_body = headers.get("content-length", "0") not in ("", "0") or "transfer-encoding" in headers
    if admission is None or not has_body or not scope["path"].startswith(API) or admission.accepts(_media_type(headers)):
        return None
    assert admission.media_types is not None
    shown = _media_type(headers)[:80].encode("ascii", "replace").decode("ascii")
    accepted = ", ".join(sorted(admission.media_types))
    return ProblemError(415, "Unsupported Media Type", f"this endpoint reads a body of {accepted}, not {shown!r}; set Content-Type to one of them")


def _to_sign_in(scope: Scope) -> Any:
    """A redirect to the sign-in page that comes back to the page asked for (only a GET's)."""
    target = scope["path"] + (f"?{scope['query_string'].decode('latin-1')}" if scope.get("query_string") else "")
    location = "/ui/login" + (f"?{urlencode({'next': target})}" if scope["method"] == "GET" and target != UI else "")
    return RedirectResponse(location, status_code=303)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A `receive` that hands the route the body already read, then waits on the client as before."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
