"""How a web UI request shows what was refused, in one place.

A page's route writes through the request's unit of work (`service.core.deps.WriteSessionDep`:
committed when the route returns, rolled back when it raises), exactly as the API's routes do, and
never catches a refusal. A decision the domain refuses (`curation.refusals.Refused`) or a request
the service refuses (`service.core.problems.ProblemError`) leaves the route as an exception: the
unit of work rolls back everything the route wrote, and then the handlers installed here answer.

What a person sees depends on where they pressed: the item page with the error beside its form,
the edit form with their text kept, a redirect back to the queue with a notice, the sign-in form.
So a route that takes a decision says first how its page shows a refusal (`shows_refusal`), and
the handler runs that answer (in a worker thread: an answer may read the database, after the
write was rolled back). Without one, and for every other error of a `/ui` request (the UI's own
`UiRefused`, a 404, invalid values in a form or address), the answer is the error page with the
refusal's status. Requests outside `/ui` are answered as the API answers them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from curation.refusals import Refused
from service.core.problems import ProblemError, refusal_problem
from service.ui.pages import UiRefused, refusal_page

ANSWER = "ui_refusal_answer"
"""Where a request keeps the answer its route gave (`shows_refusal`), on `request.state`."""


@dataclass(frozen=True)
class Refusal:
    """What was refused, as a page tells it: the HTTP status, a title, the detail saying what to do,
    and the machine-readable reason (None when the service gave none)."""

    status: int
    title: str
    detail: str
    reason: str | None

    @classmethod
    def of(cls, exc: Refused | ProblemError) -> Refusal:
        problem = refusal_problem(exc) if isinstance(exc, Refused) else exc
        reason = problem.extra.get("reason")
        return cls(problem.status, problem.title, problem.detail, reason if isinstance(reason, str) else None)


Answer = Callable[[Refusal], Response]


def shows_refusal(request: Request, answer: Answer) -> None:
    """Say how this request's page shows a refusal raised from here on: `answer(refusal)` is the
    response, made once the request's unit of work has rolled back."""
    setattr(request.state, ANSWER, answer)


async def _answer(request: Request, exc: Refused | ProblemError) -> Response:
    refusal = Refusal.of(exc)
    answer: Answer | None = getattr(request.state, ANSWER, None)
    if answer is None:
        return refusal_page(request, UiRefused(refusal.status, refusal.title, refusal.detail))
    return await run_in_threadpool(answer, refusal)


def _error_page(request: Request, exc: Exception) -> Response:
    """The error page of a `/ui` request that failed before or outside a decision."""
    if isinstance(exc, RequestValidationError):
        wrong = "; ".join(f"{'.'.join(str(part) for part in error.get('loc', ())[1:])}: {error.get('msg', '')}" for error in exc.errors()[:5])
        refused = UiRefused(422, "Not understood", f"Some values in the address or form are not valid ({wrong}). Go back and correct them.")
    elif isinstance(exc, StarletteHTTPException) and exc.status_code == 404:
        refused = UiRefused(404, "Not found", "There is no such page. Use the menu above.")
    else:
        assert isinstance(exc, StarletteHTTPException)
        refused = UiRefused(exc.status_code, "Not possible", str(exc.detail))
    return refusal_page(request, refused)


def install_refusal_pages(app: FastAPI) -> None:
    """Answer refusals and errors of `/ui` requests with pages (see the module); the API's handlers
    (`service.core.problems.install_problem_handlers`, installed first) keep answering the rest."""

    async def ui_refused(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, UiRefused)
        return refusal_page(request, exc)

    app.add_exception_handler(UiRefused, ui_refused)
    for kind in (Refused, ProblemError, RequestValidationError, StarletteHTTPException):
        _as_page_under_ui(app, kind)


def _as_page_under_ui(app: FastAPI, kind: type[Exception]) -> None:
    """Answer `kind` errors of `/ui` requests with a page; elsewhere as the app already does."""
    api_handler = app.exception_handlers[kind]

    async def handler(request: Request, exc: Exception) -> Response:
        if not request.url.path.startswith("/ui"):
            answer: Response = await api_handler(request, exc)  # type: ignore[misc]
            return answer
        if isinstance(exc, Refused | ProblemError):
            return await _answer(request, exc)
        return _error_page(request, exc)

    app.add_exception_handler(kind, handler)
