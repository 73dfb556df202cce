"""Creations racing on one name, over a real server on both databases: one 201, every other
answer 409 naming the conflict (or 503 with `Retry-After` when the database was too busy),
never a 500."""

from __future__ import annotations

import sqlite3
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import create_engine
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlmodel import Session, func, select

from schemas.evals import Eval
from schemas.model_registry import Endpoint, Model
from schemas.source import Source
from service.core.db import write_session
from service.core.problems import database_problem
from tests.conftest import LiveServer

BURST = 20


def _burst(server: LiveServer, token: str, path: str, body: dict[str, Any]) -> Counter[int]:
    """Send `body` to `path` from BURST threads at once; the statuses, each answer checked."""
    start = threading.Barrier(BURST)

    def send(_: int) -> httpx.Response:
        with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as client:
            start.wait()
            return client.post(path, json=body)

    with ThreadPoolExecutor(BURST) as pool:
        answers = list(pool.map(send, range(BURST)))
    for answer in answers:
        if answer.status_code == 409:
            assert answer.headers["content-type"] == "application/problem+json" and answer.json()["detail"]
        elif answer.status_code == 503:
            assert int(answer.headers["retry-after"]) >= 1 and "send it again" in answer.json()["detail"]
    return Counter(answer.status_code for answer in answers)


@pytest.mark.parametrize(
    ("path", "body", "table"),
    [
        ("/v1/sources", {"name": "kev", "kind": "file"}, Source),
        ("/v1/evals", {"name": "ops", "sources": ["base"]}, Eval),
        ("/v1/models", {"name": "acme-2", "provider": "acme"}, Model),
        ("/v1/endpoints", {"name": "acme-2-prod", "base_url": "https://api.acme.test/v1", "model": "base-model"}, Endpoint),
    ],
)
def test_one_creation_of_a_name_wins_and_the_others_are_told_so(live_server: LiveServer, path: str, body: dict[str, Any], table: type[Any]) -> None:
    admin = live_server.token("admin")
    with httpx.Client(base_url=live_server.url, headers={"Authorization": f"Bearer {admin}"}, timeout=30) as client:
        assert client.post("/v1/sources", json={"name": "base", "kind": "file"}).status_code == 201
        assert client.post("/v1/models", json={"name": "base-model", "provider": "acme"}).status_code == 201
    statuses = _burst(live_server, admin, path, body)
    assert statuses[201] == 1 and statuses[409] + statuses[503] == BURST - 1, statuses
    with Session(live_server.engine) as session:
        assert session.exec(select(func.count()).select_from(table).where(table.name == body["name"])).one() == 1


def test_a_lost_race_found_by_the_database_is_a_conflict_or_busy_never_a_500(engine: Engine, database_url: str, tmp_path: Path) -> None:
    """What routes that check nothing first rely on: the database's own refusal of a second row
    with a unique name is 409 naming the column or constraint (never the values), and SQLite's
    "database is locked" is 503 with `Retry-After`."""
    with write_session(engine) as session:
        session.add(Source(name="kev", kind="file"))
        session.commit()
    with write_session(engine) as session:
        session.add(Source(name="kev", kind="file"))
        with pytest.raises(IntegrityError) as raised:
            session.commit()
    conflict = database_problem(raised.value)
    assert conflict is not None and conflict.status == 409 and "source" in conflict.extra["conflict"] and "kev" not in conflict.detail
    if make_url(database_url).get_backend_name() != "sqlite":
        return
    busy_file = tmp_path / "busy.db"
    holder = sqlite3.connect(busy_file, isolation_level=None)
    holder.execute("CREATE TABLE t (x INTEGER)")
    holder.execute("BEGIN IMMEDIATE")
    waiter = create_engine(f"sqlite:///{busy_file}", connect_args={"timeout": 0.05})
    try:
        with waiter.begin() as connection, pytest.raises(OperationalError) as locked:
            connection.exec_driver_sql("INSERT INTO t VALUES (1)")
    finally:
        holder.rollback()
        holder.close()
        waiter.dispose()
    busy = database_problem(locked.value)
    assert busy is not None and busy.status == 503 and busy.headers == {"Retry-After": "1"}
