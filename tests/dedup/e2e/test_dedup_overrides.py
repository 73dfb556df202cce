"""People overruling dedup over a real HTTP server, on every backend: an item ruled not a
duplicate, or a duplicate by hand, stays so through later curation runs of its changed text and
through re-fingerprinting; every refusal is the documented problem; dedup's figures and its close
calls, with sealed items withheld."""

from __future__ import annotations

from collections import Counter
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import func
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from ingest.mapping import load_mapping
from schemas.dedup import DedupDecision, DedupOverride
from schemas.item import Item, ItemStatus
from schemas.source import SourceCreate
from service.app import create_app
from service.core.db import write_transaction
from service.core.settings import Settings
from service.dedup.runner import run_curation, run_redecide, run_refingerprint
from service.sources.definitions import create_source
from tests.conftest import LiveServer
from tests.dedup.integration.test_refingerprint import AnotherModel
from tests.dedup_support import HADOOP_MAPPING, MemoEncoder, curated_pool, hadoop_reports, ingest, planted, shared_encoder

PROBLEM = "application/problem+json"


@pytest.fixture
def encoder() -> MemoEncoder:
    """The real embedding model, loaded once for the test session."""
    return shared_encoder()


@pytest.fixture
def app(settings: Settings, engine: Engine) -> FastAPI:
    """The app with that model."""
    return create_app(settings, engine=engine, encoder=shared_encoder())


def _newest(engine: Engine, item_id: int) -> tuple[Item, DedupDecision]:
    with Session(engine) as session:
        item = session.get(Item, item_id)
        decision = session.exec(select(DedupDecision).where(DedupDecision.item_id == item_id).order_by(col(DedupDecision.id).desc())).first()
    assert item is not None and decision is not None
    return item, decision


def _changed(record: dict[str, Any], words: str) -> dict[str, Any]:
    """The record with its text changed, so a re-ingest sends it back to curation."""
    return {**record, "description": f"{record['description']} {words}"}


def _recurate(server: LiveServer, record: dict[str, Any], words: str, encoder: Any) -> None:
    assert ingest(server.engine, "hadoop", [_changed(record, words)]).updated == 1
    assert run_curation(server.engine, server.settings, encoder=encoder).decided == 1


def test_an_item_ruled_not_a_duplicate_stays_apart_through_curation_and_refingerprinting(live_server: LiveServer, encoder: MemoEncoder) -> None:
    ids = curated_pool(live_server.engine, live_server.settings, encoder)
    near = planted(hadoop_reports(60))["near"]
    copy, original = ids["PLANT-NEAR"], ids["13398683"]
    assert _newest(live_server.engine, copy)[0].duplicate_of == original
    with live_server.client("curate", name="test") as curator:
        ruled = curator.post(f"/v1/items/{copy}/not-duplicate", json={"note": "another bulk-delete change"})
    assert ruled.status_code == 200, ruled.text
    assert (ruled.json()["id"], ruled.json()["status"], ruled.json()["sealed"]) == (copy, "unique", False)
    with live_server.client("read") as reader:
        detail = reader.get(f"/v1/items/{copy}").json()
        other_side = reader.get(f"/v1/items/{original}").json()["overrides"]
    assert (detail["dedup"]["status"], detail["dedup"]["stage"], detail["dedup"]["duplicate_of"], detail["dedup"]["score"]) == ("unique", "override", None, None)
    ruling = detail["overrides"]
    assert [(o["kind"], o["item_id"], o["other_id"], o["note"], o["actor"], o["in_force"]) for o in ruling] == [
        ("not_duplicate", copy, original, "another bulk-delete change", "token:test", True)
    ]
    assert other_side == ruling
    _, decision = _newest(live_server.engine, copy)
    assert decision.details == {"rule": "override", "ruled_apart_from": original, "note": "another bulk-delete change", "actor": "token:test"}
    with live_server.client("admin") as admin:
        events = admin.get("/v1/audit", params={"action": "item.not_duplicate"}).json()["events"]
    assert [(event["object_id"], event["actor"], event["details"]["other_id"]) for event in events] == [(str(copy), "token:test", original)]

    # Its text changes and it is curated again: never matched with the original again.
    _recurate(live_server, near, "Seen again on another cluster.", encoder)
    item, decision = _newest(live_server.engine, copy)
    assert (item.status, item.duplicate_of) == (ItemStatus.UNIQUE.value, None) and decision.matched_item_id != original

    # Fingerprints recomputed for another model keep every decision; curated again under it, still apart.
    other_model = AnotherModel(encoder)
    with Session(live_server.engine) as session:
        decisions_before = session.exec(select(func.count()).select_from(DedupDecision)).one()
    assert run_refingerprint(live_server.engine, live_server.settings, encoder=other_model).items == len(ids)
    with Session(live_server.engine) as session:
        assert session.exec(select(func.count()).select_from(DedupDecision)).one() == decisions_before
    assert _newest(live_server.engine, copy)[0].status == ItemStatus.UNIQUE.value
    _recurate(live_server, near, "Seen a third time.", other_model)
    item, decision = _newest(live_server.engine, copy)
    assert (item.status, item.duplicate_of) == (ItemStatus.UNIQUE.value, None) and decision.matched_item_id != original


