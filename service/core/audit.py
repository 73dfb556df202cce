"""The audit trail: recording reads of item content, and listing events for review.

Changes are audited where they are made, in the same transaction. Reads of item content are
audited here, one event per response that served content: the token, the endpoint (method and
path), the item ids and their count, the time. An action that concerns the sealed slice names it
(`release.sealed_read`, `run.sealed_start`, `run.sealed_refused`, ...): `sealed` on an event and
the `sealed` filter of `GET /v1/audit` rely on that naming.

Release content (`/v1/evals/{name}/releases/{ref}/items` and `/export.jsonl`) is audited once
its answer succeeded, by `service.evals.read_audit`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from fastapi import Request
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from schemas.audit import AuditEvent, AuditEventRead, AuditPage
from schemas.common import read_model
from service.core.auth import Principal
from service.core.cursors import decode_id_cursor, encode_cursor
from service.core.db import write_session

SEALED_MARK = "sealed"
MAX_IDS_IN_EVENT = 10_000
CURSOR_KIND = "audit"


def is_sealed_action(action: str) -> bool:
    return SEALED_MARK in action


def record_read(
    engine: Engine, *, actor: str, action: str, endpoint: str, object_type: str, object_id: str | None, item_ids: Sequence[int], details: dict[str, Any] | None = None
) -> None:
    """Commit one audit event for a response that served the content of `item_ids` (none: no
    event). Written in its own transaction, so a read-only request still leaves its trace."""
    if not item_ids:
        return
    ids = sorted(set(item_ids))
    body: dict[str, Any] = {"endpoint": endpoint, "item_ids": ids[:MAX_IDS_IN_EVENT], **(details or {})}
    if len(ids) > MAX_IDS_IN_EVENT:
        body["item_ids_truncated"] = True
    with write_session(engine) as session:
        session.add(AuditEvent(actor=actor, action=action, object_type=object_type, object_id=object_id, count=len(ids), details=body))
        session.commit()


def audit_content_read(request: Request, principal: Principal, item_ids: Sequence[int], action: str = "item.read") -> None:
    """Audit a response that served the content of `item_ids` (none: nothing to audit), naming the
    endpoint by method and path."""
    endpoint = f"{request.method} {request.url.path}"
    record_read(request.app.state.engine, actor=principal.actor, action=action, endpoint=endpoint, object_type="item", object_id=None, item_ids=item_ids)


def list_events(
    *,
    session: Session,
    secret_key: str,
    actor: str | None = None,
    action: str | None = None,
    object_type: str | None = None,
    object_id: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    sealed_only: bool = False,
    limit: int = 100,
    cursor: str | None = None,
) -> AuditPage:
    """Events matching every filter given, newest first. `action` ending in `*` matches by prefix
    (`run.*`); `since` is inclusive, `until` exclusive."""
    query = select(AuditEvent)
    if actor is not None:
        query = query.where(AuditEvent.actor == actor)
    if action is not None:
        query = query.where(col(AuditEvent.action).startswith(action[:-1], autoescape=True) if action.endswith("*") else AuditEvent.action == action)
    if object_type is not None:
        query = query.where(AuditEvent.object_type == object_type)
    if object_id is not None:
        query = query.where(AuditEvent.object_id == object_id)
    if since is not None:
        query = query.where(col(AuditEvent.at) >= since)
    if until is not None:
        query = query.where(col(AuditEvent.at) < until)
    if sealed_only:
        query = query.where(col(AuditEvent.action).contains(SEALED_MARK, autoescape=True))
    if cursor:
        query = query.where(col(AuditEvent.id) < decode_id_cursor(cursor, CURSOR_KIND, secret_key=secret_key))
    rows = session.exec(query.order_by(col(AuditEvent.id).desc()).limit(limit + 1)).all()
    page = rows[:limit]
    next_cursor = encode_cursor(CURSOR_KIND, page[-1].id, secret_key=secret_key) if len(rows) > limit and page[-1].id is not None else None
    return AuditPage(events=[read_model(AuditEventRead, event, sealed=is_sealed_action(event.action)) for event in page], next_cursor=next_cursor)

