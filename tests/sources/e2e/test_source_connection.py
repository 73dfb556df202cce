"""Testing a connector source's connection as users drive it, on every backend: `POST
/v1/sources/{name}/test` over a real socket (admin scope, audited with the token), and `goldenset
source test NAME` on the database and over the API (--url), against Jira and GitHub replays on
loopback. A working connection, refused credentials and an unreachable host are each told with
what to do; a source without a connector is refused; nothing is stored but the audit event."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import func
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select
from typer.testing import CliRunner

from schemas.audit import AuditEvent
from schemas.item import Item
from schemas.source import Source, SourceCreate
from service.cli import app
from service.core.db import write_transaction
from service.sources.definitions import create_source
from tests.conftest import TEST_SECRET_KEY, LiveServer
from tests.eval_support import HashingEncoder
from tests.replay.cases import CASES, VendorCase
from tests.replay.server import ReplayServer, serve
from tests.support.command_line import command_line


@pytest.fixture
def cli(database_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[CliRunner]:
    with command_line(database_url, monkeypatch, encoder=HashingEncoder(), wide=("service.sources.connection_cli", "service.core.terminal")) as runner:
        yield runner


@pytest.fixture
def jira_case(shared_data: Path) -> VendorCase:
    return CASES["jira"](shared_data)


@pytest.fixture
def github_case(shared_data: Path) -> VendorCase:
    return CASES["github"](shared_data)


@pytest.fixture
def jira(jira_case: VendorCase) -> Iterator[ReplayServer]:
    with serve(jira_case.handler) as server:
        yield server


@pytest.fixture
def github(github_case: VendorCase) -> Iterator[ReplayServer]:
    with serve(github_case.handler) as server:
        yield server


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def _create_sources(engine: Engine, jira_case: VendorCase, jira_url: str, github_case: VendorCase, github_url: str) -> None:
    """`hadoop` (Jira), `issues` (GitHub), `nowhere` (GitHub on a port nobody listens on) and `pushed` (push)."""
    with write_transaction(engine) as session:
        for name, case, url in (("hadoop", jira_case, jira_url), ("issues", github_case, github_url), ("nowhere", github_case, f"http://127.0.0.1:{_closed_port()}")):
            create_source(session=session, data=SourceCreate(name=name, kind=case.kind, connector=case.config(url)), secret_key=TEST_SECRET_KEY, actor="test")
        create_source(session=session, data=SourceCreate(name="pushed", kind="push"), secret_key=TEST_SECRET_KEY, actor="test")


def _stored(engine: Engine) -> dict[str, Any]:
    """Items, and every source's cursor and pull state: what a test leaves as it was."""
    with Session(engine) as session:
        items = session.exec(select(func.count()).select_from(Item)).one()
        sources = session.exec(select(Source).order_by(col(Source.name))).all()
        state = {source.name: (source.cursor, source.status, source.last_error, source.last_run_at, source.items_pulled, source.updated_at) for source in sources}
    return {"items": items, "sources": state}


def _audited(engine: Engine) -> list[tuple[str, str | None, str]]:
    with Session(engine) as session:
        events = session.exec(select(AuditEvent).where(AuditEvent.action == "source.test").order_by(col(AuditEvent.id))).all()
    return [(event.actor, event.object_id, event.details["outcome"]) for event in events]


def test_the_api_tests_connections_as_an_admin_and_stores_nothing(
    live_server: LiveServer, engine: Engine, jira: ReplayServer, github: ReplayServer, jira_case: VendorCase, github_case: VendorCase
) -> None:
    _create_sources(engine, jira_case, jira.url, github_case, github.url)
    before = _stored(engine)
    with live_server.client("admin", name="lead") as admin:
        working = admin.post("/v1/sources/hadoop/test")
        assert working.status_code == 200, working.text
        body = working.json()
        assert (body["ok"], body["outcome"], body["http_status"], body["records"], body["action"]) == (True, "ok", 200, 50, None)
        assert body["source"] == "hadoop" and body["kind"] == "jira" and body["elapsed_seconds"] < 10
        assert admin.post("/v1/sources/issues/test").json()["outcome"] == "ok"

        jira_case.refuse_credentials()
        refused = admin.post("/v1/sources/hadoop/test")
        assert refused.status_code == 200 and refused.json()["outcome"] == "bad_credentials" and refused.json()["http_status"] == 401
        assert "`goldenset source configure hadoop --set personal_access_token=-`" in refused.json()["action"]
        unreachable = admin.post("/v1/sources/nowhere/test").json()
        assert unreachable["outcome"] == "unreachable" and unreachable["http_status"] is None and "check `base_url`" in unreachable["action"]

        missing = admin.post("/v1/sources/absent/test")
        assert missing.status_code == 404 and missing.headers["content-type"].startswith("application/problem+json")
        plain = admin.post("/v1/sources/pushed/test")
        assert plain.status_code == 409 and plain.json()["reason"] == "not_a_connector" and "push source" in plain.json()["detail"]
    for scope in ("read", "ingest", "curate"):
        with live_server.client(scope) as other:
            assert other.post("/v1/sources/hadoop/test").status_code == 403
    with httpx.Client(base_url=live_server.url) as anonymous:
        assert anonymous.post("/v1/sources/hadoop/test").status_code == 401
    assert _stored(engine) == before
    assert _audited(engine) == [
        ("token:lead", "hadoop", "ok"),
        ("token:lead", "issues", "ok"),
        ("token:lead", "hadoop", "bad_credentials"),
        ("token:lead", "nowhere", "unreachable"),
    ]


