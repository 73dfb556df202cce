"""`/ui/tokens`: tokens made, listed and revoked from the browser, by admins only; a new token's
value is shown on the answer to its form and nowhere else; each change audited with the person
who made it; a refused form changes nothing and keeps what was typed."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from schemas.audit import AuditEvent
from schemas.token import ApiToken
from tests.ui_support import make_token, newest_csrf, sign_in


@pytest.fixture
def browser(app: FastAPI) -> Iterator[TestClient]:
    with TestClient(app, follow_redirects=False) as client:
        yield client


def _tokens(engine: Engine) -> list[ApiToken]:
    with Session(engine) as session:
        return list(session.exec(select(ApiToken).order_by(col(ApiToken.id))).all())


def _events(engine: Engine, action: str) -> list[AuditEvent]:
    with Session(engine) as session:
        return list(session.exec(select(AuditEvent).where(AuditEvent.action == action)).all())


def test_an_admin_creates_a_token_shown_once_that_opens_the_api(browser: TestClient, engine: Engine) -> None:
    admin, _ = make_token(engine, "lead", "admin")
    sign_in(browser, admin)
    listed = browser.get("/ui/tokens")
    assert listed.status_code == 200 and "lead" in listed.text and admin not in listed.text
    answer = browser.post("/ui/tokens", data={"csrf": newest_csrf(engine), "name": "reviewer-ana", "scopes": ["curate", "read"], "expiry": "30d"})
    assert answer.status_code == 201, answer.text
    shown = re.search(r'id="new-token" class="mono" value="([^"]+)"', answer.text)
    assert shown is not None and "shown only this once" in answer.text
    value = shown.group(1)
    assert answer.headers["cache-control"] == "no-store" and value not in str(answer.headers)
    created = next(token for token in _tokens(engine) if token.name == "reviewer-ana")
    assert created.scopes == ["curate", "read"] and created.expires_at is not None
    assert [event.actor for event in _events(engine, "token.create") if event.object_id == str(created.id)] == ["token:lead"]
    # The value works as a bearer token, and the list never shows it again.
    with TestClient(browser.app) as api:
        assert api.get("/v1/items", headers={"Authorization": f"Bearer {value}"}).status_code == 200
    again = browser.get("/ui/tokens")
    assert value not in again.text and "reviewer-ana" in again.text


def test_a_refused_form_keeps_what_was_typed_and_creates_nothing(browser: TestClient, engine: Engine) -> None:
    admin, _ = make_token(engine, "lead", "admin")
    sign_in(browser, admin)
    before = len(_tokens(engine))
    taken = browser.post("/ui/tokens", data={"csrf": newest_csrf(engine), "name": "lead", "scopes": ["read"], "expiry": "never"})
    assert taken.status_code == 422 and "already named" in taken.text and 'value="lead"' in taken.text
    no_scope = browser.post("/ui/tokens", data={"csrf": newest_csrf(engine), "name": "pipeline", "expiry": "never"})
    assert no_scope.status_code == 422 and "at least one scope" in no_scope.text
    past = browser.post("/ui/tokens", data={"csrf": newest_csrf(engine), "name": "pipeline", "scopes": ["read"], "expiry": "date", "expiry_date": "2001-01-01"})
    assert past.status_code == 422 and "not in the future" in past.text
    bad_date = browser.post("/ui/tokens", data={"csrf": newest_csrf(engine), "name": "pipeline", "scopes": ["read"], "expiry": "date", "expiry_date": "soon"})
    assert bad_date.status_code == 422 and "YYYY-MM-DD" in bad_date.text
    assert len(_tokens(engine)) == before and not [event for event in _events(engine, "token.create") if event.actor == "token:lead"]


def test_revoking_from_the_page_shuts_the_token_out_and_is_audited(browser: TestClient, engine: Engine) -> None:
    admin, admin_id = make_token(engine, "lead", "admin")
    leaving, leaving_id = make_token(engine, "leaving", "read")
    sign_in(browser, admin)
    answer = browser.post(f"/ui/tokens/{leaving_id}/revoke", data={"csrf": newest_csrf(engine)})
    assert answer.status_code == 303 and answer.headers["location"] == "/ui/tokens"
    with TestClient(browser.app) as api:
        assert api.get("/v1/items", headers={"Authorization": f"Bearer {leaving}"}).status_code == 401
    assert [event.actor for event in _events(engine, "token.revoke")] == ["token:lead"]
    listed = browser.get("/ui/tokens").text
    assert re.search(rf'id="token-{leaving_id}" data-state="revoked"', listed)
    own = browser.post(f"/ui/tokens/{admin_id}/revoke", data={"csrf": newest_csrf(engine)})
    assert own.status_code == 409 and "signed in with" in own.text
    assert browser.post("/ui/tokens/999999/revoke", data={"csrf": newest_csrf(engine)}).status_code == 404


def test_only_admins_see_or_change_tokens(browser: TestClient, engine: Engine) -> None:
    reader, _ = make_token(engine, "reader", "read,curate,ingest")
    _, other_id = make_token(engine, "other", "read")
    sign_in(browser, reader)
    assert browser.get("/ui/tokens").status_code == 403
    home = browser.get("/ui")
    assert 'href="/ui/tokens"' not in home.text
    created = browser.post("/ui/tokens", data={"csrf": newest_csrf(engine), "name": "sneaky", "scopes": ["admin"], "expiry": "never"})
    assert created.status_code == 403 and "admin" in created.text
    assert browser.post(f"/ui/tokens/{other_id}/revoke", data={"csrf": newest_csrf(engine)}).status_code == 403
    assert "sneaky" not in {token.name for token in _tokens(engine)} and all(not token.revoked for token in _tokens(engine))
    # And without the form's CSRF value even an admin's browser is refused.
    admin, _ = make_token(engine, "lead", "admin")
    sign_in(browser, admin)
    assert browser.post("/ui/tokens", data={"name": "x", "scopes": ["read"]}).status_code == 403
