"""Pulling PagerDuty incidents from a loopback replay of REST API v2 serving the 1,404 CISA KEV
vulnerabilities as incidents, with the faults real PagerDuty produces."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from ingest.connectors import pagerduty
from ingest.connectors.base import AuthError, ConfigError, ConnectorContext, MalformedPage, RetryPolicy, TransientError
from ingest.connectors.pagerduty import PagerDutyConnector, WindowCursor
from ingest.dates import parse_incident_date
from ingest.pull import PullProgress
from schemas.item import Item
from schemas.problem import IngestSummary
from schemas.source import Source, SourceCreate, SourceUpdate
from service.core.db import write_transaction
from service.sources.definitions import create_source, update_source
from service.sources.pulls import pull_source
from tests.replay.pagerduty import PagerDutyReplay, ReplayIncident, kev_incidents, parse_pd_time, pd_time
from tests.replay.server import Delay, Fault, ReplayServer, Reply, Reset, serve

SECRET_KEY = "pagerduty-test-secret-key-0123456789abcdef"
TOKEN = "pd-api-key-valid"
ROTATED = "pd-api-key-rotated"
CLOCK = datetime(2025, 9, 1, tzinfo=UTC)
START = datetime(2021, 11, 1, tzinfo=UTC)
RETRY = RetryPolicy(max_attempts=4, initial_wait_seconds=0.01, max_backoff_seconds=0.05, jitter_seconds=0.01)
TOTAL = 1404
NAME = "kev-pagerduty"
RECENT_START = datetime(2024, 1, 1, tzinfo=UTC)
RECENT = {"start": RECENT_START.isoformat(), "limit": 10}
"""The 351 incidents from 2024 on, ten a page: enough pages for the tests that need no full pull."""


class SleepRecorder:
    def __init__(self) -> None:
        self.waits: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


@dataclass(frozen=True)
class Planned:
    """One request of a fault-free pull, in order."""

    path: str
    params: dict[str, list[str]]

    def param(self, name: str) -> str:
        return self.params[name][0]


def _config(url: str, **overrides: Any) -> dict[str, Any]:
    return {"api_key": TOKEN, "base_url": url, "start": START.isoformat(), **overrides}


def _connector(url: str, client: httpx.Client, clock: datetime = CLOCK, **overrides: Any) -> PagerDutyConnector:
    config = PagerDutyConnector.parse_config(_config(url, **overrides))
    assert isinstance(config, pagerduty.PagerDutyConfig)
    return PagerDutyConnector(config, ConnectorContext(client=client, clock=lambda: clock, sleep=SleepRecorder(), retry=RETRY))


@pytest.fixture(scope="module")
def catalog(shared_data: Path) -> Path:
    return shared_data / "cisa_kev" / "known_exploited_vulnerabilities.json"


@pytest.fixture
def replay(catalog: Path) -> PagerDutyReplay:
    return PagerDutyReplay(kev_incidents(catalog), token=TOKEN)


@pytest.fixture
def server(replay: PagerDutyReplay) -> Iterator[ReplayServer]:
    with serve(replay) as running:
        yield running


def _plan(catalog: Path, **overrides: Any) -> list[Planned]:
    """The requests of a whole fault-free first pull, to aim faults at pages and notes by number."""
    with serve(PagerDutyReplay(kev_incidents(catalog), token=TOKEN)) as running, httpx.Client(timeout=5) as client:
        for _ in _connector(running.url, client, **overrides).pages(None):
            pass
        return [Planned(request.path, request.query) for request in running.requests]


@pytest.fixture(scope="module")
def plan(catalog: Path) -> list[Planned]:
    return _plan(catalog)


@pytest.fixture(scope="module")
def recent_plan(catalog: Path) -> list[Planned]:
    return _plan(catalog, **RECENT)


def _windows(replay: PagerDutyReplay, start: datetime, days: int = 30) -> list[list[ReplayIncident]]:
    windows, since = [], start
    while since < CLOCK:
        until = min(since + timedelta(days=days), CLOCK)
        windows.append(replay.between(since, until))
        since = until
    return windows


def _numbered(faults: dict[int, Fault]) -> dict[int, Fault]:
    """Faults aimed at planned request numbers, renumbered for the retry each one adds before the next."""
    return {number + shift: fault for shift, (number, fault) in enumerate(sorted(faults.items()))}


def _pages(plan: list[Planned]) -> list[int]:
    return [number for number, request in enumerate(plan, start=1) if request.path == "/incidents"]


def _create(engine: Engine, url: str, **overrides: Any) -> None:
    with write_transaction(engine) as session:
        create_source(session=session, data=SourceCreate(name=NAME, kind="pagerduty", connector=_config(url, **overrides)), secret_key=SECRET_KEY, actor="test")


def _pull(engine: Engine, sleep: SleepRecorder | None = None, on_page: Callable[[PullProgress], None] | None = None) -> IngestSummary:
    with httpx.Client(timeout=0.5) as client:
        return pull_source(
            engine=engine, name=NAME, secret_key=SECRET_KEY, actor="test", client=client, sleep=sleep or SleepRecorder(), clock=lambda: CLOCK, retry=RETRY, on_page=on_page
        )


def _items(engine: Engine) -> dict[str, Item]:
    with Session(engine) as session:
        return {item.external_id: item for item in session.exec(select(Item))}


def _source(engine: Engine) -> Source:
    with Session(engine) as session:
        return session.exec(select(Source).where(Source.name == NAME)).one()


def _open_recent(replay: PagerDutyReplay) -> ReplayIncident:
    """An incident still open and created within the lookback before the clock."""
    return next(incident for incident in replay.ordered() if incident.created >= CLOCK - timedelta(days=7) and incident.data["status"] != "resolved")


def test_1404_incidents_over_many_windows_despite_500_429_timeout_and_reset(engine: Engine, replay: PagerDutyReplay, plan: list[Planned]) -> None:
    pages = _pages(plan)
    notes = [number for number, request in enumerate(plan, start=1) if request.path.endswith("/notes")]
    assert len(pages) >= 50 and len(notes) >= 400
    faults = _numbered(
        {
            pages[1]: Reply(500, json={"error": {"message": "Internal Server Error", "code": 2000}}),
            pages[10]: Reply(429, json={"error": {"message": "Too Many Requests", "code": 2020}}, headers={"Retry-After": "7"}),
            notes[50]: Delay(1.0),
            pages[30]: Reset(),
        }
    )
    with serve(replay, faults) as server:
        _create(engine, server.url)
        sleep = SleepRecorder()
        summary = _pull(engine, sleep)
        assert (summary.new, summary.updated, summary.rejected) == (TOTAL, 0, 0)
        assert len(server.requests) == len(plan) + 4
        assert len(sleep.waits) == 4 and 7.0 in sleep.waits  # one retry per fault, Retry-After honoured
        for number, fault in faults.items():  # each fault hit what it was aimed at, and that request was sent again
            hit, retried = server.requests[number - 1], server.requests[number]
            assert (hit.path, hit.query) == (retried.path, retried.query)
            assert hit.path == ("/incidents" if isinstance(fault, Reply | Reset) else f"/incidents/{hit.path.split('/')[2]}/notes")
        for request in server.requests:
            assert request.headers["authorization"] == f"Token token={TOKEN}"
            assert request.headers["accept"] == "application/vnd.pagerduty+json;version=2"
        listed = [request for request in server.requests if request.path == "/incidents"]
        for request in listed:
            assert request.param("sort_by") == "created_at:asc" and request.param("time_zone") == "UTC" and request.param("total") == "true"
            assert sorted(request.query["statuses[]"]) == ["acknowledged", "resolved", "triggered"]
            assert timedelta(0) < parse_pd_time(request.param("until") or "") - parse_pd_time(request.param("since") or "") <= timedelta(days=30)
        assert parse_pd_time(listed[0].param("since") or "") == START and parse_pd_time(listed[-1].param("until") or "") == CLOCK

        stored = _items(engine)
        assert len(stored) == TOTAL
        incidents = {incident.id: incident for incident in replay.ordered()}
        assert {key: item.occurred_at for key, item in stored.items()} == {key: parse_incident_date(incident.data["created_at"]) for key, incident in incidents.items()}
        resolved = next(incident for incident in incidents.values() if incident.data["status"] == "resolved")
        item = stored[resolved.id]
        assert item.reference.startswith(resolved.notes[0]["content"])
        assert item.title == resolved.data["title"] and resolved.data["service"]["summary"] in item.input and resolved.data["description"] in item.input
        assert item.meta["incident_number"] == resolved.data["incident_number"] and item.meta["status"] == "resolved"
        assert item.meta["resolved_at"] == resolved.data["last_status_change_at"]
        urgent = next(incident for incident in incidents.values() if incident.data["urgency"] == "high")
        assert stored[urgent.id].tags == ["priority:P1", "urgency:high"]
        open_item = stored[_open_recent(replay).id]
        assert open_item.reference == "" and "resolved_at" not in open_item.meta
        source = _source(engine)
        assert (source.status, source.items_pulled, source.last_error) == ("ok", TOTAL, None)
        assert WindowCursor.loads(source.cursor) == WindowCursor(since=CLOCK, filters=json.loads(source.cursor or "{}")["filters"])

        before = len(server.requests)
        again = _pull(engine)
        recent = replay.between(CLOCK - timedelta(days=7), CLOCK)
        assert (again.new, again.updated, again.rejected, again.unchanged) == (0, 0, 0, len(recent))
        reread = [request for request in server.requests[before:] if request.path == "/incidents"]
        assert [parse_pd_time(request.param("since") or "") for request in reread] == [CLOCK - timedelta(days=7)]
        assert len(_items(engine)) == TOTAL and _source(engine).items_pulled == TOTAL


def test_an_incident_resolved_after_it_was_pulled_gets_its_resolution(engine: Engine, server: ReplayServer, replay: PagerDutyReplay) -> None:
    _create(engine, server.url, **RECENT)
    expected = len(replay.between(RECENT_START, CLOCK))
    assert _pull(engine).new == expected
    incident = _open_recent(replay)
    assert _items(engine)[incident.id].reference == ""
    replay.resolve(incident.id, "Upgraded every Git client to 2.50.1; exploitation attempts blocked at the proxy.", at=CLOCK - timedelta(hours=3))
    summary = _pull(engine)
    assert (summary.new, summary.updated, summary.rejected) == (0, 1, 0)
    item = _items(engine)[incident.id]
    assert item.reference == "Upgraded every Git client to 2.50.1; exploitation attempts blocked at the proxy."
    assert item.meta["status"] == "resolved" and item.meta["resolved_at"] == pd_time(CLOCK - timedelta(hours=3)) and item.revision == 2
    assert len(_items(engine)) == expected


def test_expired_token_stops_the_source_and_a_new_key_resumes_without_duplicates(engine: Engine, server: ReplayServer, replay: PagerDutyReplay) -> None:
    _create(engine, server.url, **RECENT)
    expected = len(replay.between(RECENT_START, CLOCK))

    def expire_after_eight_pages(progress: PullProgress) -> None:
        if progress.pages == 8:
            replay.expire_token()

    with pytest.raises(AuthError, match="401"):
        _pull(engine, on_page=expire_after_eight_pages)
    source = _source(engine)
    assert source.status == "auth_failed" and "401" in (source.last_error or "")
    committed = len(_items(engine))
    assert 0 < committed < expected and source.items_pulled == committed
    cursor = WindowCursor.loads(source.cursor)
    assert cursor is not None

    replay.tokens.add(ROTATED)
    with write_transaction(engine) as session:
        stored = session.exec(select(Source).where(Source.name == NAME)).one()
        update_source(session=session, source=stored, data=SourceUpdate(connector=_config(server.url, api_key=ROTATED, **RECENT)), secret_key=SECRET_KEY, actor="test")
        assert stored.status == "idle" and stored.cursor == source.cursor
    before = len(server.requests)
    summary = _pull(engine)
    assert summary.new == expected - committed and summary.updated == 0
    first = server.requests[before]
    assert parse_pd_time(first.param("since") or "") == max(RECENT_START, cursor.since - timedelta(days=7))  # resumed, not restarted
    assert first.headers["authorization"] == f"Token token={ROTATED}"
    assert len(_items(engine)) == expected
    assert _source(engine).items_pulled == expected


def test_a_broken_incident_is_rejected_and_the_rest_of_its_page_stored(engine: Engine, server: ReplayServer, replay: PagerDutyReplay) -> None:
    crowded = max(_windows(replay, RECENT_START), key=len)
    assert len(crowded) > 20
    broken = crowded[15].id
    page_mates = {incident.id for incident in crowded[10:20]} - {broken}  # the page at offset 10 of that window
    replay.break_incident(broken)
    _create(engine, server.url, **RECENT)
    summary = _pull(engine)
    assert (summary.new, summary.rejected, summary.rejected_by_reason) == (len(replay.between(RECENT_START, CLOCK)) - 1, 1, {"bad_date": 1})
    error = summary.errors[0]
    assert (error.external_id, error.locator, error.position) == (broken, f"incident {broken}", 15)
    stored = _items(engine)
    assert broken not in stored and page_mates <= set(stored)


def test_a_malformed_page_keeps_the_cursor_at_the_last_good_page(engine: Engine, replay: PagerDutyReplay, recent_plan: list[Planned]) -> None:
    target = _pages(recent_plan)[12]
    failing = recent_plan[target - 1]
    with serve(replay, {target: Reply(200, json={"incident": [], "limit": 10, "offset": 0, "more": False})}) as server:
        _create(engine, server.url, **RECENT)
        with pytest.raises(MalformedPage, match="no 'incidents' array"):
            _pull(engine)
        source = _source(engine)
        assert source.status == "error" and "incidents" in (source.last_error or "")
        cursor = WindowCursor.loads(source.cursor)
        assert cursor is not None
        assert (cursor.since, cursor.offset) == (parse_pd_time(failing.param("since")), int(failing.param("offset")))
        if cursor.until is not None:
            assert cursor.until == parse_pd_time(failing.param("until"))
        committed = len(_items(engine))
        assert committed == len(replay.between(RECENT_START, cursor.since)) + cursor.offset > 0
        expected = len(replay.between(RECENT_START, CLOCK))
        summary = _pull(engine)
        assert summary.new == expected - committed and summary.updated == 0
        assert len(_items(engine)) == expected and _source(engine).status == "ok"


def test_crowded_windows_are_halved_and_every_cursor_resumes_without_a_gap(catalog: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Offset paging reaches 10,000 incidents; a window holding more is split (shown here with 150)."""
    monkeypatch.setattr(pagerduty, "MAX_RESULTS", 150)
    replay = PagerDutyReplay(kev_incidents(catalog), token=TOKEN, max_results=150)
    clock = datetime(2022, 1, 1, tzinfo=UTC)
    everything = {incident.id for incident in replay.between(START, clock)}
    assert len(everything) > 300
    with serve(replay) as server, httpx.Client(timeout=5) as client:
        connector = _connector(server.url, client, clock, include_notes=False, lookback_days=0)
        pages = list(connector.pages(None))
        ids = [str(record.value["id"]) for page in pages for record in page.records if record.value]
        assert len(ids) == len(everything) and set(ids) == everything
        assert len(pages) > 4 and server.count("/incidents") > len(pages)  # the first window was asked for again, halved
        for request in server.requests:
            assert int(request.param("offset") or 0) + int(request.param("limit") or 0) <= 150
        # A pull that stopped after any page resumes from its cursor with nothing skipped.
        for stop in range(len(pages) - 1):
            before = {str(record.value["id"]) for page in pages[: stop + 1] for record in page.records if record.value}
            after = {str(record.value["id"]) for page in connector.pages(pages[stop].cursor) for record in page.records if record.value}
            assert before | after == everything


