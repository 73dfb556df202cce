"""The GitHub connector against a replay of the REST issue list over real sockets, on every backend:
the 2,503 Hadoop reports through faults and rate limits, resumes, expired tokens, broken records,
malformed pages and issues edited mid-pull. Time is virtual: every wait is recorded, none is slept."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from ingest.connectors.base import AuthError, ConfigError, MalformedPage, RetryPolicy
from ingest.connectors.github import GitHubConfig, GitHubConnector
from ingest.connectors.keyset import KeysetCursor
from ingest.connectors.registry import connector_class
from schemas.item import Item
from schemas.problem import IngestSummary
from schemas.source import Source, SourceCreate, SourceUpdate
from service.core.db import write_transaction
from service.sources.definitions import create_source, get_source, update_source
from service.sources.pulls import pull_source
from tests.replay.clock import VirtualTime
from tests.replay.github import TOKEN, GitHubReplay, links_a_pull_request
from tests.replay.server import Delay, Fault, Reply, Reset

SECRET_KEY = "github-test-secret-key-0123456789abcdef"
START = datetime(2026, 1, 15, 9, 30, tzinfo=UTC)
REDACTED = re.compile(r"<[A-Z0-9_]+>")
RETRY = RetryPolicy(max_attempts=4, initial_wait_seconds=0.25, max_backoff_seconds=2.0, jitter_seconds=0.1)


@pytest.fixture
def reports(shared_data: Path) -> Path:
    return shared_data / "gitbugs_hadoop" / "reports.jsonl"


@pytest.fixture
def time() -> VirtualTime:
    return VirtualTime(START)


def _connector(base_url: str, **options: Any) -> dict[str, Any]:
    return {"owner": "apache", "repo": "hadoop", "token": TOKEN, "base_url": base_url, "per_page": 100, **options}


def _create(engine: Engine, base_url: str, *, name: str = "hadoop-gh", **options: Any) -> None:
    with write_transaction(engine) as session:
        create_source(session=session, data=SourceCreate(name=name, kind="github", connector=_connector(base_url, **options)), secret_key=SECRET_KEY, actor="test")


def _pull(engine: Engine, time: VirtualTime, *, name: str = "hadoop-gh") -> IngestSummary:
    with httpx.Client(timeout=0.5) as client:
        return pull_source(engine=engine, name=name, secret_key=SECRET_KEY, actor="test", client=client, sleep=time.sleep, clock=time.now, retry=RETRY)


def _source(engine: Engine, name: str = "hadoop-gh") -> Source:
    with Session(engine) as session:
        source = get_source(session=session, name=name)
        assert source is not None
        return source


def _items(engine: Engine, name: str = "hadoop-gh") -> dict[str, Item]:
    source = _source(engine, name)
    with Session(engine) as session:
        return {item.external_id: item for item in session.exec(select(Item).where(Item.source_id == source.id))}


def _served(replay: GitHubReplay, *numbers: int) -> Iterator[dict[str, Any]]:
    for number in numbers:
        for issue_number in replay.served[number]:
            yield replay.issues[issue_number]


def test_all_hadoop_reports_arrive_once_through_faults_and_rate_limits(engine: Engine, reports: Path, time: VirtualTime) -> None:
    replay = GitHubReplay.from_hadoop(reports, clock=time.epoch)
    assert len(replay.issue_numbers) == 2503 and len(replay.pull_request_numbers) == 250
    resets: list[int] = []
    replay.before[8] = lambda: resets.append(replay.exhaust(30))
    faults: dict[int, Fault] = {
        2: Reply(500, json={"message": "Server Error"}),
        5: Reply(429, json={"message": "Too many requests"}, headers={"Retry-After": "7"}),
        11: Delay(0.8),
        14: Reset(),
    }
    with replay.serve(faults) as server:
        _create(engine, server.url)
        first = _pull(engine, time)
        second = _pull(engine, time)

    assert (first.read, first.new, first.rejected) == (2503, 2503, 0)
    assert (second.read, second.new, second.updated) == (0, 0, 0)
    created = {str(replay.report_numbers[str(report_id)]): datetime.fromisoformat(str(at)).replace(tzinfo=UTC) for report_id, at in _report_dates(reports)}
    items = _items(engine)
    assert {key: item.occurred_at for key, item in items.items()} == created
    assert not {str(number) for number in replay.pull_request_numbers} & set(items)
    assert all("bug" in item.tags and any(tag.startswith("priority: ") for tag in item.tags) for item in items.values())
    source = _source(engine)
    assert (source.status, source.items_pulled, source.last_error) == ("ok", 2503, None)
    assert source.config["token"] == "***"
    # One wait per fault: backoff for the 500, the timeout and the reset; the 429's Retry-After
    # exactly; the spent window until its reset, which was therefore refused once only.
    assert len(time.sleeps) == 5 and time.sleeps[1] == 7.0
    assert len(resets) == 1 and len(replay.refused) == 1
    refused_at, reset = replay.refused[0]
    assert any(wait >= reset - refused_at for wait in time.sleeps)
    assert max(time.sleeps) < 40
    # Many pages, each request a keyset query in GitHub's documented form.
    pages = [request for request in server.requests if request.path == "/repos/apache/hadoop/issues"]
    assert len(replay.served) >= 28
    for request in pages:
        assert request.headers["authorization"] == f"Bearer {TOKEN}"
        assert request.headers["accept"] == "application/vnd.github+json"
        assert request.headers["x-github-api-version"] == "2022-11-28"
        assert (request.param("state"), request.param("sort"), request.param("direction"), request.param("per_page")) == ("all", "updated", "asc", "100")
    assert all(request.param("since") for request in pages[1:])


def _report_dates(reports: Path) -> Iterator[tuple[object, object]]:
    for line in reports.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        yield row["id"], row["created"]


def test_labels_become_tags_and_fields_become_metadata(engine: Engine, reports: Path, time: VirtualTime) -> None:
    replay = GitHubReplay.from_hadoop(reports, limit=120, clock=time.epoch)
    with replay.serve() as server:
        _create(engine, server.url)
        _pull(engine, time)
    items = _items(engine)
    assert len(items) == 120
    for key, item in items.items():
        issue = replay.issues[int(key)]
        assert item.tags == sorted(label["name"] for label in issue["labels"])
        assert item.title == issue["title"].strip()
        expected = (f"{issue['title']}\n\n{issue['body']}" if issue["body"] else issue["title"]).strip()
        assert item.input == expected or REDACTED.search(item.input)  # redaction may replace addresses
        assert item.meta["html_url"] == f"https://github.com/apache/hadoop/issues/{key}"
        assert item.meta["author"] == issue["user"]["login"]
        assert item.meta["state"] == issue["state"]
        assert "updated_at" not in item.meta  # edits alone must not make a new revision
        assert item.meta.get("milestone") == (issue["milestone"] or {}).get("title")
        if issue["state"] == "closed":
            assert item.reference.startswith("Closed as ") and issue["closed_at"] in item.reference
        else:
            assert item.reference == ""
    assert any("priority: Major" in item.tags and "bug" in item.tags for item in items.values())


def test_a_spent_window_is_waited_out_before_the_next_request(engine: Engine, reports: Path, time: VirtualTime) -> None:
    replay = GitHubReplay.from_hadoop(reports, limit=300, clock=time.epoch, rate_limit=2, rate_window_seconds=60)
    secondary = Reply(403, json={"message": "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."}, headers={"Retry-After": "11"})
    with replay.serve({5: secondary}) as server:
        _create(engine, server.url, per_page=50)
        summary = _pull(engine, time)
    assert summary.new == 300
    assert replay.refused == []  # every spent window was waited out, never hit
    assert time.sleeps[0] == 61.0  # the reset a minute ahead, plus a second of margin
    assert 11.0 in time.sleeps
    assert len([wait for wait in time.sleeps if wait > 11]) >= 2


def test_an_expired_token_stops_the_source_until_it_is_replaced(engine: Engine, reports: Path, time: VirtualTime) -> None:
    replay = GitHubReplay.from_hadoop(reports, limit=300, clock=time.epoch)
    replay.before[3] = replay.expire_token
    fresh = "github_pat_fresh0123456789abcdefghijklmnopqrstuvwxyz"
    with replay.serve() as server:
        _create(engine, server.url)
        with pytest.raises(AuthError, match="401"):
            _pull(engine, time)
        source = _source(engine)
        assert source.status == "auth_failed"
        assert source.last_error is not None and "401" in source.last_error and "Bad credentials" in source.last_error
        assert TOKEN not in source.last_error
        assert replay.unauthorised == 1  # not retried
        # What was stored is exactly the issues of the pages answered before the token expired.
        stored = _items(engine)
        expected = {str(issue["number"]) for issue in _served(replay, 1, 2) if not links_a_pull_request(issue)}
        assert set(stored) == expected and stored
        assert all(item.title == replay.issues[int(key)]["title"].strip() for key, item in stored.items())

        with write_transaction(engine) as session:
            row = get_source(session=session, name="hadoop-gh")
            assert row is not None
            update_source(session=session, source=row, data=SourceUpdate(connector=_connector(server.url, token=fresh)), secret_key=SECRET_KEY, actor="test")
        source = _source(engine)
        assert (source.status, source.last_error) == ("idle", None)
        replay.grant(fresh)
        resumed = _pull(engine, time)
    assert (resumed.new, resumed.updated, resumed.unchanged) == (300 - len(expected), 0, 0)
    assert set(_items(engine)) == {str(number) for number in replay.issue_numbers}
    assert server.requests[-1].headers["authorization"] == f"Bearer {fresh}"
    assert _source(engine).status == "ok"


def test_a_broken_record_is_rejected_alone_and_the_cursor_moves_past_it(engine: Engine, reports: Path, time: VirtualTime) -> None:
    replay = GitHubReplay.from_hadoop(reports, limit=300, clock=time.epoch)
    order = [issue["number"] for issue in replay.ordered() if not links_a_pull_request(issue)]
    victim = order[150]
    replay.break_record(victim)
    with replay.serve() as server:
        _create(engine, server.url)
        summary = _pull(engine, time)
        again = _pull(engine, time)
    assert (summary.new, summary.rejected, summary.rejected_by_reason) == (299, 1, {"bad_date": 1})
    error = summary.errors[0]
    assert (error.external_id, error.reason, error.locator) == (str(victim), "bad_date", f"issue #{victim}")
    assert "not a date" in error.detail
    assert set(_items(engine)) == {str(number) for number in order if number != victim}
    cursor = KeysetCursor.loads(_source(engine).cursor)
    assert cursor.since is not None and cursor.since >= replay.issues[victim]["updated_at"]
    assert again.read == 0  # the rejected record is not read again until it changes


def test_an_entry_that_is_not_an_object_is_rejected_and_the_rest_stored(engine: Engine, reports: Path, time: VirtualTime) -> None:
    replay = GitHubReplay.from_hadoop(reports, limit=50, clock=time.epoch)
    with replay.serve() as server:
        page = [replay.render(issue, server.url.removeprefix("http://")) for issue in replay.ordered()[:5]]
        server.faults[1] = Reply(200, json=["not an issue", *page], headers=replay.rate_limit_headers())
        _create(engine, server.url)
        summary = _pull(engine, time)
    assert (summary.new, summary.rejected, summary.rejected_by_reason) == (5, 1, {"wrong_type": 1})
    assert summary.errors[0].detail == "expected an issue object, got str"


def test_a_malformed_page_stops_the_pull_without_moving_the_cursor_past_the_last_good_page(engine: Engine, reports: Path, time: VirtualTime) -> None:
    replay = GitHubReplay.from_hadoop(reports, limit=300, clock=time.epoch)
    with replay.serve({3: Reply(200, json={"not": "a list"})}) as server:
        _create(engine, server.url)
        with pytest.raises(MalformedPage, match="not a JSON array"):
            _pull(engine, time)
        source = _source(engine)
        assert source.status == "error"
        assert source.last_error is not None and "not a JSON array" in source.last_error
        good = list(_served(replay, 1, 2))
        expected = KeysetCursor().advance((issue["updated_at"], str(issue["number"])) for issue in good)
        assert source.cursor == expected.dumps()
        assert set(_items(engine)) == {str(issue["number"]) for issue in good if not links_a_pull_request(issue)}
        resumed = _pull(engine, time)
    assert resumed.unchanged == 0
    assert set(_items(engine)) == {str(number) for number in replay.issue_numbers}
    assert _source(engine).status == "ok"


def test_an_issue_edited_mid_pull_is_stored_in_its_final_state_and_none_is_skipped(engine: Engine, reports: Path, time: VirtualTime) -> None:
    replay = GitHubReplay.from_hadoop(reports, limit=300, clock=time.epoch)
    order = [issue["number"] for issue in replay.ordered() if not links_a_pull_request(issue)]
    behind, next_page, ahead = order[10], order[120], order[220]

    def edit() -> None:
        replay.edit(behind, title="Edited after it was pulled", state="closed", state_reason="completed", closed_at="2026-01-15T09:30:00Z")
        replay.edit(next_page, title="Edited while its page was being fetched")
        replay.edit(ahead, body="Edited before its page was reached")

    replay.before[2] = edit
    with replay.serve() as server:
        _create(engine, server.url)
        summary = _pull(engine, time)
        again = _pull(engine, time)
    items = _items(engine)
    assert set(items) == {str(number) for number in replay.issue_numbers}
    assert (summary.new, summary.updated) == (300, 1)
    assert items[str(behind)].title == "Edited after it was pulled"
    assert items[str(behind)].reference == "Closed as completed (2026-01-15T09:30:00Z)"
    assert items[str(next_page)].title == "Edited while its page was being fetched"
    assert items[str(ahead)].input.endswith("Edited before its page was reached")
    assert again.read == 0


def test_many_issues_edited_in_the_same_second_are_each_pulled_once(engine: Engine, reports: Path, time: VirtualTime) -> None:
    # More issues share one `updated_at` second than fit on a page: `since` cannot move past them,
    # so the pull must page through them within one query, storing each once and ending.
    replay = GitHubReplay.from_hadoop(reports, limit=200, clock=time.epoch)
    with replay.serve() as server:
        _create(engine, server.url, per_page=50)
        assert _pull(engine, time).new == 200
        triaged = {"id": 7, "node_id": "LA_kwDO_triaged", "name": "triaged", "color": "00ff00", "default": False, "description": None}
        for number in sorted(replay.issue_numbers)[:130]:  # a bulk label edit: one second for all
            replay.edit(number, labels=[*replay.issues[number]["labels"], triaged])
        before = len(server.requests)
        bulk = _pull(engine, time)
        requests = server.requests[before:]
        assert _pull(engine, time).read == 0
    assert (bulk.read, bulk.updated, bulk.unchanged) == (130, 130, 0)
    assert len(requests) <= 5
    assert [request.param("page") for request in requests[1:]] == [None, "2", "3"]
    assert sum("triaged" in item.tags for item in _items(engine).values()) == 130


def test_an_edit_while_paging_through_one_second_skips_nothing(engine: Engine, reports: Path, time: VirtualTime) -> None:
    # While the pull pages through a second shared by more issues than fit on a page, an issue it
    # already read is edited: it moves to the end and every later issue slides one place earlier,
    # so the next page offset misses one. The group is read again before the cursor moves past it.
    replay = GitHubReplay.from_hadoop(reports, limit=200, clock=time.epoch)
    triaged = {"id": 7, "node_id": "LA_kwDO_triaged", "name": "triaged", "color": "00ff00", "default": False, "description": None}
    with replay.serve() as server:
        _create(engine, server.url, per_page=50)
        assert _pull(engine, time).new == 200
        group = sorted(replay.issue_numbers)[:130]
        for number in group:  # a bulk label edit: one second for all
            replay.edit(number, labels=[*replay.issues[number]["labels"], triaged])
        time.sleep(5)
        later = sorted(replay.issue_numbers)[-1]
        replay.edit(later, title="Edited five seconds after the bulk edit")
        start = len(server.requests)
        edited = group[10]  # on the group's first page: read before the edit below

        def edit() -> None:
            time.sleep(5)
            replay.edit(edited, title="Edited while the pull paged through its second")

        replay.before[start + 3] = edit
        bulk = _pull(engine, time)
        requests = server.requests[start:]
        assert _pull(engine, time).read == 0
    assert (bulk.new, bulk.updated, bulk.unchanged) == (0, 132, 0)
    items = _items(engine)
    assert sum("triaged" in item.tags for item in items.values()) == 130
    assert items[str(edited)].title == "Edited while the pull paged through its second"
    assert items[str(later)].title == "Edited five seconds after the bulk edit"
    assert len(requests) <= 10


def test_an_issue_whose_pull_request_links_are_null_is_an_issue(engine: Engine, reports: Path, time: VirtualTime) -> None:
    """Older answers carry `"pull_request": {"html_url": null, "diff_url": null, "patch_url": null}`
    on plain issues: the key alone does not make a pull request."""
    replay = GitHubReplay.from_hadoop(reports, limit=60, clock=time.epoch)
    old_style = {number for number in replay.issue_numbers if "pull_request" in replay.issues[number]}
    assert old_style and replay.pull_request_numbers
    with replay.serve() as server:
        _create(engine, server.url)
        _pull(engine, time)
    assert set(_items(engine)) == {str(number) for number in replay.issue_numbers} >= {str(number) for number in old_style}


def test_label_filter_and_pull_requests_on_request(engine: Engine, reports: Path, time: VirtualTime) -> None:
    replay = GitHubReplay.from_hadoop(reports, limit=200, clock=time.epoch)
    with replay.serve() as server:
        _create(engine, server.url, name="blockers", labels=["bug", "priority: Blocker"])
        _create(engine, server.url, name="everything", include_pull_requests=True)
        _pull(engine, time, name="blockers")
        _pull(engine, time, name="everything")
    blockers = {number for number in replay.issue_numbers if any(label["name"] == "priority: Blocker" for label in replay.issues[number]["labels"])}
    assert blockers and set(_items(engine, "blockers")) == {str(number) for number in blockers}
    assert set(_items(engine, "everything")) == {str(number) for number in replay.issues}
    assert any(request.param("labels") == "bug,priority: Blocker" for request in server.requests)


def test_configuration_is_validated_and_the_token_never_shown() -> None:
    assert connector_class("github") is GitHubConnector
    config = GitHubConnector.parse_config({"owner": "apache", "repo": "hadoop", "token": TOKEN, "base_url": "https://ghe.example.com/api/v3/"})
    assert isinstance(config, GitHubConfig)
    assert config.base_url == "https://ghe.example.com/api/v3"
    assert (config.per_page, config.labels, config.include_pull_requests) == (100, [], False)
    assert config.masked()["token"] == "***" and config.revealed()["token"] == TOKEN
    assert TOKEN not in repr(config)
    for bad in ({"per_page": 0}, {"per_page": 101}, {"base_url": "ftp://x"}, {"owner": "a/b"}, {"labels": ["a,b"]}, {"token": None}, {"unknown": 1}):
        document = {"owner": "apache", "repo": "hadoop", "token": TOKEN, **bad}
        with pytest.raises(ConfigError) as caught:
            GitHubConnector.parse_config(document)
        assert TOKEN not in str(caught.value)
    with pytest.raises(ConfigError, match="token"):
        GitHubConnector.parse_config({"owner": "apache", "repo": "hadoop"})
