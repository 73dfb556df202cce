"""What a team did on an eval's review (`curation.team_review`), per person and in agreement: each
reviewer's claims, votes and how many agreed with the outcome their round got, adjudications, and
over the rounds with two votes or more, the percent agreement and Fleiss' kappa. Reads only."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from datetime import datetime

from sqlmodel import Session, col, select

from schemas.audit import AuditEvent
from schemas.evals import Eval
from schemas.lifecycle import ItemAction
from schemas.review import Decision
from schemas.team_review import ReviewClaim, ReviewerProgress, ReviewVote, TeamReview


def fleiss_kappa(rounds: Sequence[Counter[str]]) -> float | None:
    """Fleiss' kappa over rounds that each have the same number (two or more) of votes, each a count
    of votes per decision: (P - Pe) / (1 - Pe), with P the mean share of agreeing pairs of votes in
    a round and Pe the agreement expected by chance from the decisions' overall shares. None with
    fewer than two rounds, or when chance agreement is total (every vote the same)."""
    if len(rounds) < 2:
        return None
    raters = sum(rounds[0].values())
    if raters < 2 or any(sum(counts.values()) != raters for counts in rounds):
        return None
    observed = sum((sum(count * count for count in counts.values()) - raters) / (raters * (raters - 1)) for counts in rounds) / len(rounds)
    totals: Counter[str] = Counter()
    for counts in rounds:
        totals.update(counts)
    chance = sum((count / (raters * len(rounds))) ** 2 for count in totals.values())
    if chance >= 1:
        return None
    return (observed - chance) / (1 - chance)


def team_review(*, session: Session, evaluation: Eval, waiting_for_votes: int, disputed: int, now: datetime) -> TeamReview:
    """The eval's team settings and progress (`schemas.team_review.TeamReview`): per person and in
    agreement, from the eval's votes (settled rounds grouped by when they settled; disputed rounds
    still open count too), claims and adjudications. `waiting_for_votes` and `disputed` are the
    queue's counts, which the caller reads with its filters."""
    assert evaluation.id is not None
    votes = list(session.exec(select(ReviewVote).where(ReviewVote.eval_id == evaluation.id)).all())
    claims = Counter(session.exec(select(ReviewClaim.reviewer).where(ReviewClaim.eval_id == evaluation.id, col(ReviewClaim.expires_at) > now)).all())
    rounds: dict[tuple[int, datetime | None], list[ReviewVote]] = defaultdict(list)
    for vote in votes:
        rounds[(vote.item_id, vote.settled_at)].append(vote)
    counted = [entries for entries in rounds.values() if len(entries) >= 2]
    unanimous = sum(1 for entries in counted if len({vote.decision for vote in entries}) == 1)
    full = [Counter(vote.decision for vote in entries) for entries in counted if len(entries) == evaluation.reviewers_per_item]
    adjudications = _adjudications(session, evaluation)
    people: dict[str, ReviewerProgress] = {}
    for vote in votes:
        entry = people.setdefault(vote.reviewer, _progress(vote.reviewer))
        entry.votes += 1
        entry.approved += vote.decision == Decision.APPROVE.value
        entry.rejected += vote.decision == Decision.REJECT.value
        entry.waiting += vote.settled_at is None
        entry.settled += vote.settled_at is not None and vote.outcome is not None
        entry.agreed_with_outcome += vote.outcome == vote.decision
        entry.last_at = max(filter(None, (entry.last_at, vote.cast_at)))
    for actor, count in claims.items():
        people.setdefault(actor, _progress(actor)).claimed = count
    for actor, at in adjudications:
        entry = people.setdefault(actor, _progress(actor))
        entry.adjudicated += 1
        entry.last_at = max(filter(None, (entry.last_at, at)))
    return TeamReview(
        eval=evaluation.name,
        reviewers_per_item=evaluation.reviewers_per_item,
        agreement_sample=evaluation.agreement_sample,
        assignment=evaluation.review_assignment,
        reviewers=evaluation.reviewers,
        adjudicators=evaluation.adjudicators,
        guidelines=evaluation.review_guidelines,
        waiting_for_votes=waiting_for_votes,
        disputed=disputed,
        rounds=len(counted),
        unanimous=unanimous,
        percent_agreement=unanimous / len(counted) if counted else None,
        fleiss_kappa=fleiss_kappa(full),
        people=sorted(people.values(), key=lambda entry: entry.reviewer),
    )


def _progress(actor: str) -> ReviewerProgress:
    return ReviewerProgress(reviewer=actor, claimed=0, votes=0, approved=0, rejected=0, waiting=0, settled=0, agreed_with_outcome=0, adjudicated=0, last_at=None)


def _adjudications(session: Session, evaluation: Eval) -> list[tuple[str, datetime]]:
    """Who adjudicated on the eval, and when: decisions whose event says so."""
    query = select(AuditEvent).where(col(AuditEvent.action).in_([ItemAction.APPROVE.value, ItemAction.REJECT.value]), AuditEvent.object_type == "item")
    found = []
    for event in session.exec(query.where(col(AuditEvent.id).in_(_settled_event_ids(session, evaluation)))).all():
        if event.details.get("settled") == "adjudication" and event.details.get("eval") == evaluation.name:
            found.append((event.actor, event.at))
    return found


def _settled_event_ids(session: Session, evaluation: Eval) -> list[int]:
    """The ids of the decision events on items this eval's votes touched (a bounded look-up, not a
    scan of the audit log)."""
    item_ids = sorted({str(item_id) for item_id in session.exec(select(ReviewVote.item_id).where(ReviewVote.eval_id == evaluation.id)).all()})
    if not item_ids:
        return []
    decisions = [ItemAction.APPROVE.value, ItemAction.REJECT.value]
    query = select(AuditEvent.id).where(AuditEvent.object_type == "item", col(AuditEvent.object_id).in_(item_ids), col(AuditEvent.action).in_(decisions))
    return [event_id for event_id in session.exec(query).all() if event_id is not None]
