"""`goldenset scheduler` as real processes over one PostgreSQL database (`service.scheduler`).

A scheduler started while the current period has no release catches it up once; a scheduler
killed with SIGKILL and started again, or two started at once, write no second release. A
scheduler killed while it holds the `curation` lock leaves no lock behind (a PostgreSQL advisory
lock dies with its connection), so the next one curates the pending candidates. The worker's
port answers `/healthz` (200, or a 503 problem while the database refuses connections, back to
200 without a restart).

PostgreSQL only, whatever GOLDENSET_TEST_DATABASES says: these tests fail when it is unreachable."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import httpx
from sqlalchemy import func
from sqlalchemy.engine import Engine, make_url
from sqlmodel import Session, col, select

from curation.releases.periods import period_at
from schemas.audit import AuditEvent
from schemas.common import utcnow
from schemas.dedup import DedupDecision
from schemas.evals import DEFAULT_SCHEDULE, Eval, EvalCreate
from schemas.item import Item, ItemStatus
from schemas.release import Release
from service.core.db import write_transaction
from service.core.locks import _lock_key
from service.core.metrics import serve_scheduler_metrics
from service.dedup.runner import LOCK_NAME as CURATION_LOCK
from service.evals.definitions import create_eval
from service.evals.refresh import refresh_eval
from tests.conftest import TEST_SECRET_KEY, _free_port, _pg_admin
from tests.dedup_support import KEV_MAPPING, ingest
from tests.eval_support import ingest_and_curate, kev_records
from tests.processes import Replica, start_scheduler

WAIT_SECONDS = 90.0
WORKER_ENV = {"LOG_LEVEL": "INFO"}


def _wait_for(condition: Callable[[], bool], what: str, workers: list[Replica], seconds: float = WAIT_SECONDS) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            logs = "\n".join(worker.output()[-3000:] for worker in workers)
            raise AssertionError(f"{what}: not within {seconds} s\n{logs}")
        time.sleep(0.2)


def _create_eval(engine: Engine, name: str) -> None:
    with write_transaction(engine) as session:
        create_eval(
            session=session,
            data=EvalCreate(name=name, sources=["kev"], approval_policy="auto", max_age_days=3650),
            secret_key=TEST_SECRET_KEY,
            actor="test",
            key=bytes(range(32)),
        )
        session.commit()


def _releases(engine: Engine, name: str) -> list[Release]:
    with Session(engine) as session:
        evaluation = session.exec(select(Eval).where(Eval.name == name)).one()
        return list(session.exec(select(Release).where(Release.eval_id == evaluation.id)).all())


def _release_writes(engine: Engine, name: str) -> int:
    with Session(engine) as session:
        query = select(func.count()).select_from(AuditEvent).where(AuditEvent.action == "release.create", AuditEvent.object_id == name)
        return int(session.exec(query).one())


def _synced(worker: Replica, name: str) -> bool:
    """Whether `worker` has added its refresh job for eval `name` (its first sync is done)."""
    return f"scheduled refreshes of eval {name} on" in worker.output()


def _caught_up(worker: Replica, name: str) -> bool:
    return any(f"scheduled refreshes of eval {name} on" in line and "catching up" in line for line in worker.output().splitlines())


def _released_last_period(engine: Engine, name: str) -> None:
    """Eval `name` released for the period before the current one (so the current one is missed)."""
    current = period_at(DEFAULT_SCHEDULE, utcnow())
    refresh_eval(engine, name=name, at=current.start - timedelta(days=1), secret_key=TEST_SECRET_KEY, actor="test")


def test_a_missed_period_is_caught_up_once_across_kills_restarts_and_two_schedulers(pg_url: str, pg_engine: Engine, tmp_path: Path) -> None:
    ingest_and_curate(pg_engine, "kev", kev_records(since="2025-06-01"))
    _create_eval(pg_engine, "ops")
    _create_eval(pg_engine, "fresh")  # never released: its first release waits for its schedule
    _released_last_period(pg_engine, "ops")
    period = period_at(DEFAULT_SCHEDULE, utcnow())
    first = start_scheduler(pg_url, tmp_path / "first.log", env=WORKER_ENV)
    workers = [first]
    try:
        _wait_for(lambda: len(_releases(pg_engine, "ops")) == 2, "the first scheduler's catch-up release", workers)
        assert _caught_up(first, "ops")
        release = max(_releases(pg_engine, "ops"), key=lambda release: release.number)
        assert release.period_start == period.start and release.dev_count + release.sealed_count > 0
        _wait_for(lambda: _synced(first, "fresh"), "the first scheduler's job for the new eval", workers)
        assert not _caught_up(first, "fresh") and _releases(pg_engine, "fresh") == []
        first.kill()

        # While no scheduler runs, a second eval released before misses its period; then two schedulers start at once.
        _create_eval(pg_engine, "later")
        _released_last_period(pg_engine, "later")
        second = start_scheduler(pg_url, tmp_path / "second.log", env=WORKER_ENV)
        third = start_scheduler(pg_url, tmp_path / "third.log", env=WORKER_ENV)
        workers += [second, third]
        for worker in (second, third):
            _wait_for(lambda worker=worker: _synced(worker, "ops") and _synced(worker, "later"), "a restarted scheduler's first sync", workers)  # type: ignore[misc]
            assert not _caught_up(worker, "ops"), "the period of ops has its release: nothing to catch up"
        _wait_for(lambda: len(_releases(pg_engine, "later")) == 2, "the catch-up release of the eval that missed its period while no scheduler ran", workers)
        time.sleep(3)  # whichever scheduler lost the race for the refresh lock finds the release written
        assert [(r.id, r.number, r.period_start) for r in _releases(pg_engine, "ops") if r.number == 2] == [(release.id, 2, period.start)]
        assert [(r.number, r.period_start) for r in _releases(pg_engine, "later") if r.number == 2] == [(2, period.start)]
        assert (_release_writes(pg_engine, "ops"), _release_writes(pg_engine, "later")) == (2, 2)
        assert all(worker.process.poll() is None for worker in (second, third))
        second.kill()
        third.kill()

        # A fourth, alone after both were killed, writes nothing either.
        fourth = start_scheduler(pg_url, tmp_path / "fourth.log", env=WORKER_ENV)
        workers.append(fourth)
        _wait_for(lambda: _synced(fourth, "ops") and _synced(fourth, "later"), "the fourth scheduler's first sync", workers)
        assert not _caught_up(fourth, "ops") and not _caught_up(fourth, "later")
        assert (len(_releases(pg_engine, "ops")), len(_releases(pg_engine, "later")), len(_releases(pg_engine, "fresh"))) == (2, 2, 0)
        assert (_release_writes(pg_engine, "ops"), _release_writes(pg_engine, "later")) == (2, 2)
    finally:
        for worker in workers:
            worker.kill()


def _curation_lock_holder(database: str) -> int | None:
    """The backend pid holding the `curation` advisory lock in `database`, or None."""
    key = _lock_key(CURATION_LOCK) & 0xFFFF_FFFF_FFFF_FFFF
    with _pg_admin() as conn:
        row = conn.execute(
            "SELECT l.pid FROM pg_locks l JOIN pg_database d ON d.oid = l.database "
            "WHERE l.locktype = 'advisory' AND l.granted AND d.datname = %s AND l.classid = %s AND l.objid = %s AND l.objsubid = 1",
            (database, key >> 32, key & 0xFFFF_FFFF),
        ).fetchone()
    return None if row is None else int(str(row[0]))


def _pending(engine: Engine) -> int:
    with Session(engine) as session:
        return int(session.exec(select(func.count()).select_from(Item).where(Item.status == ItemStatus.CANDIDATE.value)).one())


def test_a_scheduler_killed_holding_the_curation_lock_leaves_none_and_the_next_one_curates(pg_url: str, pg_engine: Engine, tmp_path: Path) -> None:
    from ingest.mapping import load_mapping

    records = kev_records(since="2025-07-01")
    summary = ingest(pg_engine, "kev", records, load_mapping(KEV_MAPPING).model_copy(update={"format": "jsonl", "records": None}))
    assert summary.new == len(records) and 10 < len(records) < 100
    database = str(make_url(pg_url).database)
    env = {**WORKER_ENV, "CURATE_INTERVAL_SECONDS": "1"}
    victim = start_scheduler(pg_url, tmp_path / "victim.log", env=env)
    workers = [victim]
    try:
        deadline = time.monotonic() + WAIT_SECONDS
        while (holder := _curation_lock_holder(database)) is None:
            assert time.monotonic() < deadline and victim.process.poll() is None, f"the scheduler never took the curation lock\n{victim.output()[-3000:]}"
            time.sleep(0.02)
        victim.kill()
        assert "curated" not in victim.output() and _pending(pg_engine) == len(records), "killed before its run decided anything"
        _wait_for(lambda: _curation_lock_holder(database) is None, "the killed scheduler's curation lock released", workers, seconds=15)
        with _pg_admin() as conn:
            assert conn.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (holder,)).fetchone() == (0,)

        successor = start_scheduler(pg_url, tmp_path / "successor.log", env=env)
        workers.append(successor)
        _wait_for(lambda: _pending(pg_engine) == 0, "the restarted scheduler's curation of the pending candidates", workers, seconds=180)
        # The run logs what it curated just after its last batch commits.
        _wait_for(lambda: "curated" in successor.output(), "the restarted scheduler's summary of its run", workers, seconds=30)
        assert "another process is curating" not in successor.output(), "no lock was left behind"
        with Session(pg_engine) as session:
            decided = session.exec(select(col(DedupDecision.item_id))).all()
            items = session.exec(select(col(Item.id))).all()
        assert Counter(decided) == Counter(items), "each item decided exactly once"
    finally:
        for worker in workers:
            worker.kill()


def test_the_worker_healthz_is_503_while_the_database_refuses_connections_and_recovers_without_a_restart(pg_url: str, tmp_path: Path) -> None:
    name = str(make_url(pg_url).database)
    worker = start_scheduler(pg_url, tmp_path / "worker.log")
    try:
        up = httpx.get(f"{worker.url}/healthz", timeout=30)
        assert (up.status_code, up.headers["content-type"], up.json()) == (200, "application/json", {"status": "ok", "database": "ok", "role": "worker", "scheduler": "running"})
        metrics = httpx.get(f"{worker.url}/metrics", timeout=30)
        assert metrics.status_code == 200 and "goldenset_database_up 1.0" in metrics.text
        with _pg_admin() as conn:
            conn.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,))
        for _ in range(3):  # pooled connections were cut and new ones are refused
            down = httpx.get(f"{worker.url}/healthz", timeout=30)
            assert down.status_code == 503, down.text
            assert down.headers["content-type"].startswith("application/problem+json")
            assert down.json()["status"] == 503 and down.json()["title"] == "Service Unavailable"
            assert "the database is unreachable" in down.json()["detail"]
        with _pg_admin() as conn:
            conn.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
        deadline = time.monotonic() + 20
        while (up := httpx.get(f"{worker.url}/healthz", timeout=30)).status_code != 200:
            assert time.monotonic() < deadline, up.text
            time.sleep(0.2)
        assert up.json() == {"status": "ok", "database": "ok", "role": "worker", "scheduler": "running"}
        assert worker.process.poll() is None
    finally:
        worker.stop()


def test_the_worker_healthz_is_503_when_its_scheduler_is_not_running(pg_engine: Engine) -> None:
    running = [False]
    port = _free_port()
    serve_scheduler_metrics(pg_engine, port, scheduler_running=lambda: running[0], address="127.0.0.1")
    stopped = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10)
    assert stopped.status_code == 503 and stopped.headers["content-type"].startswith("application/problem+json")
    assert stopped.json() == {"type": "about:blank", "title": "Service Unavailable", "status": 503, "detail": "the scheduler is not running", "instance": "/healthz"}
    running[0] = True
    assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10).json()["scheduler"] == "running"
    assert "goldenset_database_up 1.0" in httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
