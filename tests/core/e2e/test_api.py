"""The REST API over a real HTTP server on loopback, on every database backend."""

from __future__ import annotations

import json
import time

import httpx
from sqlalchemy import func
from sqlmodel import Session, select

from schemas.item import Item
from service.core.db import write_transaction
from service.sources.webhooks import SIGNATURE_HEADER, sign
from tests.conftest import LiveServer

PROBLEM = "application/problem+json"


def _records(count: int, prefix: str = "INC") -> list[dict[str, object]]:
    return [
        {
            "external_id": f"{prefix}-{n}",
            "occurred_at": f"2024-{1 + n % 12:02d}-{1 + n % 28:02d}T08:00:00Z",
            "title": f"incident {n}",
            "input": f"what caused incident {n}?",
            "reference": "a bad deploy",
        }
        for n in range(count)
    ]


def _create_source(server: LiveServer, name: str = "ops", mapping: dict[str, object] | None = None) -> str:
    with server.client("admin") as admin:
        response = admin.post("/v1/sources", json={"name": name, "kind": "push", "mapping": mapping})
    assert response.status_code == 201, response.text
    secret: str = response.json()["webhook_secret"]
    return secret


def _stored(server: LiveServer) -> int:
    with Session(server.engine) as session:
        return session.exec(select(func.count()).select_from(Item)).one()


def test_health_is_open_and_everything_else_needs_a_token(live_server: LiveServer) -> None:
    with httpx.Client(base_url=live_server.url) as anonymous:
        assert anonymous.get("/healthz").json() == {"status": "ok", "database": "ok", "role": "all"}
        for path in ("/v1/items", "/v1/sources", "/metrics", "/v1/items/1"):
            response = anonymous.get(path)
            assert response.status_code == 401, path
            assert response.headers["content-type"] == PROBLEM
            assert response.headers["www-authenticate"].startswith("Bearer")
        assert anonymous.get("/v1/items", headers={"Authorization": "Bearer gs_not-a-real-token"}).status_code == 401
        assert anonymous.get("/v1/items", headers={"Authorization": "Basic abc"}).status_code == 401


def test_missing_scope_is_403_naming_it(live_server: LiveServer) -> None:
    with live_server.client("read") as reader:
        response = reader.post("/v1/sources/ops/items", json=[])
    assert response.status_code == 403
    assert "'ingest' scope" in response.json()["detail"]
    with live_server.client("ingest") as ingester:
        assert ingester.get("/v1/items").status_code == 403
        assert ingester.post("/v1/sources", json={"name": "x"}).status_code == 403


def test_revoked_token_is_refused(live_server: LiveServer) -> None:
    from schemas.token import ApiToken
    from service.core.tokens import revoke_token

    token = live_server.token("read", name="soon-revoked")
    headers = {"Authorization": f"Bearer {token}"}
    assert httpx.get(f"{live_server.url}/v1/items", headers=headers).status_code == 200
    with write_transaction(live_server.engine) as session:
        row = session.exec(select(ApiToken).where(ApiToken.name == "soon-revoked")).one()
        assert row.last_used_at is not None
        assert row.id is not None
        revoke_token(session=session, token_id=row.id)
    response = httpx.get(f"{live_server.url}/v1/items", headers=headers)
    assert response.status_code == 401 and "revoked" in response.json()["detail"]


def test_push_batch_with_three_broken_records_keeps_the_other_97(live_server: LiveServer) -> None:
    _create_source(live_server)
    records: list[object] = list(_records(100))
    records[5] = {"external_id": "INC-5", "input": "no date at all"}
    records[42] = {"external_id": "INC-42", "occurred_at": "30/Feb/24 10:00", "input": "impossible date"}
    records[77] = "not an object"
    with live_server.client("ingest") as client:
        response = client.post("/v1/sources/ops/items", json=records)
    assert response.status_code == 422
    assert response.headers["content-type"] == PROBLEM
    problem = response.json()
    assert [(error["position"], error["reason"]) for error in problem["errors"]] == [(5, "missing_field"), (42, "bad_date"), (77, "wrong_type")]
    assert problem["summary"]["new"] == 97
    assert _stored(live_server) == 97
    with live_server.client("ingest") as client:
        again = client.post("/v1/sources/ops/items", json=_records(100))
    assert again.status_code == 200
    assert (again.json()["new"], again.json()["unchanged"]) == (3, 97)


