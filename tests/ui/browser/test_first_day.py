"""A new team's first day in Chromium, with no terminal after the service starts: the admin signs
in with the one token it was given, uploads the sample incidents with their mapping as a new
source, creates an eval reviewed by two people per item (half of the items, by the agreement
sample) on claimed batches with an adjudicator and guidelines, presses Refresh now (nothing is
approved yet, so no empty release is written), hands out tokens; two reviewers claim batches that
split the queue with an overlap, agree on one shared item and disagree on another; the adjudicator
decides it; a release is made; the models page registers a model and its endpoint; an eval pipeline
runs the release over the REST API with a token from the tokens page; the run's score shows on the
model's page. Curation runs in the served process on the real embedding model."""

from __future__ import annotations

import re
import time

import httpx
from playwright.sync_api import Browser, Page, expect
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from schemas.audit import AuditEvent
from schemas.item import Item
from service.core.db import write_session
from service.core.tokens import create_token
from tests.conftest import REPO_ROOT
from tests.ui.browser.conftest import Shots, UiServer

SAMPLE = REPO_ROOT / "samples" / "cisa_kev" / "known_exploited_vulnerabilities.sample.json"
MAPPING = REPO_ROOT / "examples" / "mappings" / "cisa_kev.yaml"
EVAL = "first-day"
GUIDELINES = "Approve a vulnerability only if its input names the product and what an attacker gains.\nReject records that tell two flaws as one."
SERVER_ENVIRONMENT = {"GOLDENSET_CURATE_AFTER_INGEST": "true", "GOLDENSET_API_CURATES": "true"}
"""The served process curates what an upload stored, as `make run`'s does."""


def seed(engine: Engine) -> dict[str, str]:
    """An empty, migrated database and the one admin token a team starts with."""
    with write_session(engine) as session:
        admin, _ = create_token(session=session, name="lead", scopes="admin")
        session.commit()
    return {"admin": admin}


def _sign_in(page: Page, token: str) -> None:
    page.goto("/ui/login")
    page.get_by_label("Token").fill(token)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/ui")


def _notice(page: Page) -> str:
    return page.locator("p.notice").inner_text()


def _hand_out(page: Page, name: str, *scopes: str) -> str:
    """A token made on the tokens page; its value as the page shows it, once."""
    page.goto("/ui/tokens")
    page.locator("#token-name").fill(name)
    for scope in scopes:
        page.locator(f'input[name="scopes"][value="{scope}"]').check()
    page.get_by_role("button", name="Create token").click()
    value = page.locator("#new-token").input_value()
    assert value
    return value


def _queue_ids(page: Page) -> list[int]:
    return [int(value) for value in page.locator('input[name="item"]').evaluate_all("nodes => nodes.map(node => node.value)")]


def _current(page: Page) -> int:
    link = page.locator("section.current dl.facts a").first.get_attribute("href") or ""
    return int(link.rsplit("/", 1)[-1])


def _wait_for_curation(page: Page, deadline_seconds: float = 180) -> int:
    """Reload the eval's whole queue until dedup has kept items for review; how many wait."""
    deadline = time.monotonic() + deadline_seconds
    while True:
        page.goto(f"/ui/evals/{EVAL}/review?view=all")
        waiting = int(page.locator("nav.tabs a").nth(2).locator(".count").inner_text())
        if waiting:
            return waiting
        assert time.monotonic() < deadline, "curation kept nothing for review in time"
        time.sleep(1)


