"""Team review of an eval's queue (`curation.team_rounds.is_team_review`): reviewers vote, a round
settles when the votes an item needs (`votes_needed`) agree, and a disagreement waits for an
adjudicator; reviewers share the queue by claiming batches or by round-robin assignment. What the
team has done, per person and in agreement, is `curation.team_progress`.

A vote is taken only on a `unique` item of one of the eval's sources, from a reviewer who has no
open vote on it, while its round still needs votes (on a round-robin eval, from a reviewer it is
assigned to); an approval only of an item whose text the reviewer was shown. Every vote, claim and
dispute is audited; the decision a round reaches is `curation.review.decide`'s, with the votes in
its audit event. Nothing here commits: the caller's unit of work does.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, and_, delete, exists, func, or_
from sqlmodel import Session, col, select
from sqlmodel.sql.expression import SelectOfScalar

from curation.refusals import Refused
from curation.review import UNREAD_DETAIL, decide
from curation.team_rounds import is_team_review, open_votes, votes_needed, votes_needed_column
from schemas.audit import AuditAction, AuditEvent
from schemas.evals import Eval, ReviewAssignment
from schemas.item import Item, ItemStatus
from schemas.review import Decision
from schemas.source import Source
from schemas.team_review import ClaimOutcome, ReviewClaim, ReviewVote, RoundOutcome, RoundState, VoteRead

CLAIM_HOURS = 4
"""How long a claimed batch is held for its reviewer before others may be handed its items."""
ACTOR_PREFIX = "token:"


class TeamReviewRefused(Refused):
    """A vote, an adjudication or a claim cannot be taken (`curation.refusals.Refused`)."""


def person(actor: str) -> str:
    """The name an eval's team settings use for `actor` (`token:<name>` -> `<name>`)."""
    return actor.removeprefix(ACTOR_PREFIX)


def assigned_reviewers(evaluation: Eval, item_id: int) -> list[str]:
    """On a round-robin eval, who the item is assigned to: as many of `reviewers` as it needs votes,
    in turn from the one its id falls on; every reviewer otherwise (an empty list)."""
    people = evaluation.reviewers
    if evaluation.review_assignment != ReviewAssignment.ROUND_ROBIN.value or not people:
        return []
    needed = min(votes_needed(evaluation, item_id), len(people))
    return [people[(item_id + step) % len(people)] for step in range(needed)]


def may_adjudicate(evaluation: Eval, actor: str, *, is_admin: bool) -> bool:
    """Whether `actor` decides the eval's disagreements: one of its `adjudicators`, or, when it
    names none, an admin."""
    return person(actor) in evaluation.adjudicators if evaluation.adjudicators else is_admin


def _open_count(eval_id: int) -> ColumnElement[int]:
    return (
        select(func.count())
        .select_from(ReviewVote)
        .where(col(ReviewVote.eval_id) == eval_id, col(ReviewVote.item_id) == col(Item.id), col(ReviewVote.settled_at).is_(None))
        .scalar_subquery()
    )


def _voted_by(eval_id: int, actor: str) -> ColumnElement[bool]:
    return exists().where(col(ReviewVote.eval_id) == eval_id, col(ReviewVote.item_id) == col(Item.id), col(ReviewVote.reviewer) == actor, col(ReviewVote.settled_at).is_(None))


def _claimed(eval_id: int, now: datetime, *, by: str | None = None, not_by: str | None = None) -> ColumnElement[bool]:
    conditions = [col(ReviewClaim.eval_id) == eval_id, col(ReviewClaim.item_id) == col(Item.id), col(ReviewClaim.expires_at) > now]
    if by is not None:
        conditions.append(col(ReviewClaim.reviewer) == by)
    if not_by is not None:
        conditions.append(col(ReviewClaim.reviewer) != not_by)
    return exists().where(*conditions)


def _claims_by_others(eval_id: int, actor: str, now: datetime) -> ColumnElement[int]:
    return (
        select(func.count())
        .select_from(ReviewClaim)
        .where(col(ReviewClaim.eval_id) == eval_id, col(ReviewClaim.item_id) == col(Item.id), col(ReviewClaim.reviewer) != actor, col(ReviewClaim.expires_at) > now)
        .scalar_subquery()
    )


