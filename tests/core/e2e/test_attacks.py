"""Attacks on the HTTP surface, over a real socket: input the database cannot hold, bodies before
authentication, forged cursors, side channels around the sealed slice, and the contract of every
answer (statuses, headers, caching). Each must end in a 4xx problem naming what was wrong, or in
an answer that reveals nothing sealed; never a server error."""

from __future__ import annotations

import contextlib
import http.client
import time
from datetime import timedelta

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import update
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from schemas.common import utcnow
from schemas.item import Item
from schemas.runs import Run
from service.app import create_app
from service.core.settings import Settings
from tests.conftest import LiveServer
from tests.eval_support import HashingEncoder
from tests.run_support import auth, register, released_eval, token

HUGE_ID = 2**31


@pytest.fixture
def app(settings: Settings, engine: Engine) -> FastAPI:
    """The app with the encoder the items were curated with, so dedup answers."""
    return create_app(settings, engine=engine, encoder=HashingEncoder())


def _problem(response: httpx.Response, status: int, location: str | None = None) -> dict[str, object]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    problem: dict[str, object] = response.json()
    if location is not None:
        assert location in str(problem), problem
    return problem


def test_input_no_database_can_hold_is_a_4xx_naming_it(live_server: LiveServer) -> None:
    engine = live_server.engine
    released_eval(engine, count=12)
    register(engine)
    admin = auth(token(engine, "admin", "sealed"))
    with httpx.Client(base_url=live_server.url, headers=admin, timeout=30) as client:
        for path in (f"/v1/items/{HUGE_ID}", f"/v1/runs/{HUGE_ID}", f"/v1/probes/{HUGE_ID}", f"/v1/items/{10**30}/similar"):
            _problem(client.get(path), 422, "path.")
        _problem(client.post("/v1/items/review", json={"decisions": [{"item_id": HUGE_ID, "decision": "approve"}]}), 422, "item_id")
        _problem(client.get("/v1/evals/ops/releases/³"), 422, "a release is a number")
        _problem(client.get(f"/v1/evals/ops/releases/{HUGE_ID}"), 422, "a release is a number")
        # Dates: out of range, numbers for dates, no zone.
        _problem(client.post("/v1/evals/ops/refresh", params={"at": "0001-01-04T00:00:06Z"}), 422, "query.at")
        _problem(client.get("/v1/items", params={"occurred_after": "1700000000"}), 422, "query.occurred_after")
        _problem(client.get("/v1/audit", params={"since": "2024-01-01T00:00:00"}), 422, "query.since")
        _problem(client.post("/v1/models", json={"name": "m2", "training_cutoff": 1700000000}), 422, "training_cutoff")
        # NUL in path, query and body; lone surrogates and non-finite numbers in a body.
        _problem(client.get("/v1/evals/o%00ps"), 422, "path")
        _problem(client.get("/v1/items", params={"source": "k\x00ev"}), 422, "query.source")
        _problem(client.post("/v1/items/review", json={"decisions": [{"item_id": 1, "decision": "reject", "reason": "bad\x00"}]}), 422, "reason")
        lone = b'{"decisions": [{"item_id": 1, "decision": "reject", "reason": "\\ud800"}]}'
        _problem(client.post("/v1/items/review", content=lone, headers={"Content-Type": "application/json"}), 422, "surrogate")
        not_finite = b'{"name": "ops2", "sources": ["kev"], "sealed_fraction": NaN}'
        _problem(client.post("/v1/evals", content=not_finite, headers={"Content-Type": "application/json"}), 422, "NaN")
        deep = b'{"name": "x", "description": ' + b"[" * 3000 + b"]" * 3000 + b"}"
        _problem(client.post("/v1/evals", content=deep, headers={"Content-Type": "application/json"}), 422, "nested")
        # Settings a refresh could not compute with.
        _problem(client.patch("/v1/evals/ops", json={"max_age_days": 10**9}), 422, "max_age_days")
        # Cursors: garbage, one from another list, and one altered by a byte.
        _problem(client.get("/v1/items", params={"cursor": "eyJvIjoiMjAyNC0wMS0wMVQwMDowMDowMCIsImkiOjF9"}), 422, "cursor")
        page = client.get("/v1/items", params={"limit": 2}).json()
        assert page["next_cursor"] and "2024" not in page["next_cursor"]
        _problem(client.get("/v1/audit", params={"cursor": page["next_cursor"]}), 422, "cursor")
        altered = page["next_cursor"][:-3] + ("A" if page["next_cursor"][-3] != "A" else "B") + page["next_cursor"][-2:]
        _problem(client.get("/v1/items", params={"cursor": altered}), 422, "cursor")
        assert client.get("/v1/items", params={"limit": 2, "cursor": page["next_cursor"]}).status_code == 200