def test_push_jsonl_body(live_server: LiveServer) -> None:
    _create_source(live_server)
    body = "\n".join(json.dumps(record) for record in _records(5)) + "\n{broken\n"
    with live_server.client("ingest") as client:
        response = client.post("/v1/sources/ops/items", content=body, headers={"Content-Type": "application/x-ndjson"})
    assert response.status_code == 422
    assert response.json()["errors"][0]["locator"] == "line 6"
    assert _stored(live_server) == 5


def test_unreadable_bodies_store_nothing(live_server: LiveServer) -> None:
    _create_source(live_server)
    with live_server.client("ingest") as client:
        not_utf8 = client.post("/v1/sources/ops/items", content=b'[{"input": "\xff"}]', headers={"Content-Type": "application/json"})
        assert not_utf8.status_code == 400 and "UTF-8" in not_utf8.json()["detail"]
        not_json = client.post("/v1/sources/ops/items", content=b"[{", headers={"Content-Type": "application/json"})
        assert not_json.status_code == 400 and "not valid JSON" in not_json.json()["detail"]
        not_array = client.post("/v1/sources/ops/items", json={"external_id": "x"})
        assert not_array.status_code == 400 and "array" in not_array.json()["detail"]
        too_big = client.post("/v1/sources/ops/items", content=b"[" + b" " * (2 * 1024 * 1024) + b"]", headers={"Content-Type": "application/json"})
        assert too_big.status_code == 413 and too_big.headers["content-type"] == PROBLEM
        unknown = client.post("/v1/sources/nope/items", json=_records(1))
        assert unknown.status_code == 404 and "POST /v1/sources" in unknown.json()["detail"]
    assert _stored(live_server) == 0


def test_webhook_needs_a_fresh_valid_signature(live_server: LiveServer) -> None:
    secret = _create_source(live_server, "hooks", mapping={"records": "incidents", "external_id": "id", "occurred_at": "created_at", "input": "{{ summary }}"})
    body = json.dumps({"incidents": [{"id": "PD-1", "created_at": "2024-06-01T12:00:00Z", "summary": "checkout latency"}]}).encode()
    url = f"{live_server.url}/v1/sources/hooks/webhook"
    now = int(time.time())
    refused = {
        "missing": {},
        "stale": {SIGNATURE_HEADER: sign(body, secret=secret, timestamp=now - 3600)},
        "wrong": {SIGNATURE_HEADER: sign(body, secret="whsec_wrong", timestamp=now)},
    }
    for case, headers in refused.items():
        response = httpx.post(url, content=body, headers={"Content-Type": "application/json", **headers})
        assert response.status_code == 401, case
        assert response.headers["content-type"] == PROBLEM
    assert _stored(live_server) == 0
    accepted = httpx.post(url, content=body, headers={"Content-Type": "application/json", SIGNATURE_HEADER: sign(body, secret=secret, timestamp=now)})
    assert accepted.status_code == 200, accepted.text
    assert accepted.json()["new"] == 1
    with live_server.client("read") as reader:
        item = reader.get("/v1/items", params={"source": "hooks"}).json()["items"][0]
    assert item["external_id"] == "PD-1" and item["occurred_at"] == "2024-06-01T12:00:00Z" and item["input"] == "checkout latency"


