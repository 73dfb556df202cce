"""The web UI's unit of work and its one answer to refusals (`service.ui.refusals`): a page's
decision is committed when its route returns and rolled back when it is refused, and a refusal is
shown where it was pressed (the sign-in form, a notice on the queue, the item page's error)."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import unquote

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import func
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from curation.review import ReviewRefused
from schemas.audit import AuditEvent
from schemas.item import Item
from schemas.token import ApiToken, UiSession
from service.core.db import write_transaction
from service.core.tokens import revoke_token
from service.ui.pages import NOTICE_COOKIE
from tests.eval_support import ingest_and_curate
from tests.eval_support import item_ids_by_external_id as ids_of
from tests.evals.integration.test_refresh import kev
from tests.ui_support import make_token, newest_csrf, sign_in


@pytest.fixture
def browser(app: FastAPI) -> Iterator[TestClient]:
    with TestClient(app, follow_redirects=False) as client:
        yield client


def _count(engine: Engine, action: str) -> int:
    with Session(engine) as session:
        return session.exec(select(func.count()).select_from(AuditEvent).where(AuditEvent.action == action)).one()


def _notice(browser: TestClient) -> str:
    """The notice the last redirect carries to the page it leads to."""
    return unquote(browser.cookies.get(NOTICE_COOKIE) or "")


def test_a_token_that_opens_nothing_shows_the_sign_in_form_with_why(browser: TestClient, engine: Engine) -> None:
    assert "This token is not valid" in sign_in(browser, "gs_not_a_token")
    token, token_id = make_token(engine, "leaving", "read")
    with write_transaction(engine) as session:
        revoke_token(session=session, token_id=token_id)
    assert "This token was revoked" in sign_in(browser, token)
    assert _count(engine, "ui.sign_in_refused") == 2 and _count(engine, "ui.sign_in") == 0
    with Session(engine) as session:
        assert session.exec(select(func.count()).select_from(UiSession)).one() == 0


def test_a_decision_is_committed_and_a_refused_one_is_a_notice_where_it_was_pressed(browser: TestClient, engine: Engine) -> None:
    ingest_and_curate(engine, "kev", [kev(1, "2024-02-01")])
    item_id = ids_of(engine)["CVE-2024-0001"]
    token, _ = make_token(engine, "curator", "read,curate")
    sign_in(browser, token)
    form = {"item_id": str(item_id), "decision": "approve", "csrf": newest_csrf(engine)}
    approved = browser.post("/ui/evals/ops/review/decide", data=form)
    assert approved.status_code == 303 and f"Item {item_id} approved" in _notice(browser)
    again = browser.post("/ui/evals/ops/review/decide", data=form)
    assert again.status_code == 303 and again.headers["location"].startswith("/ui/evals/ops/review")
    assert f"Item {item_id} was not decided: item {item_id} is approved, not unique" in _notice(browser)
    with Session(engine) as session:
        assert session.get(Item, item_id).status == "approved"  # type: ignore[union-attr]
    assert _count(engine, "item.approve") == 1


def test_a_refused_decision_leaves_nothing_it_wrote(browser: TestClient, engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    ingest_and_curate(engine, "kev", [kev(1, "2024-02-01")])
    item_id = ids_of(engine)["CVE-2024-0001"]

    def refused_after_writing(*, session: Session, item_id: int, **_: object) -> Item:
        session.add(AuditEvent(actor="test", action="test.written", object_type="item", object_id=str(item_id)))
        session.flush()
        raise ReviewRefused("not_reviewable", f"item {item_id} cannot be decided now", 409)

    monkeypatch.setattr("service.ui.review.decide", refused_after_writing)
    token, _ = make_token(engine, "curator", "read,curate")
    sign_in(browser, token)
    answer = browser.post("/ui/evals/ops/review/decide", data={"item_id": str(item_id), "decision": "approve", "csrf": newest_csrf(engine)})
    assert answer.status_code == 303 and "was not decided: item" in _notice(browser)
    assert _count(engine, "test.written") == 0


def test_a_refused_decision_on_the_item_page_shows_the_page_with_the_error(browser: TestClient, engine: Engine) -> None:
    ingest_and_curate(engine, "kev", [kev(1, "2024-02-01")])
    item_id = ids_of(engine)["CVE-2024-0001"]
    token, _ = make_token(engine, "curator", "read,curate")
    sign_in(browser, token)
    csrf = newest_csrf(engine)
    refused = browser.post(f"/ui/items/{item_id}/review", data={"decision": "reject", "reason": "", "csrf": csrf})
    assert refused.status_code == 422 and "needs a reason" in refused.text and "<html" in refused.text.lower()
    undone = browser.post("/ui/evals/ops/review/undo", data={"item_id": str(item_id), "csrf": csrf})
    assert undone.status_code == 303 and "Nothing undone: item" in _notice(browser)
    missing = browser.post("/ui/items/999999/not-duplicate", data={"note": "different", "csrf": csrf})
    assert missing.status_code == 404 and "No such item" in missing.text


def test_a_refusal_outside_the_ui_is_still_the_apis_problem(browser: TestClient, engine: Engine) -> None:
    """A refusal under /v1 is still the API's problem document, not a page."""
    token, _ = make_token(engine, "curator", "read,curate")
    answer = browser.post("/v1/items/999999/undo-review", headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 404 and answer.headers["content-type"].startswith("application/problem+json")
    assert answer.json()["reason"] == "not_found"


def test_a_token_is_marked_used_once_a_minute_in_a_unit_of_work_of_its_own(browser: TestClient, engine: Engine) -> None:
    token, token_id = make_token(engine, "reader", "read")
    assert browser.get("/v1/items", headers={"Authorization": f"Bearer {token}"}).status_code == 200
    with Session(engine) as session:
        first = session.get(ApiToken, token_id)
        assert first is not None and first.last_used_at is not None
        used = first.last_used_at
    assert browser.get("/v1/items", headers={"Authorization": f"Bearer {token}"}).status_code == 200
    with Session(engine) as session:
        again = session.get(ApiToken, token_id)
        assert again is not None and again.last_used_at == used

