"""`/metrics` over a real HTTP server, on every backend: the state gauges are read from the database,
so work done by another process (here the `goldenset ingest` command, a curation run, a refresh and
a sealed read made outside the app) shows on the app's metrics."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import create_engine, func
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from curation.dedup.deduplicator import Deduplicator
from curation.dedup.rules import DedupConfig
from schemas.common import utcnow
from schemas.evals import EvalCreate
from schemas.item import Item, ItemStatus
from schemas.source import Source, SourceCreate
from service.cli import app as cli_app
from service.core.db import write_transaction
from service.core.metrics import Metrics, serve_scheduler_metrics
from service.evals.definitions import create_eval, require_eval
from service.evals.refresh import refresh_eval
from service.evals.releases import take_sealed_read
from service.sources.definitions import create_source
from tests.conftest import TEST_SECRET_KEY, LiveServer, _free_port
from tests.eval_support import HashingEncoder
from tests.support.command_line import command_line

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def _scrape(server: LiveServer, app: FastAPI) -> Samples:
    metrics: Metrics = app.state.metrics
    assert metrics.database is not None
    metrics.database.clear_cache()
    with server.client("read") as reader:
        response = reader.get("/metrics")
    assert response.status_code == 200, response.text
    return {(sample.name, frozenset(sample.labels.items())): sample.value for family in text_string_to_metric_families(response.text) for sample in family.samples}


def _value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def _records(count: int) -> list[dict[str, object]]:
    return [
        {
            "external_id": f"INC-{n}",
            "occurred_at": f"2024-05-{1 + n:02d}T08:00:00Z",
            "title": f"{word} outage in region {n}",
            "input": f"why did the {word} service fail on day {n}? {word} logs show {n * 17} retries",
            "reference": f"a {word} misconfiguration",
        }
        for n, word in enumerate(["billing", "search", "payments", "login", "storage", "dns"][:count])
    ]


def test_database_gauges_show_work_done_outside_the_app(
    live_server: LiveServer, app: FastAPI, engine: Engine, database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = _scrape(live_server, app)
    assert _value(before, "goldenset_database_up") == 1
    assert _value(before, "goldenset_candidates_pending") == 0

    records = tmp_path / "incidents.jsonl"
    records.write_text("\n".join(json.dumps(record) for record in _records(6)) + "\n", encoding="utf-8")
    encoder = HashingEncoder()
    with command_line(database_url, monkeypatch, encoder=encoder) as runner:
        result = runner.invoke(cli_app, ["ingest", str(records), "--source", "ops", "--no-curate"])
    assert result.exit_code == 0, result.output

    ingested = _scrape(live_server, app)
    assert _value(ingested, "goldenset_items", source="ops", status="candidate") == 6
    assert _value(ingested, "goldenset_candidates_pending") == 6
    # The in-process counter counts only what this app ingested: nothing.
    assert _value(ingested, "goldenset_items_ingested_total", source="ops", outcome="new") is None

    with write_transaction(engine) as session:
        Deduplicator(clock=utcnow, encoder=encoder, config=DedupConfig()).curate(session)
        session.commit()
        unique = session.exec(select(func.count()).select_from(Item).where(Item.status == ItemStatus.UNIQUE.value)).one()
        create_eval(session=session, data=EvalCreate(name="ops-eval", sources=["ops"], approval_policy="auto", sealed_read_budget=3), secret_key=TEST_SECRET_KEY, actor="test")
        create_source(session=session, data=SourceCreate(name="elsewhere", kind="push"), secret_key=TEST_SECRET_KEY, actor="test")
        create_eval(session=session, data=EvalCreate(name="empty-eval", sources=["elsewhere"]), secret_key=TEST_SECRET_KEY, actor="test")
    assert unique > 0

    curated = _scrape(live_server, app)
    assert _value(curated, "goldenset_candidates_pending") == 0
    assert _value(curated, "goldenset_items", source="ops", status="unique") == unique
    assert sum(value for (name, _), value in curated.items() if name == "goldenset_curation_decisions") == 6
    assert _value(curated, "goldenset_curation_decisions", stage="none", status="unique") == unique
    assert _value(curated, "goldenset_curation_last_decision_timestamp_seconds") is not None
    assert _value(curated, "goldenset_review_backlog_items", eval="ops-eval") == unique
    assert _value(curated, "goldenset_review_backlog_items", eval="empty-eval") == 0
    assert _value(curated, "goldenset_releases", eval="ops-eval") == 0
    assert _value(curated, "goldenset_sealed_reads_left", eval="ops-eval") is None

    release = refresh_eval(engine, name="ops-eval", at=datetime.fromisoformat("2024-06-15T00:00:00+00:00"), secret_key=TEST_SECRET_KEY, actor="test").release
    assert release.dev_count + release.sealed_count > 0
    with Session(engine) as session:
        evaluation = require_eval(session=session, name="ops-eval")
    take_sealed_read(engine, evaluation=evaluation, release=release, actor="test", item_count=release.sealed_count)

    released = _scrape(live_server, app)
    assert _value(released, "goldenset_releases", eval="ops-eval") == 1
    assert _value(released, "goldenset_release_latest_number", eval="ops-eval") == 1
    age = _value(released, "goldenset_release_latest_age_seconds", eval="ops-eval")
    assert age is not None and 0 <= age < 600
    assert _value(released, "goldenset_sealed_reads_used", eval="ops-eval") == 1
    assert _value(released, "goldenset_sealed_reads_left", eval="ops-eval") == 2
    assert _value(released, "goldenset_sealed_reads_left", eval="empty-eval") is None
    assert _value(released, "goldenset_releases", eval="empty-eval") == 0
    with Session(engine) as session:
        source = session.exec(select(Source).where(Source.name == "ops")).one()
    assert _value(released, "goldenset_source_status", source="ops", status=source.status) == 1
    assert _value(released, "goldenset_source_last_success_age_seconds", source="ops") is None  # a file source is never pulled
    assert _value(released, "goldenset_probes", status="queued") == 0


def test_a_scrape_is_cached_and_an_unreadable_database_reads_as_down(engine: Engine, tmp_path: Path) -> None:
    metrics = Metrics(engine, database_cache_seconds=60)
    first = metrics.render()
    assert b"goldenset_database_up 1.0" in first
    assert metrics.render() == first
    # A database without goldenset's schema: every query fails.
    unmigrated = create_engine(f"sqlite:///{tmp_path / 'unmigrated.db'}")
    text = Metrics(unmigrated, database_cache_seconds=0).render().decode()
    unmigrated.dispose()
    assert "goldenset_database_up 0.0" in text
    assert "goldenset_items{" not in text


def test_the_scheduler_can_serve_the_state_gauges_on_a_port_of_its_own(engine: Engine) -> None:
    port = _free_port()
    serve_scheduler_metrics(engine, port, address="127.0.0.1")
    response = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10)
    assert response.status_code == 200
    assert "goldenset_database_up 1.0" in response.text
    assert "goldenset_candidates_pending 0.0" in response.text