def _assigned_to(evaluation: Eval, reviewer: str) -> ColumnElement[bool]:
    """SQL: the item is assigned to `reviewer` (`assigned_reviewers`): its id falls on them, or on one
    of the reviewers before them within the votes it needs."""
    people = evaluation.reviewers
    if reviewer not in people:
        return col(Item.id).is_(None)  # assigned nothing
    index, size = people.index(reviewer), len(people)
    needed = votes_needed_column(evaluation)
    return or_(*[and_(col(Item.id) % size == (index - step) % size, needed > step) for step in range(min(evaluation.reviewers_per_item, size))])


def _open_round_items(eval_id: int) -> SelectOfScalar[int]:
    return select(ReviewVote.item_id).where(col(ReviewVote.eval_id) == eval_id, col(ReviewVote.settled_at).is_(None)).group_by(col(ReviewVote.item_id))


def mine_conditions(evaluation: Eval, actor: str, now: datetime) -> list[ColumnElement[bool]]:
    """SQL conditions on `item` for what waits for `actor`'s vote on the eval (`QueueView.MINE`):
    items they have no open vote on whose round still needs votes, and on a claim eval only those
    they hold a claim on, on a round-robin eval only those assigned to them. Each is an
    uncorrelated look-up in the (small) vote and claim tables, or arithmetic on the item's id, so
    a count over a large pool reads no vote per item."""
    assert evaluation.id is not None
    mine = select(ReviewVote.item_id).where(col(ReviewVote.eval_id) == evaluation.id, col(ReviewVote.reviewer) == actor, col(ReviewVote.settled_at).is_(None))
    full = _open_round_items(evaluation.id).having(func.count() >= votes_needed_column(evaluation, col(ReviewVote.item_id)))
    conditions: list[ColumnElement[bool]] = [col(Item.id).not_in(mine), col(Item.id).not_in(full)]
    if evaluation.review_assignment == ReviewAssignment.CLAIM.value:
        held = select(ReviewClaim.item_id).where(col(ReviewClaim.eval_id) == evaluation.id, col(ReviewClaim.reviewer) == actor, col(ReviewClaim.expires_at) > now)
        conditions.append(col(Item.id).in_(held))
    elif evaluation.review_assignment == ReviewAssignment.ROUND_ROBIN.value:
        conditions.append(_assigned_to(evaluation, person(actor)))
    return conditions


def disputed_conditions(evaluation: Eval) -> list[ColumnElement[bool]]:
    """SQL conditions on `item` for the eval's disagreements (`QueueView.DISPUTED`): open votes
    that differ (one uncorrelated look-up in the vote table)."""
    assert evaluation.id is not None
    differing = _open_round_items(evaluation.id).having(func.count(func.distinct(col(ReviewVote.decision))) > 1)
    return [col(Item.id).in_(differing)]


def _require_reviewable(session: Session, evaluation: Eval, item_id: int) -> Item:
    item = session.get(Item, item_id)
    if item is None:
        raise TeamReviewRefused("not_found", f"no item with id {item_id}", 404)
    source = session.exec(select(Source.name).where(Source.id == item.source_id)).one()
    if source not in evaluation.sources:
        raise TeamReviewRefused("not_in_eval", f"item {item_id} is from source {source!r}, which eval {evaluation.name!r} does not take", 409)
    if item.status != ItemStatus.UNIQUE.value:
        raise TeamReviewRefused("not_reviewable", f"item {item_id} is {item.status}, not waiting for review", 409)
    return item


def _votes_read(votes: Sequence[ReviewVote]) -> list[VoteRead]:
    return [VoteRead(reviewer=vote.reviewer, decision=Decision(vote.decision), reason=vote.reason, cast_at=vote.cast_at) for vote in votes]


def _details(votes: Sequence[ReviewVote], **more: object) -> dict[str, object]:
    return {"votes": [{"reviewer": vote.reviewer, "decision": vote.decision} for vote in votes], **more}


