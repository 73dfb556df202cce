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
from starlette.requests import Request
from starlette.responses import RedirectResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.core.auth import authenticate
from service.core.problems import ProblemError, problem_response
from service.core.sessions import COOKIE, signed_in
from service.core.settings import Settings

MAX_DEPTH = 32
"""Nesting deeper than this in a request body is refused: no request model goes beyond a few levels."""
PUBLIC = {("GET", "/healthz"), ("GET", "/"), ("HEAD", "/")}
UI = "/ui"
UI_PUBLIC = ("/ui/login", "/ui/static/")
DOCS = ("/docs", "/docs/oauth2-redirect", "/redoc", "/openapi.json")
DOC_ASSETS = "/docs/static/"
WEBHOOK = re.compile(r"^/v1/sources/[^/]+/webhook$")
RECORD_BATCHES = (re.compile(r"^/v1/sources/[^/]+/items$"), WEBHOOK)
JSON_TYPES = re.compile(r"^(application/json|application/[\w.+-]+\+json)?$")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


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

    def _is_public(self, method: str, path: str) -> bool:
        if self.public_doc_assets and method in ("GET", "HEAD") and path.startswith(DOC_ASSETS):
            return True
        return (method, path) in self.public or (method == "POST" and WEBHOOK.match(path) is not None)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        method, path = scope["method"], scope["path"]
        if path == UI or path.startswith(UI + "/"):
            if not path.startswith(UI_PUBLIC) and not await self._signed_in(scope):
                await _to_sign_in(scope)(scope, receive, send)
                return
        elif not self._is_public(method, path):
            try:
                await run_in_threadpool(authenticate, Request(scope))
            except ProblemError as exc:
                await problem_response(exc.status, exc.title, exc.detail, instance=path, headers=exc.headers)(scope, receive, send)
                return
        if "\x00" in path:
            await _invalid("path", "contains a NUL character", path)(scope, receive, send)
            return
        for name, value in parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True):
            if "\x00" in name or "\x00" in value:
                await _invalid(f"query.{name.replace(chr(0), '')}", "contains a NUL character", path)(scope, receive, send)
                return
        declared = dict(scope.get("headers", [])).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.max_body_bytes:
            await self._too_large(scope, receive, send)
            return
        body = await self._read_body(receive)
        if body is None:
            await self._too_large(scope, receive, send)
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
        return True

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        detail = f"the body is larger than the limit of {self.max_body_bytes} bytes; split it into smaller batches"
        await problem_response(413, "Payload Too Large", detail, instance=scope["path"])(scope, receive, send)

    async def _read_body(self, receive: Receive) -> bytes | None:
        """The whole body, or None as soon as it grows past the limit (the rest is never read)."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return b"".join(chunks)
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
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
            document = json.loads(body, parse_constant=_refuse_constant)
        except _NotJSONValue as exc:
            return _invalid("body", str(exc), path)
        except RecursionError:
            return _invalid("body", f"is nested deeper than {MAX_DEPTH} levels", path)
        except ValueError:
            return None  # not JSON at all: the route's own validation says so
        for location, reason in _flaws(document):
            return _invalid(location, reason, path)
        return None


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
