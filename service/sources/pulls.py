"""Pulling a source now: one at a time per source, its state recorded for `GET /v1/sources/{name}`."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import datetime
from functools import partial

import httpx
from sqlalchemy.engine import Engine
from sqlmodel import Session

from curation.refusals import Refused
from ingest.connectors.base import AuthError, ConfigError, ConnectorContext, ConnectorError, RetryPolicy
from ingest.connectors.registry import UnknownConnector, connector_class
from ingest.mapping import CompiledMapping, MappingError
from ingest.pull import PullProgress, run_pull
from schemas.audit import AuditAction, AuditEvent
from schemas.common import utcnow
from schemas.problem import IngestSummary
from schemas.source import Source, SourceStatus
from service.core.db import write_transaction
from service.core.locks import LockBusy, exclusive
from service.core.tracing import annotate, traced
from service.sources.definitions import PLAIN_KINDS, connector_config, get_source, source_mapping

logger = logging.getLogger("goldenset.pulls")
HTTP_TIMEOUT = httpx.Timeout(30.0, connect=10.0)
ERROR_TEXT_LIMIT = 2000


class PullRefused(Refused):
    """The pull cannot start: `not_found` (404) for an unknown source; `not_a_connector`,
    `disabled`, `already_running` or `bad_settings` (409) for a source that cannot be pulled now.
    The API answers it as problem+json and the CLI with exit 2 (404) or 3 (409), through their
    shared handlers of refusals."""

    def __init__(self, reason: str, detail: str, status: int = 409) -> None:
        super().__init__(reason, detail, status)


def _record_state(session: Session, source_id: int, status: SourceStatus, *, error: str | None, started: datetime) -> None:
    """Record how the pull that started at `started` ended on the stored source."""
    source = session.get_one(Source, source_id)
    source.status = status.value
    source.last_error = error[:ERROR_TEXT_LIMIT] if error else None
    if status == SourceStatus.OK:
        source.last_success_at = started
    session.add(source)


@traced("goldenset.pull")
def pull_source(
    *,
    engine: Engine,
    name: str,
    secret_key: str,
    actor: str,
    client: httpx.Client | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], datetime] = utcnow,
    retry: RetryPolicy | None = None,
    on_page: Callable[[PullProgress], None] | None = None,
) -> IngestSummary:
    """Pull the source called `name` from its cursor until its system has nothing newer.

    Raises `PullRefused` before doing anything, or the connector's error after recording it on
    the source (`auth_failed` for refused credentials, `error` otherwise); every page stored
    before a failure stays stored with its cursor.
    """
    annotate(source=name)
    try:
        with exclusive(engine, f"pull:{name}"):
            summary = _pull_locked(engine=engine, name=name, secret_key=secret_key, actor=actor, client=client, sleep=sleep, clock=clock, retry=retry, on_page=on_page)
        annotate(new=summary.new, updated=summary.updated, rejected=summary.rejected)
        return summary
    except LockBusy as exc:
        raise PullRefused("already_running", f"a pull of source {name!r} is already running") from exc


def _start(session: Session, name: str, clock: Callable[[], datetime]) -> tuple[Source, datetime]:
    """The source called `name`, marked running, and when it started; `PullRefused` when it cannot be pulled."""
    source = get_source(session=session, name=name)
    if source is None:
        raise PullRefused("not_found", f"source {name!r} does not exist", 404)
    if source.kind in PLAIN_KINDS:
        raise PullRefused("not_a_connector", f"source {name!r} is a {source.kind} source; only connector sources are pulled")
    if not source.enabled:
        raise PullRefused("disabled", f"source {name!r} is disabled; enable it with `goldenset source configure {name} --enable` (API: PATCH /v1/sources/{name} enabled=true)")
    started = clock()
    source.status, source.last_run_at = SourceStatus.RUNNING.value, started
    session.add(source)
    return source, started


def _pull_locked(
    *,
    engine: Engine,
    name: str,
    secret_key: str,
    actor: str,
    client: httpx.Client | None,
    sleep: Callable[[float], None],
    clock: Callable[[], datetime],
    retry: RetryPolicy | None,
    on_page: Callable[[PullProgress], None] | None,
) -> IngestSummary:
    """Pull under the source's lock, in units of work of their own (`write_transaction`), on
    purpose: the source shows `running` while the pull goes, each page is stored with its cursor
    whatever happens to the next (`ingest.pull.run_pull`), and how the pull ended is recorded
    after a failed page was rolled back."""
    units = partial(write_transaction, engine)
    with units() as session:
        source, started = _start(session, name, clock)
    assert source.id is not None
    source_id = source.id

    def ended(status: SourceStatus, error: str) -> None:
        with units() as session:
            _record_state(session, source_id, status, error=error, started=started)

    try:
        connector_type = connector_class(source.kind)
        config = connector_config(source, secret_key=secret_key)
        mapping = CompiledMapping(source_mapping(source))
    except (UnknownConnector, ConfigError, MappingError, ValueError) as exc:
        ended(SourceStatus.ERROR, str(exc))
        raise PullRefused("bad_settings", str(exc)) from exc
    own_client = client is None
    http = client or httpx.Client(timeout=HTTP_TIMEOUT, follow_redirects=True, headers={"User-Agent": "goldenset"})
    try:
        connector = connector_type(config, ConnectorContext(client=http, clock=clock, sleep=sleep, retry=retry or RetryPolicy()))
        summary = run_pull(units=units, source=source, connector=connector, mapping=mapping, on_page=on_page)
    except AuthError as exc:
        ended(SourceStatus.AUTH_FAILED, str(exc))
        logger.warning("pull of %s stopped: %s", name, exc)
        raise
    except ConnectorError as exc:
        ended(SourceStatus.ERROR, str(exc))
        logger.warning("pull of %s failed: %s", name, exc)
        raise
    except Exception as exc:
        ended(SourceStatus.ERROR, f"internal error: {type(exc).__name__}: {exc}")
        logger.exception("pull of %s failed unexpectedly", name)
        raise
    finally:
        if own_client:
            http.close()
    with units() as session:
        _record_state(session, source_id, SourceStatus.OK, error=None, started=started)
        session.add(
            AuditEvent(
                actor=actor,
                action=AuditAction.SOURCE_PULL,
                object_type="source",
                object_id=name,
                count=summary.new + summary.updated,
                details=summary.counts(),
            )
        )
    logger.info("pulled %s: %s new, %s updated, %s rejected", name, summary.new, summary.updated, summary.rejected)
    return summary


def pull_running(engine: Engine, name: str) -> bool:
    """Whether a pull of `name` holds its lock right now (in any process)."""
    try:
        with exclusive(engine, f"pull:{name}"):
            return False
    except LockBusy:
        return True


def source_status(engine: Engine, name: str) -> dict[str, object]:
    """The pull state of a source as stored now, for error answers."""
    with Session(engine) as session:
        source = get_source(session=session, name=name)
        if source is None:
            return {}
        return {"status": source.status, "last_error": source.last_error, "cursor": source.cursor}
