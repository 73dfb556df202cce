"""Acceptance: every write operation of the OpenAPI document (POST, PATCH, PUT, DELETE), called by
every kind of token with real ids of sealed, sealed-bound and dev items and a body built from the
operation's own schema, answers without the text of a sealed item: writes that echo the item
(approve, reject, undo, edits, rulings) included, errors included, on both databases.

The one exception is the budgeted sealed read itself: a token with the `sealed` scope starting a
sealed run is served the sealed items it will be scored on (and only that operation may carry
sealed text, and only to that token)."""

from __future__ import annotations

import itertools
import json
import re
import time
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy.engine import Engine
from sqlmodel import Session

from schemas.item import Item
from service.app import create_app
from service.core.settings import Settings
from tests.conftest import LiveServer
from tests.eval_support import HashingEncoder
from tests.run_support import auth, token
from tests.sealed_support import SealedWorld, fill_paths, path_values, sealed_world

WRITES = ("post", "put", "patch", "delete")
IDENTITIES = {
    "reader": ("read",),
    "curator": ("read", "curate"),
    "ingester": ("ingest",),
    "admin": ("read", "curate", "ingest", "admin"),
    "sealed": ("read", "curate", "ingest", "admin", "sealed"),
}
SEALED_READS = {("POST", "/v1/evals/{name}/runs")}
"""The budgeted sealed reads among the writes: only the `sealed` identity may be served sealed text, only here."""
HINTS: dict[str, Any] = {"model": "m1", "endpoint": "m1-no", "note": "walked", "reason": "walked", "eval": "ops", "split": "dev"}
"""Values for body fields that name things which must exist (a generated string would only be refused)."""
ITEM_STEPS: list[tuple[str, str, dict[str, Any] | None]] = [
    ("POST", "/v1/items/{item_id}/approve", None),
    ("POST", "/v1/items/{item_id}/undo-review", None),
    ("POST", "/v1/items/{item_id}/reject", {"reason": "walked"}),
    ("POST", "/v1/items/{item_id}/undo-review", None),
    ("POST", "/v1/items/review", None),
    ("POST", "/v1/items/{item_id}/undo-review", None),
    ("PATCH", "/v1/items/{item_id}", {"note": "walked", "tags": ["walked"]}),
    ("POST", "/v1/items/{item_id}/duplicate-of", None),
    ("POST", "/v1/items/{item_id}/not-duplicate", {"note": "walked"}),
    ("GET", "/v1/items/{item_id}/similar", None),
]
"""Each item is taken through a decision, its undoing, a rejection, a batch decision, an edit and
both rulings, so each write answers with the item in every state it can reach."""
LAST = ("delete",)


@pytest.fixture
def app(settings: Settings, engine: Engine) -> FastAPI:
    """The app with the encoder the items were curated with, so `/similar` and rulings answer."""
    return create_app(settings, engine=engine, encoder=HashingEncoder())


