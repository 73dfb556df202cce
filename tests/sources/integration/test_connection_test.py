"""A connector source's connection test (`service.sources.connection_test`) against vendor replays on
loopback (Jira, GitHub, PagerDuty, each in its recorded answer shapes), on every backend: one page
read through the connector with the stored settings and credentials, the outcome told with what to
change, no wait and no retry, and nothing stored but the `source.test` audit event: no item, and
the source's cursor and pull state as they were."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from schemas.audit import AuditEvent
from schemas.item import Item
from schemas.source import ConnectionOutcome, ConnectionTestResult, Source, SourceCreate
from service.core.db import write_transaction
from service.sources.connection_test import ConnectionTestRefused, run_connection_test
from service.sources.definitions import create_source
from tests.conftest import TEST_SECRET_KEY
from tests.replay.cases import CASES, VendorCase
from tests.replay.server import Delay, Fault, ReplayServer, serve

NAME = "vendor"
ACTOR = "token:lead"
SECRET_SETTING = {"jira": "personal_access_token", "github": "token", "pagerduty": "api_key"}
ADDRESS_SETTINGS = {"jira": "`base_url`", "github": "`base_url`, `owner` and `repo`", "pagerduty": "`base_url`"}
PAGE_SIZE = {"jira": 50, "github": 50, "pagerduty": 25}


@pytest.fixture(params=sorted(SECRET_SETTING))
def case(request: pytest.FixtureRequest, shared_data: Path) -> VendorCase:
    return CASES[request.param](shared_data)


@contextmanager
def _vendor(engine: Engine, case: VendorCase, faults: dict[int, Fault] | None = None, **settings: Any) -> Iterator[ReplayServer]:
    """The case's replay on loopback, and the source `vendor` configured for it (`settings` on top)."""
    with serve(case.handler, faults) as server:
        _create(engine, case, {**case.config(server.url), **settings})
        yield server


def _create(engine: Engine, case: VendorCase, config: dict[str, Any], *, cursor: str | None = None) -> None:
    with write_transaction(engine) as session:
        source, _ = create_source(session=session, data=SourceCreate(name=NAME, kind=case.kind, connector=config), secret_key=TEST_SECRET_KEY, actor="test")
        source.cursor = cursor


def _test(engine: Engine, case: VendorCase, **options: Any) -> ConnectionTestResult:
    return run_connection_test(engine=engine, name=NAME, secret_key=TEST_SECRET_KEY, actor=ACTOR, clock=case.clock.now, **options)


def _stored(engine: Engine) -> dict[str, Any]:
    """What a test must leave as it was: the items, and the source's cursor and pull state."""
    with Session(engine) as session:
        source = session.exec(select(Source).where(Source.name == NAME)).one()
        items = session.exec(select(func.count()).select_from(Item)).one()
    fields = ("cursor", "status", "last_error", "last_run_at", "last_success_at", "items_pulled", "updated_at", "config", "connector_secret", "enabled")
    return {"items": items, **{field: getattr(source, field) for field in fields}}


def _tests_audited(engine: Engine) -> list[tuple[str, str | None, dict[str, Any]]]:
    with Session(engine) as session:
        events = session.exec(select(AuditEvent).where(AuditEvent.action == "source.test").order_by(col(AuditEvent.id))).all()
    return [(event.actor, event.object_id, event.details) for event in events]


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_a_working_connection_reads_one_page_and_stores_nothing(engine: Engine, case: VendorCase) -> None:
    with _vendor(engine, case) as server:
        before = _stored(engine)
        result = _test(engine, case)
    assert result.ok and result.outcome == ConnectionOutcome.OK, result
    assert (result.source, result.kind, result.http_status, result.from_cursor) == (NAME, case.kind, 200, False)
    # A full page of Jira issues; GitHub's lists pull requests too, which the connector leaves out,
    # and PagerDuty's first window may hold fewer incidents than a page.
    assert result.records is not None and 0 < result.records <= PAGE_SIZE[case.kind]
    if case.kind == "jira":
        assert result.records == PAGE_SIZE[case.kind]
    # One listing request (PagerDuty adds the notes of the page's resolved incidents, as a pull does).
    assert sum(1 for request in server.requests if case.is_page(request)) == 1
    assert result.requests == len(server.requests)
    assert result.action is None and f"had {result.records} records" in result.detail
    assert 0 <= result.elapsed_seconds < 10
    assert _stored(engine) == before
    assert _tests_audited(engine) == [(ACTOR, NAME, {**_audited(result)})]


def _audited(result: ConnectionTestResult) -> dict[str, Any]:
    return result.model_dump(mode="json", include={"outcome", "http_status", "records", "from_cursor", "requests", "elapsed_seconds", "retry_after_seconds"})


def test_refused_credentials_name_the_secret_to_replace_and_change_no_state(engine: Engine, case: VendorCase) -> None:
    with _vendor(engine, case) as server:
        case.refuse_credentials()
        before = _stored(engine)
        result = _test(engine, case)
    assert not result.ok and result.outcome == ConnectionOutcome.BAD_CREDENTIALS, result
    assert result.http_status == 401 and result.records is None and result.requests == len(server.requests) == 1
    secret = SECRET_SETTING[case.kind]
    assert result.action is not None and f"`{secret}`" in result.action and f"`goldenset source configure {NAME} --set {secret}=-`" in result.action
    assert "(401)" in result.detail and "{name}" not in result.detail and f"configure {NAME}" in result.detail
    # Unlike a pull, a test does not mark the source auth_failed: its state is the pulls'.
    assert _stored(engine) == before
    assert [details["outcome"] for _, _, details in _tests_audited(engine)] == ["bad_credentials"]


