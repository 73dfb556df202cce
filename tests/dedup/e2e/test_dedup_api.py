"""The dedup API over a real HTTP server, on every backend: an item's dedup verdict, its similar
earlier items, checking a text without storing it, and curation started by an API push."""

from __future__ import annotations

from datetime import datetime

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import func
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from schemas.dedup import DedupDecision, Embedding, ItemFingerprint
from schemas.item import Item
from service.app import create_app
from service.core.settings import Settings
from service.dedup.runner import CurationTrigger, run_curation
from tests.conftest import LiveServer
from tests.dedup_support import PARAPHRASE, MemoEncoder, hadoop_reports, ingest, planted, shared_encoder

PROBLEM = "application/problem+json"
REPORT_COUNT = 60


@pytest.fixture(scope="module")
def encoder() -> MemoEncoder:
    return shared_encoder()


@pytest.fixture
def app(settings: Settings, engine: Engine, encoder: MemoEncoder) -> FastAPI:
    """The app with the test session's embedding model."""
    return create_app(settings, engine=engine, encoder=encoder)


def _curated(server: LiveServer, encoder: MemoEncoder) -> dict[str, int]:
    """Hadoop reports with a planted near-verbatim copy and an exact copy, curated; ids by external id."""
    reports = hadoop_reports(REPORT_COUNT)
    plants = planted(reports)
    ingest(server.engine, "hadoop", [*reports, plants["near"], plants["exact"]])
    assert run_curation(server.engine, server.settings, encoder=encoder).decided == REPORT_COUNT + 2
    with Session(server.engine) as session:
        return {item.external_id: item.id for item in session.exec(select(Item)) if item.id is not None}


def _counts(engine: Engine) -> tuple[int, ...]:
    with Session(engine) as session:
        return tuple(session.exec(select(func.count()).select_from(table)).one() for table in (Item, DedupDecision, ItemFingerprint, Embedding))


def test_an_item_shows_how_dedup_judged_it(live_server: LiveServer, encoder: MemoEncoder) -> None:
    ids = _curated(live_server, encoder)
    with live_server.client("read") as reader:
        original = reader.get(f"/v1/items/{ids['13398683']}").json()
        copy = reader.get(f"/v1/items/{ids['PLANT-NEAR']}").json()
        exact = reader.get(f"/v1/items/{ids['PLANT-EXACT']}").json()
    assert original["status"] == "unique"
    assert original["dedup"]["status"] == "unique" and original["dedup"]["stage"] == "none" and original["dedup"]["duplicate_of"] is None
    assert copy["status"] == "duplicate"
    assert (copy["dedup"]["status"], copy["dedup"]["stage"], copy["dedup"]["duplicate_of"]) == ("duplicate", "minhash", ids["13398683"])
    assert copy["dedup"]["score"] >= live_server.settings.dedup_config().minhash_threshold
    assert datetime.fromisoformat(copy["dedup"]["decided_at"]).tzinfo is not None
    assert (exact["dedup"]["stage"], exact["dedup"]["score"], exact["dedup"]["duplicate_of"]) == ("exact", 1.0, ids["13395121"])
    # A candidate not yet curated: status only, and no neighbours to show yet.
    ingest(live_server.engine, "hadoop", hadoop_reports(REPORT_COUNT + 1)[REPORT_COUNT:])
    with Session(live_server.engine) as session:
        fresh = session.exec(select(Item).where(Item.status == "candidate")).one()
    with live_server.client("read") as reader:
        assert reader.get(f"/v1/items/{fresh.id}").json()["dedup"] == {
            "status": "candidate",
            "duplicate_of": None,
            "stage": None,
            "score": None,
            "decided_at": None,
            "explanation": None,
        }
        pending = reader.get(f"/v1/items/{fresh.id}/similar")
        duplicates = reader.get("/v1/items", params={"status": "duplicate"}).json()["items"]
    assert pending.status_code == 409 and pending.headers["content-type"] == PROBLEM and "not curated yet" in pending.json()["detail"]
    assert {item["external_id"] for item in duplicates} >= {"PLANT-NEAR", "PLANT-EXACT"}


def test_similar_lists_earlier_items_best_first(live_server: LiveServer, encoder: MemoEncoder) -> None:
    ids = _curated(live_server, encoder)
    with live_server.client("read") as reader:
        near = reader.get(f"/v1/items/{ids['PLANT-NEAR']}/similar", params={"k": 5})
        exact = reader.get(f"/v1/items/{ids['PLANT-EXACT']}/similar", params={"k": 3}).json()
        first = reader.get(f"/v1/items/{ids['13398683']}/similar", params={"k": 100}).json()
        too_many = reader.get(f"/v1/items/{ids['PLANT-NEAR']}/similar", params={"k": 1000})
        item = reader.get(f"/v1/items/{ids['PLANT-NEAR']}").json()
    assert near.status_code == 200, near.text
    similar = near.json()
    assert len(similar) == 5 and similar[0]["id"] == ids["13398683"]
    top = similar[0]
    assert (top["external_id"], top["source"], top["status"]) == ("13398683", "hadoop", "unique")
    assert top["cosine"] > 0.9 and top["jaccard"] > 0.7 and top["title_cosine"] > 0.99 and top["lexical"] > 0.5
    assert [entry["score"] for entry in similar] == sorted((entry["score"] for entry in similar), reverse=True)
    assert all(datetime.fromisoformat(entry["occurred_at"]) < datetime.fromisoformat(item["occurred_at"]) for entry in similar)
    assert ids["PLANT-NEAR"] not in {entry["id"] for entry in similar}
    assert exact[0]["id"] == ids["13395121"] and exact[0]["cosine"] > 0.99
    # The original happened first: its copies, which came later, are never among its earlier items.
    assert not {ids["PLANT-NEAR"], ids["13398683"]} & {entry["id"] for entry in first}
    assert too_many.status_code == 422


