"""A team reviews from the browser: an eval created with two reviewers per item shared by claims,
each reviewer's own queue and batch, votes that agree decide an item and votes that differ go to
the adjudicator's view (and only the adjudicator decides there), the guidelines beside every item,
the team page's progress and agreement, its settings saved by an admin or shown again with why,
and no vote approves a sealed-bound item unread."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import unquote

from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from schemas.audit import AuditEvent
from schemas.evals import Eval
from schemas.item import Item
from service.items.shaping import withheld
from service.ui.pages import NOTICE_COOKIE
from tests.conftest import TEST_SECRET_KEY
from tests.eval_support import ingest_and_curate
from tests.evals.integration.test_refresh import kev
from tests.ui_support import make_token, newest_csrf, sign_in

GUIDELINES = "Approve an incident only if its input says what broke.\nReject two incidents told as one."


@contextmanager
def person(app: FastAPI, engine: Engine, name: str, scopes: str) -> Iterator[tuple[TestClient, str]]:
    """A browser signed in as `name` with a new token of `scopes`, and its CSRF value."""
    with TestClient(app, follow_redirects=False) as client:
        token, _ = make_token(engine, name, scopes)
        sign_in(client, token)
        yield client, newest_csrf(engine)


def _notice(client: TestClient) -> str:
    return unquote(client.cookies.get(NOTICE_COOKIE) or "")


def _ids(engine: Engine) -> list[int]:
    with Session(engine) as session:
        return [item_id for item_id in session.exec(select(Item.id).order_by(col(Item.occurred_at), col(Item.id))).all() if item_id is not None]


def _status(engine: Engine, item_id: int) -> str:
    with Session(engine) as session:
        item = session.get(Item, item_id)
        assert item is not None
        return item.status


def _create_team_eval(admin: TestClient, csrf: str, **more: str) -> None:
    form = {
        "csrf": csrf,
        "name": "team",
        "sources": ["kev"],
        "max_age_days": "",
        "sealed_fraction": "0",
        "reviewers_per_item": "2",
        "review_assignment": "claim",
        "adjudicators": "judge",
        "review_guidelines": GUIDELINES,
        **more,
    }
    created = admin.post("/ui/evals/new", data=form)
    assert created.status_code == 303, created.text[-2000:]


def test_two_reviewers_split_a_claimed_queue_disagree_and_the_adjudicator_decides(app: FastAPI, engine: Engine) -> None:
    ingest_and_curate(engine, "kev", [kev(number, f"2024-01-{number:02d}") for number in range(1, 7)])
    ids = _ids(engine)
    with person(app, engine, "admin", "admin") as (admin, admin_csrf):
        _create_team_eval(admin, admin_csrf)
    with Session(engine) as session:
        evaluation = session.exec(select(Eval).where(Eval.name == "team")).one()
        assert (evaluation.reviewers_per_item, evaluation.review_assignment, evaluation.adjudicators) == (2, "claim", ["judge"])
    with person(app, engine, "alice", "read,curate") as (alice, alice_csrf), person(app, engine, "bob", "read,curate") as (bob, bob_csrf):
        empty = alice.get("/ui/evals/team/review").text
        assert "Waiting for your vote" in empty and "Claim a batch to start" in empty
        assert alice.post("/ui/evals/team/review/claim", data={"csrf": alice_csrf, "size": "2"}).status_code == 303
        assert "You hold 2 item(s)" in _notice(alice)
        assert bob.post("/ui/evals/team/review/claim", data={"csrf": bob_csrf, "size": "2"}).status_code == 303
        page = alice.get("/ui/evals/team/review").text
        assert f"/ui/items/{ids[0]}" in page and "Item 1 of 2" in page and "Vote approve" in page
        assert "Guidelines for team" in page and "Reject two incidents told as one." in page

        alice.post("/ui/evals/team/review/decide", data={"csrf": alice_csrf, "item_id": ids[0], "decision": "approve", "view": "mine"})
        assert "waits for 1 more vote" in _notice(alice) and _status(engine, ids[0]) == "unique"
        assert "Your last vote: approve" in alice.get("/ui/evals/team/review").text
        bob.post("/ui/evals/team/review/decide", data={"csrf": bob_csrf, "item_id": ids[0], "decision": "approve", "view": "mine"})
        assert "approved (the votes agreed)" in _notice(bob) and _status(engine, ids[0]) == "approved"

        alice.post("/ui/evals/team/review/decide", data={"csrf": alice_csrf, "item_id": ids[1], "decision": "approve", "view": "mine"})
        bob.post("/ui/evals/team/review/decide", data={"csrf": bob_csrf, "item_id": ids[1], "decision": "reject", "reason": "two incidents told as one", "view": "mine"})
        assert "goes to the adjudicator" in _notice(bob) and _status(engine, ids[1]) == "unique"
        disputed = alice.get("/ui/evals/team/review", params={"view": "disputed"}).text
        assert "Waiting for the adjudicator" in disputed and "two incidents told as one" in disputed and 'data-key="a"' not in disputed
        alice.post("/ui/evals/team/review/decide", data={"csrf": alice_csrf, "item_id": ids[1], "decision": "approve", "view": "disputed"})
        assert "not by alice" in _notice(alice) and _status(engine, ids[1]) == "unique"

    with person(app, engine, "judge", "read,curate") as (judge, judge_csrf):
        disputed = judge.get("/ui/evals/team/review", params={"view": "disputed"}).text
        assert "You adjudicate here" in disputed and f"/ui/items/{ids[1]}" in disputed
        judge.post("/ui/evals/team/review/decide", data={"csrf": judge_csrf, "item_id": ids[1], "decision": "reject", "reason": "two incidents", "view": "disputed"})
        assert _status(engine, ids[1]) == "rejected"
        team = judge.get("/ui/evals/team/team").text
        assert "1 unanimous" in team and "50.0%" in team
        for name in ("alice", "bob", "judge"):
            assert f"<td>{name}</td>" in team
    with Session(engine) as session:
        decided = session.exec(select(AuditEvent).where(AuditEvent.object_id == str(ids[1]), AuditEvent.action == "item.reject")).one()
    assert decided.actor == "token:judge" and decided.details["settled"] == "adjudication"


def test_the_team_settings_are_saved_by_an_admin_and_refused_with_why(app: FastAPI, engine: Engine) -> None:
    ingest_and_curate(engine, "kev", [kev(1, "2024-01-01")])
    with person(app, engine, "admin", "admin") as (admin, csrf):
        _create_team_eval(admin, csrf, reviewers_per_item="1", review_assignment="open", adjudicators="", review_guidelines="")
        refused = admin.post("/ui/evals/team/team", data={"csrf": csrf, "reviewers_per_item": "3", "review_assignment": "round_robin", "reviewers": "alice bob"})
        assert refused.status_code == 422 and "needs at least 3 named reviewer" in refused.text and 'value="alice, bob"' not in refused.text
        assert 'value="alice bob"' in refused.text  # the form as typed
        saved = admin.post(
            "/ui/evals/team/team",
            data={
                "csrf": csrf,
                "reviewers_per_item": "2",
                "agreement_sample": "0.5",
                "review_assignment": "round_robin",
                "reviewers": "alice, bob, carol",
                "review_guidelines": GUIDELINES,
            },
        )
        assert saved.status_code == 303
    with Session(engine) as session:
        evaluation = session.exec(select(Eval).where(Eval.name == "team")).one()
        assert (evaluation.reviewers_per_item, evaluation.agreement_sample, evaluation.reviewers) == (2, 0.5, ["alice", "bob", "carol"])
        assert session.exec(select(AuditEvent).where(AuditEvent.action == "eval.update")).one().actor == "token:admin"
    with person(app, engine, "curator", "read,curate") as (curator, curator_csrf):
        assert curator.get("/ui/evals/team/team").status_code == 200
        assert curator.post("/ui/evals/team/team", data={"csrf": curator_csrf, "reviewers_per_item": "1"}).status_code == 403


def test_no_vote_approves_a_sealed_bound_item_unread(app: FastAPI, engine: Engine) -> None:
    ingest_and_curate(engine, "kev", [kev(number, f"2024-01-{number:02d}") for number in range(1, 13)])
    with person(app, engine, "admin", "admin") as (admin, csrf):
        _create_team_eval(admin, csrf, sealed_fraction="0.5", review_assignment="open")
    with Session(engine) as session:
        bound = sorted(withheld(session=session, item_ids=_ids(engine), secret_key=TEST_SECRET_KEY))
    assert bound
    with person(app, engine, "alice", "read,curate") as (alice, alice_csrf):
        alice.post("/ui/evals/team/review/decide", data={"csrf": alice_csrf, "item_id": bound[0], "decision": "approve", "view": "mine"})
        assert "not approved unread" in _notice(alice)
    with Session(engine) as session:
        assert session.exec(select(AuditEvent).where(AuditEvent.action == "review.vote")).first() is None
