"""An API replica whose PostgreSQL connections are terminated under load keeps answering, without
a restart: reads that lose their connection are answered again on a new one (200), writes are
answered 503 with `Retry-After` (never 500), and a client that sends a refused push again ends
with every record stored exactly once (`service.core.disconnects`).

PostgreSQL only, whatever GOLDENSET_TEST_DATABASES says: this test fails when it is unreachable."""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import func
from sqlalchemy.engine import Engine, make_url
from sqlmodel import Session, col, select

from schemas.item import Item
from schemas.source import SourceCreate
from service.core.db import write_transaction
from service.core.tokens import create_token
from service.sources.definitions import create_source
from tests.conftest import TEST_SECRET_KEY, _pg_admin
from tests.dedup_support import KEV_MAPPING
from tests.eval_support import kev_records
from tests.processes import start_serve

LOAD_SECONDS = 10.0
TERMINATE_EVERY_SECONDS = 0.5
CLIENTS = 8
BATCH = 5
PUSH_ATTEMPTS = 20


def _kev_source(engine: Engine) -> str:
    """Create push source `kev` and return a token with `ingest` and `read`."""
    from ingest.mapping import load_mapping

    document = load_mapping(KEV_MAPPING).model_copy(update={"format": "jsonl", "records": None}).model_dump(mode="json", exclude_defaults=True)
    with write_transaction(engine) as session:
        create_source(session=session, data=SourceCreate(name="kev", kind="push", mapping=document), secret_key=TEST_SECRET_KEY, actor="test")
        token, _ = create_token(session=session, name="client", scopes=["ingest", "read"])
        session.commit()
    return token


def _terminate_backends(database: str, stop: threading.Event, terminated: list[int]) -> None:
    with _pg_admin() as conn:
        while not stop.wait(TERMINATE_EVERY_SECONDS):
            rows = conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()", (database,)).fetchall()
            terminated.append(sum(1 for (done,) in rows if done))


def test_terminated_connections_under_load_cost_no_500_and_no_restart(pg_url: str, pg_engine: Engine, tmp_path: Path) -> None:
    token = _kev_source(pg_engine)
    headers = {"Authorization": f"Bearer {token}"}
    records = kev_records()
    batches = iter([records[start : start + BATCH] for start in range(0, len(records), BATCH)])
    batches_lock = threading.Lock()
    replica = start_serve(pg_url, tmp_path / "replica.log")
    pid = replica.process.pid
    statuses: Counter[tuple[str, int]] = Counter()
    unexpected: list[str] = []
    pushed: list[str] = []
    outcome_lock = threading.Lock()
    stop = threading.Event()
    terminated: list[int] = []

    def note(kind: str, answer: httpx.Response) -> None:
        with outcome_lock:
            statuses[(kind, answer.status_code)] += 1
            if answer.status_code >= 500 and not (kind == "push" and answer.status_code == 503 and answer.headers.get("retry-after")):
                unexpected.append(f"{kind} {answer.status_code} {answer.headers.get('content-type')}: {answer.text[:300]}")
            if answer.status_code == 503 and not answer.headers.get("content-type", "").startswith("application/problem+json"):
                unexpected.append(f"{kind} 503 without a problem: {answer.text[:300]}")

    def push(client: httpx.Client, batch: list[dict[str, Any]]) -> None:
        for _ in range(PUSH_ATTEMPTS):
            answer = client.post("/v1/sources/kev/items", json=batch, headers=headers)
            note("push", answer)
            if answer.status_code in (200, 201):
                body = answer.json()
                assert body["rejected"] == 0, body
                with outcome_lock:
                    pushed.extend(record["cveID"] for record in batch)
                return
            if answer.status_code != 503:
                return
            time.sleep(min(float(answer.headers["retry-after"]), 0.2))
        unexpected.append(f"a batch was refused {PUSH_ATTEMPTS} times")

    def client_loop() -> None:
        deadline = time.monotonic() + LOAD_SECONDS
        with httpx.Client(base_url=replica.url, timeout=60) as client:
            for turn in itertools.count():
                if time.monotonic() >= deadline:
                    return
                if turn % 2:
                    with batches_lock:
                        batch = next(batches, None)
                    if batch is not None:
                        push(client, batch)
                        continue
                note("get", client.get("/v1/items", params={"limit": 50}, headers=headers))

    terminator = threading.Thread(target=_terminate_backends, args=(str(make_url(pg_url).database), stop, terminated))
    clients = [threading.Thread(target=client_loop) for _ in range(CLIENTS)]
    try:
        terminator.start()
        for thread in clients:
            thread.start()
        for thread in clients:
            thread.join(timeout=LOAD_SECONDS + 120)
        stop.set()
        terminator.join(timeout=30)
        assert unexpected == [], (unexpected[:10], statuses)
        assert sum(terminated) > 0, "no connection was terminated: the test proved nothing"
        gets = {status: count for (kind, status), count in statuses.items() if kind == "get"}
        assert set(gets) == {200}, statuses
        assert {status for (kind, status) in statuses if kind == "push"} <= {200, 201, 503}, statuses
        assert pushed, statuses
        with Session(pg_engine) as session:
            stored = session.exec(select(col(Item.external_id))).all()
            assert session.exec(select(func.count()).select_from(Item)).one() == len(stored)
        assert sorted(stored) == sorted(pushed), "every pushed record stored exactly once"
        assert replica.process.poll() is None and replica.process.pid == pid
        health = httpx.get(f"{replica.url}/healthz", timeout=30)
        assert health.status_code == 200, health.text
    finally:
        stop.set()
        replica.stop()
    print(f"\nanswers: {dict(statuses)}; connections terminated: {sum(terminated)} in {len(terminated)} sweeps")