def _raw_post(url: str, path: str, declared: int, send: bytes) -> tuple[int, float]:
    """POST `send` bytes of a body declared `declared` bytes long, without a token; the status and
    how long the answer took."""
    host, port = url.removeprefix("http://").split(":")
    started = time.monotonic()
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    connection.putrequest("POST", path)
    connection.putheader("Content-Type", "application/json")
    connection.putheader("Content-Length", str(declared))
    connection.endheaders()
    with contextlib.suppress(TimeoutError, BrokenPipeError, ConnectionResetError):
        connection.send(send)
    status = connection.getresponse().status
    connection.close()
    return status, time.monotonic() - started


def test_a_large_body_is_refused_before_it_is_read(live_server: LiveServer) -> None:
    # 50 MB declared without a token: refused at once, having read a first chunk at most.
    status, seconds = _raw_post(live_server.url, "/v1/items/review", 50 * 1024 * 1024, b"[" * 65536)
    assert status == 401 and seconds < 5
    # With a token, a body over the limit is refused as too large, unread.
    reader = token(live_server.engine, "curate")
    declared = live_server.settings.max_body_bytes + 1
    with httpx.Client(base_url=live_server.url, headers=auth(reader), timeout=30) as client:
        too_large = client.post("/v1/items/review", content=b" " * declared, headers={"Content-Type": "application/json"})
        _problem(too_large, 413, "limit")


def test_answers_carry_their_contract(live_server: LiveServer) -> None:
    engine = live_server.engine
    released_eval(engine, count=12)
    reader = auth(token(engine, "read"))
    with httpx.Client(base_url=live_server.url, headers=reader, timeout=30) as client:
        manifest = client.get("/v1/evals/ops/releases/1")
        assert manifest.headers["cache-control"].startswith("private,") and manifest.headers["etag"]
        for response in (manifest, client.get("/v1/items/999999")):
            assert response.headers["x-content-type-options"] == "nosniff" and response.headers["referrer-policy"] == "no-referrer"
            assert "default-src 'none'" in response.headers["content-security-policy"]
        not_allowed = client.put("/v1/items")
        _problem(not_allowed, 405)
        assert set(not_allowed.headers["allow"].split(", ")) == {"GET"}
        both = client.delete("/v1/endpoints/x")
        assert both.status_code in (401, 403, 404)
        document = client.get("/openapi.json").json()
        review = document["paths"]["/v1/items/review"]["post"]["responses"]
        assert {"400", "401", "413", "422"} <= set(review) and "application/problem+json" in review["422"]["content"]
        assert document["paths"]["/healthz"]["get"]["security"] == []


def test_sealed_items_leak_through_no_side_channel(live_server: LiveServer) -> None:
    engine = live_server.engine
    released = released_eval(engine, count=30, budget=5)
    register(engine)
    reader = auth(token(engine, "read", name="reader"))
    starter = auth(token(engine, "read", "sealed", name="starter"))
    other = auth(token(engine, "read", "sealed", name="other"))
    with Session(engine) as session:
        sealed_items = session.exec(select(Item).where(col(Item.id).in_(released.sealed))).all()
    with httpx.Client(base_url=live_server.url, timeout=30) as client:
        # A sealed run buys one reading, for the token that started it, for a while.
        run = client.post("/v1/evals/ops/runs", json={"model": "m1", "endpoint": "m1-no", "split": "sealed"}, headers=starter)
        assert run.status_code == 201, run.text
        run_id = run.json()["id"]
        assert client.get(f"/v1/runs/{run_id}/items", headers=starter).status_code == 200
        _problem(client.get(f"/v1/runs/{run_id}/items", headers=other), 403, "started it")
        with Session(engine) as session:
            session.exec(update(Run).where(col(Run.id) == run_id).values(created_at=utcnow() - timedelta(hours=25)))
            session.commit()
        _problem(client.get(f"/v1/runs/{run_id}/items", headers=starter), 403, "ago")

        # Lists leave sealed items out: not their text, dates, hashes, nor that they exist.
        listed = client.get("/v1/items", params={"limit": 500}, headers=reader).json()["items"]
        assert {item["id"] for item in listed} & set(released.sealed) == set()
        shown = client.get(f"/v1/items/{released.sealed[0]}", headers=reader).json()
        assert shown["sealed"] is True and shown["occurred_at"] is None and shown["content_hash"] == "" and shown["dedup"]["duplicate_of"] is None

        # Dedup never confirms a guess at a sealed item's text: no id, no neighbour.
        for item in sealed_items:
            check = client.post("/v1/dedup/check", json={"title": item.title, "input": item.input}, headers=reader)
            assert check.status_code == 200, check.text
            answer = check.json()
            assert answer["status"] == "duplicate" and answer["duplicate_of"] is None and answer["matched_item"] is None
            assert set(released.sealed) & {entry["id"] for entry in answer["similar"]} == set()
            assert not set(released.sealed) & {value.get("item") for value in answer["details"].values() if isinstance(value, dict)}
        for item_id in released.dev[:3]:
            similar = client.get(f"/v1/items/{item_id}/similar", params={"k": 50}, headers=reader).json()
            assert {entry["id"] for entry in similar} & set(released.sealed) == set()