def test_items_are_listed_newest_first_with_filters_and_cursor_pages(live_server: LiveServer) -> None:
    _create_source(live_server)
    with live_server.client("ingest") as client:
        assert client.post("/v1/sources/ops/items", json=_records(30)).status_code == 200
    seen: list[dict[str, object]] = []
    with live_server.client("read") as reader:
        cursor = None
        while True:
            params: dict[str, str | int] = {"limit": 7, "source": "ops"}
            if cursor:
                params["cursor"] = cursor
            page = reader.get("/v1/items", params=params).json()
            seen.extend(page["items"])
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert len(seen) == 30 and len({item["id"] for item in seen}) == 30
        dates = [str(item["occurred_at"]) for item in seen]
        assert dates == sorted(dates, reverse=True)
        window = reader.get("/v1/items", params={"occurred_after": "2024-03-01T00:00:00Z", "occurred_before": "2024-05-01T00:00:00Z", "limit": 100}).json()["items"]
        assert window and all("2024-03" <= str(item["occurred_at"])[:7] <= "2024-04" for item in window)
        assert reader.get("/v1/items", params={"status": "candidate"}).json()["items"]
        assert reader.get("/v1/items", params={"status": "approved"}).json()["items"] == []
        assert reader.get("/v1/items", params={"status": "bogus"}).status_code == 422
        assert reader.get("/v1/items", params={"cursor": "garbage"}).status_code == 422
        assert reader.get("/v1/items", params={"occurred_after": "2024-03-01T00:00:00"}).status_code == 422
        one = reader.get(f"/v1/items/{seen[0]['id']}").json()
        assert one.pop("dedup") == {"status": "candidate", "duplicate_of": None, "stage": None, "score": None, "decided_at": None, "explanation": None}
        assert one.pop("overrides") == []
        assert (one.pop("curated_revision"), one.pop("source_changed_at")) == (None, None)  # never edited
        assert one == seen[0]
        assert reader.get("/v1/items/999999").status_code == 404
        sources = reader.get("/v1/sources").json()
        assert [(source["name"], source["item_count"]) for source in sources] == [("ops", 30)]
        assert "webhook_secret" not in json.dumps(sources)


def test_metrics_request_ids_and_openapi(live_server: LiveServer) -> None:
    _create_source(live_server)
    with live_server.client("ingest") as client:
        client.post("/v1/sources/ops/items", json=[*_records(3), {"external_id": "bad"}])
    with live_server.client("read") as reader:
        response = reader.get("/metrics", headers={"X-Request-ID": "abc-123"})
        assert response.headers["x-request-id"] == "abc-123"
        text = response.text
        assert 'goldenset_items_ingested_total{outcome="new",source="ops"} 3.0' in text
        assert 'goldenset_items_rejected_total{reason="missing_field",source="ops"} 1.0' in text
        assert 'goldenset_request_duration_seconds_count{method="POST",route="/v1/sources/{name}/items",status="422"} 1.0' in text
        assert reader.get("/v1/items").headers["x-request-id"]
    document = httpx.get(f"{live_server.url}/openapi.json").json()
    assert "Problem" in document["components"]["schemas"]
    assert "/v1/sources/{name}/webhook" in document["paths"]


def test_creating_a_source_validates_it(live_server: LiveServer) -> None:
    with live_server.client("admin") as admin:
        assert admin.post("/v1/sources", json={"name": "Bad Name"}).status_code == 422
        assert admin.post("/v1/sources", json={"name": "ok", "kind": "telepathy"}).status_code == 422
        bad_mapping = admin.post("/v1/sources", json={"name": "ok", "mapping": {"input": "{{ x"}})
        assert bad_mapping.status_code == 422 and "template" in bad_mapping.json()["detail"]
        assert admin.post("/v1/sources", json={"name": "ok"}).status_code == 201
        assert admin.post("/v1/sources", json={"name": "ok"}).status_code == 409
        assert admin.get("/v1/sources/ok").json()["name"] == "ok"
        assert admin.get("/v1/sources/absent").status_code == 404