def test_a_new_teams_first_day_from_the_browser(browser: Browser, ui_server: UiServer, shots: Shots) -> None:
    def person() -> Page:
        context = browser.new_context(base_url=ui_server.url, viewport={"width": 1400, "height": 900})
        context.set_default_timeout(20_000)
        return context.new_page()

    lead = person()
    _sign_in(lead, ui_server.tokens["admin"])

    # A source from an upload, with its mapping typed in.
    lead.goto("/ui/upload")
    lead.locator("#upload-file").set_input_files(str(SAMPLE))
    lead.locator("#upload-new-source").fill("incidents")
    lead.locator("#upload-mapping").fill(MAPPING.read_text(encoding="utf-8"))
    lead.get_by_role("button", name="Upload and ingest").click()
    expect(lead.locator('[data-count="new"]')).to_have_text("117")
    shots(lead, "uploaded")

    # An eval reviewed by a team.
    lead.goto("/ui/evals/new")
    lead.locator("#eval-name").fill(EVAL)
    lead.locator('input[name="sources"][value="incidents"]').check()
    lead.locator("#eval-age").fill("")
    lead.locator("#eval-sealed").fill("0")
    lead.locator("#eval-per-item").fill("2")
    lead.locator("#eval-sample").fill("0.5")
    lead.locator("#eval-assignment").select_option("claim")
    lead.locator("#eval-adjudicators").fill("judge")
    lead.locator("#eval-guidelines").fill(GUIDELINES)
    shots(lead, "new-eval")
    lead.get_by_role("button", name="Create eval").click()
    lead.wait_for_url(f"**/ui/evals/{EVAL}/releases")
    assert f"Created eval {EVAL}" in _notice(lead)

    # Refresh now, before anything is approved: no empty release, and the page says why.
    lead.once("dialog", lambda dialog: dialog.accept())
    lead.get_by_role("button", name="Refresh now").click()
    lead.wait_for_load_state()
    assert "no item to release yet" in _notice(lead)
    shots(lead, "refresh-before-review")

    reviewers = {name: _hand_out(lead, name, "read", "curate") for name in ("alice", "bob", "judge")}
    shots(lead, "token-handed-out")

    waiting = _wait_for_curation(lead)
    assert waiting > 40

    # Two reviewers claim batches: each item needs two votes when it is in the agreement sample,
    # one otherwise, so the second batch shares the first's double-checked items and goes on
    # to items of its own.
    alice, bob = person(), person()
    _sign_in(alice, reviewers["alice"])
    _sign_in(bob, reviewers["bob"])
    for reviewer in (alice, bob):
        reviewer.goto(f"/ui/evals/{EVAL}/review")
        reviewer.get_by_role("button", name="Claim next 20").click()
        assert "You hold 20 item(s)" in _notice(reviewer)
    alice_ids, bob_ids = _queue_ids(alice), _queue_ids(bob)
    shared = [item_id for item_id in alice_ids if item_id in bob_ids]
    assert len(alice_ids) == len(bob_ids) == 20 and len(shared) >= 2 and set(bob_ids) - set(alice_ids)
    expect(alice.locator(".guidelines")).to_contain_text("Reject records that tell two flaws as one.")
    shots(alice, "alice-batch")

    # Alice approves down her batch until she has voted on two shared items.
    voted_shared = 0
    while voted_shared < 2:
        current = _current(alice)
        with alice.expect_navigation():
            alice.keyboard.press("a")
        voted_shared += current in shared
    # Bob's queue starts with the shared items Alice voted on: he agrees on the first and
    # rejects the second, with a reason.
    bob.goto(f"/ui/evals/{EVAL}/review")
    first, second = _current(bob), None
    assert first == shared[0]
    bob.get_by_role("button", name="Vote approve").click()
    assert "approved (the votes agreed)" in _notice(bob)
    second = _current(bob)
    assert second == shared[1]
    bob.keyboard.press("r")
    bob.keyboard.type("two flaws told as one")
    with bob.expect_navigation():
        bob.keyboard.press("Enter")
    assert "goes to the adjudicator" in _notice(bob)
    shots(bob, "bob-disagrees")

    # The adjudicator sees the disagreement with both votes and decides it.
    judge = person()
    _sign_in(judge, reviewers["judge"])
    judge.goto(f"/ui/evals/{EVAL}/review")
    judge.get_by_role("link", name=re.compile("Disagreements")).click()
    assert _current(judge) == second
    expect(judge.locator("ul.votes")).to_contain_text("two flaws told as one")
    shots(judge, "disagreement")
    judge.get_by_role("button", name="Approve", exact=True).click()
    assert f"Item {second} approved" in _notice(judge)
    judge.goto(f"/ui/evals/{EVAL}/team")
    expect(judge.locator("main")).to_contain_text("50.0%")
    shots(judge, "team-progress")

    # A release is made from what the team approved.
    lead.goto(f"/ui/evals/{EVAL}/releases")
    lead.once("dialog", lambda dialog: dialog.accept())
    lead.get_by_role("button", name="Refresh now").click()
    lead.wait_for_url(re.compile(rf".*/ui/evals/{EVAL}/releases/1$"))
    written = re.search(r"Wrote release 1 of first-day: (\d+) dev", _notice(lead))
    assert written is not None
    dev_count = int(written.group(1))
    with Session(ui_server.engine) as session:
        approved = len(session.exec(select(Item.id).where(Item.status == "approved")).all())
    assert dev_count == approved >= 3
    shots(lead, "release-1")

    # The model and its endpoint, registered on the models page.
    lead.goto("/ui/registry")
    lead.locator("#model-name").fill("first-model")
    lead.locator("#model-provider").fill("acme")
    lead.locator("#model-cutoff").fill("2023-12-31")
    lead.get_by_role("button", name="Register model").click()
    lead.locator("#endpoint-name").fill("first-model-api")
    lead.locator("#endpoint-model").select_option("first-model")
    lead.locator("#endpoint-url").fill("https://api.acme.test/v1")
    lead.locator("#endpoint-trains").select_option("no")
    lead.locator("#endpoint-retention").fill("0")
    lead.get_by_role("button", name="Register endpoint").click()
    lead.wait_for_load_state()
    pipeline = _hand_out(lead, "pipeline", "read")

    # The eval pipeline: a run of release 1 over the REST API, every item scored.
    with httpx.Client(base_url=ui_server.url, headers={"Authorization": f"Bearer {pipeline}"}, timeout=30) as api:
        started = api.post(f"/v1/evals/{EVAL}/runs", json={"model": "first-model", "endpoint": "first-model-api", "release": 1})
        assert started.status_code == 201, started.text
        run = started.json()
        scores = [{"item_id": item["item_id"], "score": 1.0 if index % 2 == 0 else 0.0} for index, item in enumerate(run["items"])]
        assert api.post(f"/v1/runs/{run['id']}/results", json={"results": scores}).status_code in (200, 201)

    lead.goto("/ui/models/first-model")
    expect(lead.locator("main")).to_contain_text(EVAL)
    expect(lead.locator("main")).to_contain_text(f"{len(scores)} of {len(scores)}")
    shots(lead, "model-page")
    with Session(ui_server.engine) as session:
        actions = {event.action for event in session.exec(select(AuditEvent)).all()}
    assert {"review.claim", "review.vote", "review.disputed", "item.approve", "release.create", "token.create", "run.start"} <= actions

