"""Team review on both databases: reviewers share an eval's queue by claims or round-robin, a round
settles when the votes an item needs agree, differing votes wait for an adjudicator (and only for
them), no single person decides an item the eval asks several votes of, and the team's progress and
agreement are counted from the votes."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from curation.refusals import Refused
from curation.review import ReviewRefused, decide
from curation.team_progress import fleiss_kappa, team_review
from curation.team_review import (
    ClaimScope,
    adjudicate,
    assigned_reviewers,
    cast_vote,
    claim_batch,
    may_adjudicate,
    withdraw_vote,
)
from curation.team_rounds import votes_needed
from schemas.audit import AuditAction, AuditEvent
from schemas.evals import Eval, EvalCreate, EvalUpdate
from schemas.item import Item, ItemStatus
from schemas.review import Decision
from schemas.team_review import QueueView, ReviewVote, RoundState
from service.core.db import write_transaction
from service.core.problems import ProblemError
from service.evals.definitions import create_eval, require_eval, update_eval
from service.evals.review_queue import queue_scope
from service.evals.team_views import view_conditions, view_counts
from tests.conftest import TEST_SECRET_KEY
from tests.eval_support import ingest_and_curate
from tests.evals.integration.test_refresh import kev

NOW = datetime(2026, 12, 5, 12, tzinfo=UTC)
ALICE, BOB, CAROL, JUDGE = "token:alice", "token:bob", "token:carol", "token:judge"


def _world(engine: Engine, count: int = 8, **team: Any) -> list[int]:
    """`count` unique items of source `kev` and an eval `team` over it with `team`'s settings; the
    item ids, oldest incident first."""
    ingest_and_curate(engine, "kev", [kev(number, f"2024-01-{number:02d}") for number in range(1, count + 1)])
    with write_transaction(engine) as session:
        create_eval(session=session, data=EvalCreate(name="team", sources=["kev"], **team), secret_key=TEST_SECRET_KEY, actor="test")
    with Session(engine) as session:
        items = session.exec(select(Item).order_by(col(Item.occurred_at), col(Item.id))).all()
        assert all(item.status == ItemStatus.UNIQUE.value for item in items)
        return [item.id for item in items if item.id is not None]


def _claim(engine: Engine, actor: str, size: int, now: datetime = NOW) -> list[int]:
    with write_transaction(engine) as session:
        evaluation = require_eval(session=session, name="team")
        return claim_batch(session=session, evaluation=evaluation, actor=actor, size=size, scope=ClaimScope(queue_scope(session, evaluation)), now=now).held


def _vote(engine: Engine, actor: str, item_id: int, decision: Decision, reason: str = "") -> RoundState:
    with write_transaction(engine) as session:
        evaluation = require_eval(session=session, name="team")
        return cast_vote(session=session, evaluation=evaluation, item_id=item_id, actor=actor, decision=decision, reason=reason, now=NOW).state


def _view(engine: Engine, view: QueueView, actor: str, now: datetime = NOW) -> list[int]:
    with Session(engine) as session:
        evaluation = require_eval(session=session, name="team")
        conditions = queue_scope(session, evaluation) + view_conditions(evaluation, view, actor=actor, now=now)
        return [item_id for item_id in session.exec(select(Item.id).where(*conditions).order_by(col(Item.occurred_at), col(Item.id))).all() if item_id is not None]


def _status(engine: Engine, item_id: int) -> str:
    with Session(engine) as session:
        item = session.get(Item, item_id)
        assert item is not None
        return item.status


def test_two_reviewers_share_a_claimed_queue_agree_and_disagree_and_the_adjudicator_decides(engine: Engine) -> None:
    ids = _world(engine, reviewers_per_item=2, review_assignment="claim", adjudicators=["judge"])
    assert _claim(engine, ALICE, 3) == ids[:3]
    assert _claim(engine, BOB, 3) == ids[:3]  # each item needs two votes: the second reviewer gets the same batch
    assert _claim(engine, CAROL, 3) == ids[3:6]  # the first three are full
    assert _view(engine, QueueView.MINE, ALICE) == ids[:3]

    assert _vote(engine, ALICE, ids[0], Decision.APPROVE) is RoundState.WAITING
    assert _status(engine, ids[0]) == ItemStatus.UNIQUE.value
    assert _vote(engine, BOB, ids[0], Decision.APPROVE) is RoundState.DECIDED
    assert _status(engine, ids[0]) == ItemStatus.APPROVED.value

    assert _vote(engine, ALICE, ids[1], Decision.APPROVE) is RoundState.WAITING
    assert _vote(engine, BOB, ids[1], Decision.REJECT, "two incidents told as one") is RoundState.DISPUTED
    assert _status(engine, ids[1]) == ItemStatus.UNIQUE.value
    assert _view(engine, QueueView.DISPUTED, JUDGE) == [ids[1]]
    assert ids[1] not in _view(engine, QueueView.MINE, ALICE) and ids[1] not in _view(engine, QueueView.MINE, CAROL)

    with write_transaction(engine) as session:
        evaluation = require_eval(session=session, name="team")
        with pytest.raises(Refused) as voted:
            cast_vote(session=session, evaluation=evaluation, item_id=ids[1], actor=CAROL, decision=Decision.APPROVE, reason="", now=NOW)
    assert voted.value.reason == "enough_votes"
    with write_transaction(engine) as session, pytest.raises(ReviewRefused) as alone:
        decide(session=session, item_id=ids[2], decision=Decision.APPROVE, reason="", actor=ALICE, now=NOW)
    assert alone.value.reason == "team_review" and "2 agreeing votes" in alone.value.detail

    with write_transaction(engine) as session:
        evaluation = require_eval(session=session, name="team")
        assert not may_adjudicate(evaluation, ALICE, is_admin=True)  # the eval names its adjudicator
        with pytest.raises(Refused) as refused:
            adjudicate(session=session, evaluation=evaluation, item_id=ids[1], actor=ALICE, allowed=False, decision=Decision.APPROVE, reason="", now=NOW)
        assert refused.value.status == 403
    with write_transaction(engine) as session:
        evaluation = require_eval(session=session, name="team")
        allowed = may_adjudicate(evaluation, JUDGE, is_admin=False)
        outcome = adjudicate(session=session, evaluation=evaluation, item_id=ids[1], actor=JUDGE, allowed=allowed, decision=Decision.REJECT, reason="two incidents", now=NOW)
    assert outcome.state is RoundState.DECIDED and _status(engine, ids[1]) == ItemStatus.REJECTED.value
    assert _view(engine, QueueView.DISPUTED, JUDGE) == []
    with Session(engine) as session:
        settled = session.exec(select(AuditEvent).where(AuditEvent.object_id == str(ids[1]), AuditEvent.action == "item.reject")).one()
        assert settled.actor == JUDGE and settled.details["settled"] == "adjudication"
        assert settled.details["votes"] == [{"reviewer": ALICE, "decision": "approve"}, {"reviewer": BOB, "decision": "reject"}]
        outcomes = {vote.reviewer: vote.outcome for vote in session.exec(select(ReviewVote).where(ReviewVote.item_id == ids[1]))}
        assert outcomes == {ALICE: "reject", BOB: "reject"}
        assert session.exec(select(AuditEvent).where(AuditEvent.action == AuditAction.REVIEW_DISPUTED.value)).one().object_id == str(ids[1])

    with Session(engine) as session:
        progress = team_review(session=session, evaluation=require_eval(session=session, name="team"), waiting_for_votes=0, disputed=0, now=NOW)
    people = {entry.reviewer: entry for entry in progress.people}
    assert (progress.rounds, progress.unanimous, progress.percent_agreement) == (2, 1, 0.5)
    assert (people[ALICE].votes, people[ALICE].agreed_with_outcome, people[BOB].agreed_with_outcome) == (2, 1, 2)
    assert (people[CAROL].claimed, people[CAROL].votes, people[JUDGE].adjudicated) == (3, 0, 1)


def test_a_claim_expires_and_its_items_go_to_the_next_reviewer(engine: Engine) -> None:
    ids = _world(engine, count=4, review_assignment="claim")
    assert _claim(engine, ALICE, 2) == ids[:2]
    assert _claim(engine, BOB, 2) == ids[2:]
    later = NOW + timedelta(hours=5)
    assert _claim(engine, CAROL, 2, now=later) == ids[:2]
    assert _view(engine, QueueView.MINE, ALICE, now=later) == []


def test_a_withdrawn_vote_leaves_the_round_open_and_one_vote_settles_an_item_outside_the_sample(engine: Engine) -> None:
    ids = _world(engine, count=6, reviewers_per_item=2, agreement_sample=0.5)
    with Session(engine) as session:
        evaluation = require_eval(session=session, name="team")
        needs = {item_id: votes_needed(evaluation, item_id) for item_id in ids}
    assert set(needs.values()) <= {1, 2}
    single = [item_id for item_id, needed in needs.items() if needed == 1]
    double = [item_id for item_id, needed in needs.items() if needed == 2]
    if single:
        assert _vote(engine, ALICE, single[0], Decision.APPROVE) is RoundState.DECIDED
    if double:
        _vote(engine, ALICE, double[0], Decision.APPROVE)
        with write_transaction(engine) as session:
            withdraw_vote(session=session, evaluation=require_eval(session=session, name="team"), item_id=double[0], actor=ALICE, now=NOW)
        assert double[0] in _view(engine, QueueView.MINE, ALICE)
        assert _vote(engine, BOB, double[0], Decision.APPROVE) is RoundState.WAITING


def test_the_agreement_sample_is_a_fixed_share_of_items() -> None:
    evaluation = Eval(name="e", sources=[], canary="c", seal_key="k", reviewers_per_item=3, agreement_sample=0.25)
    shares = Counter(votes_needed(evaluation, item_id) for item_id in range(1, 20_001))
    assert set(shares) == {1, 3} and abs(shares[3] / 20_000 - 0.25) < 0.01
    evaluation.agreement_sample = 1.0
    assert {votes_needed(evaluation, item_id) for item_id in range(1, 500)} == {3}


def test_round_robin_assigns_each_item_to_as_many_named_reviewers_as_it_needs(engine: Engine) -> None:
    ids = _world(engine, count=9, reviewers_per_item=2, review_assignment="round_robin", reviewers=["alice", "bob", "carol"])
    with Session(engine) as session:
        evaluation = require_eval(session=session, name="team")
        expected = {item_id: assigned_reviewers(evaluation, item_id) for item_id in ids}
    assert all(len(people) == 2 for people in expected.values())
    for actor in (ALICE, BOB, CAROL):
        mine = _view(engine, QueueView.MINE, actor)
        assert mine == [item_id for item_id in ids if actor.removeprefix("token:") in expected[item_id]]
        assert 4 <= len(mine) <= 8
    outsider = next(item_id for item_id in ids if "alice" not in expected[item_id])
    with write_transaction(engine) as session, pytest.raises(Refused) as refused:
        cast_vote(session=session, evaluation=require_eval(session=session, name="team"), item_id=outsider, actor=ALICE, decision=Decision.APPROVE, reason="", now=NOW)
    assert refused.value.reason == "not_assigned"
    with Session(engine) as session:
        counts = view_counts(session, require_eval(session=session, name="team"), actor=ALICE, now=NOW)
    assert (counts.mine, counts.disputed, counts.all) == (len(_view(engine, QueueView.MINE, ALICE)), 0, 9)


def test_an_edit_closes_the_round_its_votes_were_on(engine: Engine) -> None:
    from curation.editing import edit_item

    ids = _world(engine, count=2, reviewers_per_item=2)
    _vote(engine, ALICE, ids[0], Decision.APPROVE)
    with write_transaction(engine) as session:
        edit_item(session=session, item_id=ids[0], title="A new title for it", note="clearer", actor=BOB, now=NOW)
    with Session(engine) as session:
        vote = session.exec(select(ReviewVote)).one()
    assert vote.settled_at is not None and vote.outcome is None


@pytest.mark.parametrize(
    ("settings", "says"),
    [
        ({"review_assignment": "round_robin", "reviewers_per_item": 2, "reviewers": ["alice"]}, "needs at least 2 named reviewer"),
        ({"approval_policy": "auto", "reviewers_per_item": 2}, "needs manual approval"),
        ({"review_assignment": "round_robin", "reviewers": ["alice", "alice"]}, "name each person once"),
    ],
)
def test_team_settings_that_could_never_settle_an_item_are_refused(engine: Engine, settings: dict[str, Any], says: str) -> None:
    ingest_and_curate(engine, "kev", [kev(1, "2024-01-01")])
    with write_transaction(engine) as session, pytest.raises(ProblemError) as refused:
        create_eval(session=session, data=EvalCreate(name="team", sources=["kev"], **settings), secret_key=TEST_SECRET_KEY, actor="test")
    assert refused.value.status == 422 and says in refused.value.detail
    with write_transaction(engine) as session:
        evaluation = create_eval(session=session, data=EvalCreate(name="team", sources=["kev"]), secret_key=TEST_SECRET_KEY, actor="test")
    with write_transaction(engine) as session, pytest.raises(ProblemError):
        update_eval(session=session, evaluation=require_eval(session=session, name="team"), data=EvalUpdate(**settings), actor="test")
    assert evaluation.reviewers_per_item == 1


def test_fleiss_kappa_matches_a_hand_count() -> None:
    rounds = [Counter(approve=2), Counter(reject=2), Counter(approve=1, reject=1), Counter(approve=2)]
    assert fleiss_kappa(rounds) == pytest.approx((0.75 - 34 / 64) / (1 - 34 / 64))
    assert fleiss_kappa([Counter(approve=2), Counter(approve=2)]) is None  # every vote the same: chance agreement is total
    assert fleiss_kappa(rounds[:1]) is None