def test_check_reports_a_paraphrase_and_stores_nothing(live_server: LiveServer, encoder: MemoEncoder) -> None:
    ids = _curated(live_server, encoder)
    before = _counts(live_server.engine)
    body = {"title": "Deadlock risk when loading VerifierNone from the static initializer of Verifier", "input": PARAPHRASE}
    with live_server.client("read") as reader:
        response = reader.post("/v1/dedup/check", json=body, params={"k": 3})
        unrelated = reader.post("/v1/dedup/check", json={"input": "The cafeteria coffee machine on floor three dispenses hot chocolate instead of espresso."}).json()
    assert response.status_code == 200, response.text
    result = response.json()
    original = ids["13396628"]
    assert (result["status"], result["stage"], result["duplicate_of"], result["matched_item"]) == ("duplicate", "embedding", original, original)
    assert result["score"] >= live_server.settings.dedup_config().guard_embedding_threshold
    assert result["similar"][0]["id"] == original and len(result["similar"]) == 3
    assert "best_embedding" in result["details"]
    assert (unrelated["status"], unrelated["stage"], unrelated["duplicate_of"]) == ("unique", "none", None)
    assert _counts(live_server.engine) == before


def test_dedup_endpoints_need_the_read_scope_and_name_what_is_missing(live_server: LiveServer, encoder: MemoEncoder) -> None:
    ids = _curated(live_server, encoder)
    item = ids["PLANT-NEAR"]
    with httpx.Client(base_url=live_server.url) as anonymous:
        for method, path in (("GET", f"/v1/items/{item}/similar"), ("POST", "/v1/dedup/check"), ("GET", f"/v1/items/{item}")):
            response = anonymous.request(method, path, json={"input": "x"} if method == "POST" else None)
            assert response.status_code == 401 and response.headers["content-type"] == PROBLEM, path
    with live_server.client("ingest") as ingester:
        assert ingester.get(f"/v1/items/{item}/similar").status_code == 403
        refused = ingester.post("/v1/dedup/check", json={"input": "x"})
        assert refused.status_code == 403 and "'read' scope" in refused.json()["detail"]
    with live_server.client("read") as reader:
        missing = reader.get("/v1/items/999999/similar")
        assert missing.status_code == 404 and missing.headers["content-type"] == PROBLEM and "999999" in missing.json()["detail"]
        assert reader.get("/v1/items/999999").status_code == 404
        assert reader.post("/v1/dedup/check", json={"input": ""}).status_code == 422


def test_a_push_starts_curation_in_the_background(live_server: LiveServer, app: FastAPI, encoder: MemoEncoder) -> None:
    trigger = CurationTrigger(live_server.engine, live_server.settings, encoder=lambda: encoder, enabled=True)
    app.state.curation_trigger = trigger
    records = [
        {"external_id": f"OPS-{n}", "occurred_at": f"2024-05-0{n}T10:00:00Z", "title": title, "input": f"{title}: {detail}"}
        for n, (title, detail) in enumerate(
            [
                ("checkout latency spike", "p99 latency of the checkout service rose to 4 s after the 10:00 deploy"),
                ("checkout latency spike", "p99 latency of the checkout service rose to 9 s after the 14:30 deploy"),
                ("disk full on the log host", "the log volume on the aggregation host filled up and shipping stopped"),
            ],
            start=1,
        )
    ]
    with live_server.client("admin") as admin:
        assert admin.post("/v1/sources", json={"name": "ops", "kind": "push"}).status_code == 201
        assert admin.post("/v1/sources/ops/items", json=records).status_code == 200
        summary = trigger.wait(timeout=120)
        assert summary is not None and (summary.decided, summary.duplicate) == (3, 1)
        statuses = {item["external_id"]: (item["status"]) for item in admin.get("/v1/items", params={"source": "ops"}).json()["items"]}
        assert statuses == {"OPS-1": "unique", "OPS-2": "duplicate", "OPS-3": "unique"}
        # Nothing new stored: no run.
        assert admin.post("/v1/sources/ops/items", json=records).json()["unchanged"] == 3
    assert trigger.wait(timeout=5) is summary