def test_source_test_on_the_database(cli: CliRunner, engine: Engine, jira: ReplayServer, github: ReplayServer, jira_case: VendorCase, github_case: VendorCase) -> None:
    _create_sources(engine, jira_case, jira.url, github_case, github.url)
    before = _stored(engine)
    working = cli.invoke(app, ["source", "test", "hadoop"])
    assert working.exit_code == 0, working.output
    assert "source hadoop: connection OK: jira answered HTTP 200: the first page from the beginning had 50 records" in " ".join(working.stdout.split())
    as_json = cli.invoke(app, ["source", "test", "issues", "--json"])
    assert as_json.exit_code == 0, as_json.output
    assert json.loads(as_json.stdout)["outcome"] == "ok" and json.loads(as_json.stdout)["kind"] == "github"

    jira_case.refuse_credentials()
    refused = cli.invoke(app, ["source", "test", "hadoop"])
    said = " ".join(refused.output.split())
    assert refused.exit_code == 4, refused.output
    assert "connection failed (bad_credentials, HTTP 401" in said and "what to do:" in said and "--set personal_access_token=-" in said
    assert "jira-pat-valid" not in refused.output
    unreachable = cli.invoke(app, ["source", "test", "nowhere"])
    assert unreachable.exit_code == 5 and "(unreachable" in " ".join(unreachable.output.split()), unreachable.output
    missing = cli.invoke(app, ["source", "test", "absent"])
    assert missing.exit_code == 2 and "absent" in missing.output
    plain = cli.invoke(app, ["source", "test", "pushed"])
    assert plain.exit_code == 3 and "not_a_connector" in plain.output
    assert _stored(engine) == before
    assert _audited(engine) == [("cli", "hadoop", "ok"), ("cli", "issues", "ok"), ("cli", "hadoop", "bad_credentials"), ("cli", "nowhere", "unreachable")]


def test_source_test_over_the_api(
    cli: CliRunner, engine: Engine, live_server: LiveServer, jira: ReplayServer, github: ReplayServer, jira_case: VendorCase, github_case: VendorCase
) -> None:
    _create_sources(engine, jira_case, jira.url, github_case, github.url)
    before = _stored(engine)
    admin = ["--url", live_server.url, "--token", live_server.token("admin", name="remote-lead")]
    working = cli.invoke(app, [*admin, "source", "test", "issues"])
    assert working.exit_code == 0, working.output
    assert "source issues: connection OK: github answered HTTP 200" in " ".join(working.stdout.split())
    jira_case.refuse_credentials()
    refused = cli.invoke(app, [*admin, "source", "test", "hadoop", "--json"])
    assert refused.exit_code == 4 and json.loads(refused.stdout)["outcome"] == "bad_credentials", refused.output
    unreachable = cli.invoke(app, [*admin, "source", "test", "nowhere"])
    assert unreachable.exit_code == 5, unreachable.output
    assert cli.invoke(app, [*admin, "source", "test", "absent"]).exit_code == 2
    plain = cli.invoke(app, [*admin, "source", "test", "pushed"])
    assert plain.exit_code == 3 and "push source" in " ".join(plain.output.split()), plain.output
    reader = cli.invoke(app, ["--url", live_server.url, "--token", live_server.token("read"), "source", "test", "issues"])
    assert reader.exit_code == 4, reader.output
    assert _stored(engine) == before
    assert _audited(engine) == [("token:remote-lead", "issues", "ok"), ("token:remote-lead", "hadoop", "bad_credentials"), ("token:remote-lead", "nowhere", "unreachable")]
