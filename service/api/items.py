"""Reading items: filtered, cursor-paginated lists and single items.

Items in (or bound for) a sealed slice are listed without their content (`sealed: true`, text
fields and metadata empty): sealed content is served only by budgeted sealed reads and sealed
runs (`service.visibility`). Every response that serves item content is audited (`item.read`).
"""

from __future__ import annotations

import base64
import binascii
import json
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query, Request
from sqlalchemy import and_, or_
from sqlmodel import Session, col, select

from schemas.dedup import DedupDecision, DedupRead
from schemas.item import Item, ItemDetail, ItemPage, ItemRead, ItemStatus
from schemas.source import Source
from service.api.deps import SessionDep
from service.audit import record_read
from service.auth import Principal, ReadPrincipal
from service.problems import ProblemError, problem_doc, require_aware
from service.visibility import sealed_item_ids

router = APIRouter(prefix="/v1/items", tags=["items"])
MAX_PAGE = 500


def to_read(item: Item, source_name: str, *, sealed: bool = False) -> ItemRead:
    """The item as the API shows it; `sealed` withholds its content (text, metadata, tags and
    external id), keeping only what identifies and dates it."""
    assert item.id is not None
    if sealed:
        return ItemRead(
            id=item.id,
            source=source_name,
            external_id="",
            occurred_at=item.occurred_at,
            ingested_at=item.ingested_at,
            updated_at=item.updated_at,
            title="",
            input="",
            reference="",
            metadata={},
            tags=[],
            content_hash=item.content_hash,
            revision=item.revision,
            status=item.status,
            sealed=True,
        )
    return ItemRead(
        id=item.id,
        source=source_name,
        external_id=item.external_id,
        occurred_at=item.occurred_at,
        ingested_at=item.ingested_at,
        updated_at=item.updated_at,
        title=item.title,
        input=item.input,
        reference=item.reference,
        metadata=item.meta,
        tags=item.tags,
        content_hash=item.content_hash,
        revision=item.revision,
        status=item.status,
    )


def _encode_cursor(item: Item) -> str:
    raw = json.dumps({"o": item.occurred_at.isoformat(), "i": item.id}).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_cursor(cursor: str) -> tuple[datetime, int]:
    try:
        raw = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        return datetime.fromisoformat(raw["o"]), int(raw["i"])
    except (binascii.Error, ValueError, KeyError, TypeError) as exc:
        raise ProblemError(422, "Invalid cursor", "the cursor is not one this API returned; start again without it") from exc


def secret_key(request: Request) -> str:
    """The server's secret key (it decides, with each eval's seal key, which items are sealed)."""
    key: str = request.app.state.settings.secret_key.get_secret_value()
    return key


def withheld(request: Request, session: Session, item_ids: list[int]) -> set[int]:
    """Which of `item_ids` must be shown without content (`service.visibility`)."""
    return sealed_item_ids(session=session, item_ids=item_ids, secret_key=secret_key(request))


def audit_read(request: Request, principal: Principal, item_ids: list[int], action: str = "item.read") -> None:
    """Audit a response that served the content of `item_ids` (none: nothing to audit)."""
    endpoint = f"{request.method} {request.url.path}"
    record_read(request.app.state.engine, actor=principal.actor, action=action, endpoint=endpoint, object_type="item", object_id=None, item_ids=item_ids)


@router.get("", response_model=ItemPage, responses=problem_doc(401, 403, 422))
def list_items(
    principal: ReadPrincipal,
    request: Request,
    session: SessionDep,
    source: str | None = None,
    status: ItemStatus | None = None,
    occurred_after: Annotated[datetime | None, Query(description="Only items that occurred at or after this time (with zone).")] = None,
    occurred_before: Annotated[datetime | None, Query(description="Only items that occurred before this time (with zone).")] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
    cursor: str | None = None,
) -> ItemPage:
    """List items, newest incident first; pass `next_cursor` as `cursor` for the next page."""
    query = select(Item, Source.name).join(Source, col(Source.id) == col(Item.source_id))
    if source is not None:
        query = query.where(Source.name == source)
    if status is not None:
        query = query.where(Item.status == status.value)
    if (after := require_aware(occurred_after, "occurred_after")) is not None:
        query = query.where(col(Item.occurred_at) >= after)
    if (before := require_aware(occurred_before, "occurred_before")) is not None:
        query = query.where(col(Item.occurred_at) < before)
    if cursor:
        at, item_id = _decode_cursor(cursor)
        query = query.where(or_(col(Item.occurred_at) < at, and_(col(Item.occurred_at) == at, col(Item.id) < item_id)))
    rows = session.exec(query.order_by(col(Item.occurred_at).desc(), col(Item.id).desc()).limit(limit + 1)).all()
    page = rows[:limit]
    next_cursor = _encode_cursor(page[-1][0]) if len(rows) > limit else None
    hidden = withheld(request, session, [item.id for item, _ in page if item.id is not None])
    reads = [to_read(item, name, sealed=item.id in hidden) for item, name in page]
    audit_read(request, principal, [read.id for read in reads if not read.sealed])
    return ItemPage(items=reads, next_cursor=next_cursor)


def require_item(session: Session, item_id: int) -> tuple[Item, str]:
    row = session.exec(select(Item, Source.name).join(Source, col(Source.id) == col(Item.source_id)).where(Item.id == item_id)).first()
    if row is None:
        raise ProblemError(404, "Not Found", f"no item with id {item_id}")
    return row[0], row[1]


def dedup_read(session: Session, item: Item) -> DedupRead:
    """How dedup judged `item`: its newest decision, with the cluster root it points at now (an
    earlier incident arriving later can move it); just the status while it is a candidate or has
    never been judged (a reference item)."""
    if item.status == ItemStatus.CANDIDATE.value:
        return DedupRead(status=item.status)
    decision = session.exec(select(DedupDecision).where(DedupDecision.item_id == item.id).order_by(col(DedupDecision.id).desc()).limit(1)).first()
    if decision is None:
        return DedupRead(status=item.status, duplicate_of=item.duplicate_of)
    return DedupRead(status=decision.status, duplicate_of=item.duplicate_of, stage=decision.stage, score=decision.score, decided_at=decision.decided_at)


@router.get("/{item_id}", response_model=ItemDetail, responses=problem_doc(401, 403, 404))
def get_item(item_id: int, principal: ReadPrincipal, request: Request, session: SessionDep) -> ItemDetail:
    """One item, with `dedup`: `status`, `duplicate_of`, `stage` (exact, minhash, embedding, none),
    `score` and `decided_at` of curation's newest decision about it. A sealed item comes without
    its content (`sealed: true`)."""
    item, source_name = require_item(session, item_id)
    sealed = item_id in withheld(request, session, [item_id])
    if not sealed:
        audit_read(request, principal, [item_id])
    return ItemDetail(**to_read(item, source_name, sealed=sealed).model_dump(), dedup=dedup_read(session, item))
