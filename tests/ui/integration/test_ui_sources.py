"""`/ui/sources`: adding a connector source from the browser with the API's validation, its
secrets write-only (never in a page; blank keeps them), its settings changed and a pull started
from the list, which then shows the pulled items; scopes checked on every page and action."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import func
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from schemas.audit import AuditEvent
from schemas.item import Item
from schemas.source import Source
from service.sources.definitions import connector_config
from tests.conftest import TEST_SECRET_KEY
from tests.replay.jira import JiraReplay, hadoop_issues
from tests.replay.server import ReplayServer, serve
from tests.ui_support import make_token, newest_csrf, sign_in

TOKEN = "jira-pat-valid"


@pytest.fixture
def browser(app: FastAPI) -> Iterator[TestClient]:
    with TestClient(app, follow_redirects=False) as client:
        yield client


@pytest.fixture
def jira(shared_data: Path) -> Iterator[ReplayServer]:
    issues: list[dict[str, Any]] = hadoop_issues(shared_data / "gitbugs_hadoop" / "reports.jsonl")[:120]
    with serve(JiraReplay(issues=json.loads(json.dumps(issues)))) as server:
        yield server


def _source(engine: Engine) -> Source:
    with Session(engine) as session:
        return session.exec(select(Source).where(Source.name == "hadoop")).one()


def test_an_admin_adds_configures_and_pulls_a_jira_source_without_seeing_its_secret(browser: TestClient, engine: Engine, jira: ReplayServer) -> None:
    admin, _ = make_token(engine, "lead", "admin")
    sign_in(browser, admin)
    form = browser.get("/ui/sources/new", params={"kind": "jira"})
    assert form.status_code == 200 and 'name="config.base_url"' in form.text and 'type="password" id="config-personal_access_token"' in form.text
    added = browser.post(
        "/ui/sources/new",
        data={"csrf": newest_csrf(engine), "kind": "jira", "name": "hadoop", "config.base_url": jira.url, "config.personal_access_token": TOKEN, "config.page_size": "50"},
    )
    assert added.status_code == 201, added.text
    assert 'id="webhook-secret"' in added.text and TOKEN not in added.text
    config = connector_config(_source(engine), secret_key=TEST_SECRET_KEY)
    assert config.model_dump()["page_size"] == 50 and config.model_dump(mode="json")["base_url"].rstrip("/") == jira.url.rstrip("/")
    settings = browser.get("/ui/sources/hadoop")
    assert settings.status_code == 200 and TOKEN not in settings.text and 'value="50"' in settings.text
    # A blank secret keeps the stored one; a changed setting is saved and audited.
    blank_secret = {"config.base_url": jira.url, "config.page_size": "60", "config.personal_access_token": ""}
    saved = browser.post("/ui/sources/hadoop", data={"csrf": newest_csrf(engine), "enabled": "yes", **blank_secret})
    assert saved.status_code == 303, saved.text
    kept = connector_config(_source(engine), secret_key=TEST_SECRET_KEY)
    assert kept.model_dump()["page_size"] == 60 and kept.model_dump()["personal_access_token"].get_secret_value() == TOKEN
    # A setting the connector refuses changes nothing and is named.
    refused = browser.post("/ui/sources/hadoop", data={"csrf": newest_csrf(engine), "enabled": "yes", "config.base_url": jira.url, "config.jql": "project = X ORDER BY created"})
    assert refused.status_code == 422 and "ORDER BY" in refused.text and 'value="project = X ORDER BY created"' in refused.text
    assert connector_config(_source(engine), secret_key=TEST_SECRET_KEY).model_dump()["jql"] == ""
    with Session(engine) as session:
        actions = [event.action for event in session.exec(select(AuditEvent).where(AuditEvent.object_id == "hadoop")).all()]
    assert actions.count("source.create") == 1 and actions.count("source.update") == 1
    # Pull now, then the list shows the items.
    started = browser.post("/ui/sources/hadoop/pull", data={"csrf": newest_csrf(engine)})
    assert started.status_code == 303 and started.headers["location"] == "/ui/sources"
    deadline = time.monotonic() + 60
    while _source(engine).status != "ok":
        assert time.monotonic() < deadline and _source(engine).status != "error", _source(engine).last_error
        time.sleep(0.1)
    with Session(engine) as session:
        assert session.exec(select(func.count()).select_from(Item)).one() == 120
    listed = browser.get("/ui/sources")
    assert 'id="source-hadoop" data-status="ok"' in listed.text and ">120<" in listed.text


def test_a_refused_new_source_comes_back_as_typed_and_adds_nothing(browser: TestClient, engine: Engine, jira: ReplayServer) -> None:
    admin, _ = make_token(engine, "lead", "admin")
    sign_in(browser, admin)
    missing = browser.post("/ui/sources/new", data={"csrf": newest_csrf(engine), "kind": "jira", "name": "hadoop", "config.base_url": jira.url})
    assert missing.status_code == 422 and "personal_access_token" in missing.text and 'value="hadoop"' in missing.text
    bad_name = browser.post("/ui/sources/new", data={"csrf": newest_csrf(engine), "kind": "push", "name": "has space"})
    assert bad_name.status_code == 422 and "The source was not added" in bad_name.text
    assert browser.post("/ui/sources/new", data={"csrf": newest_csrf(engine), "kind": "zendesk", "name": "z"}).status_code == 422
    with Session(engine) as session:
        assert session.exec(select(func.count()).select_from(Source)).one() == 0
    assert browser.post("/ui/sources/new", data={"csrf": newest_csrf(engine), "kind": "push", "name": "pushed"}).status_code == 201
    taken = browser.post("/ui/sources/new", data={"csrf": newest_csrf(engine), "kind": "push", "name": "pushed"})
    assert taken.status_code == 409
    assert browser.post("/ui/sources/pushed/pull", data={"csrf": newest_csrf(engine)}).status_code == 409


def test_scopes_on_every_source_page_and_action(browser: TestClient, engine: Engine) -> None:
    admin, _ = make_token(engine, "lead", "admin")
    sign_in(browser, admin)
    assert browser.post("/ui/sources/new", data={"csrf": newest_csrf(engine), "kind": "push", "name": "pushed"}).status_code == 201
    reader, _ = make_token(engine, "reader", "read")
    sign_in(browser, reader)
    listed = browser.get("/ui/sources")
    assert listed.status_code == 200 and "pushed" in listed.text and "New source" not in listed.text and "Settings" not in listed.text
    assert browser.get("/ui/sources/new").status_code == 403
    assert browser.get("/ui/sources/pushed").status_code == 403
    assert browser.post("/ui/sources/pushed", data={"csrf": newest_csrf(engine), "enabled": ""}).status_code == 403
    assert browser.post("/ui/sources/pushed/pull", data={"csrf": newest_csrf(engine)}).status_code == 403
    assert _pushed_enabled(engine)


def _pushed_enabled(engine: Engine) -> bool:
    with Session(engine) as session:
        return session.exec(select(Source.enabled).where(Source.name == "pushed")).one()
