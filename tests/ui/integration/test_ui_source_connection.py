""""Test connection" on `/ui/sources/{name}`: an admin tests a Jira and a GitHub source against
replays on loopback; the settings page then shows the result, a success and a failure (refused
credentials, an unreachable host) styled apart, with what to do. Each test is audited with the
signed-in person; nothing else is stored. Scope, CSRF and a source without a connector are refused."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import func
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from schemas.audit import AuditEvent
from schemas.item import Item
from schemas.source import Source, SourceCreate
from service.core.db import write_transaction
from service.sources.definitions import create_source
from tests.conftest import TEST_SECRET_KEY
from tests.replay.cases import CASES, VendorCase
from tests.replay.server import serve
from tests.ui_support import make_token, newest_csrf, sign_in

BUTTON = '<form method="post" action="/ui/sources/{name}/test">'


@pytest.fixture
def browser(app: FastAPI) -> Iterator[TestClient]:
    with TestClient(app, follow_redirects=False) as client:
        yield client


@pytest.fixture
def jira_case(shared_data: Path) -> VendorCase:
    return CASES["jira"](shared_data)


@pytest.fixture
def github_case(shared_data: Path) -> VendorCase:
    return CASES["github"](shared_data)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def _create(engine: Engine, name: str, case: VendorCase, url: str) -> None:
    with write_transaction(engine) as session:
        create_source(session=session, data=SourceCreate(name=name, kind=case.kind, connector=case.config(url)), secret_key=TEST_SECRET_KEY, actor="test")


def _stored(engine: Engine) -> dict[str, Any]:
    with Session(engine) as session:
        items = session.exec(select(func.count()).select_from(Item)).one()
        sources = session.exec(select(Source).order_by(col(Source.name))).all()
        return {"items": items, "sources": {source.name: (source.cursor, source.status, source.last_error, source.last_run_at, source.updated_at) for source in sources}}


def _test(browser: TestClient, engine: Engine, name: str) -> str:
    """Press "Test connection" on the source's page; the page the answer leads to."""
    pressed = browser.post(f"/ui/sources/{name}/test", data={"csrf": newest_csrf(engine)})
    assert pressed.status_code == 303 and pressed.headers["location"] == f"/ui/sources/{name}", pressed.text
    shown = browser.get(pressed.headers["location"])
    assert shown.status_code == 200
    return shown.text


def test_an_admin_tests_two_connectors_and_sees_each_result_on_the_page(browser: TestClient, engine: Engine, jira_case: VendorCase, github_case: VendorCase) -> None:
    with serve(jira_case.handler) as jira, serve(github_case.handler) as github:
        _create(engine, "hadoop", jira_case, jira.url)
        _create(engine, "issues", github_case, github.url)
        _create(engine, "nowhere", github_case, f"http://127.0.0.1:{_closed_port()}")
        before = _stored(engine)
        admin, _ = make_token(engine, "lead", "admin")
        sign_in(browser, admin)
        settings = browser.get("/ui/sources/hadoop")
        assert BUTTON.format(name="hadoop") in settings.text and ">Test connection</button>" in settings.text

        working = _test(browser, engine, "hadoop")
        assert '<p class="notice notice-ok" role="status">Connection OK: jira answered HTTP 200: the first page from the beginning had 50 records' in working
        # The notice is shown once.
        assert "Connection OK" not in browser.get("/ui/sources/hadoop").text
        assert '<p class="notice notice-ok" role="status">Connection OK: github answered HTTP 200' in _test(browser, engine, "issues")

        jira_case.refuse_credentials()
        refused = _test(browser, engine, "hadoop")
        assert '<p class="notice notice-error" role="alert">Connection test failed (bad_credentials, HTTP 401)' in refused
        assert "<code>personal_access_token</code>" in refused and "<code>goldenset source configure hadoop --set personal_access_token=-</code>" in refused
        assert "jira-pat-valid" not in refused
        unreachable = _test(browser, engine, "nowhere")
        assert '<p class="notice notice-error" role="alert">Connection test failed (unreachable)' in unreachable and "<code>base_url</code>" in unreachable
    assert _stored(engine) == before
    with Session(engine) as session:
        events = session.exec(select(AuditEvent).where(AuditEvent.action == "source.test").order_by(col(AuditEvent.id))).all()
    assert [(event.actor, event.object_id, event.details["outcome"]) for event in events] == [
        ("token:lead", "hadoop", "ok"),
        ("token:lead", "issues", "ok"),
        ("token:lead", "hadoop", "bad_credentials"),
        ("token:lead", "nowhere", "unreachable"),
    ]
    assert all(event.token_id is not None for event in events)


def test_scope_csrf_and_a_source_without_a_connector_are_refused(browser: TestClient, engine: Engine, jira_case: VendorCase) -> None:
    with serve(jira_case.handler) as jira:
        _create(engine, "hadoop", jira_case, jira.url)
        with write_transaction(engine) as session:
            create_source(session=session, data=SourceCreate(name="pushed", kind="push"), secret_key=TEST_SECRET_KEY, actor="test")
        reader, _ = make_token(engine, "reader", "read,ingest,curate")
        sign_in(browser, reader)
        assert browser.post("/ui/sources/hadoop/test", data={"csrf": newest_csrf(engine)}).status_code == 403
        admin, _ = make_token(engine, "lead", "admin")
        sign_in(browser, admin)
        assert browser.post("/ui/sources/hadoop/test", data={"csrf": "forged"}).status_code == 403
        assert BUTTON.format(name="pushed") not in browser.get("/ui/sources/pushed").text
        plain = browser.post("/ui/sources/pushed/test", data={"csrf": newest_csrf(engine)})
        assert plain.status_code == 409 and "push source" in plain.text
        assert browser.post("/ui/sources/absent/test", data={"csrf": newest_csrf(engine)}).status_code == 404
    with Session(engine) as session:
        assert session.exec(select(func.count()).select_from(AuditEvent).where(AuditEvent.action == "source.test")).one() == 0
        assert jira.requests == []
