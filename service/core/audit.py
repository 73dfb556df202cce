"""The audit trail: recording reads of item content, and listing events for review.

Changes are audited where they are made, in the same transaction. Reads of item content are
audited here, one event per response that served content: the token, the endpoint (method and
path), the item ids and their count, the time. An action that concerns the sealed slice names it
(`release.sealed_read`, `run.sealed_start`, `run.sealed_refused`, ...): `sealed` on an event and
the `sealed` filter of `GET /v1/audit` rely on that naming.

Release content (`/v1/evals/{name}/releases/{ref}/items` and `/export.jsonl`) is audited once
its answer succeeded, by `service.evals.read_audit`.

Every event written while answering a request with a token records the token's id
(`token_id`, from `service.core.auth.acting_token_id`) beside the actor's name: names are
labels, and a name may be given again to a later token once the first is revoked or expired.
Filtering by actor (`token:<name>`) therefore finds every token that carried the name; filtering
by `token_id` finds one token.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from weakref import WeakKeyDictionary

from fastapi import Request
from sqlalchemy import ColumnElement, func, insert
from sqlalchemy import event as sqlalchemy_event
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection, Engine
from sqlmodel import Session, col, select

from schemas.audit import AuditAction, AuditEvent, AuditEventRead, AuditItemSet, AuditPage
from schemas.common import read_model, utcnow
from service.core.auth import Principal, acting_token_id
from service.core.cursors import decode_id_cursor, encode_cursor
from service.core.db import writer_engine

SEALED_MARK = "sealed"
MAX_IDS_IN_EVENT = 10_000
# A read of more items than this names a stored set (`AuditItemSet`) instead of listing them.
INLINE_IDS = 100
# Digests of sets this process stored, per engine (forgotten wholesale past this many).
MAX_KNOWN_SETS = 4096
_known_sets: WeakKeyDictionary[Engine, set[str]] = WeakKeyDictionary()
CURSOR_KIND = "audit"


@sqlalchemy_event.listens_for(AuditEvent, "before_insert")
def _record_acting_token(_mapper: Any, _connection: Any, target: AuditEvent) -> None:
    if target.token_id is None:
        target.token_id = acting_token_id.get()


def is_sealed_action(action: str) -> bool:
    return SEALED_MARK in action


CONTENT_READS = frozenset(action.value for action in AuditAction if action.value.endswith("read") and not is_sealed_action(action.value))
"""The actions that record a read of content outside the sealed slice (`item.read`,
`release.items_read`, ...): every page view and API read writes one, so a reader of the log
usually wants them out of the way. Reads of sealed content are not among them."""


def _conditions(
    actor: str | None,
    token_id: int | None,
    action: str | None,
    object_type: str | None,
    object_id: str | None,
    since: datetime | None,
    until: datetime | None,
    *,
    sealed_only: bool,
    only_actions: Collection[str] | None,
    leave_out_actions: Collection[str],
) -> list[ColumnElement[bool]]:
    """The filters of `list_events` as SQL conditions on `AuditEvent`."""
    found: list[ColumnElement[bool]] = []
    if actor is not None:
        found.append(col(AuditEvent.actor) == actor)
    if token_id is not None:
        found.append(col(AuditEvent.token_id) == token_id)
    if action is not None:
        found.append(col(AuditEvent.action).startswith(action[:-1], autoescape=True) if action.endswith("*") else col(AuditEvent.action) == action)
    if object_type is not None:
        found.append(col(AuditEvent.object_type) == object_type)
    if object_id is not None:
        found.append(col(AuditEvent.object_id) == object_id)
    if since is not None:
        found.append(col(AuditEvent.at) >= since)
    if until is not None:
        found.append(col(AuditEvent.at) < until)
    if sealed_only:
        found.append(col(AuditEvent.action).contains(SEALED_MARK, autoescape=True))
    if only_actions is not None:
        found.append(col(AuditEvent.action).in_(sorted(only_actions)))
    if leave_out_actions:
        found.append(col(AuditEvent.action).not_in(sorted(leave_out_actions)))
    return found


def count_events(
    *,
    session: Session,
    actor: str | None = None,
    action: str | None = None,
    object_type: str | None = None,
    object_id: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    sealed_only: bool = False,
    only_actions: Collection[str] | None = None,
) -> int:
    """How many events match the filters (as `list_events` reads them), on every page together."""
    conditions = _conditions(actor, None, action, object_type, object_id, since, until, sealed_only=sealed_only, only_actions=only_actions, leave_out_actions=())
    return int(session.exec(select(func.count()).select_from(AuditEvent).where(*conditions)).one())


@dataclass(frozen=True)
class ContentRead:
    """One response that served the content of `item_ids`, to be audited."""

    actor: str
    action: str
    endpoint: str
    object_type: str
    object_id: str | None
    item_ids: Sequence[int]
    details: dict[str, Any] | None = None


def record_read(
    engine: Engine, *, actor: str, action: str, endpoint: str, object_type: str, object_id: str | None, item_ids: Sequence[int], details: dict[str, Any] | None = None
) -> None:
    """Commit one audit event for a response that served the content of `item_ids` (none: no
    event), in its own transaction, so a read-only request still leaves its trace (`record_reads`)."""
    record_reads(engine, [ContentRead(actor, action, endpoint, object_type, object_id, item_ids, details)])


def record_reads(engine: Engine, reads: Sequence[ContentRead]) -> None:
    """Commit one audit event for each read that served any item, all in one transaction. More
    than INLINE_IDS ids are stored once as an `AuditItemSet` and the event names its digest
    (`item_set`); `list_events` gives them back as `item_ids` either way."""
    known = _known_sets.setdefault(engine, set())
    rows: list[dict[str, Any]] = []
    new_sets: dict[str, list[int]] = {}
    for read in reads:
        if not read.item_ids:
            continue
        distinct = sorted(set(read.item_ids))
        ids = distinct[:MAX_IDS_IN_EVENT]
        body: dict[str, Any] = {"endpoint": read.endpoint, **(read.details or {})}
        if len(distinct) > MAX_IDS_IN_EVENT:
            body["item_ids_truncated"] = True
        if len(ids) > INLINE_IDS:
            digest = hashlib.sha256(",".join(map(str, ids)).encode()).hexdigest()
            body["item_set"] = digest
            if digest not in known:
                new_sets[digest] = ids
        else:
            body["item_ids"] = ids
        rows.append(
            {
                "actor": read.actor,
                "token_id": acting_token_id.get(),
                "action": read.action,
                "object_type": read.object_type,
                "object_id": read.object_id,
                "count": len(distinct),
                "at": utcnow(),
                "details": body,
            }
        )
    if not rows:
        return
    # Plain INSERTs on a connection of their own, without the ORM's unit of work: this runs on
    # every content read.
    with writer_engine(engine).begin() as connection:
        for digest, ids in new_sets.items():
            _store_set(connection, digest, ids)
        connection.execute(insert(AuditEvent), rows)
    if len(known) + len(new_sets) > MAX_KNOWN_SETS:
        known.clear()
    known.update(new_sets)  # committed: later events skip the insert


def _store_set(connection: Connection, digest: str, ids: list[int]) -> None:
    """Store `ids` as the `AuditItemSet` named `digest`, unless another process stored it already."""
    dialect_insert = postgresql_insert if connection.dialect.name == "postgresql" else sqlite_insert
    connection.execute(dialect_insert(AuditItemSet).values(digest=digest, count=len(ids), item_ids=ids, created_at=utcnow()).on_conflict_do_nothing(index_elements=["digest"]))


def _expanded(session: Session, events: Sequence[AuditEvent]) -> dict[int, dict[str, Any]]:
    """The events' details with `item_ids` filled in from the stored sets they name, by event id."""
    digests = {event.details["item_set"] for event in events if isinstance(event.details.get("item_set"), str)}
    sets = {row.digest: row.item_ids for row in session.exec(select(AuditItemSet).where(col(AuditItemSet.digest).in_(sorted(digests))))} if digests else {}
    expanded: dict[int, dict[str, Any]] = {}
    for event in events:
        assert event.id is not None
        digest = event.details.get("item_set")
        expanded[event.id] = {**event.details, "item_ids": sets.get(digest, [])} if isinstance(digest, str) else event.details
    return expanded


