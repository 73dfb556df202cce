"""Where a command works: on the configured database, or against a running goldenset over its API
(`--url`/`--token`, GOLDENSET_URL/GOLDENSET_TOKEN), through the `goldenset_client` package.

A command with a remote mode asks `remote_client()`; it is None when no URL was given. A refused
request ends the command with the problem's detail and the exit status of the CLI's contract
(`service.core.terminal`): 404 and 422 → 2, 401 and 403 → 4 (a spent sealed budget → 7),
409 → 3, an unreachable service or a 5xx → 5. A problem whose `reason` the contract knows takes
that reason's status instead (`service.core.terminal.REASON_EXITS`), so a command exits alike on the database and over
the API: `busy` (another process held the lock too long) → 6, `cannot_refresh` → 2.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import typer
from pydantic import BaseModel
from sqlmodel import Session

if TYPE_CHECKING:
    from goldenset_client import Client, GoldensetError

Shown = TypeVar("Shown", bound=BaseModel)


@dataclass
class Target:
    """The API the command line was pointed at, if any."""

    url: str | None = None
    token: str | None = None


TARGET = Target()


def set_target(url: str | None, token: str | None) -> None:
    """Record `--url`/`--token` (or their variables) for the commands of this invocation."""
    TARGET.url = url.rstrip("/") if url else None
    TARGET.token = token or None


def is_remote() -> bool:
    """Whether commands work over the API."""
    return TARGET.url is not None


@contextmanager
def remote_client() -> Iterator[Client | None]:
    """A client of the API given by `--url` (None when working on the database); a missing token
    ends the command (exit 2), and a refused request ends it as `remote_failure` says."""
    if TARGET.url is None:
        yield None
        return
    from goldenset_client import Client, GoldensetError

    from service.core.terminal import fail

    if not TARGET.token:
        raise fail(f"--url {TARGET.url} needs a token: give --token or set GOLDENSET_TOKEN (create one with `goldenset token create` where the database is)")
    with Client(TARGET.url, token=TARGET.token) as client:
        try:
            yield client
        except GoldensetError as exc:
            raise remote_failure(exc) from None


def read_here_or_there(over_api: Callable[[Client], BaseModel], on_database: Callable[[Session], Shown], shape: type[Shown]) -> Shown:
    """What a read-only command shows: over the API when `--url` is given (the client's answer read
    into `shape`, the service's own model, so both ways print alike), else on the database, where a
    refusal (`ProblemError`) ends the command with its detail (exit 2)."""
    with remote_client() as client:
        if client is not None:
            return shape.model_validate(over_api(client).model_dump(mode="json"))
    from service.core.problems import ProblemError
    from service.core.terminal import fail, open_engine

    with Session(open_engine()) as session:
        try:
            return on_database(session)
        except ProblemError as exc:
            raise fail(exc.detail) from exc


def remote_failure(exc: GoldensetError) -> typer.Exit:
    """The exit for a refused request, after printing its detail."""
    from service.core.terminal import EXIT_BUDGET, EXIT_FAILED, EXIT_REFUSED, EXIT_REJECTED, EXIT_USAGE, REASON_EXITS, fail

    condition = exc.problem.get("condition")
    reason = exc.problem.get("reason")
    if isinstance(reason, str) and reason in REASON_EXITS:
        code = REASON_EXITS[reason]
    elif exc.status in (401, 403):
        code = EXIT_BUDGET if condition == "sealed_budget" else EXIT_REFUSED
    elif exc.status == 409:
        code = EXIT_REJECTED
    elif exc.status in (400, 404, 413, 422):
        code = EXIT_USAGE
    else:
        code = EXIT_FAILED
    where = f" ({TARGET.url})" if exc.status == 0 or exc.status >= 500 else ""
    from rich.markup import escape

    text = escape(exc.detail or exc.title or str(exc))
    return fail(f"{text}{where}" + (f" (condition: {condition})" if condition else ""), code)