def cast_vote(
    *, session: Session, evaluation: Eval, item_id: int, actor: str, decision: Decision, reason: str, now: datetime, unread: Collection[int] = ()
) -> RoundOutcome:
    """Record `actor`'s vote on the item in the eval's review and audit it (`review.vote`). When the
    round then has the votes the item needs, agreeing votes decide it (`curation.review.decide`, the
    votes in its event) and differing ones make it disputed (`review.disputed`). Raises
    TeamReviewRefused: `not_team_review` (409), `not_found` (404), `not_in_eval`, `not_reviewable`,
    `not_assigned`, `already_voted`, `enough_votes`, `unread` (409), `reason_required` (422)."""
    assert evaluation.id is not None
    if not is_team_review(evaluation):
        raise TeamReviewRefused("not_team_review", f"eval {evaluation.name!r} is reviewed by single decisions: approve or reject the item", 409)
    reason = reason.strip()
    if decision is Decision.REJECT and not reason:
        raise TeamReviewRefused("reason_required", f"a vote to reject item {item_id} needs a reason, so the others and the adjudicator see why", 422)
    if decision is Decision.APPROVE and item_id in unread:
        raise TeamReviewRefused("unread", UNREAD_DETAIL.format(item_id=item_id), 409)
    _require_reviewable(session, evaluation, item_id)
    assigned = assigned_reviewers(evaluation, item_id)
    if assigned and person(actor) not in assigned:
        raise TeamReviewRefused("not_assigned", f"item {item_id} of eval {evaluation.name!r} is assigned to {', '.join(assigned)}, not to {person(actor)}", 409)
    votes = open_votes(session, evaluation.id, item_id)
    needed = votes_needed(evaluation, item_id)
    mine = next((vote for vote in votes if vote.reviewer == actor), None)
    if mine is not None:
        raise TeamReviewRefused("already_voted", f"you voted {mine.decision} on item {item_id} at {mine.cast_at:%Y-%m-%d %H:%M} UTC; it waits for the other votes", 409)
    if len(votes) >= needed:
        raise TeamReviewRefused("enough_votes", f"item {item_id} has the {needed} vote(s) it needs and waits for an adjudicator", 409)
    vote = ReviewVote(eval_id=evaluation.id, item_id=item_id, reviewer=actor, decision=decision.value, reason=reason, cast_at=now)
    session.add(vote)
    session.exec(delete(ReviewClaim).where(col(ReviewClaim.eval_id) == evaluation.id, col(ReviewClaim.item_id) == item_id, col(ReviewClaim.reviewer) == actor))
    details = {"eval": evaluation.name, "decision": decision.value, "reason": reason, "votes": len(votes) + 1, "needed": needed}
    session.add(AuditEvent(actor=actor, action=AuditAction.REVIEW_VOTE, object_type="item", object_id=str(item_id), details=details, at=now))
    votes.append(vote)
    shown = _votes_read(votes)
    if len(votes) < needed:
        return RoundOutcome(item_id=item_id, eval=evaluation.name, state=RoundState.WAITING, needed=needed, votes=shown, status=ItemStatus.UNIQUE.value)
    if len({entry.decision for entry in votes}) == 1:
        settled = _details(votes, eval=evaluation.name, settled="agreement")
        item = decide(session=session, item_id=item_id, decision=decision, reason=reason, actor=actor, now=now, unread=unread, settled_by=settled)
        return RoundOutcome(item_id=item_id, eval=evaluation.name, state=RoundState.DECIDED, needed=needed, votes=shown, status=item.status)
    disputed = _details(votes, eval=evaluation.name)
    session.add(AuditEvent(actor=actor, action=AuditAction.REVIEW_DISPUTED, object_type="item", object_id=str(item_id), details=disputed, at=now))
    return RoundOutcome(item_id=item_id, eval=evaluation.name, state=RoundState.DISPUTED, needed=needed, votes=shown, status=ItemStatus.UNIQUE.value)


