"""The review page of an eval reviewed by a team (`curation.team_rounds.is_team_review`): its views
(what waits for my vote, the disagreements, everything) with their counts, claiming a batch and
giving it back, the votes an adjudicator decides between, and what a vote or an adjudication did,
said in one line. On such an eval the page's Approve and Reject cast votes; in the disagreements
view they are the adjudicator's decision.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Annotated

from fastapi import Form, Request
from fastapi.responses import RedirectResponse
from sqlmodel import Session, select

from curation.team_review import ClaimScope, TeamDecision, adjudicate, cast_vote, claim_batch, decide_batch, may_adjudicate, person, release_claims
from curation.team_rounds import open_votes
from schemas.audit import AuditEvent
from schemas.common import utcnow
from schemas.evals import Eval, ReviewAssignment
from schemas.review import Decision, ReviewDecision
from schemas.team_review import QueueView, ReviewVote, RoundOutcome, RoundState
from schemas.token import Scope
from service.core.auth import Principal
from service.core.deps import WriteSessionDep
from service.evals.definitions import require_eval
from service.evals.review_queue import queue_scope
from service.evals.team_views import ViewCounts, default_view, view_counts
from service.ui.pages import done, need, ui_router
from service.ui.refusals import shows_refusal

router = ui_router()
VIEWS = frozenset(view.value for view in QueueView)
CLAIM_SIZE = 20


@dataclass(frozen=True)
class TeamPlace:
    """What the review page shows of the eval's team review to one person: the view, the views'
    counts, whether the person adjudicates, and the eval's settings they work by."""

    view: QueueView
    counts: ViewCounts
    adjudicator: bool
    claims: bool
    needed: int
    guidelines: str
    adjudicators: Sequence[str]

    @classmethod
    def of(cls, session: Session, evaluation: Eval, view: QueueView | None, who: Principal) -> TeamPlace:
        adjudicator = may_adjudicate(evaluation, who.actor, is_admin=Scope.ADMIN.value in who.scopes)
        return cls(
            view=view or default_view(evaluation),
            counts=view_counts(session, evaluation, actor=who.actor, now=utcnow()),
            adjudicator=adjudicator,
            claims=evaluation.review_assignment == ReviewAssignment.CLAIM.value,
            needed=evaluation.reviewers_per_item,
            guidelines=evaluation.review_guidelines,
            adjudicators=evaluation.adjudicators,
        )


def votes_shown(session: Session, evaluation: Eval, item_id: int, team: TeamPlace, actor: str) -> list[ReviewVote]:
    """The open votes on the item that the page shows: all of them in the disagreements view (what
    the adjudicator decides between), otherwise only the person's own (the others' would sway them)."""
    assert evaluation.id is not None
    votes = open_votes(session, evaluation.id, item_id)
    return votes if team.view is QueueView.DISPUTED else [vote for vote in votes if vote.reviewer == actor]


def vote_still_open(session: Session, event: AuditEvent) -> bool:
    """Whether the vote recorded by `event` (`review.vote`) is still open, so Undo can take it back."""
    name = event.details.get("eval")
    if not isinstance(name, str) or event.object_id is None or not event.object_id.isdigit():
        return False
    evaluation = session.exec(select(Eval).where(Eval.name == name)).first()
    if evaluation is None or evaluation.id is None:
        return False
    return any(vote.reviewer == event.actor for vote in open_votes(session, evaluation.id, int(event.object_id)))


def team_decision(
    session: Session, evaluation: Eval, who: Principal, item_id: int, decision: Decision, reason: str, *, adjudicating: bool, unread: Collection[int]
) -> RoundOutcome:
    """The person's vote on the item, or, from the disagreements view, their decision as adjudicator."""
    now = utcnow()
    if adjudicating:
        allowed = may_adjudicate(evaluation, who.actor, is_admin=Scope.ADMIN.value in who.scopes)
        return adjudicate(session=session, evaluation=evaluation, item_id=item_id, actor=who.actor, allowed=allowed, decision=decision, reason=reason, now=now, unread=unread)
    return cast_vote(session=session, evaluation=evaluation, item_id=item_id, actor=who.actor, decision=decision, reason=reason, now=now, unread=unread)


