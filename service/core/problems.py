"""RFC 9457 problem details: one exception type for expected errors, the problem that answers a
decision curation refused, and the handlers that render every error (ours, FastAPI's,
validation, the database's races, unexpected) as `application/problem+json`.

Races are answered here, once for every route: a write that lost a race on a unique name (two
creations of one source, eval, model, endpoint at once) is 409 naming what conflicted, and a
write that could not get the database's lock in time (SQLite's "database is locked", a
PostgreSQL deadlock or serialization failure) is 503 with `Retry-After`: nothing was written, and
sending it again is safe. Neither is a 500. A request that found no free pooled connection within
GOLDENSET_DB_POOL_TIMEOUT is 503 with `Retry-After` as well. A decision the domain refused
(`curation.refusals.Refused`) is answered by one handler, with its status, detail and `reason`.
A request that needs the embedding model in an install without the `embeddings` extra is 503
naming the extra (`service.core.embedding_extra`)."""

from __future__ import annotations

import logging
import re
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException

from curation.refusals import Refused
from service.core.admission import api_routes
from service.core.embedding_extra import missing_embeddings

PROBLEM_MEDIA_TYPE = "application/problem+json"
BUSY_RETRY_AFTER_SECONDS = 1
POOL_RETRY_AFTER_SECONDS = 1
# SQLSTATEs of a PostgreSQL write that lost a race: unique and foreign-key violations (a conflict),
# serialization failures, deadlocks and lock timeouts (busy: try again).
_CONFLICT_STATES = ("23505", "23503")
_BUSY_STATES = ("40001", "40P01", "55P03")
_SQLITE_CONFLICT = re.compile(r"^(UNIQUE|FOREIGN KEY) constraint failed(?:: (?P<columns>[\w., ]+))?")
_SQLITE_BUSY = ("database is locked", "database table is locked")
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
    title = {403: "Forbidden", 404: "Not Found", 409: "Conflict"}.get(exc.status, "Invalid request")
    return ProblemError(exc.status, title, exc.detail, reason=exc.reason)


def database_problem(exc: IntegrityError | OperationalError) -> ProblemError | None:
    """The problem answering a write that lost a race (see the module docstring), or None for
    any other database error (a bug, or a lost connection: `service.core.disconnects`). Names the
    table and columns or constraint, never the values: they may be an item's text."""
    orig = exc.orig
    state = getattr(orig, "sqlstate", None)
    message = str(orig) if orig is not None else ""
    if isinstance(exc, IntegrityError):
        diag = getattr(orig, "diag", None)
        if state in _CONFLICT_STATES:
            table, constraint = getattr(diag, "table_name", None), getattr(diag, "constraint_name", None)
            what = f"{constraint} on {table}" if constraint and table else (constraint or table or "a unique constraint")
        elif (match := _SQLITE_CONFLICT.match(message)) is not None:
            what = match.group("columns") or f"a {match.group(1).lower()} constraint"
        else:
            return None
        detail = f"the request conflicts with a row another request stored first ({what}): read what is there now, or send the request again with another name"
        return ProblemError(409, "Conflict", detail, conflict=what)
    if state in _BUSY_STATES or any(busy in message for busy in _SQLITE_BUSY):
        detail = f"the database was busy with other writes and this one did not get its turn in time; nothing was written: send it again after {BUSY_RETRY_AFTER_SECONDS} s"
        return ProblemError(503, "Service Unavailable", detail, headers={"Retry-After": str(BUSY_RETRY_AFTER_SECONDS)})
    return None


def pool_saturated(method: str, path: str) -> JSONResponse:
    """The answer to a request that found no free pooled connection within GOLDENSET_DB_POOL_TIMEOUT
    (in its route or before it), logged: 503 with `Retry-After`, nothing done."""
    logger.warning("%s %s found no free database connection in time: answering 503", method, path)
    detail = f"every database connection of this process is in use; nothing was done: send the request again after {POOL_RETRY_AFTER_SECONDS} s"
    return problem_response(503, "Service Unavailable", detail, instance=path, headers={"Retry-After": str(POOL_RETRY_AFTER_SECONDS)})


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
    409: "Conflicts with an existing object (one stored first by a request racing this one included).",
    413: "The body is larger than the configured limit.",
    415: "The body is encoded (`Content-Encoding` other than identity) or of a media type the endpoint does not read; the problem names it.",
    422: "Invalid input; the problem names each bad record or field.",
    429: "Too many requests of a limited kind (sign-ins or 401 answers from one address, sealed matches of one token); retry after `Retry-After` seconds.",
    502: "The incident system answered with an error; the pull stopped (its state is on the source).",
    503: "Unavailable for now: the database is unreachable, its connection was lost mid-request, or it was too busy with other writes "
    "(send the request again after `Retry-After` seconds), or this process does not serve the operation (the problem says which).",
}


def problem_descriptions() -> dict[int, str]:
    """What each problem status means, for the OpenAPI document."""
    return dict(_PROBLEM_DESCRIPTIONS)


def _allowed_methods(request: Request) -> str | None:
    """Every method the app's routes take on the request's path (for a 405's `Allow`), or None when
    no route matches it. Routes are matched by the patterns the router matches them by; the HEAD
    that every GET route answers too is left out, as the OpenAPI document leaves it out."""
    methods: set[str] = set()
    for route in api_routes(request.app.router.routes):
        regex, taken = getattr(route, "path_regex", None), getattr(route, "methods", None)
        if regex is not None and taken and regex.fullmatch(request.url.path):
            methods.update(method for method in taken if method.lower() in HTTP_METHODS and method != "HEAD")
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
            detail = f"{request.method} is not taken by {request.url.path}; it takes {allowed}"
        return problem_response(exc.status_code, title, detail, instance=request.url.path, headers=headers or None)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [
            {"location": ".".join(str(part) for part in err.get("loc", ())), "reason": err.get("type", "invalid"), "detail": err.get("msg", "")}
            for err in exc.errors()
        ]
        summary = "; ".join(f"{err['location']}: {err['detail']}" for err in errors[:5])
        return problem_response(422, "Invalid request", summary, instance=request.url.path, errors=errors)

    async def _database(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, IntegrityError | OperationalError)
        problem = database_problem(exc)
        if problem is None:
            raise exc  # a lost connection (recovered outside) or a bug (500)
        logger.info("%s %s lost a race: %s", request.method, request.url.path, problem.title)
        return problem_response(problem.status, problem.title, problem.detail, instance=request.url.path, headers=problem.headers, **problem.extra)

    app.add_exception_handler(IntegrityError, _database)
    app.add_exception_handler(OperationalError, _database)

    @app.exception_handler(PoolTimeout)
    async def _saturated(request: Request, exc: PoolTimeout) -> JSONResponse:
        return pool_saturated(request.method, request.url.path)

    @app.exception_handler(Refused)
    async def _refused(request: Request, exc: Refused) -> JSONResponse:
        problem = refusal_problem(exc)
        return problem_response(problem.status, problem.title, problem.detail, instance=request.url.path, headers=problem.headers, **problem.extra)

    @app.exception_handler(ModuleNotFoundError)
    async def _without_embeddings(request: Request, exc: ModuleNotFoundError) -> JSONResponse:
        message = missing_embeddings(exc)
        if message is None:
            raise exc  # a bug (500)
        return problem_response(503, "Service Unavailable", message, instance=request.url.path)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        logger.exception("unhandled error", extra={"path": request.url.path})
        return problem_response(500, "Internal Server Error", "the server failed; the error is logged with this request's id", instance=request.url.path)
