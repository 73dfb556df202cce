"""Items as readers see them: lookups, pages, read models with sealed content withheld, how dedup
judged an item, and the items dedup finds most like one.

An item in (or bound for) a sealed slice (`curation.releases.visibility`) is shown without its
content (`sealed: true`; external id, text fields, metadata and tags empty): sealed content is
served only by budgeted sealed reads and sealed runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from datetime import datetime

from fastapi import Request
from sqlalchemy import and_, or_
from sqlmodel import Session, col, select

from curation.dedup.similarity import Similar
from schemas.dedup import DedupDecision, DedupRead, SimilarRead
from schemas.item import Item, ItemRead, ItemStatus
from schemas.source import Source
from service.core.audit import audit_content_read
from service.core.auth import Principal
from service.core.cursors import decode_time_id_cursor, encode_cursor
from service.core.problems import ProblemError
from service.items.shaping import ShownItem, shape_item, shape_items

CURSOR_KIND = "items"


def require_item(session: Session, item_id: int) -> tuple[Item, str]:
    """The item and its source's name, or a 404 problem."""
    row = session.exec(select(Item, Source.name).join(Source, col(Source.id) == col(Item.source_id)).where(Item.id == item_id)).first()
    if row is None:
        raise ProblemError(404, "Not Found", f"no item with id {item_id}")
    return row[0], row[1]


def shown_item(session: Session, item_id: int, *, secret_key: str) -> tuple[Item, ShownItem]:
    """The item (a 404 problem when there is none) and the item as an API reader may see it
    (`service.items.shaping`: no API token reads a sealed item's content through `/v1/items`)."""
    item, source = require_item(session, item_id)
    return item, shape_item(session=session, item=item, source=source, secret_key=secret_key)


def answer_after_write(request: Request, principal: Principal, session: Session, item_id: int, *, secret_key: str) -> ItemRead:
    """The item as it is after a committed write (a review decision, a ruling), shaped for the
    reader, with its content read audited when it carries content. Ends `session`'s transaction
    first: the audit writes on a connection of its own, and on SQLite an open write transaction
    would hold the lock it waits for."""
    _item, shown = shown_item(session, item_id, secret_key=secret_key)
    session.rollback()
    if not shown.withheld:
        audit_content_read(request, principal, [item_id])
    return shown.read()


def item_page(
    *,
    session: Session,
    secret_key: str,
    source: str | None = None,
    status: ItemStatus | None = None,
    occurred_after: datetime | None = None,
    occurred_before: datetime | None = None,
    limit: int,
    cursor: str | None = None,
) -> tuple[list[ShownItem], str | None]:
    """One page of items with their source names, newest incident first (ties: higher id first),
    and the cursor of the next page (None on the last). Items in (or bound for) a sealed slice are
    left out, so neither a page, nor its filters, nor its cursor tells anything of them; a page can
    therefore hold fewer than `limit` items before the last one."""
    query = select(Item, Source.name).join(Source, col(Source.id) == col(Item.source_id))
    if source is not None:
        query = query.where(Source.name == source)
    if status is not None:
        query = query.where(Item.status == status.value)
    if occurred_after is not None:
        query = query.where(col(Item.occurred_at) >= occurred_after)
    if occurred_before is not None:
        query = query.where(col(Item.occurred_at) < occurred_before)
    if cursor:
        at, item_id = decode_time_id_cursor(cursor, CURSOR_KIND, secret_key=secret_key)
        query = query.where(or_(col(Item.occurred_at) < at, and_(col(Item.occurred_at) == at, col(Item.id) < item_id)))
    rows = session.exec(query.order_by(col(Item.occurred_at).desc(), col(Item.id).desc()).limit(limit + 1)).all()
    page = [(item, name) for item, name in rows[:limit]]
    last = page[-1][0] if len(rows) > limit else None
    next_cursor = encode_cursor(CURSOR_KIND, last.occurred_at.isoformat(), last.id, secret_key=secret_key) if last is not None and last.id is not None else None
    return [shown for shown in shape_items(session=session, rows=page, secret_key=secret_key) if not shown.withheld], next_cursor


def dedup_read(session: Session, item: Item, *, sealed: bool = False) -> DedupRead:
    """How dedup judged `item`: its newest decision, with the cluster root it points at now (an
    earlier incident arriving later can move it); just the status while it is a candidate, has
    never been judged (a reference item), or is sealed (its matches would name what it is like)."""
    if sealed or item.status == ItemStatus.CANDIDATE.value:
        return DedupRead(status=item.status)
    decision = session.exec(select(DedupDecision).where(DedupDecision.item_id == item.id).order_by(col(DedupDecision.id).desc()).limit(1)).first()
    if decision is None:
        return DedupRead(status=item.status, duplicate_of=item.duplicate_of)
    return DedupRead(status=decision.status, duplicate_of=item.duplicate_of, stage=decision.stage, score=decision.score, decided_at=decision.decided_at)


def similar_reads(*, session: Session, ranked: Sequence[Similar], secret_key: str) -> list[SimilarRead]:
    """The ranked items as the API shows them, best first. Items in (or bound for) a sealed slice
    are left out (their ids and scores would confirm a guess at their text), as are items deleted
    since the index was built."""
    ids = [entry.item_id for entry in ranked]
    rows = session.exec(select(Item, Source.name).join(Source, col(Source.id) == col(Item.source_id)).where(col(Item.id).in_(ids))).all()
    shown = {item.id: item for item in shape_items(session=session, rows=list(rows), secret_key=secret_key) if not item.withheld}
    return [_similar_read(entry, shown[entry.item_id]) for entry in ranked if entry.item_id in shown]


def _similar_read(entry: Similar, item: ShownItem) -> SimilarRead:
    fields = {"id": item.id, "external_id": item.external_id, "source": item.source, "title": item.title, "occurred_at": item.occurred_at, "status": item.status}
    return SimilarRead.model_validate(asdict(entry) | fields)