def said(outcome: RoundOutcome, decision: Decision) -> str:
    """What a vote or an adjudication did, in one line for the page's notice."""
    item = f"item {outcome.item_id}"
    if outcome.state is RoundState.WAITING:
        missing = outcome.needed - len(outcome.votes)
        return f"Your vote to {decision.value} {item} is in; it waits for {missing} more vote{'s' if missing != 1 else ''}. Press u or Undo to take it back."
    if outcome.state is RoundState.DISPUTED:
        votes = ", ".join(f"{person(vote.reviewer)}: {vote.decision.value}" for vote in outcome.votes)
        return f"The votes on {item} differ ({votes}): it goes to the adjudicator."
    agreed = len(outcome.votes) > 1 and len({vote.decision for vote in outcome.votes}) == 1
    how = "the votes agreed" if agreed else "decided"
    return f"{item.capitalize()} {outcome.status} ({how})."


def team_batch(session: Session, evaluation: Eval, who: Principal, decisions: Sequence[ReviewDecision], *, adjudicating: bool, unread: Collection[int]) -> str:
    """Each decision as a vote (or an adjudication) on its own (`curation.team_review.decide_batch`);
    what happened, in one line."""
    allowed = may_adjudicate(evaluation, who.actor, is_admin=Scope.ADMIN.value in who.scopes)
    entries = [TeamDecision(item_id=entry.item_id, decision=entry.decision, reason=entry.reason) for entry in decisions]
    outcome = decide_batch(session=session, evaluation=evaluation, actor=who.actor, decisions=entries, adjudicating=adjudicating, allowed=allowed, now=utcnow(), unread=unread)
    states = Counter(done.state.value for done in outcome.rounds)
    parts = [f"{count} {state}" for state, count in sorted(states.items())]
    if outcome.refused:
        parts.append(f"refused {len(outcome.refused)} ({'; '.join(detail for _, detail in outcome.refused[:3])})")
    return ("Adjudicated: " if adjudicating else "Votes cast: ") + (", ".join(parts) or "none") + "."


def _review_url(name: str) -> str:
    return f"/ui/evals/{name}/review?view=mine"


@router.post("/ui/evals/{name}/review/claim")
def claim(request: Request, name: str, session: WriteSessionDep, size: Annotated[int, Form(ge=1, le=200)] = CLAIM_SIZE) -> RedirectResponse:
    """Claim the person's next batch of the eval's queue (an eval shared by claims)."""
    who = need(request, Scope.CURATE, "Claiming items to review")
    shows_refusal(request, lambda refusal: done(_review_url(name), f"Nothing claimed: {refusal.detail}"))
    evaluation = require_eval(session=session, name=name)
    outcome = claim_batch(session=session, evaluation=evaluation, actor=who.actor, size=size, scope=_scope(session, evaluation), now=utcnow())
    if not outcome.held:
        return done(_review_url(name), "Nothing to claim: every item waiting has the reviewers it needs, or you voted on it.")
    until = f"{outcome.expires_at:%H:%M} UTC" if outcome.expires_at else ""
    return done(_review_url(name), f"You hold {len(outcome.held)} item(s) ({len(outcome.claimed)} new) until {until}; nobody else is handed them meanwhile.")


@router.post("/ui/evals/{name}/review/claims/release")
def give_back(request: Request, name: str, session: WriteSessionDep) -> RedirectResponse:
    """Give back every item the person holds on the eval."""
    who = need(request, Scope.CURATE, "Giving back claimed items")
    evaluation = require_eval(session=session, name=name)
    released = release_claims(session=session, evaluation=evaluation, actor=who.actor, now=utcnow())
    return done(_review_url(name), f"Gave back {released} item(s): others may claim them now.")


def _scope(session: Session, evaluation: Eval) -> ClaimScope:
    return ClaimScope(queue_scope(session, evaluation))