def test_an_unreachable_host_is_told_with_the_address_settings(engine: Engine, case: VendorCase) -> None:
    port = _closed_port()
    _create(engine, case, case.config(f"http://127.0.0.1:{port}"))
    before = _stored(engine)
    result = _test(engine, case)
    assert result.outcome == ConnectionOutcome.UNREACHABLE, result
    assert result.http_status is None and result.records is None and result.elapsed_seconds < 5
    assert result.action is not None and f"127.0.0.1:{port}" in result.action and "check `base_url`" in result.action
    assert "connection failed" in result.detail and "next pull" not in result.detail
    assert _stored(engine) == before
    assert [details["outcome"] for _, _, details in _tests_audited(engine)] == ["unreachable"]


def test_a_wrong_address_is_not_found(engine: Engine, case: VendorCase) -> None:
    with serve(case.handler) as server:
        _create(engine, case, case.config(f"{server.url}/nowhere"))
        result = _test(engine, case)
    assert result.outcome == ConnectionOutcome.NOT_FOUND and result.http_status == 404, result
    assert result.action is not None and f"{server.url}/nowhere/" in result.action and ADDRESS_SETTINGS[case.kind] in result.action


def test_a_rate_limit_is_reported_with_its_wait_not_waited_for(engine: Engine, case: VendorCase) -> None:
    with _vendor(engine, case, {1: case.rate_limited}) as server:
        result = _test(engine, case)
    assert result.outcome == ConnectionOutcome.RATE_LIMITED, result
    assert result.retry_after_seconds == case.rate_wait and result.http_status == case.rate_limited.status
    assert len(server.requests) == 1 and case.clock.sleeps == [] and result.elapsed_seconds < 5
    assert result.action is not None and f"test again in {case.rate_wait:.0f} s" in result.action
    assert "next pull" not in result.detail


def test_a_vendor_error_and_an_answer_of_the_wrong_shape_are_told_apart(engine: Engine, case: VendorCase) -> None:
    with _vendor(engine, case, {1: case.server_error, 2: case.missing_array}) as server:
        failing = _test(engine, case)
        malformed = _test(engine, case)
    assert failing.outcome == ConnectionOutcome.VENDOR_ERROR and failing.http_status == case.server_error.status, failing
    assert malformed.outcome == ConnectionOutcome.UNEXPECTED_ANSWER and malformed.http_status == 200, malformed
    assert len(server.requests) == 2 and case.clock.sleeps == []
    assert [details["outcome"] for _, _, details in _tests_audited(engine)] == ["vendor_error", "unexpected_answer"]


def test_a_slow_vendor_times_out_within_the_test_s_time(engine: Engine, case: VendorCase) -> None:
    with _vendor(engine, case, {1: Delay(3.0)}):
        result = _test(engine, case, timeout=0.5)
    assert result.outcome == ConnectionOutcome.TIMED_OUT and result.http_status is None, result
    assert result.elapsed_seconds < 2.5
    assert "within the test's" in result.detail


def test_the_next_pull_s_first_page_is_read_from_the_stored_cursor_which_stays(engine: Engine, shared_data: Path) -> None:
    case = CASES["jira"](shared_data)
    cursor = '{"since":"2014/01/01 00:00","seen":[]}'
    with serve(case.handler) as server:
        _create(engine, case, case.config(server.url), cursor=cursor)
        result = _test(engine, case)
    assert result.ok and result.from_cursor and "from the stored cursor" in result.detail, result
    assert 'updated >= "2014/01/01 00:00"' in (server.requests[0].param("jql") or "")
    assert _stored(engine)["cursor"] == cursor


def test_settings_that_cannot_be_used_are_told_before_anything_is_sent(engine: Engine, shared_data: Path) -> None:
    case = CASES["jira"](shared_data)
    with serve(case.handler) as server:
        _create(engine, case, case.config(server.url), cursor="not a cursor")
        unreadable = _test(engine, case)
        with write_transaction(engine) as session:
            session.exec(select(Source).where(Source.name == NAME)).one().connector_secret = "not-encrypted"
        undecryptable = _test(engine, case)
    assert server.requests == []
    assert unreadable.outcome == ConnectionOutcome.BAD_SETTINGS and unreadable.requests == 0, unreadable
    assert f"goldenset source configure {NAME} --reset-cursor" in unreadable.detail
    assert undecryptable.outcome == ConnectionOutcome.BAD_SETTINGS and "GOLDENSET_SECRET_KEY" in undecryptable.detail, undecryptable


def test_an_unknown_source_and_one_without_a_connector_are_refused_unaudited(engine: Engine) -> None:
    with write_transaction(engine) as session:
        create_source(session=session, data=SourceCreate(name="pushed", kind="push"), secret_key=TEST_SECRET_KEY, actor="test")
    with pytest.raises(ConnectionTestRefused) as missing:
        run_connection_test(engine=engine, name="nowhere", secret_key=TEST_SECRET_KEY, actor=ACTOR)
    assert (missing.value.status, missing.value.reason) == (404, "not_found")
    with pytest.raises(ConnectionTestRefused) as plain:
        run_connection_test(engine=engine, name="pushed", secret_key=TEST_SECRET_KEY, actor=ACTOR)
    assert (plain.value.status, plain.value.reason) == (409, "not_a_connector") and "push source" in plain.value.detail
    with Session(engine) as session:
        assert session.exec(select(func.count()).select_from(AuditEvent).where(AuditEvent.action == "source.test")).one() == 0