def withdraw_vote(*, session: Session, evaluation: Eval, item_id: int, actor: str, now: datetime) -> RoundOutcome:
    """Take back `actor`'s open vote on the item (a round not settled yet; a disputed one too), audited
    (`review.vote_withdrawn`). Raises TeamReviewRefused `no_vote` (409) when there is none."""
    assert evaluation.id is not None
    votes = open_votes(session, evaluation.id, item_id)
    mine = next((vote for vote in votes if vote.reviewer == actor), None)
    if mine is None:
        raise TeamReviewRefused("no_vote", f"you have no open vote on item {item_id} of eval {evaluation.name!r} to take back", 409)
    session.delete(mine)
    details = {"eval": evaluation.name, "decision": mine.decision, "cast_at": mine.cast_at.isoformat()}
    session.add(AuditEvent(actor=actor, action=AuditAction.REVIEW_VOTE_WITHDRAWN, object_type="item", object_id=str(item_id), details=details, at=now))
    rest = [vote for vote in votes if vote is not mine]
    item = session.get(Item, item_id)
    status = item.status if item is not None else ItemStatus.UNIQUE.value
    return RoundOutcome(item_id=item_id, eval=evaluation.name, state=RoundState.WAITING, needed=votes_needed(evaluation, item_id), votes=_votes_read(rest), status=status)


def adjudicate(
    *,
    session: Session,
    evaluation: Eval,
    item_id: int,
    actor: str,
    allowed: bool,
    decision: Decision,
    reason: str,
    now: datetime,
    unread: Collection[int] = (),
) -> RoundOutcome:
    """Decide the item for the eval as its adjudicator (`allowed`: `may_adjudicate`), whatever its
    votes, closing its round; the votes go into the decision's audit event. Raises
    TeamReviewRefused `not_adjudicator` (403) and the refusals of `curation.review.decide`."""
    assert evaluation.id is not None
    if not allowed:
        who = ", ".join(evaluation.adjudicators) if evaluation.adjudicators else "an admin"
        raise TeamReviewRefused("not_adjudicator", f"disagreements on eval {evaluation.name!r} are decided by {who}, not by {person(actor)}", 403)
    _require_reviewable(session, evaluation, item_id)
    votes = open_votes(session, evaluation.id, item_id)
    needed = votes_needed(evaluation, item_id)
    settled = _details(votes, eval=evaluation.name, settled="adjudication")
    item = decide(session=session, item_id=item_id, decision=decision, reason=reason, actor=actor, now=now, unread=unread, settled_by=settled)
    return RoundOutcome(item_id=item_id, eval=evaluation.name, state=RoundState.DECIDED, needed=needed, votes=_votes_read(votes), status=item.status)


@dataclass(frozen=True)
class TeamDecision:
    """One decision of a batch taken by team review: a vote, or an adjudication."""

    item_id: int
    decision: Decision
    reason: str = ""


@dataclass
class BatchOutcome:
    """What a batch of votes or adjudications did: each round's outcome, and each refused one
    with why (its item id and the refusal's detail); the others are kept."""

    rounds: list[RoundOutcome]
    refused: list[tuple[int, str]]


def decide_batch(
    *,
    session: Session,
    evaluation: Eval,
    actor: str,
    decisions: Sequence[TeamDecision],
    adjudicating: bool,
    allowed: bool,
    now: datetime,
    unread: Collection[int] = (),
) -> BatchOutcome:
    """Each decision as a vote (`cast_vote`) or, when `adjudicating`, an adjudication
    (`adjudicate`, `allowed` as there), on its own savepoint: a refused one leaves nothing behind
    and the others are kept. The caller commits."""
    outcome = BatchOutcome(rounds=[], refused=[])
    for entry in decisions:
        try:
            with session.begin_nested():
                done = _settle(session, evaluation, actor, entry, adjudicating=adjudicating, allowed=allowed, now=now, unread=unread)
        except Refused as exc:
            outcome.refused.append((entry.item_id, exc.detail))
            continue
        outcome.rounds.append(done)
    return outcome


def _settle(
    session: Session, evaluation: Eval, actor: str, entry: TeamDecision, *, adjudicating: bool, allowed: bool, now: datetime, unread: Collection[int]
) -> RoundOutcome:
    if adjudicating:
        return adjudicate(
            session=session,
            evaluation=evaluation,
            item_id=entry.item_id,
            actor=actor,
            allowed=allowed,
            decision=entry.decision,
            reason=entry.reason,
            now=now,
            unread=unread,
        )
    return cast_vote(session=session, evaluation=evaluation, item_id=entry.item_id, actor=actor, decision=entry.decision, reason=entry.reason, now=now, unread=unread)


