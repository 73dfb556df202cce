"""Auditing reads of release content: every successful answer of the release items and export
routes (dev and sealed) leaves one audit event naming the token, the endpoint, the release and the
item ids served. A middleware records it once the answer succeeded (an export streams after its
handler returns), from the same rows the route served.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi import FastAPI, Request, Response
from fastapi.concurrency import run_in_threadpool
from pydantic import TypeAdapter
from sqlalchemy.engine import Engine
from sqlmodel import Session

from schemas.common import Instant
from schemas.evals import Split
from service.core.audit import record_read
from service.core.problems import ProblemError
from service.evals.definitions import get_eval
from service.evals.releases import release_rows, resolve_release

RELEASE_CONTENT_ROUTES = {
    "/v1/evals/{name}/releases/{ref}/items": "items",
    "/v1/evals/{name}/releases/{ref}/export.jsonl": "export",
}


def _served(engine: Engine, name: str, ref: str, split: Split, occurred_after: str | None) -> tuple[str, list[int]]:
    """The release number and the item ids the route served (it answered 200, so its parameters parse)."""
    with Session(engine) as session:
        evaluation = get_eval(session=session, name=name)
        if evaluation is None:
            return ref, []
        try:
            release = resolve_release(session=session, evaluation=evaluation, ref=ref)
        except ProblemError:
            return ref, []
        after = TypeAdapter(Instant).validate_python(occurred_after) if occurred_after else None
        return str(release.number), [row.item_id for row in release_rows(session=session, release=release, split=split, occurred_after=after)]


def _audit(engine: Engine, request: Request, kind: str) -> None:
    principal = getattr(request.state, "principal", None)
    params = request.scope.get("path_params", {})
    if principal is None:
        return
    split = Split(request.query_params.get("split", Split.DEV.value))
    number, ids = _served(engine, params["name"], params["ref"], split, request.query_params.get("occurred_after"))
    sealed = split is Split.SEALED
    record_read(
        engine,
        actor=principal.actor,
        action=f"release.{'sealed_' if sealed else ''}{'items_read' if kind == 'items' else 'export'}",
        endpoint=f"{request.method} {request.url.path}",
        object_type="release",
        object_id=f"{params['name']}/{number}",
        item_ids=ids,
        details={"split": split.value},
    )


def install_release_read_audit(app: FastAPI) -> None:
    """Audit every successful answer of the release content routes of `app`."""

    @app.middleware("http")
    async def audit_release_reads(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        response = await call_next(request)
        route = request.scope.get("route")
        kind = RELEASE_CONTENT_ROUTES.get(getattr(route, "path", ""))
        if kind is not None and request.method == "GET" and response.status_code == 200:
            await run_in_threadpool(_audit, request.app.state.engine, request, kind)
        return response