def test_lookback_rereads_without_moving_the_cursor_back(catalog: Path) -> None:
    replay = PagerDutyReplay(kev_incidents(catalog), token=TOKEN)
    with serve(replay) as server, httpx.Client(timeout=5) as client:
        connector = _connector(server.url, client, include_notes=False, lookback_days=60)
        middle = WindowCursor(since=datetime(2024, 1, 1, tzinfo=UTC), until=datetime(2024, 1, 31, tzinfo=UTC), offset=5, filters=connector._filters())
        pages = list(connector.pages(middle.dumps()))
        lookback = [page for page in pages if page.cursor == middle.dumps()]
        assert sum(len(page.records) for page in lookback) == len(replay.between(datetime(2023, 11, 2, tzinfo=UTC), middle.since))
        january = replay.between(middle.since, middle.until or CLOCK)
        resumed = [str(record.value["id"]) for page in pages[len(lookback) :] for record in page.records if record.value]
        assert resumed[: len(january) - 5] == [incident.id for incident in january[5:]]
        # A cursor counted under other filters restarts its window at offset 0: repeats, never skips.
        other = WindowCursor(since=middle.since, until=middle.until, offset=5, filters="other")
        first = [str(record.value["id"]) for page in connector.pages(other.dumps()) for record in page.records if record.value]
        assert {incident.id for incident in january} <= set(first)


