"""ServiceNow beyond the shared contract (tests/sources/integration/test_connector_contract.py): display
values and stored values mapped into items, basic auth, a filter naming an unknown field refused
(ServiceNow would ignore it and answer every record), and the configuration checked."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from ingest.connectors.base import ConfigError, ConnectorError, RetryPolicy
from ingest.connectors.servicenow import ServiceNowConnector, query_fields
from schemas.item import Item
from schemas.source import SourceCreate
from service.core.db import write_transaction
from service.sources.definitions import create_source
from service.sources.pulls import pull_source
from tests.replay.server import ReplayServer, serve
from tests.replay.servicenow import ServiceNowReplay, kev_incidents

SECRET_KEY = "servicenow-test-secret-key-0123456789abcdef"


@pytest.fixture
def replay(shared_data: Path) -> ServiceNowReplay:
    return ServiceNowReplay(kev_incidents(shared_data / "cisa_kev" / "known_exploited_vulnerabilities.json", limit=120))


@pytest.fixture
def server(replay: ServiceNowReplay) -> Iterator[ReplayServer]:
    with serve(replay) as running:
        yield running


def _pull(engine: Engine, url: str, **config: object) -> object:
    connector = {"instance_url": url, "page_size": 40, **config}
    with write_transaction(engine) as session:
        create_source(session=session, data=SourceCreate(name="snow", kind="servicenow", connector=connector), secret_key=SECRET_KEY, actor="test")
    with httpx.Client(timeout=2) as client:
        return pull_source(engine=engine, name="snow", secret_key=SECRET_KEY, actor="test", client=client, sleep=lambda seconds: None, retry=RetryPolicy(max_attempts=2))


def test_display_values_and_stored_values_become_the_item(engine: Engine, server: ReplayServer, replay: ServiceNowReplay) -> None:
    _pull(engine, server.url, username="goldenset.reader", password="s3cret-Passw0rd", query="active=false")
    with Session(engine) as session:
        items = {item.external_id: item for item in session.exec(select(Item))}
    resolved = [incident for incident in replay.incidents.values() if incident.values["active"] == "false"]
    assert set(items) == {incident.values["number"] for incident in resolved} and resolved
    incident = resolved[0]
    item = items[incident.values["number"]]
    assert item.title == incident.values["short_description"]
    assert item.occurred_at.strftime("%Y-%m-%d %H:%M:%S") == incident.values["opened_at"]  # the stored (UTC) value, not the user's display
    assert item.reference.startswith(incident.values["close_notes"]) and "Close code: Solved (Permanently)" in item.reference
    assert "Work notes:" in item.reference and "(Work notes)" in item.reference
    assert item.meta["priority"] in ("1 - Critical", "3 - Moderate") and item.meta["sys_id"] == incident.values["sys_id"]
    assert "category:Security" in item.tags
    sent = [request for request in server.requests if request.path == "/api/now/table/incident"]
    assert all((request.param("sysparm_query") or "").startswith("active=false") and request.param("sysparm_display_value") == "all" for request in sent)


def test_a_filter_naming_an_unknown_field_is_refused_not_ignored(engine: Engine, server: ReplayServer) -> None:
    with pytest.raises(ConnectorError, match="the query names priorty, which the incident table does not have"):
        _pull(engine, server.url, oauth_token="snow-oauth-valid", query="priorty<=2")
    with Session(engine) as session:
        assert session.exec(select(Item)).all() == []


def test_the_configuration_is_checked() -> None:
    for document, message in (
        ({"instance_url": "https://acme.service-now.com"}, "either username \\+ password, or oauth_token"),
        ({"instance_url": "https://acme.service-now.com", "username": "u"}, "needs both username and password"),
        ({"instance_url": "https://acme.service-now.com", "oauth_token": "t", "table": "Incident; drop"}, "not a table name"),
        ({"instance_url": "https://acme.service-now.com", "oauth_token": "t", "query": "active=true^ORDERBYnumber"}, "leave ORDERBY out"),
    ):
        with pytest.raises(ConfigError, match=message):
            ServiceNowConnector.parse_config(document)
    assert query_fields("active=true^priority<=2^ORcategory=network^NQcaller_id.email=a@b.c") == {"active", "priority", "category", "caller_id"}