def _resolve(schema: dict[str, Any], document: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


def _example(schema: dict[str, Any], document: dict[str, Any], hints: dict[str, Any], name: str = "") -> Any:
    """A value valid for `schema` as far as the schema says: required fields only, enums' first
    value, minimums respected; `hints` by field name where a value must name something real."""
    schema = _resolve(schema, document)
    if name in hints:
        return hints[name]
    options = [option for option in schema.get("anyOf", []) if _resolve(option, document).get("type") != "null"]
    if options:
        return _example(options[0], document, hints, name)
    if "enum" in schema:
        return schema["enum"][0]
    if schema.get("default") is not None:
        return schema["default"]
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        properties = schema.get("properties", {})
        return {field: _example(properties[field], document, hints, field) for field in schema.get("required", []) if field in properties}
    if kind == "array":
        return [_example(schema.get("items", {}), document, hints) for _ in range(max(1, schema.get("minItems", 1)))]
    if kind == "integer":
        return max(int(schema.get("minimum", 1)), 1)
    if kind == "number":
        return min(max(float(schema.get("minimum", 0.5)), 0.5), float(schema.get("maximum", 1.0)))
    if kind == "boolean":
        return True
    if schema.get("format") == "date-time":
        return datetime(2024, 3, 1, tzinfo=UTC).isoformat()
    if schema.get("format") == "date":
        return "2024-03-01"
    if schema.get("format") == "uri" or "url" in name:
        return "https://walk.example.test/v1"
    return "walked".ljust(int(schema.get("minLength", 1)), "x")


def _body(operation: dict[str, Any], document: dict[str, Any], hints: dict[str, Any]) -> tuple[dict[str, str], bytes | None]:
    content = operation.get("requestBody", {}).get("content", {})
    if "application/json" not in content:
        return {}, None
    return {"Content-Type": "application/json"}, json.dumps(_example(content["application/json"]["schema"], document, hints)).encode()


def _scan(world: SealedWorld, identity: str, method: str, template: str, path: str, response: httpx.Response) -> None:
    assert response.status_code < 500, (identity, method, path, response.text[:300])
    leaked = world.leaks(response.text)
    if identity == "sealed" and (method, template) in SEALED_READS:
        return
    assert not leaked, f"{identity}: {method} {path} answered {response.status_code} with sealed text: {leaked[:2]}"


def test_no_write_answers_with_sealed_text_for_any_token(live_server: LiveServer, engine: Engine) -> None:
    world = sealed_world(engine, live_server.url)
    released = world.released
    items = {"released sealed": released.sealed[:3], "bound for sealed": sorted(world.bound)[:3], "dev": released.dev[:2]}
    document = httpx.get(f"{live_server.url}/openapi.json", timeout=30).json()
    writes = {(method.upper(), template): operation for template, operations in document["paths"].items() for method, operation in operations.items() if method in WRITES}
    tokens = {identity: auth(token(engine, *scopes, name=f"walk-{identity}")) for identity, scopes in IDENTITIES.items()}
    called: set[tuple[str, str]] = set()
    statuses: dict[tuple[str, str], set[int]] = {}
    other = released.dev[-1]

    with httpx.Client(base_url=live_server.url, timeout=60) as client:

        def call(identity: str, method: str, template: str, path: str, body: dict[str, Any] | None, hints: dict[str, Any]) -> None:
            operation = writes.get((method, template))
            content: bytes | None
            if body is not None:
                headers, content = {"Content-Type": "application/json"}, json.dumps(body).encode()
            elif operation is not None:
                headers, content = _body(operation, document, hints)
            else:
                headers, content = {}, None
            response = client.request(method, path, headers={**tokens[identity], **headers}, content=content)
            if response.status_code == 503 and "Retry-After" in response.headers:
                # The database was busy with another write (a background task's, on a loaded
                # machine): nothing was written, and the answer says to send it again. Its text
                # is scanned too.
                assert not world.leaks(response.text), (identity, method, path)
                time.sleep(float(response.headers["Retry-After"]))
                response = client.request(method, path, headers={**tokens[identity], **headers}, content=content)
            called.add((method, template))
            statuses.setdefault((method, template), set()).add(response.status_code)
            _scan(world, identity, method, template, path, response)

        # Every item write, on items of each kind, by each identity, in an order that succeeds.
        for identity, item_id in itertools.product(IDENTITIES, [item_id for ids in items.values() for item_id in ids]):
            hints = HINTS | {"item_id": other if item_id != other else released.dev[0]}
            for method, template, body in ITEM_STEPS:
                batch = {"decisions": [{"item_id": item_id, "decision": "approve"}]} if template == "/v1/items/review" else body
                call(identity, method, template, template.replace("{item_id}", str(item_id)), batch, hints)
        # A dedup check of each sealed item's own text, and of it with another number in its title
        # (which the rules refuse with a reason quoting both titles): the answer names no sealed text.
        with Session(engine) as session:
            sealed_items = [session.get(Item, item_id) for item_id in [*items["released sealed"], *items["bound for sealed"]]]
        for identity, item in itertools.product(("reader", "sealed"), [item for item in sealed_items if item is not None]):
            for title in (item.title, re.sub(r"\d+", lambda number: str(int(number.group()) + 1), item.title) or "walked 2"):
                call(identity, "POST", "/v1/dedup/check", "/v1/dedup/check", {"title": title, "input": item.input}, HINTS)
        # Every other write of the document, with every real value of its path parameters.
        values = path_values(engine)
        values["item_id"] = [str(item_id) for ids in items.values() for item_id in ids]
        hints = HINTS | {"item_id": int(values["item_id"][0])}
        for identity, (method, template) in itertools.product(IDENTITIES, sorted(writes, key=lambda key: (key[1], key[0]))):
            if method.lower() not in LAST:
                for path in fill_paths(template, values):
                    call(identity, method, template, path, None, hints)
        # Deletions last (they take away what the other writes act on), by the admin.
        for method, template in sorted(key for key in writes if key[0].lower() in LAST):
            for path in fill_paths(template, values):
                call("admin", method, template, path, None, hints)

    assert set(writes) <= called, f"writes never walked: {sorted(set(writes) - called)}"
    # The walk reached the item writes' answers, not only their refusals.
    for step in [("POST", "/v1/items/{item_id}/approve"), ("POST", "/v1/items/{item_id}/reject"), ("POST", "/v1/items/{item_id}/undo-review"), ("PATCH", "/v1/items/{item_id}")]:
        assert 200 in statuses[step], (step, statuses[step])
    assert 201 in statuses[("POST", "/v1/evals/{name}/runs")]