def test_configuration_is_validated_and_the_key_never_shown(engine: Engine) -> None:
    with pytest.raises(ConfigError, match="limit"):
        PagerDutyConnector.parse_config({"api_key": "k", "limit": 101})
    with pytest.raises(ConfigError, match="window_days"):
        PagerDutyConnector.parse_config({"api_key": "k", "window_days": 200})
    with pytest.raises(ConfigError, match="statuses"):
        PagerDutyConnector.parse_config({"api_key": "k", "statuses": ["closed"]})
    with pytest.raises(ConfigError, match="base_url") as caught:
        PagerDutyConnector.parse_config({"api_key": "very-secret-pd-key", "base_url": "api.pagerduty.com"})
    assert "very-secret-pd-key" not in str(caught.value)
    with pytest.raises(ConfigError, match="api_key"):
        PagerDutyConnector.parse_config({})
    defaults = PagerDutyConnector.parse_config({"api_key": "k", "start": "2020-02-01"})
    assert isinstance(defaults, pagerduty.PagerDutyConfig)
    assert defaults.base_url == "https://api.pagerduty.com" and defaults.start == datetime(2020, 2, 1, tzinfo=UTC)
    assert (defaults.window_days, defaults.limit, defaults.lookback_days, defaults.include_notes) == (30, 100, 7, True)
    _create(engine, "https://api.pagerduty.com", api_key="very-secret-pd-key")
    source = _source(engine)
    assert source.config["api_key"] == "***"
    assert "very-secret-pd-key" not in json.dumps(source.config) and "very-secret-pd-key" not in (source.connector_secret or "")


