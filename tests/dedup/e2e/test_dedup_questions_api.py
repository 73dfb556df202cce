"""Dedup questions over a real HTTP server and from the command line, on every backend: the list
(both items side by side, P, the rules' outcome, the features and evidence; filters and cursor),
answers (scopes, refusals as problems), and a sealed pair shown without any of its text and
answered only by a sealed reviewer who opened the eval's sealed view."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from fastapi import FastAPI
from sqlalchemy.engine import Engine
from sqlmodel import Session, select
from typer.testing import CliRunner

from schemas.dedup import DedupOverride
from schemas.dedup_questions import DedupQuestion
from schemas.evals import EvalCreate
from schemas.item import Item, ItemStatus
from service.app import create_app
from service.cli import app as cli_app
from service.core.db import write_transaction
from service.core.settings import Settings
from service.evals.definitions import create_eval
from tests.conftest import TEST_SECRET_KEY, LiveServer
from tests.eval_support import HashingEncoder
from tests.question_support import ORIGINAL, PLANT, asked_world, questions
from tests.support.command_line import command_line

PROBLEM = "application/problem+json"


@pytest.fixture
def app(settings: Settings, engine: Engine) -> FastAPI:
    return create_app(settings, engine=engine, encoder=HashingEncoder())


@pytest.fixture
def cli(database_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[CliRunner]:
    with command_line(database_url, monkeypatch, encoder=HashingEncoder(), wide=("service.dedup.dedup_cli",)) as runner:
        yield runner


def _second_question(engine: Engine, ids: dict[str, int]) -> int:
    """Another open question (about two other items), for paging."""
    others = sorted(item_id for external_id, item_id in ids.items() if external_id not in (PLANT, ORIGINAL))
    with write_transaction(engine) as session:
        question = DedupQuestion(item_id=others[-1], other_id=others[0], p_same=0.5, rules_outcome="unique", evidence={"stage": "embedding", "features": {"body_cosine": 0.8}})
        session.add(question)
        session.flush()
        assert question.id is not None
        return question.id


def test_questions_list_both_items_side_by_side_and_answers_apply_as_rulings(live_server: LiveServer, engine: Engine) -> None:
    ids = asked_world(engine, p=0.1)
    plant, original = ids[PLANT], ids[ORIGINAL]
    second = _second_question(engine, ids)
    with live_server.client("read") as reader:
        page = reader.get("/v1/dedup/questions")
        assert page.status_code == 200, page.text
        first, other = page.json()["questions"]
        assert (first["item"]["id"], first["other"]["id"], first["state"], first["rules_outcome"], first["p_same"]) == (plant, original, "open", "duplicate", 0.1)
        assert first["item"]["title"] and first["other"]["title"] and not first["item"]["sealed"]
        assert (first["rule"], first["stage"]) == ("fresh", "embedding") and "too low to confirm" in first["why"]
        assert first["features"]["body_cosine"] > 0.85 and first["evidence"]["body_cosine"] == first["features"]["body_cosine"]
        assert first["evidence"]["title_differences"] == [] and other["id"] == second
        # Filters and the cursor.
        assert reader.get("/v1/dedup/questions", params={"state": "answered"}).json()["questions"] == []
        assert reader.get("/v1/dedup/questions", params={"source": "nowhere"}).json()["questions"] == []
        one = reader.get("/v1/dedup/questions", params={"limit": 1, "source": "hadoop", "state": "open"}).json()
        assert [q["id"] for q in one["questions"]] == [first["id"]] and one["next_cursor"]
        rest = reader.get("/v1/dedup/questions", params={"limit": 1, "cursor": one["next_cursor"]}).json()
        assert [q["id"] for q in rest["questions"]] == [second] and rest["next_cursor"] is None
        assert reader.get("/v1/dedup/questions", params={"state": "maybe"}).status_code == 422
        refused = reader.post(f"/v1/dedup/questions/{first['id']}/answer", json={"ruling": "same"})
        assert refused.status_code == 403
    with live_server.client("read", "curate", name="curator") as curator:
        answered = curator.post(f"/v1/dedup/questions/{first['id']}/answer", json={"ruling": "same", "note": "one fix closes both"})
        assert answered.status_code == 200, answered.text
        body = answered.json()
        assert (body["state"], body["ruling"], body["note"], body["item"]["status"]) == ("answered", "same", "one fix closes both", ItemStatus.DUPLICATE.value)
        assert isinstance(body["ruled_by"], int) and body["ruled_at"]
        again = curator.post(f"/v1/dedup/questions/{first['id']}/answer", json={"ruling": "distinct"})
        assert (again.status_code, again.headers["content-type"], again.json()["reason"]) == (409, PROBLEM, "already_answered")
        missing = curator.post("/v1/dedup/questions/999999/answer", json={"ruling": "same"})
        assert (missing.status_code, missing.json()["reason"]) == (404, "not_found")
        assert curator.post(f"/v1/dedup/questions/{second}/answer", json={"ruling": "maybe"}).status_code == 422
        assert curator.post(f"/v1/dedup/questions/{second}/answer", json={"ruling": "same", "extra": 1}).status_code == 422
        exported = curator.get("/v1/dedup/questions", params={"state": "answered"}).json()["questions"]
        assert [(q["id"], q["ruling"]) for q in exported] == [(first["id"], "same")]
    with Session(engine) as session:
        item = session.get(Item, plant)
        (ruling,) = session.exec(select(DedupOverride)).all()
    assert item is not None and (item.status, item.duplicate_of) == (ItemStatus.DUPLICATE.value, original)
    assert (ruling.kind, ruling.actor) == ("duplicate_of", "token:curator")


def test_a_sealed_pair_is_listed_and_answered_without_its_text(live_server: LiveServer, engine: Engine) -> None:
    ids = asked_world(engine, p=0.1)
    with write_transaction(engine) as session:
        create_eval(session=session, data=EvalCreate(name="all-sealed", sources=["hadoop"], sealed_fraction=1.0), secret_key=TEST_SECRET_KEY, actor="test", key=b"s" * 32)
    with Session(engine) as session:
        texts = [text for item_id in (ids[PLANT], ids[ORIGINAL]) if (item := session.get(Item, item_id)) is not None for text in (item.title, item.input[:60], item.external_id)]
    for scopes in (("read",), ("read", "curate", "sealed")):
        with live_server.client(*scopes) as reader:
            listed = reader.get("/v1/dedup/questions")
        assert listed.status_code == 200
        (question,) = listed.json()["questions"]
        assert question["item"]["sealed"] and question["other"]["sealed"] and question["item"]["title"] == ""
        assert (question["features"], question["evidence"]) == ({}, None) and question["p_same"] == 0.1
        assert not [text for text in texts if text and text in listed.text]
    # Answered blind, a ruling could move a sealed item to the dev side: refused, without its text.
    with live_server.client("curate") as curator:
        refused = curator.post(f"/v1/dedup/questions/{question['id']}/answer", json={"ruling": "distinct"})
    assert refused.status_code == 403 and refused.json()["reason"] == "sealed_item"
    assert not [text for text in texts if text and text in refused.text]
    with live_server.client("read", "curate", "sealed") as reviewer:
        assert reviewer.post("/v1/evals/all-sealed/sealed-review", json={}).status_code == 201
        answered = reviewer.post(f"/v1/dedup/questions/{question['id']}/answer", json={"ruling": "distinct"})
    assert answered.status_code == 200 and answered.json()["state"] == "answered" and not answered.json()["item"]["sealed"]


def test_questions_and_answers_from_the_command_line(cli: CliRunner, engine: Engine, live_server: LiveServer) -> None:
    ids = asked_world(engine, p=0.1)
    listed = cli.invoke(cli_app, ["dedup", "questions"])
    assert listed.exit_code == 0, listed.output
    assert "dedup questions" in listed.output and "0.10" in listed.output and str(ids[PLANT]) in listed.output
    (question,) = json.loads(cli.invoke(cli_app, ["dedup", "questions", "--json"]).output)["questions"]
    assert (question["item"]["id"], question["other"]["id"]) == (ids[PLANT], ids[ORIGINAL])
    remote = cli.invoke(cli_app, ["--url", live_server.url, "--token", live_server.token("read"), "dedup", "questions", "--json"])
    assert remote.exit_code == 0, remote.output
    assert [q["id"] for q in json.loads(remote.output)["questions"]] == [question["id"]]
    answered = cli.invoke(cli_app, ["dedup", "answer", str(question["id"]), "distinct", "--note", "two incidents"])
    assert answered.exit_code == 0, answered.output
    assert "distinct incidents" in answered.output
    assert [(q.state, q.ruling, q.note, q.ruled_by) for q in questions(engine)] == [("answered", "distinct", "two incidents", None)]
    again = cli.invoke(cli_app, ["dedup", "answer", str(question["id"]), "same"])
    assert again.exit_code == 3 and "already_answered" in again.output
    assert cli.invoke(cli_app, ["dedup", "answer", "999999", "same"]).exit_code == 2
    assert cli.invoke(cli_app, ["dedup", "answer", str(question["id"]), "maybe"]).exit_code == 2
    assert "no dedup questions open" in cli.invoke(cli_app, ["dedup", "questions"]).output
    every = json.loads(cli.invoke(cli_app, ["dedup", "questions", "--all", "--json"]).output)["questions"]
    assert [q["ruling"] for q in every] == ["distinct"]
