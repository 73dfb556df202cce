"""The errors a call raises: one class per kind of refusal, each carrying the server's problem
document (RFC 9457 `application/problem+json`: `title`, `detail`, `status`, and members such as
`condition`, `reason`, `errors`, `summary`).

    GoldensetError            any refusal; `.status`, `.title`, `.detail`, `.reason`, `.problem`
    ├── Unauthorized          401: no token, or an unknown, revoked or expired one
    ├── Forbidden             403: a scope is missing, or a gate refused (`.condition`)
    ├── NotFound              404
    ├── Conflict              409
    ├── InvalidRequest        422: the request or some of its records were refused (`.errors`)
    ├── RateLimited           429 after the retries (`.retry_after`: seconds the server asked for)
    ├── ServerError           5xx after the retries
    └── GoldensetUnavailable  no answer at all after the retries (status 0; `__cause__` is the
                              last transport error)

Any other status (400, 413, ...) raises `GoldensetError` itself.
"""

from __future__ import annotations

from typing import Any

import httpx

__all__ = [
    "Conflict",
    "Forbidden",
    "GoldensetError",
    "GoldensetUnavailable",
    "InvalidRequest",
    "NotFound",
    "RateLimited",
    "ServerError",
    "Unauthorized",
    "error_for",
]


class GoldensetError(Exception):
    """The API refused a request: its `status` and the problem document (`problem`), with its
    `title` and `detail` (empty strings when the server sent none)."""

    def __init__(self, status: int, problem: dict[str, Any]) -> None:
        self.status = status
        self.problem = problem
        self.title = str(problem.get("title") or "")
        self.detail = str(problem.get("detail") or "")
        super().__init__(f"{status} {self.title}: {self.detail}" if self.detail else f"{status} {self.title}")

    @property
    def reason(self) -> str | None:
        """The problem's machine-readable `reason` where it has one (a refused decision:
        `already_voted`, `not_assigned`, `team_review`, ...), else None."""
        value = self.problem.get("reason")
        return None if value is None else str(value)


class Unauthorized(GoldensetError):
    """401: the token is missing, unknown, revoked or expired (`detail` says which)."""


class Forbidden(GoldensetError):
    """403: the token lacks a scope, or a gate refused the request. `condition` names the gate's
    reason where there is one (`sealed_scope`, `trains_on_inputs`, `terms_unknown`,
    `terms_unchecked`, `terms_stale`, `sealed_budget`, `augmented_endpoint`), else None."""

    @property
    def condition(self) -> str | None:
        value = self.problem.get("condition")
        return None if value is None else str(value)


class NotFound(GoldensetError):
    """404: the eval, item, run, release or other object named does not exist."""


class Conflict(GoldensetError):
    """409: the request clashes with the current state (already exists, already decided, ...)."""


class InvalidRequest(GoldensetError):
    """422: the request was refused as invalid. For a pushed batch, `errors` names each bad record
    (`position`, `reason`, `detail`) and the problem's `summary` counts what was stored."""

    @property
    def errors(self) -> list[dict[str, Any]]:
        value = self.problem.get("errors")
        return [entry for entry in value if isinstance(entry, dict)] if isinstance(value, list) else []


class RateLimited(GoldensetError):
    """429 once the retries are used up (or when the server asked to wait longer than the
    client's `max_backoff`). `retry_after`: the seconds it asked for, or None."""

    def __init__(self, status: int, problem: dict[str, Any], retry_after: float | None = None) -> None:
        super().__init__(status, problem)
        self.retry_after = retry_after


class ServerError(GoldensetError):
    """A 5xx answer once the retries are used up."""


class GoldensetUnavailable(GoldensetError):
    """No answer: every attempt failed to connect, timed out or lost its connection. `status` is
    0 and `problem` a local document naming the last failure (also in `__cause__`)."""

    def __init__(self, error: httpx.TransportError, attempts: int) -> None:
        detail = f"no answer after {attempts} attempt(s): {type(error).__name__}: {error}"
        super().__init__(0, {"title": "Unavailable", "detail": detail})


_BY_STATUS: dict[int, type[GoldensetError]] = {401: Unauthorized, 403: Forbidden, 404: NotFound, 409: Conflict, 422: InvalidRequest}


def problem_of(response: httpx.Response) -> dict[str, Any]:
    """The problem document of a refused `response`; a body that is not a JSON object becomes
    `{"title": <reason phrase>, "detail": <the start of the body>}`."""
    try:
        problem = response.json()
    except ValueError:
        return {"title": response.reason_phrase, "status": response.status_code, "detail": response.text[:500]}
    return problem if isinstance(problem, dict) else {"title": response.reason_phrase, "status": response.status_code, "detail": str(problem)[:500]}


def error_for(response: httpx.Response, retry_after: float | None = None) -> GoldensetError:
    """The error to raise for a refused (non-2xx) `response`, of the class its status names.
    `retry_after` goes to a `RateLimited`. The response body must have been read."""
    status = response.status_code
    problem = problem_of(response)
    if status == 429:
        return RateLimited(status, problem, retry_after)
    if status >= 500:
        return ServerError(status, problem)
    return _BY_STATUS.get(status, GoldensetError)(status, problem)
