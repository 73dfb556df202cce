"""Runs on both backends over the HTTP API: the registry, the exposure ledger and its reports,
exposure marks retiring items at the next refresh, the sealed-run gate and budget, results with
their validation and interval, idempotent starts, paging, and the audit of it all."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from schemas.audit import AuditEvent
from schemas.common import utcnow
from schemas.item import Item
from schemas.model_registry import TrainsOnInputs
from schemas.runs import RunItem
from service.evals.refresh import refresh_eval
from tests.conftest import TEST_SECRET_KEY
from tests.run_support import REFRESH_AT, auth, register, released_eval, token


@pytest.fixture
def api(app: FastAPI) -> Iterator[TestClient]:
    with TestClient(app) as client:
        yield client


def test_registry_needs_admin_to_change_and_audits_terms_changes(engine: Engine, api: TestClient) -> None:
    admin, reader = auth(token(engine, "admin", name="boss")), auth(token(engine, "read", name="reader"))
    model = {"name": "acme/llm-1", "provider": "acme", "training_cutoff": "2023-12-01", "release_date": "2024-02-01"}
    assert api.post("/v1/models", json=model, headers=reader).status_code == 403
    assert api.post("/v1/models", json=model, headers=admin).status_code == 201
    assert api.post("/v1/models", json=model, headers=admin).status_code == 409
    assert api.get("/v1/models/acme/llm-1", headers=reader).json()["training_cutoff"] == "2023-12-01"
    endpoint = {"name": "acme-prod", "base_url": "https://api.acme.test/v1", "model": "acme/llm-1"}
    created = api.post("/v1/endpoints", json=endpoint, headers=admin).json()
    assert (created["trains_on_inputs"], created["terms_checked_at"], created["sealed_allowed"]) == ("unknown", None, False)
    assert api.post("/v1/endpoints", json={**endpoint, "name": "x", "model": "nope"}, headers=admin).status_code == 404
    bad = api.post("/v1/endpoints", json={**endpoint, "name": "y", "base_url": "ftp://x"}, headers=admin)
    assert bad.status_code == 422 and "base_url" in bad.json()["detail"]

    changed = api.patch("/v1/endpoints/acme-prod", json={"trains_on_inputs": "no", "retention_days": 0, "terms_url": "https://acme.test/terms"}, headers=admin).json()
    assert (changed["trains_on_inputs"], changed["checked_by"], changed["terms_age_days"], changed["sealed_allowed"]) == ("no", "token:boss", 0, True)
    stale = (utcnow() - timedelta(days=91)).isoformat()
    changed = api.patch("/v1/endpoints/acme-prod", json={"terms_checked_at": stale, "checked_by": "legal"}, headers=admin).json()
    assert (changed["checked_by"], changed["terms_age_days"], changed["sealed_allowed"]) == ("legal", 91, False)
    assert [e["name"] for e in api.get("/v1/endpoints", params={"model": "acme/llm-1"}, headers=reader).json()] == ["acme-prod"]
    with Session(engine) as session:
        events = session.exec(select(AuditEvent).where(AuditEvent.action == "endpoint.update").order_by(col(AuditEvent.id))).all()
    assert [event.details["terms_before"]["trains_on_inputs"] for event in events] == ["unknown", "no"]
    assert api.delete("/v1/endpoints/acme-prod", headers=admin).status_code == 204


def test_dev_runs_are_ledgered_and_an_exposing_endpoint_retires_exactly_its_items(engine: Engine, api: TestClient) -> None:
    released = released_eval(engine)
    register(engine)
    reader = auth(token(engine, "read", name="pipeline"))
    safe = api.post("/v1/evals/ops/runs", json={"model": "m1", "endpoint": "m1-no"}, headers=reader)
    assert safe.status_code == 201, safe.text
    body = safe.json()
    assert body["split"] == "dev" and body["warning"] is None and body["canary"].startswith("GOLDENSET CANARY GUID ")
    assert sorted(item["item_id"] for item in body["items"]) == released.dev
    assert all(item["split"] == "dev" for item in body["items"])

    # Only the items after a date go to the training endpoint.
    dates = sorted(item["occurred_at"] for item in body["items"])
    after = dates[len(dates) // 2]
    risky = api.post("/v1/evals/ops/runs", json={"model": "m1", "endpoint": "m1-yes", "occurred_after": after}, headers=reader).json()
    sent = sorted(item["item_id"] for item in risky["items"])
    assert sent and len(sent) < len(released.dev) and risky["exposes_items"] and "leave the eval" in risky["warning"]
    with Session(engine) as session:
        exposed = sorted(item.id for item in session.exec(select(Item).where(col(Item.exposed_at).is_not(None))) if item.id is not None)
        assert len(session.exec(select(RunItem)).all()) == len(released.dev) + len(sent)
    assert exposed == sent

    one = api.get(f"/v1/items/{sent[0]}/exposures", headers=reader).json()
    assert [(e["endpoint"], e["trains_on_inputs"], e["exposes_items"]) for e in one["exposures"]] == [("m1-no", "no", False), ("m1-yes", "yes", True)]
    assert "m1-yes" in one["exposed_reason"]
    report = api.get("/v1/evals/ops/exposure", headers=reader).json()["releases"][0]
    shares = {entry["endpoint"]: entry for entry in report["endpoints"]}
    total = len(released.dev) + len(released.sealed)
    assert report["items"] == total and report["exposed_items"] == len(sent)
    assert (shares["m1-no"]["items"], shares["m1-no"]["runs"], shares["m1-no"]["sealed_items"]) == (len(released.dev), 1, 0)
    assert shares["m1-yes"]["share"] == round(len(sent) / total, 4) and shares["m1-yes"]["trains_on_inputs"] == "yes"

    second = refresh_eval(engine, name="ops", at=REFRESH_AT + timedelta(days=31), secret_key=TEST_SECRET_KEY, actor="test").release
    assert second.number == 2
    assert {entry["item_id"]: entry["reason"] for entry in second.diff["retired"]} == dict.fromkeys(sent, "exposed")
    assert second.dev_count == len(released.dev) - len(sent) and second.sealed_count == len(released.sealed)


@pytest.mark.parametrize(
    ("endpoint", "scopes", "condition"),
    [
        ("m1-no", ("read",), "sealed_scope"),
        ("m1-unknown", ("read", "sealed"), "terms_unknown"),
        ("m1-yes", ("read", "sealed"), "trains_on_inputs"),
        ("stale-no", ("read", "sealed"), "terms_stale"),
    ],
)
def test_sealed_runs_refused_name_the_failing_condition(engine: Engine, api: TestClient, endpoint: str, scopes: tuple[str, ...], condition: str) -> None:
    released_eval(engine)
    register(engine)
    register(engine, model="m2", endpoints={"stale-no": TrainsOnInputs.NO}, checked_days_ago=120)
    model = "m2" if endpoint == "stale-no" else "m1"
    refused = api.post("/v1/evals/ops/runs", json={"model": model, "endpoint": endpoint, "split": "sealed"}, headers=auth(token(engine, *scopes)))
    assert refused.status_code == 403
    problem = refused.json()
    assert problem["condition"] == condition and problem["title"] == "Sealed run refused"
    assert endpoint in problem["detail"] if condition != "sealed_scope" else "'sealed' scope" in problem["detail"]
    with Session(engine) as session:
        assert session.exec(select(RunItem)).all() == []
        event = session.exec(select(AuditEvent).where(AuditEvent.action == "run.sealed_refused")).one()
    assert event.details["condition"] == condition


def test_sealed_runs_pass_the_gate_until_the_budget_is_spent(engine: Engine, api: TestClient) -> None:
    released = released_eval(engine, budget=2)
    register(engine)
    sealed = auth(token(engine, "read", "sealed", name="final"))
    request = {"model": "m1", "endpoint": "m1-no", "split": "sealed"}
    first = api.post("/v1/evals/ops/runs", json=request, headers={**sealed, "Idempotency-Key": "k1"})
    assert first.status_code == 201, first.text
    assert sorted(item["item_id"] for item in first.json()["items"]) == released.sealed and not first.json()["exposes_items"]
    retried = api.post("/v1/evals/ops/runs", json=request, headers={**sealed, "Idempotency-Key": "k1"})
    assert retried.status_code == 201 and retried.json()["id"] == first.json()["id"]
    misused = api.post("/v1/evals/ops/runs", json={**request, "endpoint": "m1-unknown"}, headers={**sealed, "Idempotency-Key": "k1"})
    assert misused.status_code == 422
    assert api.post("/v1/evals/ops/runs", json=request, headers=sealed).status_code == 201
    spent = api.post("/v1/evals/ops/runs", json=request, headers=sealed)
    assert spent.status_code == 403 and spent.json()["condition"] == "sealed_budget"
    # Sealed run items are readable again only with the sealed scope; the budget is not charged again.
    run_id = first.json()["id"]
    assert api.get(f"/v1/runs/{run_id}/items", headers=auth(token(engine, "read", name="r"))).status_code == 403
    assert len(api.get(f"/v1/runs/{run_id}/items", headers=sealed).json()["items"]) == len(released.sealed)
    # Its per-item results too (which sealed items a model fails); its mean is for every reader.
    scores = [{"item_id": item_id, "score": 1.0} for item_id in released.sealed]
    assert api.post(f"/v1/runs/{run_id}/results", json={"results": scores}, headers=sealed).status_code in (200, 201)
    reader = auth(token(engine, "read", name="reader-of-results"))
    withheld = api.get(f"/v1/runs/{run_id}/results", headers=reader)
    assert withheld.status_code == 403 and withheld.json()["reason"] == "sealed_results" and f"GET /v1/runs/{run_id}" in withheld.json()["detail"]
    assert len(api.get(f"/v1/runs/{run_id}/results", headers=sealed).json()) == len(released.sealed)
    assert api.get(f"/v1/runs/{run_id}", headers=reader).json()["scored"] == len(released.sealed)
    with Session(engine) as session:
        assert session.exec(select(Item).where(col(Item.exposed_at).is_not(None))).all() == []
    admin = auth(token(engine, "admin", name="auditor"))
    highlighted = api.get("/v1/audit", params={"sealed": "true", "token": "final"}, headers=admin).json()["events"]
    assert [event["action"] for event in highlighted] == [
        "run.sealed_items_read",
        "run.sealed_refused",
        "run.sealed_start",
        "release.sealed_run",
        "run.sealed_start",
        "release.sealed_run",
    ]
    assert all(event["sealed"] for event in highlighted)


def test_results_are_validated_against_the_run_and_summarised(engine: Engine, api: TestClient) -> None:
    released_eval(engine)
    register(engine)
    owner = auth(token(engine, "read", name="owner"))
    run = api.post("/v1/evals/ops/runs", json={"model": "m1", "endpoint": "m1-no"}, headers=owner).json()
    ids = [item["item_id"] for item in run["items"]]
    outsider = max(ids) + 1000
    unknown = api.post(f"/v1/runs/{run['id']}/results", json={"results": [{"item_id": ids[0], "score": 1}, {"item_id": outsider, "score": 0}]}, headers=owner)
    assert unknown.status_code == 422 and unknown.json()["item_ids"] == [outsider] and str(outsider) in unknown.json()["detail"]
    out_of_range = api.post(f"/v1/runs/{run['id']}/results", json={"results": [{"item_id": ids[0], "score": 1.5}]}, headers=owner)
    assert out_of_range.status_code == 422 and "score" in out_of_range.json()["detail"]
    twice = api.post(f"/v1/runs/{run['id']}/results", json={"results": [{"item_id": ids[0], "score": 1}, {"item_id": ids[0], "score": 1}]}, headers=owner)
    assert twice.status_code == 422
    other = api.post(f"/v1/runs/{run['id']}/results", json={"results": [{"item_id": ids[0], "score": 1}]}, headers=auth(token(engine, "read", name="other")))
    assert other.status_code == 403

    half = len(ids) // 2
    binary = [{"item_id": item_id, "score": 1.0 if n % 3 else 0.0, "human_success": 0.5} for n, item_id in enumerate(ids[:half])]
    accepted = api.post(f"/v1/runs/{run['id']}/results", json={"results": binary}, headers=owner).json()
    assert (accepted["stored"], accepted["unchanged"], accepted["scored"], accepted["remaining"]) == (half, 0, half, len(ids) - half)
    again = api.post(f"/v1/runs/{run['id']}/results", json={"results": binary[:3]}, headers=owner).json()
    assert (again["stored"], again["unchanged"]) == (0, 3)
    conflict = api.post(f"/v1/runs/{run['id']}/results", json={"results": [{**binary[0], "score": 0.5}]}, headers=owner)
    assert conflict.status_code == 409 and conflict.json()["item_ids"] == [ids[0]]

    summary = api.get(f"/v1/runs/{run['id']}", headers=owner).json()
    successes = sum(1 for n in range(half) if n % 3)
    score = summary["score"]
    assert score["method"] == "wilson" and score["n"] == half and score["mean"] == pytest.approx(successes / half)
    assert score["low"] < score["mean"] < score["high"] and summary["human_success_mean"] == 0.5 and summary["training_cutoff"] == "2023-12-01"
    api.post(f"/v1/runs/{run['id']}/results", json={"results": [{"item_id": item_id, "score": 0.25} for item_id in ids[half:]]}, headers=owner)
    summary = api.get(f"/v1/runs/{run['id']}", headers=owner).json()
    assert summary["score"]["method"] == "bootstrap" and summary["remaining"] == 0
    assert summary["score"]["low"] <= summary["score"]["mean"] <= summary["score"]["high"]
    stored = api.get(f"/v1/runs/{run['id']}/results", headers=owner).json()
    assert len(stored) == len(ids) and all(entry["occurred_at"].startswith("2024-") for entry in stored)


def test_run_items_page_in_order_and_every_content_read_is_audited(engine: Engine, api: TestClient) -> None:
    released = released_eval(engine)
    register(engine)
    reader = auth(token(engine, "read", name="pipeline"))
    run = api.post("/v1/evals/ops/runs", json={"model": "m1", "endpoint": "m1-no"}, headers=reader).json()
    seen, cursor, pages = [], None, 0
    while True:
        page = api.get(f"/v1/runs/{run['id']}/items", params={"limit": 7, **({"cursor": cursor} if cursor else {})}, headers=reader).json()
        seen += [item["item_id"] for item in page["items"]]
        pages += 1
        assert page["canary"] == run["canary"]
        if not (cursor := page["next_cursor"]):
            break
    assert seen == [item["item_id"] for item in run["items"]] and pages == -(-len(released.dev) // 7)
    assert api.get(f"/v1/runs/{run['id']}/items", params={"cursor": "!!"}, headers=reader).status_code == 422
    assert api.get("/v1/evals/ops/releases/1/items", headers=reader).status_code == 200
    assert api.get(f"/v1/items/{released.dev[0]}", headers=reader).status_code == 200

    admin = auth(token(engine, "admin", name="auditor"))
    assert api.get("/v1/audit", headers=reader).status_code == 403
    events = api.get("/v1/audit", params={"token": "pipeline"}, headers=admin).json()["events"]
    actions = [event["action"] for event in events]
    assert actions == ["item.read", "release.items_read", *["run.items_read"] * pages, "run.start"]
    assert events[1]["details"]["item_ids"] == released.dev and events[1]["details"]["endpoint"] == "GET /v1/evals/ops/releases/1/items"
    assert events[-1]["count"] == len(released.dev) and not any(event["sealed"] for event in events)
    runs_only = api.get("/v1/audit", params={"action": "run.*", "actor": "token:pipeline", "limit": 2}, headers=admin).json()
    following = api.get("/v1/audit", params={"action": "run.*", "actor": "token:pipeline", "limit": 2, "cursor": runs_only["next_cursor"]}, headers=admin).json()
    assert [e["id"] for e in runs_only["events"] + following["events"]] == sorted((e["id"] for e in events if e["action"].startswith("run.")), reverse=True)[:4]
    late = api.get("/v1/audit", params={"since": (utcnow() + timedelta(minutes=1)).isoformat()}, headers=admin).json()
    assert late["events"] == []
    early = api.get("/v1/audit", params={"until": (utcnow() - timedelta(days=1)).isoformat()}, headers=admin).json()
    assert early["events"] == []
    assert api.get("/v1/audit", params={"since": "2024-01-01T00:00:00"}, headers=admin).status_code == 422
