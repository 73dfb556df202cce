"""Attacks on the ingest promises over a real HTTP server, on every backend: a poison value in one
record of a pushed batch or webhook costs that record only (named by position and reason, the
rest stored, never a 500); a webhook is authenticated by its signature alone (a replay is
refused, an unknown source looks like a bad signature); an older event never rolls an item back."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import httpx
import pytest
from sqlalchemy import func
from sqlmodel import Session, select

from schemas.common import utcnow
from schemas.item import Item
from schemas.source import WebhookDelivery
from service.core.db import write_session
from service.sources.definitions import get_source
from service.sources.webhooks import SIGNATURE_HEADER, sign
from tests.conftest import LiveServer

PROBLEM = "application/problem+json"
DEEP = 2000

# name: (the poisoned field as JSON text, the reason, what the detail must name)
POISONS: dict[str, tuple[str, str, str]] = {
    "nul": ('"input": "disk full\\u0000 on node 7"', "nul_character", "input"),
    "lone surrogate": ('"title": "broken \\ud800 title"', "lone_surrogate", "title"),
    "nan": ('"metadata": {"latency_ms": NaN}', "non_finite_number", "metadata.latency_ms"),
    "infinity": ('"metadata": {"latency_ms": -Infinity}', "non_finite_number", "metadata.latency_ms"),
    "overflow": ('"metadata": {"cost": 1e400}', "non_finite_number", "metadata.cost"),
    "deep nesting": ('"metadata": {"trace": ' + "[" * DEEP + "]" * DEEP + "}", "too_deep", "metadata.trace"),
    "huge integer": ('"metadata": {"bytes": ' + "9" * 5000 + "}", "number_too_long", "metadata.bytes"),
    "nul in a key": ('"metadata": {"k\\u0000ey": 1}', "nul_character", "metadata"),
    "nul in the id": ('"external_id": "BAD-\\u0000"', "nul_character", "external_id"),
}


def _record(external_id: str, summary: str = "checkout latency") -> dict[str, object]:
    return {"external_id": external_id, "occurred_at": "2024-06-01T12:00:00Z", "title": f"incident {external_id}", "input": f"why {summary}?"}


def _poisoned(poison: str, external_id: str = "BAD") -> str:
    """A record as JSON text with one field replaced by the poison."""
    field_text = POISONS[poison][0]
    key = field_text.split('"', 2)[1]
    base = {name: value for name, value in _record(external_id).items() if name != key}
    return json.dumps(base)[:-1] + ", " + field_text + "}"


def _create_source(server: LiveServer, name: str = "ops", mapping: Mapping[str, object] | None = None) -> str:
    with server.client("admin") as admin:
        response = admin.post("/v1/sources", json={"name": name, "kind": "push", "mapping": dict(mapping) if mapping is not None else None})
    assert response.status_code == 201, response.text
    secret: str = response.json()["webhook_secret"]
    return secret


def _items(server: LiveServer) -> dict[str, Item]:
    with Session(server.engine) as session:
        return {item.external_id: item for item in session.exec(select(Item))}


def _deliveries(server: LiveServer) -> int:
    with Session(server.engine) as session:
        return session.exec(select(func.count()).select_from(WebhookDelivery)).one()


def _signed(secret: str, body: bytes, timestamp: int | None = None) -> dict[str, str]:
    return {"Content-Type": "application/json", SIGNATURE_HEADER: sign(body, secret=secret, timestamp=timestamp or int(time.time()))}


def _assert_only_the_poison_rejected(response: httpx.Response, position: int, poison: str, good: int) -> None:
    _, reason, named = POISONS[poison]
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == PROBLEM
    problem = response.json()
    assert [(error["position"], error["reason"]) for error in problem["errors"]] == [(position, reason)]
    assert named in problem["errors"][0]["detail"]
    assert (problem["summary"]["new"], problem["summary"]["rejected"], problem["summary"]["read"]) == (good, 1, good + 1)


@pytest.mark.parametrize("poison", sorted(POISONS))
def test_a_poison_value_costs_only_its_record_in_an_array_and_in_json_lines(live_server: LiveServer, poison: str) -> None:
    _create_source(live_server)
    array = "[" + ", ".join([json.dumps(_record("A-0")), json.dumps(_record("A-1")), _poisoned(poison), json.dumps(_record("A-3"))]) + "]"
    lines = "\n".join([json.dumps(_record("L-0")), _poisoned(poison), "", json.dumps(_record("L-3"))]) + "\n"
    with live_server.client("ingest") as client:
        pushed = client.post("/v1/sources/ops/items", content=array.encode(), headers={"Content-Type": "application/json"})
        _assert_only_the_poison_rejected(pushed, 2, poison, good=3)
        streamed = client.post("/v1/sources/ops/items", content=lines.encode(), headers={"Content-Type": "application/x-ndjson"})
        _assert_only_the_poison_rejected(streamed, 2, poison, good=2)
        assert streamed.json()["errors"][0]["locator"] == "line 2"
    assert set(_items(live_server)) == {"A-0", "A-1", "A-3", "L-0", "L-3"}


def test_every_poison_at_once_through_a_signed_webhook_keeps_the_good_records(live_server: LiveServer) -> None:
    secret = _create_source(live_server, "hooks", mapping={"records": "events", "metadata_object": "metadata"})
    poisons = sorted(POISONS)
    elements = [json.dumps(_record("GOOD-first"))] + [_poisoned(poison, f"BAD-{index}") for index, poison in enumerate(poisons)] + [json.dumps(_record("GOOD-last"))]
    body = ('{"events": [' + ", ".join(elements) + "]}").encode()
    response = httpx.post(f"{live_server.url}/v1/sources/hooks/webhook", content=body, headers=_signed(secret, body))
    assert response.status_code == 422, response.text
    problem = response.json()
    assert [(error["position"], error["reason"]) for error in problem["errors"]] == [(index + 1, POISONS[poison][1]) for index, poison in enumerate(poisons)]
    assert problem["summary"]["new"] == 2
    assert set(_items(live_server)) == {"GOOD-first", "GOOD-last"}
    # The answer is valid UTF-8 JSON although the records were not: bad characters are named, never echoed raw.
    json.loads(response.content.decode("utf-8"))
    surrogate = next(error for error in problem["errors"] if error["reason"] == "lone_surrogate")
    assert "U+D800" in surrogate["detail"]


@pytest.mark.parametrize("poison", ["nan", "lone surrogate", "deep nesting"])
def test_a_webhook_of_one_poisoned_record_is_named_and_stores_nothing(live_server: LiveServer, poison: str) -> None:
    secret = _create_source(live_server, "hooks")
    body = _poisoned(poison).encode()
    response = httpx.post(f"{live_server.url}/v1/sources/hooks/webhook", content=body, headers=_signed(secret, body))
    _assert_only_the_poison_rejected(response, 0, poison, good=0)
    assert _items(live_server) == {}


def test_an_element_nested_2000_deep_among_good_records_costs_only_itself(live_server: LiveServer) -> None:
    _create_source(live_server)
    deep_element = "[" * DEEP + "]" * DEEP
    deep_record = '{"external_id": "DEEP", "occurred_at": "2024-06-01T12:00:00Z", "input": "x", "metadata": {"n": ' + deep_element + "}}"
    elements = [json.dumps(_record(f"INC-{n}")) for n in range(100)]
    elements.insert(40, deep_element)  # an element that is itself a 2,000-deep array
    elements.insert(70, deep_record)  # a record holding one
    body = ("[" + ",".join(elements) + "]").encode()
    with live_server.client("ingest") as client:
        response = client.post("/v1/sources/ops/items", content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 422, response.text
    errors = response.json()["errors"]
    assert [(error["position"], error["reason"]) for error in errors] == [(40, "wrong_type"), (70, "too_deep")]
    assert "metadata.n" in errors[1]["detail"] and "64" in errors[1]["detail"]
    assert len(_items(live_server)) == 100


def test_a_body_nested_too_deep_to_parse_at_all_is_a_400_not_a_500(live_server: LiveServer) -> None:
    _create_source(live_server)
    with live_server.client("ingest") as client:
        unclosed = client.post("/v1/sources/ops/items", content=b"[" * 5000, headers={"Content-Type": "application/json"})
    assert unclosed.status_code == 400 and "not valid JSON" in unclosed.json()["detail"]
    assert _items(live_server) == {}


def test_a_replayed_webhook_is_refused_and_stores_nothing(live_server: LiveServer) -> None:
    # No version in the mapping: the replay refusal alone must keep the item at its newest content.
    secret = _create_source(live_server, "hooks", mapping={"external_id": "id", "occurred_at": "created_at", "input": "{{ summary }}"})
    url = f"{live_server.url}/v1/sources/hooks/webhook"
    first = json.dumps({"id": "PD-1", "created_at": "2024-06-01T12:00:00Z", "summary": "first words"}).encode()
    captured = _signed(secret, first)
    assert httpx.post(url, content=first, headers=captured).json()["new"] == 1
    second = json.dumps({"id": "PD-1", "created_at": "2024-06-01T12:00:00Z", "summary": "corrected words"}).encode()
    assert httpx.post(url, content=second, headers=_signed(secret, second)).json()["updated"] == 1
    replayed = httpx.post(url, content=first, headers=captured)
    assert replayed.status_code == 409, replayed.text
    assert replayed.headers["content-type"] == PROBLEM and "already" in replayed.json()["detail"]
    # Adding a junk signature beside the captured one is the same delivery.
    padded = {**captured, SIGNATURE_HEADER: captured[SIGNATURE_HEADER] + ",v1=" + "0" * 64}
    assert httpx.post(url, content=first, headers=padded).status_code == 409
    item = _items(live_server)["PD-1"]
    assert (item.input, item.revision) == ("corrected words", 2)


def test_concurrent_copies_of_one_delivery_are_accepted_once(live_server: LiveServer) -> None:
    secret = _create_source(live_server, "hooks")
    body = json.dumps(_record("RACE")).encode()
    headers = _signed(secret, body)
    with ThreadPoolExecutor(max_workers=6) as pool:
        statuses = sorted(pool.map(lambda _: httpx.post(f"{live_server.url}/v1/sources/hooks/webhook", content=body, headers=headers).status_code, range(6)))
    assert statuses == [200, 409, 409, 409, 409, 409]
    assert _deliveries(live_server) == 1


def test_deliveries_older_than_the_tolerance_are_pruned(live_server: LiveServer) -> None:
    secret = _create_source(live_server, "hooks")
    with write_session(live_server.engine) as session:
        source = get_source(session=session, name="hooks")
        assert source is not None and source.id is not None
        old = utcnow() - timedelta(seconds=live_server.settings.webhook_tolerance_seconds + 60)
        session.add(WebhookDelivery(source_id=source.id, digest="0" * 64, signed_at=old, received_at=old))
        session.commit()
    body = json.dumps(_record("FRESH")).encode()
    assert httpx.post(f"{live_server.url}/v1/sources/hooks/webhook", content=body, headers=_signed(secret, body)).status_code == 200
    with Session(live_server.engine) as session:
        assert [row.digest for row in session.exec(select(WebhookDelivery))] != ["0" * 64]
    assert _deliveries(live_server) == 1


def _without_instance(problem: dict[str, object]) -> dict[str, object]:
    """A problem without `instance`, the request path, which differs by the source name only."""
    return {key: value for key, value in problem.items() if key != "instance"}


def test_an_unknown_source_is_answered_exactly_like_a_bad_signature(live_server: LiveServer) -> None:
    secret = _create_source(live_server, "real")
    body = json.dumps(_record("X")).encode()
    now = int(time.time())
    attempts = {
        "missing": {"Content-Type": "application/json"},
        "malformed": {"Content-Type": "application/json", SIGNATURE_HEADER: "garbage"},
        "stale": _signed(secret, body, now - 3600),
        "wrong secret": _signed("whsec_guess", body, now),
        "the real source's secret": _signed(secret, body, now + 1),
    }
    for case, headers in attempts.items():
        unknown = httpx.post(f"{live_server.url}/v1/sources/ghost/webhook", content=body, headers=headers)
        assert unknown.status_code == 401, (case, unknown.text)
        assert unknown.headers["content-type"] == PROBLEM
        if case == "the real source's secret":
            continue
        known = httpx.post(f"{live_server.url}/v1/sources/real/webhook", content=body, headers=headers)
        assert known.status_code == 401, case
        assert _without_instance(unknown.json()) == _without_instance(known.json()), case
    assert _items(live_server) == {}


def test_a_source_that_received_webhooks_can_still_be_deleted(live_server: LiveServer) -> None:
    secret = _create_source(live_server, "hooks")
    body = json.dumps({"external_id": "NO-DATE", "input": "rejected, so the source stays empty"}).encode()
    assert httpx.post(f"{live_server.url}/v1/sources/hooks/webhook", content=body, headers=_signed(secret, body)).status_code == 422
    assert _deliveries(live_server) == 1
    with live_server.client("admin") as admin:
        assert admin.delete("/v1/sources/hooks").status_code == 204
    assert _deliveries(live_server) == 0


VERSIONED = {"external_id": "id", "occurred_at": "created_at", "input": "{{ summary }}", "version": "updated_at"}


def _event(summary: str, updated_at: object) -> bytes:
    return json.dumps({"id": "PD-7", "created_at": "2024-06-01T12:00:00Z", "summary": summary, "updated_at": updated_at}).encode()


def test_an_older_event_sent_later_cannot_roll_an_item_back(live_server: LiveServer) -> None:
    secret = _create_source(live_server, "hooks", mapping=VERSIONED)
    url = f"{live_server.url}/v1/sources/hooks/webhook"

    def deliver(body: bytes) -> dict[str, object]:
        response = httpx.post(url, content=body, headers=_signed(secret, body))
        assert response.status_code == 200, response.text
        summary: dict[str, object] = response.json()
        return summary

    assert deliver(_event("v1 words", "2024-06-01T12:00:00Z"))["new"] == 1
    assert deliver(_event("v2 words", "2024-06-01T12:05:00+00:00"))["updated"] == 1
    # The v1 event again, freshly signed (not a replay): older than what is stored.
    stale = deliver(_event("v1 words", "2024-06-01T13:00:00+02:00"))
    assert (stale["stale"], stale["updated"], stale["read"]) == (1, 0, 1)
    item = _items(live_server)["PD-7"]
    assert (item.input, item.revision) == ("v2 words", 2)
    # Equal kinds compare as instants, whatever the spelling: 12:10Z is newer than 12:05Z.
    assert deliver(_event("v3 words", "2024-06-01T14:10:00+02:00"))["updated"] == 1
    # An event without a version applies as before, and keeps the stored version.
    assert deliver(_event("unversioned words", None))["updated"] == 1
    assert deliver(_event("v2 words", "2024-06-01T12:05:00Z"))["stale"] == 1
    item = _items(live_server)["PD-7"]
    assert (item.input, item.revision, item.source_version) == ("unversioned words", 4, "2024-06-01T12:10:00+00:00")


def test_an_unreadable_version_rejects_its_record_and_numbers_compare_as_numbers(live_server: LiveServer) -> None:
    _create_source(live_server, "ops", mapping=VERSIONED)
    with live_server.client("ingest") as client:
        batch = [json.loads(_event("nine", 9)), json.loads(_event("ten", "10")), json.loads(_event("eight", 8.5)), {**json.loads(_event("bad", "yesterday-ish")), "id": "PD-8"}]
        response = client.post("/v1/sources/ops/items", json=batch)
    assert response.status_code == 422
    problem = response.json()
    assert [(error["position"], error["reason"]) for error in problem["errors"]] == [(3, "bad_version")]
    assert (problem["summary"]["new"], problem["summary"]["updated"], problem["summary"]["stale"]) == (1, 1, 1)
    item = _items(live_server)["PD-7"]
    assert (item.input, item.source_version) == ("ten", "10")
