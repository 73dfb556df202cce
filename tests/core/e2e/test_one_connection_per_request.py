"""Acceptance: no request holds two pooled database connections at once. The server runs on a pool
of exactly one connection (no overflow); a request that needed a second one while holding the
first would wait for itself and be answered 503 when the pool's wait ends. Every GET operation of
the OpenAPI document, with real ids in its path, and the writes that audit, echo items or take a
budget (reviews, edits, rulings, answers, pushes, runs and results, sealed reads and exports)
answer without one such 503, on both databases. A saturated pool answers 503 with `Retry-After`
within its wait (GOLDENSET_DB_POOL_TIMEOUT), never a 30-second hang."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from schemas.dedup_questions import DedupQuestion
from service.app import create_app
from service.core.db import make_engine
from service.core.settings import Settings
from tests.conftest import LiveServer, serve
from tests.eval_support import HashingEncoder
from tests.run_support import auth, token
from tests.sealed_support import fill_paths, path_values, sealed_world

POOL_WAIT_SECONDS = 8.0
"""How long a request waits for the one connection: longer than any request here holds it."""


@pytest.fixture
def pool_of_one(database_url: str) -> Iterator[Engine]:
    engine = make_engine(database_url, pool_size=1, max_overflow=0, pool_timeout=POOL_WAIT_SECONDS)
    yield engine
    engine.dispose()


@pytest.fixture
def app(settings: Settings, pool_of_one: Engine) -> FastAPI:
    return create_app(settings, engine=pool_of_one, encoder=HashingEncoder())


def _saturated(response: httpx.Response) -> bool:
    return response.status_code == 503 and "database connection" in response.text


def test_no_request_holds_two_pooled_connections(live_server: LiveServer, engine: Engine, pool_of_one: Engine) -> None:
    url = live_server.url
    world = sealed_world(engine, url)
    everything = auth(token(engine, "read", "curate", "ingest", "admin", "sealed", name="all-scopes"))
    document = httpx.get(f"{url}/openapi.json", timeout=30).json()
    values = path_values(engine)
    answered: list[tuple[str, str, int]] = []
    with httpx.Client(base_url=url, headers=everything, timeout=60) as client:
        assert client.post("/v1/evals/ops/sealed-review", json={}).status_code == 201
        for template, operations in document["paths"].items():
            if "get" in operations:
                for path in fill_paths(template, values)[:6]:
                    answered.append(("GET", path, client.get(path).status_code))
        item = world.released.dev[0]
        with Session(engine) as session:
            question = session.exec(select(DedupQuestion)).first()
        assert question is not None
        record = {"external_id": "pool-1", "title": "Pool check", "input": "A record pushed during the pool check.", "occurred_at": "2024-04-01T00:00:00Z"}
        writes: list[tuple[str, str, object]] = [
            ("POST", f"/v1/items/{item}/approve", None),
            ("POST", f"/v1/items/{item}/undo-review", None),
            ("PATCH", f"/v1/items/{item}", {"note": "checked", "tags": ["pool"]}),
            ("POST", f"/v1/items/{item}/not-duplicate", {"note": "checked"}),
            ("POST", f"/v1/dedup/questions/{question.id}/answer", {"ruling": "distinct"}),
            ("POST", "/v1/sources/kev/items", [record]),
            ("POST", "/v1/evals/ops/runs", {"model": "m1", "endpoint": "m1-no"}),
            ("POST", "/v1/evals/ops/runs", {"model": "m1", "endpoint": "m1-no", "split": "sealed"}),
            ("GET", "/v1/evals/ops/releases/1/items?split=sealed", None),
            ("GET", "/v1/evals/ops/releases/1/export.jsonl?split=sealed", None),
            ("GET", "/v1/evals/ops/releases/1/export.jsonl", None),
            ("POST", "/v1/evals/ops/refresh", None),
            ("POST", "/v1/probes", {"eval": "ops", "model": "m1", "endpoint": "m1-no", "allow_exposure": True}),
        ]
        for method, path, body in writes:
            answered.append((method, path, client.request(method, path, json=body).status_code))
    saturated = [entry for entry in answered if entry[2] == 503]
    assert not saturated, f"requests that waited for a second connection: {saturated[:5]}"
    assert not [entry for entry in answered if entry[2] >= 500], answered
    ok = sum(1 for entry in answered if entry[2] < 300)
    assert ok >= 0.8 * len(answered) and len(answered) > 60, (ok, len(answered))
    assert pool_of_one.pool.checkedout() == 0  # type: ignore[attr-defined]


def test_a_saturated_pool_answers_503_with_retry_after_within_its_wait(settings: Settings, database_url: str, engine: Engine) -> None:
    quick = make_engine(database_url, pool_size=1, max_overflow=0, pool_timeout=0.5)
    app = create_app(settings, engine=quick, encoder=HashingEncoder())
    reader = auth(token(engine, "read", name="reader"))
    held = threading.Event()
    release = threading.Event()

    def hold() -> None:
        with quick.connect():
            held.set()
            release.wait(10)

    with serve(app, quick, settings) as server:
        holder = threading.Thread(target=hold)
        holder.start()
        try:
            assert held.wait(5)
            started = time.monotonic()
            response = httpx.get(f"{server.url}/v1/items", headers=reader, timeout=30)
            waited = time.monotonic() - started
        finally:
            release.set()
            holder.join()
        assert _saturated(response) and response.headers["retry-after"] == "1", response.text
        assert response.headers["content-type"].startswith("application/problem+json")
        assert waited < 3, waited
        assert httpx.get(f"{server.url}/v1/items", headers=reader, timeout=30).status_code == 200
    quick.dispose()


def test_more_clients_than_connections_wait_their_turn_instead_of_a_503(settings: Settings, database_url: str, engine: Engine) -> None:
    """GOLDENSET_CONCURRENT_REQUESTS bounds the requests a process works on at once by its pool: 24
    clients against a pool of two connections that waits 50 ms for one are all answered, none refused
    (with the limit at 24 instead, some are answered 503),
    and the pool opened no connection past its two."""
    small = make_engine(database_url, pool_size=2, max_overflow=0, pool_timeout=0.05)
    app = create_app(settings.model_copy(update={"concurrent_requests": 2}), engine=small, encoder=HashingEncoder())
    reader = auth(token(engine, "read", name="reader"))
    statuses: list[int] = []
    lock = threading.Lock()

    def client(url: str) -> None:
        with httpx.Client(headers=reader, timeout=30) as http:
            for _ in range(8):
                status = http.get(f"{url}/v1/items", params={"limit": 50}).status_code
                with lock:
                    statuses.append(status)

    with serve(app, small, settings) as server:
        clients = [threading.Thread(target=client, args=(server.url,)) for _ in range(24)]
        for thread in clients:
            thread.start()
        for thread in clients:
            thread.join()
        assert small.pool.checkedout() == 0  # type: ignore[attr-defined]
        opened = small.pool.size() + small.pool.overflow()  # type: ignore[attr-defined]
    small.dispose()
    assert statuses == [200] * 24 * 8, sorted(set(statuses))
    assert opened <= 2, opened
