"""Pulling Jira from a loopback replay of its REST search, with the faults real Jira produces."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import func
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from ingest.connectors.base import AuthError, MalformedPage, RetryPolicy, TransientError
from ingest.connectors.jira import JiraConnector, adf_to_text
from schemas.item import Item
from schemas.source import Source, SourceCreate, SourceUpdate
from service.core.db import write_transaction
from service.sources.definitions import create_source, update_source
from service.sources.pulls import pull_source
from tests.replay.jira import JiraReplay, adf, hadoop_issues
from tests.replay.server import Delay, ReplayServer, Reply, Reset, serve

SECRET_KEY = "jira-test-secret-key-0123456789abcdef"
RETRY = RetryPolicy(max_attempts=4, initial_wait_seconds=0.01, max_backoff_seconds=0.05, jitter_seconds=0.01)


class SleepRecorder:
    def __init__(self) -> None:
        self.waits: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


@pytest.fixture(scope="module")
def issues(shared_data: Path) -> list[dict[str, Any]]:
    return hadoop_issues(shared_data / "gitbugs_hadoop" / "reports.jsonl")


SLICE = 700  # fault tests run on the first 700 reports (7+ pages); the acceptance test on all 2,503


@pytest.fixture
def replay(issues: list[dict[str, Any]], request: pytest.FixtureRequest) -> JiraReplay:
    everything = request.node.get_closest_marker("all_reports") is not None
    return JiraReplay(issues=json.loads(json.dumps(issues if everything else issues[:SLICE])))


@pytest.fixture
def server(replay: JiraReplay) -> Iterator[ReplayServer]:
    with serve(replay) as running:
        yield running


def _create(engine: Engine, url: str, *, api: str | None = "v2", token: str = "jira-pat-valid", name: str = "hadoop-jira", jql: str = "project = HADOOP") -> None:
    connector = {"base_url": url, "personal_access_token": token, "jql": jql, **({"api": api} if api is not None else {})}
    with write_transaction(engine) as session:
        create_source(session=session, data=SourceCreate(name=name, kind="jira", connector=connector), secret_key=SECRET_KEY, actor="test")


class Loopback(httpx.HTTPTransport):
    """Sends every request to a loopback port, whatever host its URL names (a Cloud site's name)."""

    def __init__(self, port: int) -> None:
        super().__init__()
        self.port = port

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        request.url = request.url.copy_with(scheme="http", host="127.0.0.1", port=self.port)
        return super().handle_request(request)


def _pull(engine: Engine, sleep: SleepRecorder | None = None, name: str = "hadoop-jira", transport: httpx.BaseTransport | None = None) -> Any:
    with httpx.Client(timeout=0.5, transport=transport) as client:
        return pull_source(engine=engine, name=name, secret_key=SECRET_KEY, actor="test", client=client, sleep=sleep or SleepRecorder(), retry=RETRY)


def _items(engine: Engine) -> dict[str, Item]:
    with Session(engine) as session:
        return {item.external_id: item for item in session.exec(select(Item))}


def _source(engine: Engine, name: str = "hadoop-jira") -> Source:
    with Session(engine) as session:
        return session.exec(select(Source).where(Source.name == name)).one()


@pytest.mark.all_reports
def test_2503_reports_over_26_pages_despite_a_500_and_a_429(engine: Engine, server: ReplayServer, issues: list[dict[str, Any]]) -> None:
    server.faults = {7: Reply(500, json={"errorMessages": ["Internal server error"]}), 12: Reply(429, json={}, headers={"Retry-After": "2"})}
    _create(engine, server.url)
    sleep = SleepRecorder()
    summary = _pull(engine, sleep)
    assert (summary.new, summary.rejected) == (2503, 0)
    assert server.count("/rest/api/2/search") >= 26 + 2
    assert 2.0 in sleep.waits  # Retry-After honoured
    stored = _items(engine)
    assert len(stored) == 2503
    expected = {issue["key"]: datetime.strptime(issue["fields"]["created"], "%Y-%m-%dT%H:%M:%S.000+0000").replace(tzinfo=UTC) for issue in issues}
    assert {key: item.occurred_at for key, item in stored.items()} == expected
    assert all(item.revision == 1 for item in stored.values())
    source = _source(engine)
    assert (source.status, source.items_pulled, source.last_error) == ("ok", 2503, None)
    again = _pull(engine)
    assert (again.new, again.updated) == (0, 0)
    assert len(_items(engine)) == 2503


def test_timeouts_and_resets_are_retried(engine: Engine, server: ReplayServer) -> None:
    server.faults = {3: Delay(1.0), 5: Reset()}
    _create(engine, server.url)
    summary = _pull(engine)
    assert summary.new == SLICE


def test_exhausted_retries_keep_every_committed_page(engine: Engine, server: ReplayServer) -> None:
    server.faults = {n: Reply(503, json={}) for n in range(4, 4 + RETRY.max_attempts)}
    _create(engine, server.url)
    with pytest.raises(TransientError, match="gave up after 4 attempts"):
        _pull(engine)
    source = _source(engine)
    assert source.status == "error" and "503" in (source.last_error or "")
    committed = len(_items(engine))
    assert 250 <= committed <= 300  # three pages committed with their cursor (pages overlap at the cursor minute)
    assert _pull(engine).new == SLICE - committed


def test_expired_token_stops_the_source_until_it_is_replaced(engine: Engine, server: ReplayServer, replay: JiraReplay) -> None:
    _create(engine, server.url)
    replay.expired = True
    with pytest.raises(AuthError, match="401"):
        _pull(engine)
    source = _source(engine)
    assert source.status == "auth_failed" and "401" in (source.last_error or "")
    assert _items(engine) == {}
    replay.expired, replay.token = False, "jira-pat-rotated"
    with write_transaction(engine) as session:
        stored = session.exec(select(Source)).one()
        update_source(
            session=session,
            source=stored,
            data=SourceUpdate(connector={"base_url": server.url, "personal_access_token": "jira-pat-rotated", "jql": "project = HADOOP"}),
            secret_key=SECRET_KEY,
            actor="test",
        )
        assert stored.status == "idle"
    assert _pull(engine).new == SLICE


def test_token_expiring_mid_pull_resumes_without_duplicates(engine: Engine, server: ReplayServer, replay: JiraReplay) -> None:
    _create(engine, server.url)
    original = replay.__call__

    def expire_after_five(request: Any) -> Reply:
        if replay.requests_seen >= 5:
            replay.expired = True
        return original(request)

    server.handler = expire_after_five
    with pytest.raises(AuthError):
        _pull(engine)
    committed = len(_items(engine))
    assert 400 <= committed <= 500
    server.handler = original
    replay.expired = False
    assert _pull(engine).new == SLICE - committed
    assert len(_items(engine)) == SLICE


def test_a_broken_record_is_rejected_and_its_page_still_stored(engine: Engine, server: ReplayServer, replay: JiraReplay) -> None:
    broken = sorted(replay.issues, key=lambda issue: (issue["fields"]["updated"], issue["key"]))[150]["key"]
    replay.broken_keys = {broken}
    _create(engine, server.url)
    summary = _pull(engine)
    assert (summary.new, summary.rejected, summary.rejected_by_reason) == (SLICE - 1, 1, {"bad_date": 1})
    assert summary.errors[0].external_id == broken
    assert broken not in _items(engine)


def test_a_malformed_page_does_not_advance_the_cursor(engine: Engine, server: ReplayServer) -> None:
    server.faults = {4: Reply(200, json={"unexpected": "shape"})}
    _create(engine, server.url)
    with pytest.raises(MalformedPage, match="no 'issues' array"):
        _pull(engine)
    source = _source(engine)
    assert source.status == "error" and "issues" in (source.last_error or "")
    committed = len(_items(engine))
    assert 250 <= committed <= 300
    cursor = source.cursor
    assert _pull(engine).new == SLICE - committed
    assert cursor is not None and _source(engine).cursor != cursor


def test_issues_edited_while_paging_are_stored_in_their_final_state(engine: Engine, server: ReplayServer, replay: JiraReplay) -> None:
    ordered = sorted(replay.issues, key=lambda issue: (issue["fields"]["updated"], issue["key"]))
    early, late = ordered[20]["key"], ordered[650]["key"]
    original = replay.__call__

    def edit_during_paging(request: Any) -> Reply:
        if replay.requests_seen == 6:
            # an already-read issue and a not-yet-read one are edited while we page
            replay.edit(early, summary="edited after it was read", updated=datetime(2025, 1, 1, tzinfo=UTC))
            replay.edit(late, summary="edited before it was read", updated=datetime(2025, 1, 2, tzinfo=UTC))
        return original(request)

    server.handler = edit_during_paging
    _create(engine, server.url)
    _pull(engine)
    stored = _items(engine)
    assert len(stored) == SLICE
    assert stored[late].title == "edited before it was read"
    assert stored[early].title == "edited after it was read"
    assert stored[early].revision == 2


def test_v3_token_paging_with_document_format_descriptions(engine: Engine, server: ReplayServer, replay: JiraReplay) -> None:
    replay.issues = replay.issues[:450]
    _create(engine, server.url, api="v3")
    assert _pull(engine).new == 450
    assert server.count("/rest/api/3/search/jql") >= 5
    item = next(iter(_items(engine).values()))
    assert "{'type'" not in item.input and '"type"' not in item.input


def test_a_cloud_site_with_no_jql_pulls_through_the_bounded_enhanced_search(engine: Engine, server: ReplayServer, replay: JiraReplay) -> None:
    """Jira Cloud answers 410 on the removed search endpoints and 400 on a query without a
    restriction; a Cloud site's source with neither `api` nor `jql` still pulls everything."""
    replay.cloud = True
    replay.issues = replay.issues[:250]
    port = int(server.url.rsplit(":", 1)[1])
    _create(engine, f"http://acme.atlassian.net:{port}", api=None, jql="")
    assert _pull(engine, transport=Loopback(port)).new == 250
    searched = [request for request in server.requests if request.path.startswith("/rest/api/")]
    assert {request.path for request in searched} == {"/rest/api/3/search/jql"}
    assert all('updated >= "' in (request.param("jql") or "") for request in searched)
    # The endpoints Cloud removed really are refused by the replay, as Cloud refuses them.
    assert httpx.get(f"{server.url}/rest/api/2/search", headers={"Authorization": "Bearer jira-pat-valid"}).status_code == 410
    unbounded = httpx.get(f"{server.url}/rest/api/3/search/jql", params={"jql": "ORDER BY updated ASC"}, headers={"Authorization": "Bearer jira-pat-valid"})
    assert unbounded.status_code == 400 and "Unbounded JQL" in unbounded.text


def test_v2_search_is_refused_for_a_cloud_site_and_chosen_for_a_server(engine: Engine) -> None:
    from ingest.connectors.base import ConfigError
    from ingest.connectors.jira import JiraConfig

    with pytest.raises(ConfigError, match=r"Jira Cloud site.*410 Gone.*api: v3"):
        JiraConnector.parse_config({"base_url": "https://acme.atlassian.net", "email": "ops@example.com", "api_token": "t", "api": "v2"})
    cloud = JiraConnector.parse_config({"base_url": "https://acme.atlassian.net", "email": "ops@example.com", "api_token": "t"})
    server = JiraConnector.parse_config({"base_url": "https://issues.example.org/jira", "personal_access_token": "t"})
    assert isinstance(cloud, JiraConfig) and isinstance(server, JiraConfig)
    assert (cloud.search_api, server.search_api) == ("v3", "v2")


def test_a_null_description_from_jira_server_renders_as_nothing(engine: Engine) -> None:
    """Jira Server answers `"description": null` for an issue without one (the vendor's shape,
    tests/replay/vendor/jira_server_search.json): the default mapping's input holds no word `None`."""
    answer = json.loads((Path(__file__).resolve().parents[2] / "replay" / "vendor" / "jira_server_search.json").read_text(encoding="utf-8"))
    with serve(lambda request: Reply(json=answer)) as vendor:
        _create(engine, vendor.url, jql="")
        assert _pull(engine).new == 2
    stored = _items(engine)
    assert stored["OPS-231"].input == "Nightly backup job skips the archive volume"
    assert stored["OPS-231"].reference == ""
    assert stored["OPS-232"].reference.startswith("Resolution: Fixed")
    assert all("None" not in f"{item.title}{item.input}{item.reference}" for item in stored.values())


def test_adf_flattening() -> None:
    assert adf_to_text(adf("first line\nsecond line")).strip() == "first line\nsecond line"


def test_configuration_is_validated_and_credentials_never_shown(engine: Engine) -> None:
    from ingest.connectors.base import ConfigError

    with pytest.raises(ConfigError, match="either email \\+ api_token, or personal_access_token"):
        JiraConnector.parse_config({"base_url": "https://jira.example.com"})
    with pytest.raises(ConfigError, match="base_url"):
        JiraConnector.parse_config({"base_url": "jira.example.com", "personal_access_token": "x"})
    with pytest.raises(ConfigError, match="ORDER BY") as caught:
        JiraConnector.parse_config({"base_url": "https://j", "personal_access_token": "s3cr3t-value", "jql": "project = X ORDER BY created"})
    assert "s3cr3t-value" not in str(caught.value)
    _create(engine, "https://jira.example.com", token="very-secret-pat")
    source = _source(engine)
    assert source.config["personal_access_token"] == "***"
    assert "very-secret-pat" not in json.dumps(source.config) and "very-secret-pat" not in (source.connector_secret or "")


def test_items_per_source_stay_unique_in_the_database(engine: Engine, server: ReplayServer) -> None:
    _create(engine, server.url)
    _pull(engine)
    _pull(engine)
    with Session(engine) as session:
        duplicates = session.exec(select(Item.external_id, func.count()).group_by(Item.external_id).having(func.count() > 1)).all()
    assert duplicates == []


def test_an_edit_while_paging_through_a_crowded_minute_skips_nothing(engine: Engine, server: ReplayServer, replay: JiraReplay) -> None:
    """250 issues updated in the cursor's minute (more than a page): offsets are followed through
    that minute, and an issue edited meanwhile slides the others under the offset; none may be skipped."""
    crowded = sorted(replay.issues[:250], key=lambda issue: issue["key"])
    for issue in crowded:
        issue["fields"]["updated"] = "2023-03-03T03:03:00.000+0000"
    replay.issues = crowded[:1]
    _create(engine, server.url)
    _pull(engine)  # the cursor now stands in the crowded minute
    replay.issues = crowded
    original = replay.__call__
    edited = crowded[5]["key"]
    seen_before = replay.requests_seen

    def edit_before_the_second_page(request: Any) -> Reply:
        if replay.requests_seen == seen_before + 1:
            replay.edit(edited, summary="edited while the minute was paged", updated=datetime(2024, 1, 1, tzinfo=UTC))
        return original(request)

    server.handler = edit_before_the_second_page
    _pull(engine)
    stored = _items(engine)
    assert len(stored) == 250
    assert stored[edited].title == "edited while the minute was paged"
