"""`goldenset review` on an eval reviewed by a team, as real processes against a live server, on
every backend: two reviewers claim batches and vote (one takes a vote back), they disagree, votes
and take-backs by id, the adjudicator decides the disagreement with `--disputed`; on the database
the command refuses such an eval in one line, and the team flags refuse an eval reviewed by single
decisions."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from schemas.item import Item
from schemas.team_review import ReviewVote
from service.app import create_app
from service.core.settings import Settings
from tests.conftest import TEST_SECRET_KEY, LiveServer
from tests.core.e2e.test_cli_front_door import GOLDENSET
from tests.eval_support import HashingEncoder, ingest_and_curate, item_ids_by_external_id
from tests.evals.integration.test_refresh import kev

TEAM = {"name": "team", "sources": ["kev"], "sealed_fraction": 0, "reviewers_per_item": 2, "review_assignment": "claim", "adjudicators": ["judge"]}
PASS = ["--margin", "0", "--no-neighbours"]


@pytest.fixture
def app(settings: Settings, engine: Engine) -> FastAPI:
    return create_app(settings, engine=engine, encoder=HashingEncoder())


def _goldenset(args: list[str], env: dict[str, str], cwd: Path, keys: str = "") -> subprocess.CompletedProcess[str]:
    base = {name: value for name, value in os.environ.items() if not name.startswith("GOLDENSET_")}
    return subprocess.run(
        [GOLDENSET, "review", *args], cwd=cwd, env={**base, "COLUMNS": "200", **env}, input=keys, capture_output=True, text=True, timeout=120, check=False
    )


def _statuses(engine: Engine) -> dict[str, str]:
    with Session(engine) as session:
        return {item.external_id: item.status for item in session.exec(select(Item))}


def test_two_reviewers_disagree_and_the_adjudicator_decides(live_server: LiveServer, engine: Engine, tmp_path: Path) -> None:
    ingest_and_curate(engine, "kev", [kev(n, f"2024-02-{n:02d}") for n in range(1, 5)])
    ids = item_ids_by_external_id(engine)
    first, second, third, fourth = (ids[f"CVE-2024-000{n}"] for n in (1, 2, 3, 4))
    with httpx.Client(base_url=live_server.url, headers={"Authorization": f"Bearer {live_server.token('admin', name='admin')}"}) as api:
        api.post("/v1/evals", json={**TEAM, "review_guidelines": "Only what a model can answer from the text."}).raise_for_status()
    nowhere = f"sqlite:///{tmp_path / 'none.db'}"

    def person(name: str, *scopes: str) -> dict[str, str]:
        return {"GOLDENSET_URL": live_server.url, "GOLDENSET_TOKEN": live_server.token(*scopes, name=name), "GOLDENSET_DATABASE_URL": nowhere}

    alice, bob, judge = person("alice", "read", "curate"), person("bob", "curate"), person("judge", "read", "curate")

    # alice claims 3: approves 1, rejects 2, takes that back (2 is shown again), rejects 2 again, rejects 3.
    walked = _goldenset(["--eval", "team", "--claim", "3", *PASS], alice, tmp_path, "a\nr\nnot gradable\nu\nr\nnot gradable\nr\nno answer\n")
    assert walked.returncode == 0, walked.stdout + walked.stderr
    assert "you hold 3 item(s) of team (3 new) until " in walked.stdout and f"meanwhile: {first}, {second}, {third}" in walked.stdout
    assert "guidelines: Only what a model can answer from the text." in walked.stdout
    assert "3 item(s) wait for your vote in team, oldest incident first: a/r cast your vote (up to 2 agreeing votes" in walked.stdout
    assert f"item {first}: voted approve; waiting for 1 more vote" in walked.stdout
    assert walked.stdout.count(f"item {second}: voted reject; waiting for 1 more vote") == 2
    assert f"took back your vote on item {second}: it waits for your vote again" in walked.stdout
    assert walked.stdout.count("2 of 3 · item") == 2  # shown, then again after the vote was taken back
    assert "voted to approve 1, to reject 2, skipped 0, taken back 1" in walked.stdout

    # bob (curate only: the team endpoint tells him the eval is reviewed by a team) agrees on 1, differs on 2 and 3.
    voted = _goldenset(["--eval", "team", "--claim", "3", *PASS], bob, tmp_path, "a\na\na\n")
    assert voted.returncode == 0, voted.stdout + voted.stderr
    assert f"item {first}: voted approve; decided (agreed): approved" in voted.stdout
    assert f"item {second}: voted approve; disputed (alice: reject, bob: approve): goes to the adjudicator" in voted.stdout
    assert "voted to approve 3, to reject 0, skipped 0, taken back 0" in voted.stdout

    # by id: a vote; a vote on a decided item and an adjudication by a non-adjudicator are refused with their reasons (exit 3)
    by_id = _goldenset(["--eval", "team", "--approve", str(fourth)], bob, tmp_path)
    assert by_id.returncode == 0 and f"item {fourth}: voted approve; waiting for 1 more vote" in by_id.stdout, by_id.stdout + by_id.stderr
    refused = _goldenset(["--eval", "team", "--approve", str(first)], bob, tmp_path)
    assert refused.returncode == 3 and f"item {first} not voted on: (not_reviewable) item {first} is approved" in " ".join(refused.stderr.split()), refused.stderr
    not_judge = _goldenset(["--eval", "team", "--disputed", "--approve", str(second)], alice, tmp_path)
    assert not_judge.returncode == 3 and "(not_adjudicator) disagreements on eval 'team' are decided by judge, not by alice" in " ".join(not_judge.stderr.split())

    # the adjudicator walks the disagreements (2 and 3): rejects 2, undoes that at 3 (2 is shown again), rejects 2, approves 3
    decided = _goldenset(["--eval", "team", "--disputed", *PASS], judge, tmp_path, "r\nan internal ticket\nu\nr\nan internal ticket\na\n")
    assert decided.returncode == 0, decided.stdout + decided.stderr
    assert "2 disagreement(s) in team wait for an adjudicator, oldest incident first: a/r decide the item" in decided.stdout
    assert f"item {second}: adjudicated reject; decided over the votes (alice: reject, bob: approve): rejected" in decided.stdout
    assert f"undid the rejection of item {second} (taken by token:judge at " in decided.stdout
    assert f"item {second}: adjudicated reject; decided: rejected" in decided.stdout  # the first decision settled its votes
    assert f"item {third}: adjudicated approve; decided over the votes (alice: reject, bob: approve): approved" in decided.stdout
    assert "adjudicated: approved 1, rejected 1, skipped 0, undone 1" in decided.stdout
    again = _goldenset(["--eval", "team", "--disputed", *PASS], judge, tmp_path)
    assert again.returncode == 0 and "no disagreements in team wait for an adjudicator" in again.stdout

    # by id, --undo takes back an open vote, or undoes the decision the person's vote settled
    undone = _goldenset(["--eval", "team", "--undo", str(fourth), "--undo", str(first)], bob, tmp_path)
    assert undone.returncode == 0, undone.stdout + undone.stderr
    assert f"took back your vote on item {fourth}: it waits for your vote again" in undone.stdout
    assert f"undid the approval of item {first} (taken by token:bob at " in undone.stdout

    assert _statuses(engine) == {"CVE-2024-0001": "unique", "CVE-2024-0002": "rejected", "CVE-2024-0003": "approved", "CVE-2024-0004": "unique"}
    with Session(engine) as session:
        votes = [(vote.item_id, vote.reviewer, vote.decision, vote.outcome) for vote in session.exec(select(ReviewVote).order_by(col(ReviewVote.id)))]
    assert votes == [
        (first, "token:alice", "approve", "approve"),
        (second, "token:alice", "reject", "reject"),
        (third, "token:alice", "reject", "approve"),
        (first, "token:bob", "approve", "approve"),
        (second, "token:bob", "approve", "reject"),
        (third, "token:bob", "approve", "approve"),
    ]
    assert not (tmp_path / "none.db").exists()

    # on the database the command line is nobody: one line, exit 2
    local = {"GOLDENSET_DATABASE_URL": live_server.settings.database_url, "GOLDENSET_SECRET_KEY": TEST_SECRET_KEY}
    for args in (["--eval", "team"], ["--eval", "team", "--approve", str(fourth)]):
        on_database = _goldenset(args, local, tmp_path)
        assert on_database.returncode == 2 and on_database.stdout == "", on_database.stdout + on_database.stderr
        assert " ".join(on_database.stderr.split()) == (
            "error: eval team is reviewed by a team: each person votes with their own token over the API, "
            "so run this with --url (or GOLDENSET_URL) and GOLDENSET_TOKEN set to your token"
        )


def test_the_team_flags_refuse_an_eval_reviewed_by_single_decisions(live_server: LiveServer, engine: Engine, tmp_path: Path) -> None:
    ingest_and_curate(engine, "kev", [kev(1, "2024-02-01")])
    token = live_server.token("read", "curate", "admin", name="curator")
    with httpx.Client(base_url=live_server.url, headers={"Authorization": f"Bearer {token}"}) as api:
        api.post("/v1/evals", json={"name": "ops", "sources": ["kev"], "sealed_fraction": 0}).raise_for_status()
    remote = {"GOLDENSET_URL": live_server.url, "GOLDENSET_TOKEN": token, "GOLDENSET_DATABASE_URL": f"sqlite:///{tmp_path / 'none.db'}"}
    local = {"GOLDENSET_DATABASE_URL": live_server.settings.database_url, "GOLDENSET_SECRET_KEY": TEST_SECRET_KEY}
    for env, expected in ((remote, "eval ops is reviewed by single decisions"), (local, "give --eval NAME with --url and GOLDENSET_TOKEN")):
        for flag in (["--claim", "5"], ["--disputed"]):
            refused = _goldenset(["--eval", "ops", *flag, *PASS], env, tmp_path)
            assert refused.returncode == 2 and expected in " ".join(refused.stderr.split()), refused.stdout + refused.stderr
