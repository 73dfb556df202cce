"""The review page approves no item whose text it did not show: a sealed-bound item is shown by
its metadata only (no Approve button) and refused if approved anyway, alone or among selected
items, until a person with the `sealed` scope opens the sealed view, which shows it in full."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import unquote

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from schemas.evals import EvalCreate
from schemas.item import Item
from service.core.db import write_transaction
from service.evals.definitions import create_eval
from service.items.shaping import withheld
from service.ui.pages import NOTICE_COOKIE
from tests.conftest import TEST_SECRET_KEY
from tests.eval_support import ingest_and_curate, kev_records
from tests.ui_support import make_token, newest_csrf, sign_in


@pytest.fixture
def browser(app: FastAPI) -> Iterator[TestClient]:
    with TestClient(app, follow_redirects=False) as client:
        yield client


def _world(engine: Engine) -> tuple[list[int], list[int]]:
    """An eval sealing half its items; (sealed-bound ids, plain ids)."""
    ingest_and_curate(engine, "kev", kev_records(since="2024-01-01")[:30])
    with write_transaction(engine) as session:
        create_eval(session=session, data=EvalCreate(name="ops", sources=["kev"], sealed_fraction=0.5, max_age_days=None), secret_key=TEST_SECRET_KEY, actor="test")
    with Session(engine) as session:
        ids = [item_id for item_id in session.exec(select(Item.id)).all() if item_id is not None]
        bound = withheld(session=session, item_ids=ids, secret_key=TEST_SECRET_KEY)
    return sorted(bound), sorted(set(ids) - bound)


def _status(engine: Engine, item_id: int) -> str:
    with Session(engine) as session:
        item = session.get(Item, item_id)
        assert item is not None
        return item.status


def _notice(browser: TestClient) -> str:
    return unquote(browser.cookies.get(NOTICE_COOKIE) or "")


def test_without_the_text_shown_nothing_is_approved(browser: TestClient, engine: Engine) -> None:
    sealed, plain = _world(engine)
    assert len(sealed) >= 2 and len(plain) >= 2
    curator, _ = make_token(engine, "curator", "read,curate")
    sign_in(browser, curator)
    # Walking the queue: every sealed-bound item comes without its text and without Approve.
    withheld_pages = 0
    for position in range(1, len(sealed) + len(plain) + 1):
        page = browser.get("/ui/evals/ops/review", params={"at": position}).text
        if '<h2 id="current-title">Sealed-bound item' in page:
            withheld_pages += 1
            assert "cannot be approved unread" in page and 'data-key="a"' not in page
        else:
            assert 'data-key="a"' in page
    assert withheld_pages == len(sealed)
    single = browser.post("/ui/evals/ops/review/decide", data={"csrf": newest_csrf(engine), "item_id": sealed[0], "decision": "approve"})
    assert single.status_code == 303 and "not approved unread" in _notice(browser)
    assert _status(engine, sealed[0]) == "unique"
    bulk = browser.post("/ui/evals/ops/review/bulk", data={"csrf": newest_csrf(engine), "item": [sealed[1], plain[0]], "decision": "approve"})
    assert bulk.status_code == 303 and "approved 1" in _notice(browser) and "refused 1" in _notice(browser) and "not approved unread" in _notice(browser)
    assert (_status(engine, sealed[1]), _status(engine, plain[0])) == ("unique", "approved")


def test_a_sealed_reader_approves_once_the_sealed_view_shows_the_text(browser: TestClient, engine: Engine) -> None:
    sealed, _ = _world(engine)
    reader, _ = make_token(engine, "sealed-curator", "read,curate,sealed")
    sign_in(browser, reader)
    closed = browser.post("/ui/evals/ops/review/decide", data={"csrf": newest_csrf(engine), "item_id": sealed[0], "decision": "approve"})
    assert closed.status_code == 303 and "not approved unread" in _notice(browser) and _status(engine, sealed[0]) == "unique"
    opened = browser.post("/ui/evals/ops/review/sealed", data={"csrf": newest_csrf(engine)})
    assert opened.status_code == 303 and "Sealed view opened" in _notice(browser)
    approved = browser.post("/ui/evals/ops/review/decide", data={"csrf": newest_csrf(engine), "item_id": sealed[0], "decision": "approve"})
    assert approved.status_code == 303 and "approved" in _notice(browser) and _status(engine, sealed[0]) == "approved"


def test_the_item_page_approves_no_sealed_bound_item_it_did_not_show(browser: TestClient, engine: Engine) -> None:
    sealed, plain = _world(engine)
    curator, _ = make_token(engine, "curator", "read,curate")
    sign_in(browser, curator)
    page = browser.get(f"/ui/items/{sealed[0]}").text
    assert 'value="approve"' not in page and 'value="reject"' in page
    assert 'value="approve"' in browser.get(f"/ui/items/{plain[0]}").text
    refused = browser.post(f"/ui/items/{sealed[0]}/review", data={"csrf": newest_csrf(engine), "decision": "approve"})
    assert refused.status_code == 409 and "not approved unread" in refused.text
    assert _status(engine, sealed[0]) == "unique"
    assert browser.post(f"/ui/items/{plain[0]}/review", data={"csrf": newest_csrf(engine), "decision": "approve"}).status_code == 303
    assert _status(engine, plain[0]) == "approved"
