"""Sentry beyond the shared contract (tests/sources/integration/test_connector_contract.py): issues with
their resolution and comments as the reference, the mark and its lookback, cursors read from
`Link` headers, the reset-based wait, and the configuration checked."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from ingest.connectors.base import ConfigError, RetryPolicy
from ingest.connectors.sentry import SentryConnector, next_cursor, rate_limit_delay, resolution
from schemas.item import Item
from schemas.source import Source, SourceCreate
from service.core.db import write_transaction
from service.sources.definitions import create_source
from service.sources.pulls import pull_source
from tests.replay.clock import VirtualTime
from tests.replay.sentry import ORG, SentryReplay, hadoop_issues
from tests.replay.server import serve

SECRET_KEY = "sentry-test-secret-key-0123456789abcdef"


def test_issues_with_resolution_and_comments_and_a_second_pull_reading_the_lookback_again(engine: Engine, shared_data: Path) -> None:
    clock = VirtualTime(datetime(2025, 9, 1, tzinfo=UTC))
    issues = hadoop_issues(shared_data / "gitbugs_hadoop" / "reports.jsonl")
    replay = SentryReplay(issues, clock=clock.now())
    with serve(replay) as server:
        config = {"auth_token": next(iter(replay.tokens)), "organization": ORG, "base_url": server.url, "lookback_days": 14}
        with write_transaction(engine) as session:
            create_source(session=session, data=SourceCreate(name="sentry", kind="sentry", connector=config), secret_key=SECRET_KEY, actor="test")
        with httpx.Client(timeout=2) as client:
            pull_source(engine=engine, name="sentry", secret_key=SECRET_KEY, actor="test", client=client, sleep=clock.sleep, clock=clock.now, retry=RetryPolicy(max_attempts=2))
            first_queries = [request.param("query") for request in server.requests if request.path.endswith("/issues/")]
            pull_source(engine=engine, name="sentry", secret_key=SECRET_KEY, actor="test", client=client, sleep=clock.sleep, clock=clock.now, retry=RetryPolicy(max_attempts=2))
        second = [request for request in server.requests if request.path.endswith("/issues/")][len(first_queries) :]
    newest = max(issue.first_seen for issue in issues)
    with Session(engine) as session:
        items = {item.external_id: item for item in session.exec(select(Item))}
        source = session.exec(select(Source)).one()
    assert set(items) == {issue.data["id"] for issue in issues}
    assert datetime.fromisoformat(source.cursor or "") == newest
    assert set(first_queries) == {"firstSeen:>=2015-01-01T00:00:00"}
    assert second and all(request.param("query") == f"firstSeen:>={(newest - timedelta(days=14)).strftime('%Y-%m-%dT%H:%M:%S')}" for request in second)
    resolved = next(issue for issue in issues if issue.data["status"] == "resolved" and "inRelease" in issue.data["statusDetails"])
    item = items[resolved.data["id"]]
    assert item.reference.startswith(f"Resolved in release {resolved.data['statusDetails']['inRelease']}.") and "Fixed upstream in HADOOP-" in item.reference
    assert item.title == resolved.data["title"] and "In: " in item.input and "level:" in " ".join(item.tags)


def test_link_cursors_waits_and_resolutions_read_as_sentry_writes_them() -> None:
    link = (
        '<https://sentry.io/api/0/organizations/acme/issues/?&cursor=1717000000000:0:1>; rel="previous"; results="false"; cursor="1717000000000:0:1", '
        '<https://sentry.io/api/0/organizations/acme/issues/?&cursor=1716000000000:100:0>; rel="next"; results="true"; cursor="1716000000000:100:0"'
    )
    assert next_cursor(link) == "1716000000000:100:0"
    assert next_cursor(link.replace('results="true"', 'results="false"')) is None
    refused = httpx.Response(429, headers={"X-Sentry-Rate-Limit-Reset": "1000030"}, json={"detail": "You are attempting to use this endpoint too frequently."})
    assert rate_limit_delay(refused, 1_000_000.0) == 31.0 and rate_limit_delay(httpx.Response(500), 0) is None
    assert resolution({"inCommit": {"id": "a1b2c3", "repository": {"name": "hadoop"}}}) == "Resolved in commit a1b2c3."
    assert resolution({"inNextRelease": True}) == "Resolved in the next release." and resolution({}) == ""
    for document, message in (
        ({"auth_token": "t"}, "organization"),
        ({"auth_token": "t", "organization": "acme corp"}, "not an organization slug"),
        ({"auth_token": "t", "organization": "acme", "query": "firstSeen:-24h"}, "leave firstSeen out"),
        ({"auth_token": "t", "organization": "acme", "page_size": 500}, "page_size"),
    ):
        with pytest.raises(ConfigError, match=message):
            SentryConnector.parse_config(document)
