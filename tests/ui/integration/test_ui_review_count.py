"""How many items wait for review on an eval: on an eval with automatic approval, the items it
already took (released, or retired from it) wait for nobody's review, so its review page's "Item 1
of N", its queue, the API's review queue, the eval list and the overview all count only the rest;
an eval with manual review over the same source counts every unique item."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from schemas.evals import Eval, EvalCreate, EvalItem
from schemas.item import Item, ItemStatus
from service.core.db import write_transaction
from service.core.sessions import LOGIN_CSRF_COOKIE
from service.core.tokens import create_token
from service.evals.definitions import create_eval
from service.evals.refresh import refresh_eval
from tests.conftest import TEST_SECRET_KEY
from tests.eval_support import ingest_and_curate
from tests.evals.integration.test_refresh import kev

KEY = b"k" * 32
RECORDS = 14
TAKEN = 6


@pytest.fixture
def browser(app: FastAPI) -> Iterator[TestClient]:
    with TestClient(app, follow_redirects=False) as client:
        yield client


def _world(engine: Engine) -> tuple[list[int], list[int]]:
    """Unique items of source `kev`, an eval `auto` with automatic approval that released
    `TAKEN` of them, and an eval `manual` over the same source. Returns the ids of the items
    `auto` took and of those still waiting for its review, oldest incident first."""
    ingest_and_curate(engine, "kev", [kev(number, f"2024-01-{number:02d}") for number in range(1, RECORDS + 1)])
    with write_transaction(engine) as session:
        for name, policy in (("auto", "auto"), ("manual", "manual")):
            data = EvalCreate(name=name, sources=["kev"], approval_policy=policy, target_size=TAKEN, max_age_days=None)
            create_eval(session=session, data=data, secret_key=TEST_SECRET_KEY, actor="test", key=KEY)
    refresh_eval(engine, name="auto", at=datetime(2024, 3, 1, 3, tzinfo=UTC), secret_key=TEST_SECRET_KEY, actor="test")
    with Session(engine) as session:
        evaluation = session.exec(select(Eval).where(Eval.name == "auto")).one()
        members = set(session.exec(select(EvalItem.item_id).where(EvalItem.eval_id == evaluation.id)).all())
        oldest_first = select(Item.id).where(Item.status == ItemStatus.UNIQUE.value).order_by(col(Item.occurred_at), col(Item.id))
        unique = [item_id for item_id in session.exec(oldest_first).all() if item_id is not None]
    assert len(unique) == RECORDS and len(members) == TAKEN and members <= set(unique), "automatic approval leaves the items it takes unique"
    return [item_id for item_id in unique if item_id in members], [item_id for item_id in unique if item_id not in members]


def _sign_in(browser: TestClient, engine: Engine) -> str:
    with write_transaction(engine) as session:
        token, _ = create_token(session=session, name="curator", scopes="read,curate")
    browser.get("/ui/login")
    assert browser.post("/ui/login", data={"token": token, "csrf": browser.cookies[LOGIN_CSRF_COOKIE]}).status_code == 303
    return token


def test_an_eval_with_automatic_approval_counts_only_what_it_did_not_take(browser: TestClient, engine: Engine) -> None:
    taken, waiting = _world(engine)
    token = _sign_in(browser, engine)

    page = browser.get("/ui/evals/auto/review").text
    assert f"<strong>Item 1 of {len(waiting)}</strong> waiting for review" in page
    assert f"Queue 1–{len(waiting)} of {len(waiting)}" in page
    listed = [int(value) for value in re.findall(r'name="item" value="(\d+)"', page)]
    assert listed == waiting and not set(listed) & set(taken)

    api = browser.get("/v1/evals/auto/review-queue", params={"limit": 100}, headers={"Authorization": f"Bearer {token}"}).json()
    assert api["total"] == len(waiting) and [entry["id"] for entry in api["entries"]] == waiting

    # The manual eval over the same source waits for a review of every unique item.
    manual = browser.get("/ui/evals/manual/review").text
    assert f"<strong>Item 1 of {RECORDS}</strong> waiting for review" in manual

    evals = browser.get("/ui/evals").text
    counts = {name: int(count) for count, name in re.findall(r'<td class="num">(\d+)</td>\s*<td class="links"><a href="/ui/evals/(\w+)/releases">', evals)}
    assert counts == {"auto": len(waiting), "manual": RECORDS}
    overview = browser.get("/ui").text
    assert f'<a href="/ui/evals/auto/review">{len(waiting)}</a>' in overview
    assert f'<a href="/ui/evals/manual/review">{RECORDS}</a>' in overview
