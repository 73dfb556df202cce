"""Connectors are found by kind, built-in or installed by a third-party package's entry point."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from ingest.connectors.registry import UnknownConnector, connector_class, connector_kinds, connector_targets
from schemas.item import Item
from schemas.source import SourceCreate
from service.core.db import write_transaction
from service.sources.definitions import create_source
from service.sources.pulls import pull_source
from tests.conftest import TEST_SECRET_KEY


@pytest.fixture
def installed_plugin(tmp_path: Path) -> Iterator[None]:
    """Install a distribution whose entry point declares the `statuspage` connector."""
    dist = tmp_path / "goldenset_statuspage-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: goldenset-statuspage\nVersion: 0.1\n")
    plugin = "tests.support.statuspage:StatuspageConnector"
    (dist / "entry_points.txt").write_text(f"[goldenset.connectors]\nstatuspage = {plugin}\njira = {plugin}\n")
    sys.path.insert(0, str(tmp_path))
    connector_targets.cache_clear()
    yield
    sys.path.remove(str(tmp_path))
    connector_targets.cache_clear()


def test_builtin_kinds() -> None:
    assert {"jira", "github", "pagerduty", "servicenow", "opsgenie", "sentry", "incidentio"} <= set(connector_kinds())
    with pytest.raises(UnknownConnector, match="registered: "):
        connector_class("zendesk")


def test_a_plugin_connector_is_discovered_and_pulled(installed_plugin: None, engine: Engine) -> None:
    assert connector_class("statuspage").__name__ == "StatuspageConnector"
    assert connector_class("jira").__name__ == "JiraConnector"  # a plugin cannot replace a built-in
    with write_transaction(engine) as session:
        create_source(
            session=session,
            data=SourceCreate(name="status", kind="statuspage", connector={"incidents": [{"id": "s1", "created_at": "2024-05-01T10:00:00Z", "name": "API degraded"}]}),
            secret_key=TEST_SECRET_KEY,
            actor="test",
        )
    assert pull_source(engine=engine, name="status", secret_key=TEST_SECRET_KEY, actor="test").new == 1
    assert pull_source(engine=engine, name="status", secret_key=TEST_SECRET_KEY, actor="test").new == 0
    with Session(engine) as session:
        assert session.exec(select(Item.input)).one() == "API degraded"
