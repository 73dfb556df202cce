"""Dependencies shared by the routers: database sessions, settings, the secret key, metrics, bounded
request bodies."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Annotated

from fastapi import Depends, Path, Request
from sqlalchemy.exc import DBAPIError
from sqlmodel import Session

from schemas.common import MAX_ROW_ID
from service.core.audit import record_reads
from service.core.db import write_session
from service.core.disconnects import connection_lost
from service.core.metrics import Metrics
from service.core.problems import ProblemError
from service.core.settings import Settings

logger = logging.getLogger("goldenset.database")


def get_session(request: Request) -> Iterator[Session]:
    """The request's session for reads: one connection at most, returned to the pool as soon as
    the route function returns (before the answer is sent), with the transaction rolled back.
    Content reads the route audits are written after that (`service.core.audit.audit_content_read`),
    so no request holds two pooled connections."""
    yield from _unit_of_work(request, Session(request.app.state.engine, expire_on_commit=False), commit=False)


def get_write_session(request: Request) -> Iterator[Session]:
    """The request's session for reads and writes (SQLite: BEGIN IMMEDIATE): one unit of work,
    committed when the route function returns and rolled back when it raises; its connection is
    returned to the pool before the answer is sent, and audited reads are written after that."""
    yield from _unit_of_work(request, write_session(request.app.state.engine), commit=True)


def _unit_of_work(request: Request, session: Session, *, commit: bool) -> Iterator[Session]:
    """Hand `session` to the route; when it returns, commit (`commit`) or end the read, return the
    connection, write the reads it audited, then run what waits for the commit (`after_commit`).
    When the route raises (a refusal included), roll back: nothing it wrote stays."""
    pending = request.state.pending_reads = []
    waiting = request.state.after_commit = []
    try:
        yield session
        if commit:
            session.commit()
    finally:
        _close(session)
        request.state.pending_reads = request.state.after_commit = None
    record_reads(request.app.state.engine, pending)
    for task in waiting:
        task()


def after_commit(request: Request, task: Callable[[], object]) -> None:
    """Run `task` once the request's unit of work committed (at once outside one): work that must
    see what the request wrote, such as waking background curation."""
    waiting: list[Callable[[], object]] | None = getattr(request.state, "after_commit", None)
    if waiting is None:
        task()
    else:
        waiting.append(task)


def hand_back_connection(session: Session) -> None:
    """End the request session's transaction (without expiring what it loaded) so that its
    connection returns to the pool, before work that opens a connection of its own: a request never
    holds two. The session begins a new transaction, on a connection from the pool, if used again."""
    session.commit()


def _close(session: Session) -> None:
    """Close a request's session once its answer is made. A database connection lost by then is
    left to the pool to replace: the request's work was committed or failed already (and its
    error, if any, is on its way), so the rollback that closing attempts has nothing to undo."""
    try:
        session.close()
    except DBAPIError as exc:
        if not connection_lost(exc):
            raise
        logger.info("a request's database connection was lost after its answer was made (%s); the pool replaces it", type(exc).__name__)


def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def get_secret_key(request: Request) -> str:
    """The server's secret key: it decrypts secrets at rest, and with each eval's seal key decides
    which items are sealed."""
    key: str = request.app.state.settings.secret_key.get_secret_value()
    return key


def get_metrics(request: Request) -> Metrics:
    metrics: Metrics = request.app.state.metrics
    return metrics


SessionDep = Annotated[Session, Depends(get_session, scope="function")]
WriteSessionDep = Annotated[Session, Depends(get_write_session, scope="function")]
SettingsDep = Annotated[Settings, Depends(get_settings)]
MetricsDep = Annotated[Metrics, Depends(get_metrics)]
SecretKeyDep = Annotated[str, Depends(get_secret_key)]
IdPath = Annotated[int, Path(ge=1, le=MAX_ROW_ID, description="A row id (1 to 2147483647).")]


async def read_limited_body(request: Request) -> bytes:
    """The raw body, refusing (413) one larger than GOLDENSET_MAX_BODY_BYTES before reading it all."""
    limit: int = request.app.state.settings.max_body_bytes
    too_large = ProblemError(413, "Payload Too Large", f"the body is larger than the limit of {limit} bytes; split it into smaller batches")
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise too_large
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_large
        chunks.append(chunk)
    return b"".join(chunks)


BodyDep = Annotated[bytes, Depends(read_limited_body)]
