"""incident.io beyond the shared contract (tests/sources/integration/test_connector_contract.py): the
postmortem, or else a closed incident's updates, as the reference; dated by "Reported at"; test
incidents left out unless asked for; the mark read back by date; a spent rate limit waited out as
its body alone asks; the configuration checked."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from ingest.connectors.base import ConfigError, RetryPolicy
from ingest.connectors.incidentio import IncidentIoConnector
from schemas.item import Item
from schemas.source import SourceCreate
from service.core.db import write_transaction
from service.sources.definitions import create_source
from service.sources.pulls import pull_source
from tests.replay.clock import VirtualTime
from tests.replay.incidentio import IncidentIoReplay, hadoop_incidents
from tests.replay.server import serve

SECRET_KEY = "incidentio-test-secret-key-0123456789abcdef"


def test_postmortems_updates_reported_times_modes_and_the_mark(engine: Engine, shared_data: Path) -> None:
    incidents = hadoop_incidents(shared_data / "gitbugs_hadoop" / "reports.jsonl")
    drill = incidents[5]
    drill.data["mode"] = "test"
    replay = IncidentIoReplay(incidents)
    clock = VirtualTime(datetime(2025, 9, 1, tzinfo=UTC))
    with serve(replay) as server:
        for name, modes in (("io", None), ("io-with-drills", ["standard", "test"])):
            config = {"api_key": "inc-io-api-key-valid", "base_url": server.url, **({"modes": modes} if modes else {})}
            with write_transaction(engine) as session:
                create_source(session=session, data=SourceCreate(name=name, kind="incidentio", connector=config), secret_key=SECRET_KEY, actor="test")
            with httpx.Client(timeout=2) as client:
                pull_source(engine=engine, name=name, secret_key=SECRET_KEY, actor="test", client=client, sleep=clock.sleep, clock=clock.now, retry=RetryPolicy(max_attempts=2))
        first_pull = len(server.requests)
        with httpx.Client(timeout=2) as client:
            pull_source(engine=engine, name="io", secret_key=SECRET_KEY, actor="test", client=client, sleep=clock.sleep, clock=clock.now, retry=RetryPolicy(max_attempts=2))
        again = [request for request in server.requests[first_pull:] if request.path == "/v2/incidents"]
    with Session(engine) as session:
        items = list(session.exec(select(Item)))
    by_source: dict[int, dict[str, Item]] = {}
    for item in items:
        by_source.setdefault(item.source_id, {})[item.external_id] = item
    plain, with_drills = sorted(by_source.values(), key=len)
    assert drill.data["reference"] not in plain and drill.data["reference"] in with_drills and len(with_drills) == len(plain) + 1 == len(incidents)
    newest = max(incident.updated for incident in incidents if incident is not drill)
    assert again and all(request.param("updated_at[gte]") == newest.date().isoformat() for request in again)
    with_postmortem = next(incident for incident in incidents if incident.postmortem)
    item = plain[with_postmortem.data["reference"]]
    assert item.reference.startswith(f"# {with_postmortem.data['name']}") and "## Resolution" in item.reference
    closed = next(incident for incident in incidents if incident.updates and not incident.postmortem and incident is not drill)
    assert plain[closed.data["reference"]].reference.startswith("Resolved as ")
    reported = closed.data["incident_timestamp_values"][0]["value"]["value"]
    assert plain[closed.data["reference"]].occurred_at == datetime.fromisoformat(reported.replace("Z", "+00:00"))  # not the later created_at
    assert plain[closed.data["reference"]].meta["status_category"] == "closed"


def test_a_rate_limit_named_only_in_the_body_is_waited_out_and_the_pull_completes(engine: Engine, shared_data: Path) -> None:
    incidents = hadoop_incidents(shared_data / "gitbugs_hadoop" / "reports.jsonl")
    replay = IncidentIoReplay(incidents)
    clock = VirtualTime(datetime(2025, 9, 1, tzinfo=UTC))
    # The second page finds the key's limit spent for a minute; the 429 names the moment it ends in
    # its body's rate_limit.retry_after and in no header. Backing off instead (1 + 2 + 4 + 8 + 16 s
    # over the default six attempts) would fail the pull while the window is still closed.
    replay.spend_rate_limit(after_pages=1, seconds=60, clock=clock.now)
    with serve(replay) as server:
        config = {"api_key": "inc-io-api-key-valid", "base_url": server.url, "page_size": 25}
        with write_transaction(engine) as session:
            create_source(session=session, data=SourceCreate(name="io", kind="incidentio", connector=config), secret_key=SECRET_KEY, actor="test")
        with httpx.Client(timeout=2) as client:
            summary = pull_source(engine=engine, name="io", secret_key=SECRET_KEY, actor="test", client=client, sleep=clock.sleep, clock=clock.now, retry=RetryPolicy())
        pages = server.count("/v2/incidents")
    assert clock.sleeps == [60.0]
    assert clock.now() == datetime(2025, 9, 1, 0, 1, tzinfo=UTC)
    assert pages == -(-len(incidents) // 25) + 1  # every page once, the second twice
    with Session(engine) as session:
        stored = {item.external_id for item in session.exec(select(Item))}
    assert stored == {incident.data["reference"] for incident in incidents} and summary.new == summary.read == len(incidents)


def test_the_configuration_is_checked() -> None:
    for document, message in (
        ({}, "api_key"),
        ({"api_key": "k", "page_size": 251}, "page_size"),
        ({"api_key": "k", "modes": ["drill"]}, "modes"),
        ({"api_key": "k", "modes": []}, "modes"),
    ):
        with pytest.raises(ConfigError, match=message):
            IncidentIoConnector.parse_config(document)