@dataclass(frozen=True)
class ClaimScope:
    """What a claim hands out: the items of the eval's queue (`conditions` on `item`: its sources,
    less those it took without review), oldest incident first."""

    conditions: Sequence[ColumnElement[bool]]


def claim_batch(*, session: Session, evaluation: Eval, actor: str, size: int, scope: ClaimScope, now: datetime, hours: float = CLAIM_HOURS) -> ClaimOutcome:
    """Hold up to `size` items of the eval's queue for `actor` until `now + hours`, audited
    (`review.claim`): the claims they still hold, then the oldest items they have not voted on
    whose round has room (open votes and others' live claims fewer than the votes it needs). Expired
    claims are dropped first. Raises TeamReviewRefused `not_claim` (409) on an eval not shared by
    claims."""
    assert evaluation.id is not None
    if evaluation.review_assignment != ReviewAssignment.CLAIM.value or not is_team_review(evaluation):
        raise TeamReviewRefused("not_claim", f"eval {evaluation.name!r} does not share its queue by claims (assignment: {evaluation.review_assignment})", 409)
    session.exec(delete(ReviewClaim).where(col(ReviewClaim.eval_id) == evaluation.id, col(ReviewClaim.expires_at) <= now))
    expires = now + timedelta(hours=hours)
    order = (col(Item.occurred_at), col(Item.id))
    unvoted = ~_voted_by(evaluation.id, actor)
    held = list(session.exec(select(Item.id).where(*scope.conditions, _claimed(evaluation.id, now, by=actor), unvoted).order_by(*order)).all())
    room = _open_count(evaluation.id) + _claims_by_others(evaluation.id, actor, now) < votes_needed_column(evaluation)
    wanted = max(size - len(held), 0)
    fresh: list[int | None] = []
    if wanted:
        fresh = list(session.exec(select(Item.id).where(*scope.conditions, ~_claimed(evaluation.id, now, by=actor), unvoted, room).order_by(*order).limit(wanted)).all())
    for item_id in fresh:
        assert item_id is not None
        session.add(ReviewClaim(eval_id=evaluation.id, item_id=item_id, reviewer=actor, claimed_at=now, expires_at=expires))
    if held:  # a new claim renews the batch held
        session.exec(
            ReviewClaim.__table__.update()  # type: ignore[attr-defined]
            .where(col(ReviewClaim.eval_id) == evaluation.id, col(ReviewClaim.reviewer) == actor, col(ReviewClaim.item_id).in_(held))
            .values(expires_at=expires)
        )
    if fresh:
        details = {"eval": evaluation.name, "items": fresh, "expires_at": expires.isoformat()}
        session.add(AuditEvent(actor=actor, action=AuditAction.REVIEW_CLAIM, object_type="eval", object_id=evaluation.name, details=details, at=now))
    ids = [item_id for item_id in held + fresh if item_id is not None]
    return ClaimOutcome(eval=evaluation.name, held=ids, claimed=[item_id for item_id in fresh if item_id is not None], expires_at=expires if ids else None)


def release_claims(*, session: Session, evaluation: Eval, actor: str, now: datetime) -> int:
    """Give back every claim `actor` holds on the eval, audited (`review.claims_released`); how many."""
    claims = list(session.exec(select(ReviewClaim).where(ReviewClaim.eval_id == evaluation.id, ReviewClaim.reviewer == actor, col(ReviewClaim.expires_at) > now)).all())
    session.exec(delete(ReviewClaim).where(col(ReviewClaim.eval_id) == evaluation.id, col(ReviewClaim.reviewer) == actor))
    if claims:
        details = {"eval": evaluation.name, "items": sorted(claim.item_id for claim in claims)}
        session.add(AuditEvent(actor=actor, action=AuditAction.REVIEW_CLAIMS_RELEASED, object_type="eval", object_id=evaluation.name, details=details, at=now))
    return len(claims)
