"""`goldenset source configure`: a connector source's settings and credentials, its enabled flag,
cursor, interval and mapping changed from the command line, on the database (SQLite and
PostgreSQL) and over the API (--url, a live server on loopback). Only what is named changes,
credentials are never printed, and a refused change (an unknown key, a bad value, a source that
takes no connector) exits 2 with the reason and changes nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, select
from typer.testing import CliRunner

from schemas.audit import AuditEvent
from schemas.source import Source, SourceCreate, SourceStatus
from service.cli import app
from service.core.db import write_transaction
from service.sources.definitions import connector_config, create_source
from tests.conftest import REPO_ROOT, TEST_SECRET_KEY, LiveServer
from tests.eval_support import HashingEncoder
from tests.support.command_line import command_line

FIRST_KEY = "inc-io-key-first-0123456789"
SECOND_KEY = "inc-io-key-second-9876543210"


@pytest.fixture
def cli(database_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[CliRunner]:
    with command_line(database_url, monkeypatch, encoder=HashingEncoder(), wide=("service.sources.configure_cli", "service.core.terminal")) as runner:
        yield runner


def _create(engine: Engine) -> None:
    with write_transaction(engine) as session:
        config = {"api_key": FIRST_KEY, "base_url": "https://api.incident.io", "page_size": 25}
        create_source(session=session, data=SourceCreate(name="io", kind="incidentio", connector=config), secret_key=TEST_SECRET_KEY, actor="test")
        create_source(session=session, data=SourceCreate(name="pushed", kind="push"), secret_key=TEST_SECRET_KEY, actor="test")
        source = session.exec(select(Source).where(Source.name == "io")).one()
        source.status, source.last_error, source.cursor = SourceStatus.AUTH_FAILED.value, "incident.io rejected the credentials (401)", "cursor-after-page-9"


def _stored(engine: Engine, name: str = "io") -> dict[str, Any]:
    """What a source holds now, its connector configuration with credentials in plain text."""
    with Session(engine) as session:
        source = session.exec(select(Source).where(Source.name == name)).one()
        config = connector_config(source, secret_key=TEST_SECRET_KEY).revealed() if source.connector_secret else None
        return {"config": config, "enabled": source.enabled, "cursor": source.cursor, "status": source.status, "interval": source.pull_interval_seconds, "mapping": source.mapping}


def _lines(output: str) -> list[str]:
    return [line.strip() for line in output.splitlines() if line.strip()]


def test_configure_on_the_database_changes_only_what_it_names(cli: CliRunner, engine: Engine, tmp_path: Path) -> None:
    _create(engine)
    # A new credential asked for with hidden input, and one setting: the rest stays as stored.
    changed = cli.invoke(app, ["source", "configure", "io", "--set", "api_key=-", "--set", "page_size=50"], input=f"{SECOND_KEY}\n")
    assert changed.exit_code == 0, changed.output
    assert _lines(changed.stdout) == ["source io changed:", "api_key: set (not shown)", "page_size: 25 → 50", "status: auth_failed → idle"]
    assert SECOND_KEY not in changed.output and FIRST_KEY not in changed.output
    stored = _stored(engine)
    assert stored["config"]["api_key"] == SECOND_KEY and stored["config"]["page_size"] == 50 and stored["config"]["base_url"] == "https://api.incident.io"
    assert stored["status"] == "idle" and stored["cursor"] == "cursor-after-page-9"

    # A list in YAML, a setting back to its default, and settings from a file.
    listed = cli.invoke(app, ["source", "configure", "io", "--set", "modes=[standard, test]", "--unset", "page_size"])
    assert listed.exit_code == 0, listed.output
    assert _lines(listed.stdout) == ["source io changed:", 'modes: ["standard", "retrospective"] → ["standard", "test"]', "page_size: 50 → 100"]
    settings = tmp_path / "io.yaml"
    settings.write_text("include_updates: false\nstatus_categories: [closed]\n")
    filed = cli.invoke(app, ["source", "configure", "io", "--connector", str(settings)])
    assert _lines(filed.stdout) == ["source io changed:", "include_updates: true → false", 'status_categories: [] → ["closed"]'], filed.output
    assert _stored(engine)["config"]["api_key"] == SECOND_KEY

    # The flags PATCH takes besides the connector.
    flags = cli.invoke(app, ["source", "configure", "io", "--disable", "--reset-cursor", "--interval", "600"])
    assert flags.exit_code == 0, flags.output
    assert _lines(flags.stdout) == ["source io changed:", "pull interval: manual pulls only → every 600 s", "disabled", "cursor: reset (the next pull starts from the beginning)"]
    assert {key: _stored(engine)[key] for key in ("enabled", "cursor", "interval")} == {"enabled": False, "cursor": None, "interval": 600}
    back = cli.invoke(app, ["source", "configure", "io", "--enable", "--interval", "0"])
    assert _lines(back.stdout) == ["source io changed:", "pull interval: every 600 s → manual pulls only", "enabled"], back.output
    mapped = cli.invoke(app, ["source", "configure", "io", "--mapping", str(REPO_ROOT / "examples" / "mappings" / "hadoop_jira.yaml")])
    assert _lines(mapped.stdout) == ["source io changed:", "mapping: replaced"] and _stored(engine)["mapping"] is not None, mapped.output
    same = cli.invoke(app, ["source", "configure", "io", "--set", "page_size=100"])
    assert same.exit_code == 0 and "source io: nothing changed" in same.output

    # The audit trail names the keys set, never a credential.
    with Session(engine) as session:
        events = [event.details for event in session.exec(select(AuditEvent).where(AuditEvent.action == "source.update").order_by(AuditEvent.id))]  # type: ignore[arg-type]
    assert events[0] == {"fields": ["connector_settings"], "connector_keys": ["api_key", "page_size"]}
    assert SECOND_KEY not in str(events) and FIRST_KEY not in str(events)


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        (["io", "--set", "pagesize=5"], "unknown key 'pagesize': did you mean 'page_size'?"),
        (["io", "--set", "page_size=many"], "page_size"),
        (["io", "--set", "page_size=251"], "page_size"),
        (["io", "--set", "modes=[drill]"], "modes"),
        (["io", "--set", "base_url=ftp://api.incident.io"], "base_url"),
        (["io", "--set", "api_key=-", "--set", "page_size=0"], "page_size"),
        (["pushed", "--set", "page_size=5"], "a push source takes no connector configuration"),
        (["nowhere", "--enable"], "source 'nowhere' does not exist"),
        (["io"], "nothing to change"),
        (["io", "--set", "page_size"], "--set takes KEY=VALUE (got 'page_size' without a value)"),
        (["io", "--set", "page_size=5", "--unset", "page_size"], "name it once"),
        (["io", "--set", "modes=[standard"], "must be a YAML list or object"),
        (["io", "--mapping", "/nonexistent/mapping.yaml"], "mapping.yaml"),
        (["io", "--interval", "5"], "pull_interval_seconds must be at least"),
    ],
)
def test_a_refused_change_exits_2_says_why_and_changes_nothing(cli: CliRunner, engine: Engine, arguments: list[str], said: str) -> None:
    _create(engine)
    before = {name: _stored(engine, name) for name in ("io", "pushed")}
    refused = cli.invoke(app, ["source", "configure", *arguments], input=f"{SECOND_KEY}\n")
    assert refused.exit_code == 2, refused.output
    assert said in " ".join(refused.output.split())
    assert SECOND_KEY not in refused.output and FIRST_KEY not in refused.output
    assert {name: _stored(engine, name) for name in ("io", "pushed")} == before


def test_configure_over_the_api(cli: CliRunner, engine: Engine, live_server: LiveServer) -> None:
    _create(engine)
    admin = ["--url", live_server.url, "--token", live_server.token("admin")]
    changed = cli.invoke(app, [*admin, "source", "configure", "io", "--set", f"api_key={SECOND_KEY}", "--set", "include_postmortems=false", "--disable"])
    assert changed.exit_code == 0, changed.output
    assert _lines(changed.stdout) == ["source io changed:", "api_key: set (not shown)", "include_postmortems: true → false", "disabled", "status: auth_failed → idle"]
    assert SECOND_KEY not in changed.output
    stored = _stored(engine)
    assert (stored["config"]["api_key"], stored["config"]["include_postmortems"], stored["config"]["page_size"], stored["enabled"]) == (SECOND_KEY, False, 25, False)

    # Refused by the service: exit 2 with its reason, nothing changed.
    before = _stored(engine)
    unknown = cli.invoke(app, [*admin, "source", "configure", "io", "--set", "pagesize=5", "--enable"])
    assert unknown.exit_code == 2 and "unknown key 'pagesize'" in " ".join(unknown.output.split()), unknown.output
    missing = cli.invoke(app, [*admin, "source", "configure", "nowhere", "--enable"])
    assert missing.exit_code == 2 and "nowhere" in missing.output
    reader = cli.invoke(app, ["--url", live_server.url, "--token", live_server.token("read"), "source", "configure", "io", "--enable"])
    assert reader.exit_code == 4, reader.output
    assert _stored(engine) == before
