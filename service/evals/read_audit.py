"""Auditing reads of release content: every successful answer of the release items and export
routes (dev and sealed) leaves one audit event naming the token, the endpoint, the release and the
item ids served. A middleware records it once the route answered 200 and before the answer's
body is sent, from the same rows the route served: the ids the route left in
`request.state.release_read` when it had them (a finished answer), else read again (an export
streamed for the first time).
"""

from __future__ import annotations

import asyncio

from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from pydantic import TypeAdapter
from sqlalchemy.engine import Engine
from sqlmodel import Session
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from schemas.audit import AuditAction
from schemas.common import Instant
from schemas.evals import Split
from service.core.audit import ContentRead, record_reads
from service.core.problems import ProblemError
from service.evals.content_cache import CachedContent
from service.evals.definitions import get_eval
from service.evals.releases import release_rows, resolve_release

_ACTIONS = {
    (False, "items"): AuditAction.RELEASE_ITEMS_READ,
    (False, "export"): AuditAction.RELEASE_EXPORT,
    (True, "items"): AuditAction.RELEASE_SEALED_ITEMS_READ,
    (True, "export"): AuditAction.RELEASE_SEALED_EXPORT,
}
"""The action auditing a read of a release's content, by (sealed split, route kind)."""

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


def _read_of(engine: Engine, request: Request, kind: str) -> ContentRead | None:
    """The read to audit for a 200 answer of a content route (None without a principal); the ids
    are those the route left in `request.state.release_read`, else read again (a query)."""
    principal = getattr(request.state, "principal", None)
    params = request.scope.get("path_params", {})
    if principal is None:
        return None
    split = Split(request.query_params.get("split", Split.DEV.value))
    content: CachedContent | None = getattr(request.state, "release_read", None)
    if content is not None:
        number, ids = str(content.release_number), list(content.item_ids)
    else:
        number, ids = _served(engine, params["name"], params["ref"], split, request.query_params.get("occurred_after"))
    sealed = split is Split.SEALED
    return ContentRead(
        actor=principal.actor,
        action=_ACTIONS[(sealed, kind)],
        endpoint=f"{request.method} {request.url.path}",
        object_type="release",
        object_id=f"{params['name']}/{number}",
        item_ids=ids,
        details={"split": split.value},
    )


class GroupCommit:
    """Audit events of concurrent reads committed together: each caller of `record` waits until a
    transaction holding its event committed (or raises what made it fail). While one transaction
    runs, the events that arrive wait and go into the next one, so a busy process writes one
    transaction per batch of reads instead of one per read, and a quiet one adds no delay."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pending: list[tuple[ContentRead, asyncio.Future[None]]] = []
        self._writer: asyncio.Task[None] | None = None

    async def record(self, read: ContentRead) -> None:
        """Return once `read`'s event is committed."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # a new event loop (tests start one per client): start afresh
            self._loop, self._pending, self._writer = loop, [], None
        done: asyncio.Future[None] = loop.create_future()
        self._pending.append((read, done))
        if self._writer is None or self._writer.done():
            self._writer = loop.create_task(self._write_pending())
        await done

    async def _write_pending(self) -> None:
        while self._pending:
            batch, self._pending = self._pending, []
            try:
                await run_in_threadpool(record_reads, self.engine, [read for read, _ in batch])
            except Exception as exc:  # every request of the batch fails with it
                for _, done in batch:
                    if not done.done():
                        done.set_exception(exc)
            else:
                for _, done in batch:
                    if not done.done():
                        done.set_result(None)


class ReleaseReadAudit:
    """Audit every successful (200) GET of the release content routes before its body leaves: the
    event is committed when the route has answered and before the answer's first byte is sent, so
    content is never served without its trace (a failed audit fails the request instead). Events
    of concurrent reads share transactions (`GroupCommit`)."""

    def __init__(self, app: ASGIApp, *, engine: Engine) -> None:
        self.app = app
        self.group_commit = GroupCommit(engine)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "GET":
            await self.app(scope, receive, send)
            return

        async def send_after_audit(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] == 200:
                kind = RELEASE_CONTENT_ROUTES.get(getattr(scope.get("route"), "path", ""))
                if kind is not None:
                    request = Request(scope)
                    if getattr(request.state, "release_read", None) is not None:
                        read = _read_of(self.group_commit.engine, request, kind)
                    else:
                        read = await run_in_threadpool(_read_of, self.group_commit.engine, request, kind)
                    if read is not None:
                        await self.group_commit.record(read)
            await send(message)

        await self.app(scope, receive, send_after_audit)


def install_release_read_audit(app: FastAPI) -> None:
    """Audit every successful answer of the release content routes of `app` (`ReleaseReadAudit`)."""
    app.add_middleware(ReleaseReadAudit, engine=app.state.engine)
