"""Evals, review and releases over HTTP on a real server: scopes, problems, caching headers,
immutability after an item changes, and the sealed slice's scope and budget."""

from __future__ import annotations

import json

from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from curation.releases.content import CONTENT_FIELDS, canonical_json, content_digest
from schemas.audit import AuditEvent
from tests.conftest import LiveServer
from tests.eval_support import ingest_and_curate
from tests.eval_support import item_ids_by_external_id as _ids
from tests.evals.integration.test_refresh import kev


def test_define_review_refresh_and_serve_an_eval(live_server: LiveServer, engine: Engine) -> None:
    ingest_and_curate(engine, "kev", [kev(n, f"2024-02-{n:02d}") for n in range(1, 26)])
    ids = _ids(engine)
    # The curator may read sealed-bound items, so it may approve them (none is approved unread).
    admin, reader, curator = live_server.client("admin"), live_server.client("read"), live_server.client("curate", "sealed")

    definition = {"name": "ops", "sources": ["kev"], "target_size": 20, "sealed_fraction": 0.5, "sealed_read_budget": 2}  # both splits hold items but for about 1 key in 130,000
    assert reader.post("/v1/evals", json=definition).status_code == 403
    created = admin.post("/v1/evals", json=definition)
    assert created.status_code == 201, created.text
    body = created.json()
    assert body["canary"].startswith("GOLDENSET CANARY GUID ") and "seal_key" not in body
    assert (body["schedule"], body["max_age_days"], body["approval_policy"], body["latest_release"]) == ("0 3 1 * *", 365, "manual", None)
    assert admin.post("/v1/evals", json=definition).status_code == 409
    unknown = admin.post("/v1/evals", json={**definition, "name": "other", "sources": ["nope"]})
    assert unknown.status_code == 422 and "unknown source(s): nope" in unknown.json()["detail"]
    bad_cron = admin.post("/v1/evals", json={**definition, "name": "other", "schedule": "monthly"})
    assert bad_cron.status_code == 422 and "five fields" in bad_cron.json()["detail"]
    assert [entry["name"] for entry in reader.get("/v1/evals").json()] == ["ops"]
    patched = admin.patch("/v1/evals/ops", json={"description": "ops incidents", "target_size": 18})
    assert patched.status_code == 200 and patched.json()["target_size"] == 18
    unchanged = admin.patch("/v1/evals/ops", json={"schedule": None})  # a null for a required setting leaves it as it is
    assert unchanged.status_code == 200 and unchanged.json()["schedule"] == patched.json()["schedule"]

    # Review: single decisions, problems, and a bulk form that keeps the good decisions.
    assert reader.post(f"/v1/items/{ids['CVE-2024-0001']}/approve").status_code == 403
    approved = curator.post(f"/v1/items/{ids['CVE-2024-0001']}/approve", json={"reason": "clear and gradable"})
    assert approved.status_code == 200 and approved.json()["status"] == "approved"
    again = curator.post(f"/v1/items/{ids['CVE-2024-0001']}/approve")
    assert again.status_code == 409 and "already approved" in again.json()["detail"]
    assert curator.post(f"/v1/items/{ids['CVE-2024-0002']}/reject", json={}).status_code == 422
    assert curator.post("/v1/items/999999/approve").status_code == 404
    rejected = curator.post(f"/v1/items/{ids['CVE-2024-0002']}/reject", json={"reason": "duplicate of an internal ticket"})
    assert rejected.json()["status"] == "rejected"
    bulk = curator.post(
        "/v1/items/review",
        json={"decisions": [{"item_id": ids[f"CVE-2024-{n:04d}"], "decision": "approve"} for n in range(3, 26)] + [{"item_id": ids["CVE-2024-0002"], "decision": "approve"}]},
    )
    assert bulk.status_code == 200 and len(bulk.json()["approved"]) == 23
    assert [(error["position"], error["reason"]) for error in bulk.json()["errors"]] == [(23, "not_reviewable")]

    # Refresh: 201 with a new release, 200 with the same one for the same period.
    assert reader.post("/v1/evals/ops/refresh").status_code == 403
    first = admin.post("/v1/evals/ops/refresh", params={"at": "2024-03-05T00:00:00Z"})
    assert first.status_code == 201, first.text
    release = first.json()["release"]
    assert (release["number"], release["period_start"], release["dev_count"] + release["sealed_count"]) == (1, "2024-03-01T03:00:00Z", 18)
    repeat = admin.post("/v1/evals/ops/refresh", params={"at": "2024-03-20T00:00:00Z"})
    assert repeat.status_code == 200 and repeat.json() == {"created": False, "release": release}
    assert admin.post("/v1/evals/ops/refresh", params={"at": "2024-02-05T00:00:00Z"}).status_code == 409

    # The manifest: digests only, strong ETag, immutable when numbered, revalidated as latest.
    manifest = reader.get("/v1/evals/ops/releases/1")
    assert manifest.status_code == 200 and manifest.headers["cache-control"] == "private, max-age=31536000, immutable"
    etag = manifest.headers["etag"]
    assert etag.startswith('"') and not etag.startswith("W/")
    assert reader.get("/v1/evals/ops/releases/1", headers={"If-None-Match": etag}).status_code == 304
    latest = reader.get("/v1/evals/ops/releases/latest")
    assert latest.content == manifest.content and latest.headers["cache-control"] == "no-cache"
    entries = manifest.json()["items"]
    assert set(entries[0]) == {"item_id", "split", "content_digest"} and len(entries) == 18
    sealed_ids = {entry["item_id"] for entry in entries if entry["split"] == "sealed"}
    assert sealed_ids and len(sealed_ids) < 18
    assert reader.get("/v1/evals/ops/releases").json()[0]["dev_merkle_root"] == manifest.json()["dev_merkle_root"]
    assert reader.get("/v1/evals/ops/releases/7").status_code == 404

    # Dev items never include sealed ones; occurred_after scores only later incidents.
    dev = reader.get("/v1/evals/ops/releases/1/items", params={"split": "dev"}).json()
    assert {item["item_id"] for item in dev["items"]} == {entry["item_id"] for entry in entries} - sealed_ids
    assert dev["canary"] == body["canary"]
    after = reader.get("/v1/evals/ops/releases/1/items", params={"occurred_after": "2024-02-20T00:00:00Z"}).json()["items"]
    assert after and all(item["content"]["occurred_at"] >= "2024-02-20" for item in after)
    assert reader.get("/v1/evals/ops/releases/1/items", params={"occurred_after": "2024-02-20T00:00:00"}).status_code == 422
    # A date is ISO 8601 text, as documented: epoch seconds are refused, naming the parameter.
    as_epoch = reader.get("/v1/evals/ops/releases/1/items", params={"occurred_after": "1708387200"})
    assert as_epoch.status_code == 422 and as_epoch.json()["errors"][0]["location"] == "query.occurred_after"
    export = reader.get("/v1/evals/ops/releases/1/export.jsonl")
    lines = export.text.splitlines()
    rows = [json.loads(line) for line in lines]
    assert export.headers["content-type"].startswith("application/x-ndjson") and len(rows) == len(dev["items"])
    assert {row["metadata"]["canary"] for row in rows} == {body["canary"]} and {row["metadata"]["release"] for row in rows} == {1}
    assert {row["id"] for row in rows} == {item["item_id"] for item in dev["items"]}
    by_id = {item["item_id"]: item for item in dev["items"]}
    for row in rows:  # the released content comes back from the row, and hashes to its digest
        content = {key: row[key] for key in CONTENT_FIELDS if key != "metadata"} | {"metadata": json.loads(row["metadata"]["item"])}
        assert content == by_id[row["id"]]["content"] and content_digest(canonical_json(content)) == row["content_digest"]

    # An item changes at its source after the release: the release does not.
    ingest_and_curate(engine, "kev", [kev(5, "2024-02-05", "Entirely rewritten text after the release was published.")])
    assert reader.get("/v1/evals/ops/releases/1").content == manifest.content
    assert reader.get("/v1/evals/ops/releases/1/export.jsonl").content == export.content
    assert "rewritten" not in reader.get("/v1/evals/ops/releases/1/items").text

    # Sealed content: only with the sealed scope, never cached, counted against the budget.
    for client in (reader, admin):
        refused = client.get("/v1/evals/ops/releases/1/items", params={"split": "sealed"})
        assert refused.status_code == 403 and "'sealed' scope" in refused.json()["detail"]
    sealed_client = live_server.client("sealed")
    read = sealed_client.get("/v1/evals/ops/releases/1/items", params={"split": "sealed"})
    assert read.status_code == 200 and read.headers["cache-control"] == "no-store" and "etag" not in read.headers
    assert {item["item_id"] for item in read.json()["items"]} == sealed_ids
    sealed_export = sealed_client.get("/v1/evals/ops/releases/1/export.jsonl", params={"split": "sealed"})
    assert sealed_export.status_code == 200 and len(sealed_export.text.splitlines()) == len(sealed_ids)
    spent = sealed_client.get("/v1/evals/ops/releases/1/items", params={"split": "sealed"})
    assert spent.status_code == 403
    problem = spent.json()
    assert (problem["budget"], problem["used"]) == (2, 2) and "sealed-read budget of eval 'ops' is 2 per release" in problem["detail"]
    with Session(engine) as session:
        actions = [event.action for event in session.exec(select(AuditEvent).where(col(AuditEvent.action).startswith("release.")).order_by(col(AuditEvent.id)))]
    budget = {"release.create", "release.sealed_read", "release.sealed_refused"}
    assert [action for action in actions if action in budget] == ["release.create", "release.sealed_read", "release.sealed_read", "release.sealed_refused"]
