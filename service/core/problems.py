"""RFC 9457 problem details: one exception type for expected errors, the problem that answers a
decision curation refused, and the handlers that render every error (ours, FastAPI's,
validation, unexpected) as `application/problem+json`."""

from __future__ import annotations

import logging
import re
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from curation.refusals import Refused

PROBLEM_MEDIA_TYPE = "application/problem+json"
HTTP_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
logger = logging.getLogger("goldenset.errors")


class ProblemError(Exception):
    """An error the client can act on. `extra` members are added to the problem document."""

    def __init__(self, status: int, title: str, detail: str, *, headers: dict[str, str] | None = None, **extra: Any) -> None:
        super().__init__(detail)
        self.status = status
        self.title = title
        self.detail = detail
        self.headers = headers
        self.extra = extra


def refusal_problem(exc: Refused) -> ProblemError:
    """A decision curation refused (a review, a ruling on dedup), as the problem answering it: its
    status, its detail and its machine-readable `reason`."""
    title = {404: "Not Found", 409: "Conflict"}.get(exc.status, "Invalid request")
    return ProblemError(exc.status, title, exc.detail, reason=exc.reason)


def problem_response(status: int, title: str, detail: str | None, *, instance: str | None = None, headers: dict[str, str] | None = None, **extra: Any) -> JSONResponse:
    """A problem+json response."""
    body: dict[str, Any] = {"type": "about:blank", "title": title, "status": status}
    if detail is not None:
        body["detail"] = detail
    if instance is not None:
        body["instance"] = instance
    body.update(extra)
    return JSONResponse(body, status_code=status, headers=headers, media_type=PROBLEM_MEDIA_TYPE)


_PROBLEM_DESCRIPTIONS = {
    400: "The body cannot be read (not UTF-8, not JSON, not an array).",
    405: "The path does not take this method; `Allow` names those it takes.",
    401: "Missing, unknown, revoked or expired bearer token, or a bad webhook signature.",
    403: "The token lacks the scope this endpoint needs.",
    404: "Not found.",
    409: "Conflicts with an existing object.",
    413: "The body is larger than the configured limit.",
    422: "Invalid input; the problem names each bad record or field.",
    502: "The incident system answered with an error; the pull stopped (its state is on the source).",
    503: "Unavailable for now: the database is unreachable or its connection was lost mid-request (send the request again after `Retry-After` seconds), "
    "or this process does not serve the operation (the problem says which).",
}


def problem_descriptions() -> dict[int, str]:
    """What each problem status means, for the OpenAPI document."""
    return dict(_PROBLEM_DESCRIPTIONS)


def _allowed_methods(request: Request) -> str | None:
    """Every method the app's OpenAPI document gives the request's path (for a 405's `Allow`), or
    None when no documented path matches it."""
    methods: set[str] = set()
    for template, operations in request.app.openapi().get("paths", {}).items():
        if re.fullmatch(re.sub(r"\\{[^}]+\\}", "[^/]+", re.escape(template)), request.url.path):
            methods.update(method.upper() for method in operations if method in HTTP_METHODS)
    return ", ".join(sorted(methods)) or None


def problem_doc(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` entries for the problem codes a route can answer with."""
    schema = {"$ref": "#/components/schemas/Problem"}
    return {code: {"description": _PROBLEM_DESCRIPTIONS.get(code, "Error."), "content": {PROBLEM_MEDIA_TYPE: {"schema": schema}}} for code in codes}


def install_problem_handlers(app: FastAPI) -> None:
    """Render every error of `app` as problem+json."""

    @app.exception_handler(ProblemError)
    async def _problem(request: Request, exc: ProblemError) -> JSONResponse:
        return problem_response(exc.status, exc.title, exc.detail, instance=request.url.path, headers=exc.headers, **exc.extra)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        detail = exc.detail if isinstance(exc.detail, str) else None
        title = {400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed"}.get(exc.status_code, "HTTP error")
        headers = dict(exc.headers) if exc.headers else {}
        if exc.status_code == 405 and (allowed := _allowed_methods(request)) is not None:
            headers["Allow"] = allowed
        return problem_response(exc.status_code, title, detail, instance=request.url.path, headers=headers or None)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [
            {"location": ".".join(str(part) for part in err.get("loc", ())), "reason": err.get("type", "invalid"), "detail": err.get("msg", "")}
            for err in exc.errors()
        ]
        summary = "; ".join(f"{err['location']}: {err['detail']}" for err in errors[:5])
        return problem_response(422, "Invalid request", summary, instance=request.url.path, errors=errors)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        logger.exception("unhandled error", extra={"path": request.url.path})
        return problem_response(500, "Internal Server Error", "the server failed; the error is logged with this request's id", instance=request.url.path)