def test_a_duplicate_by_hand_stays_one_until_ruled_apart(live_server: LiveServer, encoder: MemoEncoder) -> None:
    ids = curated_pool(live_server.engine, live_server.settings, encoder)
    first, second = hadoop_reports(2)
    later, earlier = ids[first["id"]], ids[second["id"]]
    with live_server.client("curate") as curator:
        ruled = curator.post(f"/v1/items/{later}/duplicate-of", json={"item_id": earlier, "note": "one outage, reported twice"})
        assert ruled.status_code == 200, ruled.text
        assert ruled.json()["status"] == "duplicate"
        detail = curator.get(f"/v1/items/{later}")  # curate alone does not read
        assert detail.status_code == 403
    with live_server.client("read") as reader:
        dedup = reader.get(f"/v1/items/{later}").json()["dedup"]
    assert (dedup["status"], dedup["stage"], dedup["duplicate_of"]) == ("duplicate", "override", earlier)

    # Its text changes and it is curated again: the ruling decides, not the engine.
    _recurate(live_server, first, "Reopened after the fix.", encoder)
    item, decision = _newest(live_server.engine, later)
    assert (item.status, item.duplicate_of, decision.stage, decision.details["rule"], decision.matched_item_id) == ("duplicate", earlier, "override", "override", earlier)
    # Re-deciding every decided item under the current rules leaves people's rulings alone.
    run_redecide(live_server.engine, live_server.settings, encoder=encoder)
    redecided, in_force = _newest(live_server.engine, later)
    assert (redecided.status, redecided.duplicate_of, in_force.id) == (item.status, earlier, decision.id)

    # Ruled apart later: the newest ruling of the pair is in force.
    with live_server.client("curate") as curator:
        assert curator.post(f"/v1/items/{later}/not-duplicate", json={"note": "two outages after all"}).json()["status"] == "unique"
    _recurate(live_server, first, "Reopened once more.", encoder)
    item, decision = _newest(live_server.engine, later)
    assert item.status == ItemStatus.UNIQUE.value and decision.matched_item_id != earlier
    with live_server.client("read") as reader:
        assert [(o["kind"], o["in_force"]) for o in reader.get(f"/v1/items/{later}").json()["overrides"]] == [("duplicate_of", False), ("not_duplicate", True)]
    with live_server.client("admin") as admin:
        assert [event["object_id"] for event in admin.get("/v1/audit", params={"action": "item.duplicate_of"}).json()["events"]] == [str(later)]


