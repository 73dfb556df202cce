"""Pulls as users drive them: the CLI killed mid-pull, the REST endpoints, and the scheduler."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from schemas.item import Item
from schemas.source import Source, SourceCreate
from service.core.db import write_transaction
from service.scheduler import GoldensetScheduler, due_pull_sources
from service.sources.definitions import create_source
from service.sources.pulls import pull_source
from tests.conftest import TEST_SECRET_KEY, LiveServer
from tests.replay.jira import JiraReplay, hadoop_issues
from tests.replay.server import ReplayServer, Reply, Request, serve

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def issues(shared_data: Path) -> list[dict[str, Any]]:
    return hadoop_issues(shared_data / "gitbugs_hadoop" / "reports.jsonl")


@pytest.fixture
def replay(issues: list[dict[str, Any]]) -> JiraReplay:
    return JiraReplay(issues=json.loads(json.dumps(issues)))


@pytest.fixture
def jira(replay: JiraReplay) -> Iterator[ReplayServer]:
    with serve(replay) as server:
        yield server


def _connector(url: str, token: str = "jira-pat-valid") -> dict[str, Any]:
    return {"base_url": url, "personal_access_token": token}


def _count(engine: Engine) -> int:
    with Session(engine) as session:
        return session.exec(select(func.count()).select_from(Item)).one()


def test_sigkill_mid_pull_then_pull_again_gives_each_item_once(engine: Engine, database_url: str, jira: ReplayServer, replay: JiraReplay) -> None:
    with write_transaction(engine) as session:
        create_source(session=session, data=SourceCreate(name="hadoop", kind="jira", connector=_connector(jira.url)), secret_key=TEST_SECRET_KEY, actor="test")

    def slow(request: Request) -> Reply:
        time.sleep(0.15)
        return replay(request)

    jira.handler = slow
    env = {**os.environ, "GOLDENSET_DATABASE_URL": database_url, "GOLDENSET_SECRET_KEY": TEST_SECRET_KEY}
    process = subprocess.Popen([sys.executable, "-m", "service.cli", "pull", "--source", "hadoop"], env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while _count(engine) < 800:
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the pull made no progress"
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    killed_at = _count(engine)
    assert 800 <= killed_at < 2503
    with Session(engine) as session:
        assert session.exec(select(Source)).one().status == "running"  # it died without a word
    jira.handler = replay
    summary = pull_source(engine=engine, name="hadoop", secret_key=TEST_SECRET_KEY, actor="test")  # the dead pull's lock died with it
    assert summary.new == 2503 - killed_at
    with Session(engine) as session:
        items = session.exec(select(Item)).all()
        assert len(items) == 2503 and len({item.external_id for item in items}) == 2503
        assert all(item.revision == 1 for item in items)
        assert session.exec(select(Source)).one().status == "ok"


def test_sources_api_creates_pulls_and_reports_state(live_server: LiveServer, jira: ReplayServer, replay: JiraReplay) -> None:
    replay.issues = replay.issues[:250]
    with live_server.client("admin") as admin, live_server.client("ingest") as ingester, live_server.client("read") as reader:
        bad = admin.post("/v1/sources", json={"name": "j", "kind": "jira", "connector": {"base_url": jira.url}})
        assert bad.status_code == 422 and "personal_access_token" in bad.json()["detail"]
        unknown = admin.post("/v1/sources", json={"name": "j", "kind": "zendesk", "connector": {}})
        assert unknown.status_code == 422 and "registered: github, incidentio, jira, opsgenie, pagerduty, sentry, servicenow" in unknown.json()["detail"]
        created = admin.post("/v1/sources", json={"name": "j", "kind": "jira", "connector": _connector(jira.url), "pull_interval_seconds": 3600})
        assert created.status_code == 201, created.text
        assert created.json()["config"]["personal_access_token"] == "***"
        assert reader.post("/v1/sources/j/pull").status_code == 403
        done = ingester.post("/v1/sources/j/pull", params={"wait": "true"})
        assert done.status_code == 200, done.text
        assert done.json()["new"] == 250
        state = reader.get("/v1/sources/j").json()
        assert (state["status"], state["items_pulled"], state["item_count"], state["last_error"]) == ("ok", 250, 250, None)
        assert state["last_run_at"] and state["last_success_at"] and "jira-pat-valid" not in json.dumps(state)

        replay.expired = True
        failed = ingester.post("/v1/sources/j/pull", params={"wait": "true"})
        assert failed.status_code == 502 and "401" in failed.json()["detail"]
        assert failed.json()["source_status"]["status"] == "auth_failed"
        assert reader.get("/v1/sources/j").json()["status"] == "auth_failed"

        replay.expired, replay.token = False, "rotated"
        replay.issues.append({**replay.issues[0], "key": "HADOOP-NEW", "id": "1", "fields": {**replay.issues[0]["fields"], "updated": "2025-01-01T00:00:00.000+0000"}})
        patched = admin.patch("/v1/sources/j", json={"connector": _connector(jira.url, "rotated")})
        assert patched.status_code == 200 and patched.json()["status"] == "idle"
        assert admin.patch("/v1/sources/j", json={"pull_interval_seconds": 5}).status_code == 422
        started = ingester.post("/v1/sources/j/pull")
        assert started.status_code == 202
        deadline = time.monotonic() + 30
        while reader.get("/v1/sources/j").json()["status"] != "ok":
            assert time.monotonic() < deadline
            time.sleep(0.1)
        assert reader.get("/v1/sources/j").json()["item_count"] == 251

        assert admin.delete("/v1/sources/j").status_code == 409
        admin.post("/v1/sources", json={"name": "empty"})
        assert admin.delete("/v1/sources/empty").status_code == 204
        assert reader.get("/v1/sources/empty").status_code == 404
        assert ingester.post("/v1/sources/absent/pull").status_code == 404


def test_scheduler_runs_due_pulls_once_per_interval(engine: Engine, jira: ReplayServer, replay: JiraReplay) -> None:
    from service.core.settings import Settings

    replay.issues = replay.issues[:120]
    with write_transaction(engine) as session:
        for name, interval, enabled in (("due", 3600, True), ("manual", None, True), ("paused", 3600, False)):
            source, _ = create_source(
                session=session, data=SourceCreate(name=name, kind="jira", connector=_connector(jira.url), pull_interval_seconds=interval), secret_key=TEST_SECRET_KEY, actor="test"
            )
            source.enabled = enabled
            session.add(source)
        session.commit()
        assert due_pull_sources(session) == {"due": 3600}
    settings = Settings(secret_key=TEST_SECRET_KEY, database_url=str(engine.url), curate_after_ingest=False, curate_interval_seconds=3600)
    scheduler = GoldensetScheduler(engine, settings)
    scheduler.start()
    try:
        deadline = time.monotonic() + 30
        while _count(engine) < 120:
            assert time.monotonic() < deadline, "the scheduled pull did not run"
            time.sleep(0.1)
        job = scheduler.scheduler.get_job("pull:due")
        assert job is not None and job.coalesce and job.max_instances == 1
        assert {job.id for job in scheduler.scheduler.get_jobs()} == {"sync-source-jobs", "curate", "scale", "pull:due"}
        with Session(engine) as session:
            source = session.exec(select(Source).where(Source.name == "due")).one()
            source.status = "auth_failed"
            session.add(source)
            session.commit()
        scheduler.sync_jobs()
        assert scheduler.scheduler.get_job("pull:due") is None
    finally:
        scheduler.shutdown()
