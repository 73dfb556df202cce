"""Review: approving or rejecting items that dedup kept as `unique`, one at a time or in bulk,
each decision audited. Approval is global to the item: every eval that takes its source sees it.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlmodel import Session, col, select

from curation.refusals import Refused
from schemas.audit import AuditEvent
from schemas.common import utcnow
from schemas.item import Item, ItemStatus
from schemas.problem import RecordError
from schemas.review import Decision, ReviewDecision, ReviewOutcome
from schemas.source import Source


class ReviewRefused(Refused):
    """A review decision cannot be taken (`curation.refusals.Refused`)."""


def decide(*, session: Session, item_id: int, decision: Decision, reason: str, actor: str) -> Item:
    """Approve or reject one `unique` item and audit it, without committing. Raises ReviewRefused:
    `not_found` (404), `reason_required` (422, a rejection needs a reason) or `not_reviewable` (409)."""
    reason = reason.strip()
    if decision is Decision.REJECT and not reason:
        raise ReviewRefused("reason_required", f"rejecting item {item_id} needs a reason, so the decision can be understood later", 422)
    item = session.get(Item, item_id)
    if item is None:
        raise ReviewRefused("not_found", f"no item with id {item_id}", 404)
    if item.status != ItemStatus.UNIQUE.value:
        hint = {
            ItemStatus.CANDIDATE.value: "curation has not decided it yet (`goldenset curate`)",
            ItemStatus.APPROVED.value: "it was already approved",
            ItemStatus.REJECTED.value: "it was already rejected",
        }.get(item.status, "only items dedup kept as unique are reviewed")
        raise ReviewRefused("not_reviewable", f"item {item_id} is {item.status}, not unique: {hint}", 409)
    item.status = (ItemStatus.APPROVED if decision is Decision.APPROVE else ItemStatus.REJECTED).value
    item.updated_at = utcnow()
    session.add(item)
    details = {"reason": reason} if reason else {}
    session.add(AuditEvent(actor=actor, action=f"item.{'approve' if decision is Decision.APPROVE else 'reject'}", object_type="item", object_id=str(item_id), details=details))
    return item


def review_batch(*, session: Session, decisions: Sequence[ReviewDecision], actor: str) -> ReviewOutcome:
    """Apply each decision on its own (a savepoint each); a refused one is reported by position and
    reason and leaves nothing behind, and the others are kept. The caller commits."""
    outcome = ReviewOutcome(approved=[], rejected=[], errors=[])
    for position, entry in enumerate(decisions):
        try:
            with session.begin_nested():
                decide(session=session, item_id=entry.item_id, decision=entry.decision, reason=entry.reason, actor=actor)
        except ReviewRefused as exc:
            outcome.errors.append(RecordError(position=position, locator=f"index {position}", reason=exc.reason, detail=exc.detail, external_id=str(entry.item_id)))
            continue
        (outcome.approved if entry.decision is Decision.APPROVE else outcome.rejected).append(entry.item_id)
    return outcome


def pending_items(*, session: Session, sources: Sequence[str], limit: int | None = None) -> list[tuple[Item, str]]:
    """Items of `sources` waiting for review (`unique`), newest incident first."""
    query = (
        select(Item, Source.name)
        .join(Source, col(Source.id) == col(Item.source_id))
        .where(col(Source.name).in_(list(sources)), Item.status == ItemStatus.UNIQUE.value)
        .order_by(col(Item.occurred_at).desc(), col(Item.id).desc())
    )
    if limit is not None:
        query = query.limit(limit)
    return [(item, name) for item, name in session.exec(query).all()]
