"""Acceptance: a dedup ruling never opens the sealed slice. Ruling a sealed-bound item the same as
a dev item would move it to the dev side, where every reader sees its text; so a ruling on an
item withheld from the caller (an answer to a question, `duplicate-of` either way round,
`not-duplicate`) is refused with 403 `sealed_item`, nothing is written, and the item stays
withheld. With the `sealed` scope and an open sealed review window on the eval, the same ruling
is taken. Over a real HTTP server, on every backend."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from schemas.dedup import DedupOverride, NearLink
from schemas.dedup_questions import DedupQuestion
from service.app import create_app
from service.core.settings import Settings
from tests.conftest import LiveServer
from tests.eval_support import HashingEncoder
from tests.run_support import auth, token
from tests.sealed_support import sealed_world

PROBLEM = "application/problem+json"


@pytest.fixture
def app(settings: Settings, engine: Engine) -> FastAPI:
    return create_app(settings, engine=engine, encoder=HashingEncoder())


def _written(engine: Engine) -> tuple[int, int]:
    with Session(engine) as session:
        return len(session.exec(select(DedupOverride)).all()), len(session.exec(select(NearLink)).all())


def _refused(response: httpx.Response, item_id: int) -> None:
    assert response.status_code == 403, response.text
    assert response.headers["content-type"].startswith(PROBLEM)
    problem = response.json()
    assert problem["reason"] == "sealed_item" and str(item_id) in problem["detail"] and "sealed-review" in problem["detail"]


def test_no_ruling_moves_a_sealed_bound_item_to_the_dev_side_without_reading_it(live_server: LiveServer, engine: Engine) -> None:
    url = live_server.url
    world = sealed_world(engine, url)
    dev = world.released.dev[0]
    bound = sorted(world.bound)[0]
    with Session(engine) as session:
        question = session.exec(select(DedupQuestion).where(DedupQuestion.item_id == bound)).one()
    curator = auth(token(engine, "read", "curate"))
    sealed_no_window = auth(token(engine, "read", "curate", "sealed"))
    before = _written(engine)
    attempts = [
        ("post", f"/v1/dedup/questions/{question.id}/answer", {"ruling": "same", "note": "looks alike"}),
        ("post", f"/v1/dedup/questions/{question.id}/answer", {"ruling": "distinct"}),
        ("post", f"/v1/items/{bound}/duplicate-of", {"item_id": dev, "note": "same incident"}),
        ("post", f"/v1/items/{dev}/duplicate-of", {"item_id": bound, "note": "same incident"}),
        ("post", f"/v1/items/{bound}/not-duplicate", {"note": "not the same"}),
    ]
    for headers in (curator, sealed_no_window):
        for method, path, body in attempts:
            response = httpx.request(method, url + path, json=body, headers=headers, timeout=30)
            _refused(response, bound)
            assert not world.leaks(response.text)
    assert _written(engine) == before
    shown = httpx.get(f"{url}/v1/items/{bound}", headers=curator, timeout=30)
    assert shown.status_code == 200 and shown.json()["sealed"] is True and not world.leaks(shown.text)
    with Session(engine) as session:
        assert session.get(DedupQuestion, question.id).state == "open"  # type: ignore[union-attr]

    # A sealed reviewer who opened the eval's sealed view reads the pair and may rule on it.
    sealed = token(engine, "read", "curate", "sealed")
    assert httpx.post(f"{url}/v1/evals/ops/sealed-review", json={}, headers=auth(sealed), timeout=30).status_code in (200, 201)
    answered = httpx.post(f"{url}/v1/dedup/questions/{question.id}/answer", json={"ruling": "same", "note": "read both"}, headers=auth(sealed), timeout=30)
    assert answered.status_code == 200, answered.text
    assert answered.json()["state"] == "answered" and answered.json()["ruling"] == "same"
    assert _written(engine)[0] == before[0] + 1