def test_a_duplicate_of_a_reference_item_is_contaminated(live_server: LiveServer, encoder: MemoEncoder) -> None:
    ids = curated_pool(live_server.engine, live_server.settings, encoder)
    with write_transaction(live_server.engine) as session:
        mapping = load_mapping(HADOOP_MAPPING).model_dump(mode="json", exclude_defaults=True)
        create_source(session=session, data=SourceCreate(name="bench", kind="reference", mapping=mapping), secret_key="x" * 40, actor="test")
        session.commit()
    bench = {"id": "B-1", "created": "2020-01-01T00:00:00", "title": "Checkout returns HTTP 500", "description": "The checkout service answers 500 to every order."}
    ingest(live_server.engine, "bench", [bench])
    assert run_curation(live_server.engine, live_server.settings, encoder=encoder).references == 1
    with Session(live_server.engine) as session:
        reference = session.exec(select(Item.id).where(Item.external_id == "B-1")).one()
    item = ids[hadoop_reports(1)[0]["id"]]
    with live_server.client("curate") as curator:
        ruled = curator.post(f"/v1/items/{item}/duplicate-of", json={"item_id": reference, "note": "copied from the benchmark"})
        assert ruled.status_code == 200 and ruled.json()["status"] == "contaminated", ruled.text
        refused = curator.post(f"/v1/items/{reference}/duplicate-of", json={"item_id": item, "note": "x"})
    assert (refused.status_code, refused.json()["reason"]) == (409, "reference_item")


def test_each_refusal_is_the_documented_problem(live_server: LiveServer, encoder: MemoEncoder) -> None:
    ids = curated_pool(live_server.engine, live_server.settings, encoder)
    ingest(live_server.engine, "hadoop", hadoop_reports(61)[60:])
    with Session(live_server.engine) as session:
        candidate = session.exec(select(Item.id).where(Item.status == ItemStatus.CANDIDATE.value)).one()
    unique, other = ids[hadoop_reports(1)[0]["id"]], ids[hadoop_reports(2)[1]["id"]]
    exact, its_original = ids["PLANT-EXACT"], ids["13395121"]
    with live_server.client("curate") as curator:
        assert curator.post(f"/v1/items/{other}/approve").status_code == 200
        cases = {
            "note_required": curator.post(f"/v1/items/{exact}/not-duplicate", json={"note": "   "}),
            "not_a_duplicate": curator.post(f"/v1/items/{unique}/not-duplicate", json={"note": "x"}),
            "not_found": curator.post("/v1/items/999999/not-duplicate", json={"note": "x"}),
            "same_item": curator.post(f"/v1/items/{unique}/duplicate-of", json={"item_id": unique, "note": "x"}),
            "other_not_found": curator.post(f"/v1/items/{unique}/duplicate-of", json={"item_id": 999999, "note": "x"}),
            "other_is_duplicate": curator.post(f"/v1/items/{unique}/duplicate-of", json={"item_id": exact, "note": "x"}),
            "not_curated": curator.post(f"/v1/items/{candidate}/duplicate-of", json={"item_id": unique, "note": "x"}),
            "other_not_curated": curator.post(f"/v1/items/{unique}/duplicate-of", json={"item_id": candidate, "note": "x"}),
            "reviewed": curator.post(f"/v1/items/{other}/duplicate-of", json={"item_id": unique, "note": "x"}),
        }
        missing_note = curator.post(f"/v1/items/{exact}/not-duplicate", json={})
        empty_note = curator.post(f"/v1/items/{unique}/duplicate-of", json={"item_id": other, "note": ""})
    expected = {
        "note_required": 422,
        "not_a_duplicate": 409,
        "not_found": 404,
        "same_item": 422,
        "other_not_found": 404,
        "other_is_duplicate": 409,
        "not_curated": 409,
        "other_not_curated": 409,
        "reviewed": 409,
    }
    for name, response in cases.items():
        assert response.headers["content-type"] == PROBLEM, name
        reason = "not_found" if name == "other_not_found" else name
        assert (response.status_code, response.json()["reason"]) == (expected[name], reason), (name, response.text)
    assert "999999" in cases["other_not_found"].json()["detail"]
    assert f"rule item {unique} a duplicate of item {its_original} instead" in cases["other_is_duplicate"].json()["detail"]
    assert "curate first" in cases["not_curated"].json()["detail"]
    for response in (missing_note, empty_note):
        assert response.status_code == 422 and response.headers["content-type"] == PROBLEM
        assert [error["location"] for error in response.json()["errors"]] == ["body.note"]
    with live_server.client("read") as reader:
        forbidden = reader.post(f"/v1/items/{exact}/not-duplicate", json={"note": "x"})
    assert forbidden.status_code == 403 and "'curate' scope" in forbidden.json()["detail"]
    with httpx.Client(base_url=live_server.url) as anonymous:
        assert anonymous.post(f"/v1/items/{exact}/duplicate-of", json={"item_id": unique, "note": "x"}).status_code == 401
    with Session(live_server.engine) as session:
        assert session.exec(select(func.count()).select_from(DedupOverride)).one() == 0
        assert session.get(Item, exact) is not None and _newest(live_server.engine, exact)[0].status == ItemStatus.DUPLICATE.value