def audit_content_read(request: Request, principal: Principal, item_ids: Sequence[int], action: str = AuditAction.ITEM_READ) -> None:
    """Audit a response that served the content of `item_ids` (none: nothing to audit), naming the
    endpoint by method and path (`audit_request_read`)."""
    endpoint = f"{request.method} {request.url.path}"
    audit_request_read(request, ContentRead(principal.actor, action, endpoint, "item", None, list(item_ids)))


def audit_request_read(request: Request, read: ContentRead) -> None:
    """Audit `read`, served by this request. In a request holding a session (`service.core.deps`)
    the event is committed after the session's connection is returned to the pool and before the
    answer is sent (a failed audit fails the request), so the request never holds two
    connections; otherwise at once."""
    pending: list[ContentRead] | None = getattr(request.state, "pending_reads", None)
    if pending is not None:
        pending.append(read)
    else:
        record_reads(request.app.state.engine, [read])


def list_events(
    *,
    session: Session,
    secret_key: str,
    actor: str | None = None,
    token_id: int | None = None,
    action: str | None = None,
    object_type: str | None = None,
    object_id: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    sealed_only: bool = False,
    only_actions: Collection[str] | None = None,
    leave_out_actions: Collection[str] = (),
    limit: int = 100,
    cursor: str | None = None,
) -> AuditPage:
    """Events matching every filter given, newest first. `action` ending in `*` matches by prefix
    (`run.*`); `since` is inclusive, `until` exclusive; `only_actions` keeps the events of those
    actions, `leave_out_actions` drops them."""
    query = select(AuditEvent).where(
        *_conditions(actor, token_id, action, object_type, object_id, since, until, sealed_only=sealed_only, only_actions=only_actions, leave_out_actions=leave_out_actions)
    )
    if cursor:
        query = query.where(col(AuditEvent.id) < decode_id_cursor(cursor, CURSOR_KIND, secret_key=secret_key))
    rows = session.exec(query.order_by(col(AuditEvent.id).desc()).limit(limit + 1)).all()
    page = rows[:limit]
    next_cursor = encode_cursor(CURSOR_KIND, page[-1].id, secret_key=secret_key) if len(rows) > limit and page[-1].id is not None else None
    details = _expanded(session, page)
    events = [read_model(AuditEventRead, event, sealed=is_sealed_action(event.action), details=details[event.id or 0]) for event in page]
    return AuditPage(events=events, next_cursor=next_cursor)
