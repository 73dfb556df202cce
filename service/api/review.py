"""Review decisions over HTTP: approve or reject items dedup kept as unique (`curate` scope)."""

from __future__ import annotations

from fastapi import APIRouter

from schemas.item import ItemRead
from schemas.review import ApproveBody, Decision, RejectBody, ReviewBatch, ReviewOutcome
from service.api.deps import WriteSessionDep
from service.api.items import require_item, to_read
from service.auth import CuratePrincipal
from service.problems import ProblemError, problem_doc
from service.review import ReviewRefused, decide, review_batch

router = APIRouter(prefix="/v1/items", tags=["review"])


def _decide(session: WriteSessionDep, item_id: int, decision: Decision, reason: str, actor: str) -> ItemRead:
    try:
        decide(session=session, item_id=item_id, decision=decision, reason=reason, actor=actor)
    except ReviewRefused as exc:
        session.rollback()
        title = {404: "Not Found", 409: "Conflict"}.get(exc.status, "Invalid request")
        raise ProblemError(exc.status, title, exc.detail, reason=exc.reason) from exc
    session.commit()
    item, source = require_item(session, item_id)
    return to_read(item, source)


@router.post("/review", response_model=ReviewOutcome, responses=problem_doc(401, 403, 422))
def review(data: ReviewBatch, principal: CuratePrincipal, session: WriteSessionDep) -> ReviewOutcome:
    """Approve or reject many items at once; each refused decision is reported by position and
    reason (`not_found`, `not_reviewable`, `reason_required`) and the others are kept."""
    return review_batch(session=session, decisions=data.decisions, actor=principal.actor)


@router.post("/{item_id}/approve", response_model=ItemRead, responses=problem_doc(401, 403, 404, 409))
def approve(item_id: int, principal: CuratePrincipal, session: WriteSessionDep, data: ApproveBody | None = None) -> ItemRead:
    """Approve a unique item for the evals that take its source (409 unless it is unique)."""
    return _decide(session, item_id, Decision.APPROVE, data.reason if data else "", principal.actor)


@router.post("/{item_id}/reject", response_model=ItemRead, responses=problem_doc(401, 403, 404, 409, 422))
def reject(item_id: int, data: RejectBody, principal: CuratePrincipal, session: WriteSessionDep) -> ItemRead:
    """Reject a unique item, with the reason (409 unless it is unique); it never enters an eval."""
    return _decide(session, item_id, Decision.REJECT, data.reason, principal.actor)
