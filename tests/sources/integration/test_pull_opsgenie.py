"""Opsgenie beyond the shared contract (tests/sources/integration/test_connector_contract.py): alerts and
incidents in one source with their notes as the reference, notes paged, the EU host by region,
an incident edited after a pull read again by the next, and the configuration checked."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from ingest.connectors.base import ConfigError, RetryPolicy
from ingest.connectors.opsgenie import OpsgenieConfig, OpsgenieConnector
from schemas.item import Item
from schemas.source import SourceCreate
from service.core.db import write_transaction
from service.sources.definitions import create_source
from service.sources.pulls import pull_source
from tests.replay.clock import VirtualTime
from tests.replay.opsgenie import OpsgenieReplay, blocker_incidents, og_time, openstack_alerts
from tests.replay.server import ReplayServer, serve

SECRET_KEY = "opsgenie-test-secret-key-0123456789abcdef"


@pytest.fixture
def replay(shared_data: Path) -> OpsgenieReplay:
    alerts = openstack_alerts(shared_data / "loghub_2k" / "OpenStack" / "OpenStack_2k.log_structured.csv")
    return OpsgenieReplay(alerts, blocker_incidents(shared_data / "gitbugs_hadoop" / "reports.jsonl"))


@pytest.fixture
def server(replay: OpsgenieReplay) -> Iterator[ReplayServer]:
    with serve(replay) as running:
        yield running


def _pull(engine: Engine, clock: VirtualTime) -> object:
    with httpx.Client(timeout=2) as client:
        return pull_source(engine=engine, name="og", secret_key=SECRET_KEY, actor="test", client=client, sleep=clock.sleep, clock=clock.now, retry=RetryPolicy(max_attempts=2))


def _items(engine: Engine) -> dict[str, Item]:
    with Session(engine) as session:
        return {item.external_id: item for item in session.exec(select(Item))}


def test_alerts_and_incidents_with_their_notes_and_an_incident_edited_after_a_pull(engine: Engine, server: ReplayServer, replay: OpsgenieReplay) -> None:
    closed = next(alert for alert in replay.alerts.values() if alert.data["status"] == "closed")
    closed.notes.extend([{**closed.notes[0], "note": f"Follow-up {n}", "offset": f"{closed.notes[0]['offset']}-{n:03d}"} for n in range(120)])  # two pages of notes
    data = SourceCreate(name="og", kind="opsgenie", connector={"api_key": "og-api-key-valid", "base_url": server.url, "limit": 100})
    with write_transaction(engine) as session:
        create_source(session=session, data=data, secret_key=SECRET_KEY, actor="test")
    clock = VirtualTime(datetime(2025, 9, 1, tzinfo=UTC))
    _pull(engine, clock)
    items = _items(engine)
    assert set(items) == set(replay.alerts) | set(replay.incidents)
    note_requests = [request for request in server.requests if request.path == f"/v2/alerts/{closed.data['id']}/notes"]
    assert len(note_requests) == 2 and note_requests[1].param("offset")
    assert items[closed.data["id"]].reference.startswith("Closed: the known pattern") and "Follow-up 119" in items[closed.data["id"]].reference
    assert items[closed.data["id"]].meta["kind"] == "alert" and "nova" in items[closed.data["id"]].tags
    resolved = next(incident for incident in replay.incidents.values() if incident.data["status"] == "resolved")
    assert items[resolved.data["id"]].reference.startswith("Resolved:") and items[resolved.data["id"]].meta["kind"] == "incident"
    incident_queries = {request.param("query") for request in server.requests if request.path == "/v1/incidents"}
    assert incident_queries == {"updatedAt>=0"}  # Opsgenie requires a query for incidents
    # An incident updated after the pull (incidents are listed by creation only) is read again by the next one.
    replay.edit(resolved.data["id"], message="Blocker re-opened and renamed", at=clock.now() - timedelta(minutes=1))
    _pull(engine, clock)
    assert _items(engine)[resolved.data["id"]].title == "Blocker re-opened and renamed"


def test_the_region_picks_the_host_and_the_configuration_is_checked() -> None:
    eu = OpsgenieConnector.parse_config({"api_key": "k", "region": "eu"})
    assert isinstance(eu, OpsgenieConfig) and eu.api == "https://api.eu.opsgenie.com" and eu.kinds == ["alerts", "incidents"]
    us = OpsgenieConnector.parse_config({"api_key": "k"})
    assert isinstance(us, OpsgenieConfig) and us.api == "https://api.opsgenie.com"
    for document, message in (
        ({}, "api_key"),
        ({"api_key": "k", "region": "apac"}, "region"),
        ({"api_key": "k", "kinds": []}, "kinds"),
        ({"api_key": "k", "query": "updatedAt > 5"}, "leave updatedAt out"),
        ({"api_key": "k", "limit": 101}, "limit"),
    ):
        with pytest.raises(ConfigError, match=message):
            OpsgenieConnector.parse_config(document)
    assert og_time(datetime(2023, 9, 26, 17, 48, 54, 480000, tzinfo=UTC)) == "2023-09-26T17:48:54.48Z"