def _expected_figures(engine: Engine) -> dict[str, Any]:
    """The figures computed plainly from the rows, for comparison with the service's queries."""
    with Session(engine) as session:
        items = list(session.exec(select(Item)))
        newest: dict[int, DedupDecision] = {}
        for decision in session.exec(select(DedupDecision).order_by(col(DedupDecision.id))):
            newest[decision.item_id] = decision
    statuses = Counter(item.status for item in items)
    decided = len(items) - statuses["candidate"] - statuses["reference"]
    roots = {item.id: item.duplicate_of or item.id for item in items}
    sizes = Counter(roots[item.id] for item in items)  # the pools here hold no chains
    return {
        "items": len(items),
        "by_status": {status.value: statuses[status.value] for status in ItemStatus},
        "decisions": Counter((decision.stage, decision.details.get("rule")) for decision in newest.values()),
        "cluster_sizes": sorted(Counter(sizes.values()).items()),
        "largest": sorted(((size, root) for root, size in sizes.items() if size > 1), key=lambda entry: (-entry[0], entry[1])),
        "duplicate_share": round(statuses["duplicate"] / decided, 4),
    }


def _check_figures(stats: dict[str, Any], engine: Engine) -> None:
    expected = _expected_figures(engine)
    assert stats["items"] == expected["items"] and stats["by_status"] == expected["by_status"]
    assert Counter({(row["stage"], row["rule"]): row["count"] for row in stats["decisions"]}) == expected["decisions"]
    assert [(row["size"], row["clusters"]) for row in stats["cluster_sizes"]] == expected["cluster_sizes"]
    assert [(row["size"], row["representative"]) for row in stats["largest_clusters"]] == expected["largest"]
    assert stats["duplicate_share"] == expected["duplicate_share"]


