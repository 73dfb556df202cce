"""One contract, every connector kind: each pulls its vendor's replay (tests/replay/cases.py) over
a real socket and must store every record once, dated by the incident; survive a 5xx, the vendor's
own 429, a timeout and a reset; stop without losing committed pages on a page without its array;
reject an unmappable record alone; stop scheduled pulls when the credentials are refused; and hold
the final state of a record edited while it pulls. A second pull adds nothing."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from ingest.connectors.base import AuthError, MalformedPage, RetryPolicy
from schemas.item import Item
from schemas.problem import IngestSummary
from schemas.source import Source, SourceCreate
from service.core.db import write_transaction
from service.scheduler import due_pull_sources
from service.sources.definitions import create_source
from service.sources.pulls import pull_source
from tests.replay.cases import CASES, VendorCase
from tests.replay.server import Delay, ReplayServer, Reset, serve

SECRET_KEY = "contract-test-secret-key-0123456789abcdef"
RETRY = RetryPolicy(max_attempts=4, initial_wait_seconds=0.25, max_backoff_seconds=2.0, jitter_seconds=0.1)
NAME = "contract"


@pytest.fixture(params=sorted(CASES))
def case(request: pytest.FixtureRequest, shared_data: Path) -> VendorCase:
    return CASES[request.param](shared_data)


@pytest.fixture
def server(case: VendorCase) -> Iterator[ReplayServer]:
    with serve(case.handler) as running:
        yield running


def _create(engine: Engine, case: VendorCase, url: str) -> None:
    data = SourceCreate(name=NAME, kind=case.kind, connector=case.config(url), pull_interval_seconds=3600)
    with write_transaction(engine) as session:
        create_source(session=session, data=data, secret_key=SECRET_KEY, actor="test")


def _pull(engine: Engine, case: VendorCase) -> IngestSummary:
    with httpx.Client(timeout=0.5) as client:
        return pull_source(engine=engine, name=NAME, secret_key=SECRET_KEY, actor="test", client=client, sleep=case.clock.sleep, clock=case.clock.now, retry=RETRY)


def _items(engine: Engine) -> dict[str, Item]:
    with Session(engine) as session:
        return {item.external_id: item for item in session.exec(select(Item))}


def _source(engine: Engine) -> Source:
    with Session(engine) as session:
        return session.exec(select(Source).where(Source.name == NAME)).one()


def _stored_once(engine: Engine, case: VendorCase) -> dict[str, Item]:
    items = _items(engine)
    assert set(items) == set(case.expected)
    assert {key: item.occurred_at for key, item in items.items()} == case.expected
    return items


def test_a_full_pull_stores_every_record_once_dated_by_the_incident(engine: Engine, case: VendorCase, server: ReplayServer) -> None:
    _create(engine, case, server.url)
    first = _pull(engine, case)
    assert (first.new, first.rejected) == (len(case.expected), 0)
    items = _stored_once(engine, case)
    assert all(item.title and item.input for item in items.values())
    assert sum(1 for request in server.requests if case.is_page(request)) >= 3  # several pages, really paged
    second = _pull(engine, case)
    assert (second.new, second.updated, second.rejected) == (0, 0, 0)
    source = _source(engine)
    assert (source.status, source.last_error, source.items_pulled) == ("ok", None, len(case.expected))


def test_a_5xx_the_vendors_own_429_a_timeout_and_a_reset_are_retried(engine: Engine, case: VendorCase, server: ReplayServer) -> None:
    server.aim(case.is_page, {2: case.server_error, 4: case.rate_limited, 6: Delay(1.0), 8: Reset()})
    _create(engine, case, server.url)
    summary = _pull(engine, case)
    assert (summary.new, summary.rejected) == (len(case.expected), 0)
    _stored_once(engine, case)
    assert server.picked_faults == {}  # every fault was served
    # The vendor's wait honoured (a reset in epoch seconds is read against the moving clock, plus a margin).
    assert any(case.rate_wait - 5 <= wait <= case.rate_wait + 2 for wait in case.clock.sleeps), case.clock.sleeps


def test_a_page_without_its_array_stops_the_pull_and_keeps_the_pages_before(engine: Engine, case: VendorCase, server: ReplayServer) -> None:
    server.aim(case.is_page, {3: case.missing_array})
    _create(engine, case, server.url)
    with pytest.raises(MalformedPage):
        _pull(engine, case)
    source = _source(engine)
    assert source.status == "error" and source.last_error
    kept = len(_items(engine))
    assert 0 < kept < len(case.expected)
    resumed = _pull(engine, case)
    assert resumed.new == len(case.expected) - kept
    _stored_once(engine, case)


def test_a_record_that_does_not_map_is_rejected_alone(engine: Engine, case: VendorCase, server: ReplayServer) -> None:
    broken = case.break_record()
    _create(engine, case, server.url)
    summary = _pull(engine, case)
    assert (summary.new, summary.rejected) == (len(case.expected) - 1, 1)
    assert summary.errors[0].reason == "bad_date" and summary.errors[0].external_id == broken
    assert set(_items(engine)) == set(case.expected) - {broken}
    again = _pull(engine, case)
    assert (again.new, again.updated) == (0, 0)  # the cursor moved past it


def test_refused_credentials_stop_scheduled_pulls_until_replaced(engine: Engine, case: VendorCase, server: ReplayServer) -> None:
    _create(engine, case, server.url)
    with Session(engine) as session:
        assert NAME in due_pull_sources(session)
    case.refuse_credentials()
    with pytest.raises(AuthError):
        _pull(engine, case)
    source = _source(engine)
    assert source.status == "auth_failed" and ("401" in (source.last_error or "") or "403" in (source.last_error or ""))
    with Session(engine) as session:
        assert NAME not in due_pull_sources(session)
    assert _items(engine) == {}


def test_a_record_edited_during_a_pull_ends_in_its_final_state_and_none_is_skipped(engine: Engine, case: VendorCase, server: ReplayServer) -> None:
    target = case.edit_target
    title = f"{case.title_of(target)} (edited while the pull ran)"
    latest = max(case.expected.values())

    def edit_after_the_first_page(request: Any) -> Any:
        reply = case.handler(request)
        if case.is_page(request) and not edited:
            edited.append(True)
            case.edit(target, title, max(case.clock.now() - timedelta(minutes=5), latest + timedelta(minutes=1)))
        return reply

    edited: list[bool] = []
    server.handler = edit_after_the_first_page
    _create(engine, case, server.url)
    _pull(engine, case)
    _pull(engine, case)  # a vendor that lists by creation time reads its recent records again
    items = _stored_once(engine, case)
    assert edited and items[target].title.endswith("(edited while the pull ran)")  # (as redacted)
    if case.kind not in ("pagerduty", "sentry"):  # read on the first page, before the edit, then read again
        assert items[target].revision == 2
