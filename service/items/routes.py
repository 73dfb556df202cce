"""Items over HTTP: filtered, cursor-paginated lists and single items (`read`), and review
decisions on the items dedup kept as unique (`curate`).

Items in (or bound for) a sealed slice are listed without their content (`service.items.reads`).
Every response that serves item content is audited (`item.read`).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request

from curation.dedup.overrides import overrides_of
from curation.review import ReviewRefused, decide, review_batch
from schemas.common import Instant
from schemas.item import ItemDetail, ItemPage, ItemRead, ItemStatus
from schemas.review import ApproveBody, Decision, RejectBody, ReviewBatch, ReviewOutcome
from service.core.audit import audit_content_read
from service.core.auth import CuratePrincipal, ReadPrincipal
from service.core.deps import IdPath, SecretKeyDep, SessionDep, WriteSessionDep
from service.core.problems import problem_doc, refusal_problem
from service.items.reads import dedup_read, item_page, item_read, require_item, withheld

router = APIRouter(prefix="/v1/items")
MAX_PAGE = 500


@router.get("", response_model=ItemPage, responses=problem_doc(401, 403, 422), tags=["items"])
def list_items(
    principal: ReadPrincipal,
    request: Request,
    session: SessionDep,
    secret_key: SecretKeyDep,
    source: str | None = None,
    status: ItemStatus | None = None,
    occurred_after: Annotated[Instant | None, Query(description="Only items that occurred at or after this time (with zone).")] = None,
    occurred_before: Annotated[Instant | None, Query(description="Only items that occurred before this time (with zone).")] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
    cursor: str | None = None,
) -> ItemPage:
    """List items, newest incident first; pass `next_cursor` as `cursor` for the next page. Items
    in (or bound for) a sealed slice are not listed, so a page may hold fewer than `limit` items."""
    page, next_cursor = item_page(
        session=session,
        secret_key=secret_key,
        source=source,
        status=status,
        occurred_after=occurred_after,
        occurred_before=occurred_before,
        limit=limit,
        cursor=cursor,
    )
    reads = [item_read(item, name) for item, name in page]
    audit_content_read(request, principal, [read.id for read in reads])
    return ItemPage(items=reads, next_cursor=next_cursor)


@router.get("/{item_id}", response_model=ItemDetail, responses=problem_doc(401, 403, 404), tags=["items"])
def get_item(item_id: IdPath, principal: ReadPrincipal, request: Request, session: SessionDep, secret_key: SecretKeyDep) -> ItemDetail:
    """One item, with `dedup`: `status`, `duplicate_of`, `stage` (exact, minhash, embedding,
    override, none), `score` and `decided_at` of curation's newest decision about it; and
    `overrides`, people's rulings naming it. A sealed item comes without its content, dates,
    content hash, dedup details and rulings (`sealed: true`)."""
    item, source_name = require_item(session, item_id)
    sealed = item_id in withheld(session=session, item_ids=[item_id], secret_key=secret_key)
    if not sealed:
        audit_content_read(request, principal, [item_id])
    overrides = [] if sealed else overrides_of(session, item_id)
    return ItemDetail(**item_read(item, source_name, sealed=sealed).model_dump(), dedup=dedup_read(session, item, sealed=sealed), overrides=overrides)


def _decide(session: WriteSessionDep, item_id: int, decision: Decision, reason: str, actor: str) -> ItemRead:
    try:
        decide(session=session, item_id=item_id, decision=decision, reason=reason, actor=actor)
    except ReviewRefused as exc:
        session.rollback()
        raise refusal_problem(exc) from exc
    session.commit()
    item, source = require_item(session, item_id)
    return item_read(item, source)


@router.post("/review", response_model=ReviewOutcome, responses=problem_doc(401, 403, 422), tags=["review"])
def review(data: ReviewBatch, principal: CuratePrincipal, session: WriteSessionDep) -> ReviewOutcome:
    """Approve or reject many items at once; each refused decision is reported by position and
    reason (`not_found`, `not_reviewable`, `reason_required`) and the others are kept."""
    outcome = review_batch(session=session, decisions=data.decisions, actor=principal.actor)
    session.commit()
    return outcome


@router.post("/{item_id}/approve", response_model=ItemRead, responses=problem_doc(401, 403, 404, 409), tags=["review"])
def approve(item_id: IdPath, principal: CuratePrincipal, session: WriteSessionDep, data: ApproveBody | None = None) -> ItemRead:
    """Approve a unique item for the evals that take its source (409 unless it is unique)."""
    return _decide(session, item_id, Decision.APPROVE, data.reason if data else "", principal.actor)


@router.post("/{item_id}/reject", response_model=ItemRead, responses=problem_doc(401, 403, 404, 409, 422), tags=["review"])
def reject(item_id: IdPath, data: RejectBody, principal: CuratePrincipal, session: WriteSessionDep) -> ItemRead:
    """Reject a unique item, with the reason (409 unless it is unique); it never enters an eval."""
    return _decide(session, item_id, Decision.REJECT, data.reason, principal.actor)
