"""Review: approving or rejecting items that dedup kept as `unique`, one at a time or in bulk,
and undoing a decision; each audited. Approval is global to the item: every eval that takes its
source sees it.

The audit trail is the record of decisions: a decision is the newest `item.approve` or
`item.reject` event of its item, and `item.review_undone` marks it undone.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import or_
from sqlmodel import Session, col, select

from curation.refusals import Refused
from curation.team_rounds import close_rounds, votes_required_by
from schemas.audit import AuditEvent
from schemas.evals import EvalItem
from schemas.item import Item, ItemStatus
from schemas.lifecycle import MOVES, ItemAction, is_move, move
from schemas.problem import RecordError
from schemas.release import Release
from schemas.review import Decision, ReviewDecision, ReviewOutcome, ReviewUndone
from schemas.source import Source

UNDONE = ItemAction.REVIEW_UNDONE.value
_ACTIONS = {ItemAction.APPROVE.value: Decision.APPROVE, ItemAction.REJECT.value: Decision.REJECT}
_STATUS_OF = {Decision.APPROVE: ItemStatus.APPROVED.value, Decision.REJECT: ItemStatus.REJECTED.value}


class ReviewRefused(Refused):
    """A review decision cannot be taken or undone (`curation.refusals.Refused`)."""


UNREAD_DETAIL = (
    "item {item_id} is in (or bound for) an eval's sealed slice and its text was not shown to you, so it is not approved unread: "
    "read it first (the 'sealed' scope; on the review page, in an open sealed view), or leave it to the eval's approval policy"
)


def decide(
    *,
    session: Session,
    item_id: int,
    decision: Decision,
    reason: str,
    actor: str,
    now: datetime,
    unread: Collection[int] = (),
    settled_by: Mapping[str, Any] | None = None,
) -> Item:
    """Approve or reject one `unique` item at `now` and audit it, without committing; the item's open
    team-review rounds close with it (`curation.team_rounds.close_rounds`). `unread`: the items
    whose text the decider was not shown (the service says which); none of them is approved.
    `settled_by`: set by team review (`curation.team_review`) when agreeing votes or an adjudicator
    decide, with what the audit event records of them; without it, an item an eval asks several
    votes of is not decided by one person. Raises ReviewRefused: `not_found` (404),
    `reason_required` (422, a rejection needs a reason), `unread` (409, an approval of an item in
    `unread`), `team_review` (409, votes are needed) or `not_reviewable` (409)."""
    if decision is Decision.APPROVE and item_id in unread:
        raise ReviewRefused("unread", UNREAD_DETAIL.format(item_id=item_id), 409)
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
    if settled_by is None:
        source = session.exec(select(Source.name).where(Source.id == item.source_id)).one()
        team = votes_required_by(session, item_id, source)
        if team is not None:
            detail = (
                f"eval {team.name!r} asks {team.reviewers_per_item} agreeing votes on item {item_id}: vote in its review queue "
                f"(POST /v1/evals/{team.name}/review/votes, or the review page); disagreements go to its adjudicators"
            )
            raise ReviewRefused("team_review", detail, 409)
    approve = decision is Decision.APPROVE
    action, status = (ItemAction.APPROVE, ItemStatus.APPROVED) if approve else (ItemAction.REJECT, ItemStatus.REJECTED)
    details: dict[str, Any] = {"reason": reason} if reason else {}
    event = move(item, action, status, actor=actor, details={**details, **(settled_by or {})}, at=now)
    item.source_changed_at = None  # a held source change has been looked at
    session.add(item)
    session.add(event)
    close_rounds(session, [item_id], now=now, outcome=decision.value)
    return item


def review_batch(*, session: Session, decisions: Sequence[ReviewDecision], actor: str, now: datetime, unread: Collection[int] = ()) -> ReviewOutcome:
    """Apply each decision on its own (a savepoint each), all at `now`; a refused one is reported by position and
    reason and leaves nothing behind, and the others are kept. `unread` as for `decide`. The caller commits."""
    outcome = ReviewOutcome(approved=[], rejected=[], errors=[])
    for position, entry in enumerate(decisions):
        try:
            with session.begin_nested():
                decide(session=session, item_id=entry.item_id, decision=entry.decision, reason=entry.reason, actor=actor, now=now, unread=unread)
        except ReviewRefused as exc:
            outcome.errors.append(RecordError(position=position, locator=f"index {position}", reason=exc.reason, detail=exc.detail, external_id=str(entry.item_id)))
            continue
        (outcome.approved if entry.decision is Decision.APPROVE else outcome.rejected).append(entry.item_id)
    return outcome


def undo_review(*, session: Session, item_id: int, actor: str, now: datetime) -> ReviewUndone:
    """Undo the item's newest review decision (an approval or a rejection) at `now`: the item is `unique`
    again, and `item.review_undone` is audited with what was undone. Does not commit. Raises
    ReviewRefused: `not_found` (404); `not_reviewed` (409: no decision in force, or it was undone
    already); `released` (409: a release took the item in, or retired it, after the decision, so the
    decision has been acted on); `not_yours` (409: `actor` did not take it)."""
    item = session.get(Item, item_id)
    if item is None:
        raise ReviewRefused("not_found", f"no item with id {item_id}", 404)
    latest = newest_move(session, item_id)
    if latest is None or latest.action not in _ACTIONS:
        if latest is None:
            since = ""
        elif latest.action == UNDONE:
            since = " (the last one was undone already)"
        else:
            since = f" (it was moved since: {latest.action}, {MOVES[ItemAction(latest.action)].meaning})"
        raise ReviewRefused("not_reviewed", f"item {item_id} is {item.status}: it has no review decision to undo{since}", 409)
    decision = _ACTIONS[latest.action]
    if _released_since(session, item_id, latest):
        raise ReviewRefused("released", f"item {item_id} was {decision.value}d and a release has taken that into account since: the release keeps it as it was", 409)
    if item.status != _STATUS_OF[decision]:
        raise ReviewRefused("not_reviewed", f"item {item_id} is {item.status} now, no longer {_STATUS_OF[decision]}: there is no review decision to undo", 409)
    if latest.actor != actor:
        raise ReviewRefused("not_yours", f"item {item_id} was {decision.value}d by {latest.actor}: only they can undo it; ask them, or decide it again once it is undone", 409)
    reason = str(latest.details.get("reason", ""))
    details = {"undone": decision.value, "reason": reason, "decision_event": latest.id, "decided_at": latest.at.isoformat()}
    session.add(move(item, ItemAction.REVIEW_UNDONE, ItemStatus.UNIQUE, actor=actor, details=details, at=now))
    session.add(item)
    return ReviewUndone(item_id=item_id, status=item.status, undone=decision, reason=reason, decided_by=latest.actor, decided_at=latest.at)


def newest_move(session: Session, item_id: int) -> AuditEvent | None:
    """The audit event of the item's newest move by a person or a source (`schemas.lifecycle`); an
    event that left the status as it was (an edit of tags, a ruling apart) is no move."""
    query = select(AuditEvent).where(AuditEvent.object_type == "item", AuditEvent.object_id == str(item_id), col(AuditEvent.action).in_([action.value for action in ItemAction]))
    for event in session.exec(query.order_by(col(AuditEvent.id).desc()).limit(50)):
        if is_move(event):
            return event
    return None


def undoable(session: Session, decision: AuditEvent) -> bool:
    """Whether review decision `decision` can still be undone: it is its item's newest move, and no
    release has acted on it since."""
    assert decision.object_id is not None
    item_id = int(decision.object_id)
    latest = newest_move(session, item_id)
    return latest is not None and latest.id == decision.id and decision.action in _ACTIONS and not _released_since(session, item_id, decision)


def _released_since(session: Session, item_id: int, decision: AuditEvent) -> bool:
    """Whether a release took the item in, or retired it, at or after the decision."""
    query = (
        select(EvalItem.id)
        .join(Release, (col(Release.eval_id) == col(EvalItem.eval_id)) & (col(Release.number) == col(EvalItem.first_release)))
        .where(EvalItem.item_id == item_id, or_(col(Release.created_at) >= decision.at, col(EvalItem.retired_at) >= decision.at))
        .limit(1)
    )
    return session.exec(query).first() is not None