def test_stats_and_low_margin_duplicates_show_what_dedup_decided(live_server: LiveServer, encoder: MemoEncoder) -> None:
    ids = curated_pool(live_server.engine, live_server.settings, encoder)
    with live_server.client("read") as reader:
        stats = reader.get("/v1/dedup/stats").json()
    _check_figures(stats, live_server.engine)
    plants = planted(hadoop_reports(60))
    assert {ids[plant["of"]] for plant in plants.values()} | {ids["PLANT-EARLIER"]} >= {row["representative"] for row in stats["largest_clusters"]}
    assert stats["by_status"]["duplicate"] == 4 and stats["overrides"] == {"not_duplicate": 0, "duplicate_of": 0}
    with Session(live_server.engine) as session:
        titles = {item.id: item.title for item in session.exec(select(Item))}
    assert all(row["title"] == titles[row["representative"]] and not row["sealed"] for row in stats["largest_clusters"])

    # Close calls: the paraphrase (embedding) and the late earlier incident's duplicate (MinHash), by margin.
    margins = {name: _newest(live_server.engine, ids[name])[1].details["margin"] for name in ("PLANT-PARAPHRASE", "13392716", "PLANT-NEAR")}
    closest, next_closest = sorted(("PLANT-PARAPHRASE", "13392716"), key=margins.__getitem__)
    with live_server.client("curate") as curator:
        one = curator.get("/v1/dedup/low-margin", params={"margin": margins[closest] + 0.0001}).json()
        both = curator.get("/v1/dedup/low-margin", params={"margin": margins[next_closest] + 0.0001, "source": "hadoop"}).json()
        assert curator.get("/v1/dedup/low-margin", params={"margin": 1, "source": "nope"}).json() == []
        assert len(curator.get("/v1/dedup/low-margin", params={"margin": 1, "limit": 1}).json()) == 1
        every = {entry["item_id"] for entry in curator.get("/v1/dedup/low-margin", params={"margin": 1}).json()}
        assert curator.get("/v1/dedup/low-margin", params={"margin": 0}).status_code == 422
    assert [entry["item_id"] for entry in both] == [ids[closest], ids[next_closest]]
    entry = one[0]
    assert len(one) == 1 and entry["item_id"] == ids[closest]
    _, decision = _newest(live_server.engine, ids[closest])
    assert (entry["matched_item_id"], entry["stage"], entry["rule"], entry["score"], entry["margin"], entry["source"]) == (
        decision.matched_item_id,
        decision.stage,
        decision.details["rule"],
        decision.score,
        margins[closest],
        "hadoop",
    )
    assert every == {ids["PLANT-PARAPHRASE"], ids["13392716"], ids["PLANT-NEAR"]}  # never the exact copy
    with live_server.client("read") as reader:
        assert reader.get("/v1/dedup/low-margin").status_code == 403

    # Rulings move the figures: one pair ruled apart, one item joined to the exact copy's cluster.
    joined = ids[hadoop_reports(1)[0]["id"]]
    with live_server.client("curate") as curator:
        assert curator.post(f"/v1/items/{ids['PLANT-NEAR']}/not-duplicate", json={"note": "apart"}).status_code == 200
        assert curator.post(f"/v1/items/{joined}/duplicate-of", json={"item_id": ids["13395121"], "note": "same"}).status_code == 200
        assert ids["PLANT-NEAR"] not in {entry["item_id"] for entry in curator.get("/v1/dedup/low-margin", params={"margin": 1}).json()}
    with live_server.client("read") as reader:
        stats = reader.get("/v1/dedup/stats").json()
    _check_figures(stats, live_server.engine)
    assert stats["overrides"] == {"not_duplicate": 1, "duplicate_of": 1}
    assert (stats["largest_clusters"][0]["representative"], stats["largest_clusters"][0]["size"]) == (ids["13395121"], 3)
    assert Counter({(row["stage"], row["rule"]): row["count"] for row in stats["decisions"]})[("override", "override")] == 2

    # Once the source's items are bound for a sealed slice, titles and close calls are withheld.
    with live_server.client("admin") as admin:
        created = admin.post("/v1/evals", json={"name": "all-sealed", "sources": ["hadoop"], "sealed_fraction": 1.0})
        assert created.status_code == 201, created.text
        sealed = admin.get("/v1/dedup/stats").json()
        assert admin.get("/v1/dedup/low-margin", params={"margin": 1}).json() == []
        # A ruling on an item nobody here can read is refused (it could move the item to the dev side).
        refused = admin.post(f"/v1/items/{ids['PLANT-PARAPHRASE']}/not-duplicate", json={"note": "apart"})
        detail = admin.get(f"/v1/items/{ids['PLANT-NEAR']}").json()
    assert refused.status_code == 403 and refused.json()["reason"] == "sealed_item"
    assert str(ids["PLANT-PARAPHRASE"]) in refused.json()["detail"] and "sealed-review" in refused.json()["detail"]
    assert (detail["sealed"], detail["overrides"], detail["dedup"]["stage"]) == (True, [], None)
    assert sealed["largest_clusters"] and all(row["title"] == "" and row["sealed"] for row in sealed["largest_clusters"])
    assert [row["representative"] for row in sealed["largest_clusters"]] == [row["representative"] for row in stats["largest_clusters"]]
