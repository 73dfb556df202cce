"""Rate limits over a real socket, on both databases: sign-ins and 401 answers per client address,
and sealed matches of `/v1/dedup/check` per token. Each refusal is a 429 problem with
`Retry-After`, counted in the metrics, and never an audit event of its own."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, func, select

from schemas.audit import AuditEvent
from schemas.item import Item
from service.app import create_app
from service.core.sessions import LOGIN_CSRF_COOKIE
from service.core.settings import Settings
from tests.conftest import LiveServer, make_settings
from tests.eval_support import HashingEncoder
from tests.run_support import auth, released_eval, token


@pytest.fixture
def settings(database_url: str) -> Settings:
    return make_settings(database_url).model_copy(update={"sign_in_rate_limit": "8/minute", "unauthorized_rate_limit": "3/minute", "sealed_check_rate_limit": "2/hour"})


@pytest.fixture
def app(settings: Settings, engine: Engine) -> FastAPI:
    return create_app(settings, engine=engine, encoder=HashingEncoder())


def _retry_after(response: httpx.Response, window: int) -> int:
    assert response.status_code == 429, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    wait = int(response.headers["Retry-After"])
    assert 1 <= wait <= window
    return wait


def _metric(app: FastAPI, name: str, **labels: str) -> float:
    """A counter of the server's metrics (read in process: the address may be refused by now)."""
    return app.state.metrics.registry.get_sample_value(name, labels) or 0.0


def _audited(server: LiveServer, action: str) -> int:
    with Session(server.engine) as session:
        return session.exec(select(func.count()).select_from(AuditEvent).where(AuditEvent.action == action)).one()


def test_wrong_sign_ins_are_limited_per_address_and_audited_only_at_first(live_server: LiveServer, app: FastAPI) -> None:
    with httpx.Client(base_url=live_server.url, timeout=30) as browser:
        browser.get("/ui/login")

        def attempt(value: str) -> httpx.Response:
            # Each answered form sets a fresh value of the form's own cookie.
            return browser.post("/ui/login", data={"token": value, "csrf": browser.cookies[LOGIN_CSRF_COOKIE]})

        answers = [attempt(f"gs_wrong{number}") for number in range(8)]
        assert {answer.status_code for answer in answers} == {200} and all("not valid" in answer.text for answer in answers)
        _retry_after(attempt("gs_wrong"), 60)
        # The limit holds for a good token too: the address is refused, not the token.
        _retry_after(attempt(live_server.token("read")), 60)
    assert _audited(live_server, "ui.sign_in_refused") == 5
    assert _metric(app, "goldenset_sign_ins_refused_total", audited="false") == 3
    assert _metric(app, "goldenset_rate_limited_total", limit="sign_in") == 2


def test_repeated_401s_refuse_the_address_before_its_credentials_are_read(live_server: LiveServer, app: FastAPI) -> None:
    good = auth(live_server.token("read"))
    with httpx.Client(base_url=live_server.url, timeout=30) as client:
        assert client.get("/v1/sources", headers=good).status_code == 200
        assert [client.get("/v1/sources", headers=auth(f"gs_guess{n}")).status_code for n in range(3)] == [401, 401, 401]
        _retry_after(client.get("/v1/sources", headers=auth("gs_guess")), 60)
        _retry_after(client.get("/v1/sources", headers=good), 60)
        _retry_after(client.post("/v1/sources/ops/webhook", content=b"{}", headers={"Goldenset-Signature": "t=1,v1=" + "0" * 64}), 60)
        assert client.get("/healthz").status_code == 200
    assert _metric(app, "goldenset_rate_limited_total", limit="unauthorized") == 3


def test_sealed_matches_of_dedup_checks_are_audited_and_limited_per_token(live_server: LiveServer) -> None:
    released = released_eval(live_server.engine, count=30)
    with Session(live_server.engine) as session:
        sealed = session.exec(select(Item).where(col(Item.id).in_(released.sealed))).all()
        dev = session.exec(select(Item).where(col(Item.id).in_(released.dev))).first()
    assert len(sealed) >= 3 and dev is not None
    reader, other = auth(token(live_server.engine, "read")), auth(token(live_server.engine, "read"))
    with httpx.Client(base_url=live_server.url, timeout=60) as client:
        # A match with a dev item is no sealed event and spends nothing.
        for _ in range(3):
            assert client.post("/v1/dedup/check", json={"title": dev.title, "input": dev.input}, headers=reader).status_code == 200
        for item in sealed[:2]:
            answer = client.post("/v1/dedup/check", json={"title": item.title, "input": item.input}, headers=reader)
            assert answer.status_code == 200 and answer.json()["duplicate_of"] is None
        _retry_after(client.post("/v1/dedup/check", json={"title": sealed[2].title, "input": sealed[2].input}, headers=reader), 3600)
        # Per token: another token still checks.
        assert client.post("/v1/dedup/check", json={"title": sealed[2].title, "input": sealed[2].input}, headers=other).status_code == 200
        events = client.get("/v1/audit", params={"action": "item.sealed_check_matched", "sealed": "true"}, headers=auth(token(live_server.engine, "admin"))).json()["events"]
    assert len(events) == 3 and all(event["sealed"] for event in events)
    assert {event["details"]["item_ids"][0] for event in events} == {item.id for item in sealed[:3]}
