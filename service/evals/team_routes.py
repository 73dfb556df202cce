"""Team review over HTTP (`curate`): claim a batch of an eval's queue and give it back, vote on an
item, adjudicate a disagreement (the eval's adjudicators, or admins when it names none), and read
the team's progress and agreement. The queue's views are `GET /v1/evals/{name}/review-queue?view=`.

Answers never carry an item's content, so no sealed text goes out through them; an approval vote
or adjudication of a sealed-bound item is refused unless its text was shown to the voter in an
token with the `sealed` scope, which reads it in full (`service.evals.sealed_review.unread_by`).
"""

from __future__ import annotations

from fastapi import APIRouter

from curation.team_progress import team_review
from curation.team_review import ClaimScope, adjudicate, cast_vote, claim_batch, may_adjudicate, release_claims, withdraw_vote
from schemas.common import utcnow
from schemas.review import Decision
from schemas.team_review import ClaimBody, ClaimOutcome, RoundOutcome, TeamReview, VoteBody
from schemas.token import Scope
from service.core.auth import CuratePrincipal
from service.core.deps import SecretKeyDep, SessionDep, WriteSessionDep
from service.core.problems import problem_doc
from service.evals.definitions import require_eval
from service.evals.review_queue import queue_scope
from service.evals.sealed_review import unread_by
from service.evals.team_views import view_counts

team_router = APIRouter(prefix="/v1/evals/{name}/review", tags=["review"])


@team_router.post("/claims", response_model=ClaimOutcome, responses=problem_doc(401, 403, 404, 409, 422))
def claim(name: str, data: ClaimBody, principal: CuratePrincipal, session: WriteSessionDep) -> ClaimOutcome:
    """Hold up to `size` items of the eval's queue for this reviewer (an eval shared by claims):
    the ones still held, then the oldest not voted on whose round has room. Held for four hours,
    renewed by each claim; audited."""
    evaluation = require_eval(session=session, name=name)
    return claim_batch(session=session, evaluation=evaluation, actor=principal.actor, size=data.size, scope=ClaimScope(queue_scope(session, evaluation)), now=utcnow())


@team_router.delete("/claims", responses=problem_doc(401, 403, 404))
def give_back(name: str, principal: CuratePrincipal, session: WriteSessionDep) -> dict[str, int]:
    """Give back every claim this reviewer holds on the eval (audited): `released`, how many."""
    evaluation = require_eval(session=session, name=name)
    return {"released": release_claims(session=session, evaluation=evaluation, actor=principal.actor, now=utcnow())}


@team_router.post("/votes", response_model=RoundOutcome, responses=problem_doc(401, 403, 404, 409, 422))
def vote(name: str, data: VoteBody, principal: CuratePrincipal, session: WriteSessionDep, secret_key: SecretKeyDep) -> RoundOutcome:
    """This reviewer's vote on an item of the eval's queue (a rejection with a reason). The round
    settles when the votes the item needs agree (the item is approved or rejected), or waits for an
    adjudicator when they differ (`state`: waiting, decided, disputed). 409 when the item waits for
    nobody's vote, was voted on by this reviewer already, is assigned to others, or is sealed-bound
    and this token may not read it (no `sealed` scope)."""
    evaluation = require_eval(session=session, name=name)
    unread = unread_by(session=session, principal=principal, item_ids=[data.item_id], secret_key=secret_key, through_window=False) if data.decision is Decision.APPROVE else set()
    actor = principal.actor
    return cast_vote(session=session, evaluation=evaluation, item_id=data.item_id, actor=actor, decision=data.decision, reason=data.reason, now=utcnow(), unread=unread)


@team_router.delete("/votes/{item_id}", response_model=RoundOutcome, responses=problem_doc(401, 403, 404, 409))
def take_back(name: str, item_id: int, principal: CuratePrincipal, session: WriteSessionDep) -> RoundOutcome:
    """Take back this reviewer's open vote on the item (before its round settles); audited."""
    evaluation = require_eval(session=session, name=name)
    return withdraw_vote(session=session, evaluation=evaluation, item_id=item_id, actor=principal.actor, now=utcnow())


@team_router.post("/adjudications", response_model=RoundOutcome, responses=problem_doc(401, 403, 404, 409, 422))
def adjudication(name: str, data: VoteBody, principal: CuratePrincipal, session: WriteSessionDep, secret_key: SecretKeyDep) -> RoundOutcome:
    """Decide an item of the eval as its adjudicator (403 for anyone else), whatever its votes; the
    votes go into the decision's audit event."""
    evaluation = require_eval(session=session, name=name)
    allowed = may_adjudicate(evaluation, principal.actor, is_admin=Scope.ADMIN.value in principal.scopes)
    unread = unread_by(session=session, principal=principal, item_ids=[data.item_id], secret_key=secret_key, through_window=False) if data.decision is Decision.APPROVE else set()
    return adjudicate(
        session=session,
        evaluation=evaluation,
        item_id=data.item_id,
        actor=principal.actor,
        allowed=allowed,
        decision=data.decision,
        reason=data.reason,
        now=utcnow(),
        unread=unread,
    )


@team_router.get("/team", response_model=TeamReview, responses=problem_doc(401, 403, 404))
def team(name: str, principal: CuratePrincipal, session: SessionDep) -> TeamReview:
    """The eval's team settings and progress: per person (claims, votes, agreement with outcomes,
    adjudications), the rounds' percent agreement and Fleiss' kappa, what waits for this reviewer
    (`waiting_for_votes`) and the disagreements waiting for an adjudicator."""
    evaluation = require_eval(session=session, name=name)
    now = utcnow()
    counts = view_counts(session, evaluation, actor=principal.actor, now=now)
    return team_review(session=session, evaluation=evaluation, waiting_for_votes=counts.mine, disputed=counts.disputed, now=now)