def _rate_limited(reset: str) -> Reply:
    """PagerDuty's own 429: its documented `ratelimit-*` headers (seconds until the window resets),
    no `Retry-After`, and its error object."""
    headers = {"ratelimit-limit": "960", "ratelimit-remaining": "0", "ratelimit-reset": reset}
    return Reply(429, json={"error": {"message": "Rate Limit Exceeded", "code": 2020}}, headers=headers)


def test_pagerdutys_ratelimit_reset_is_waited_for_and_a_longer_wait_than_allowed_stops_the_pull(engine: Engine, replay: PagerDutyReplay, plan: list[Planned]) -> None:
    pages = _pages(plan)
    with serve(replay, _numbered({pages[2]: _rate_limited("60")})) as server:
        _create(engine, server.url, **RECENT)
        sleep = SleepRecorder()
        summary = _pull(engine, sleep)
        assert summary.new == len(replay.between(RECENT_START, CLOCK)) and sleep.waits == [60.0]
        # A reset past what a pull waits (an hour by default): the next pull stops at once, naming both waits.
        asked = len(server.requests)
        server.faults = {asked + 1: _rate_limited("7200")}
        sleep = SleepRecorder()
        with pytest.raises(TransientError, match="asks to wait 7200 s before the next request, more than the 3600 s a pull waits"):
            _pull(engine, sleep)
        assert sleep.waits == [] and len(server.requests) == asked + 1
