"""Acceptance: a read-scope token walking every GET endpoint of the OpenAPI document, with every
path parameter filled with real ids and every enumerated query value tried, never receives the
text of a sealed item: neither one released in a sealed split nor one bound for it at the next
release. Runs, results, exposures and sealed reads exist, so every endpoint has data to show."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy.engine import Engine

from service.app import create_app
from service.core.settings import Settings
from tests.conftest import LiveServer
from tests.eval_support import HashingEncoder
from tests.run_support import auth, token
from tests.sealed_support import fill_paths, path_values, sealed_world


@pytest.fixture
def app(settings: Settings, engine: Engine) -> FastAPI:
    """The app with the encoder the items were curated with, so `/similar` answers."""
    return create_app(settings, engine=engine, encoder=HashingEncoder())


def _queries(operation: dict[str, Any], document: dict[str, Any]) -> list[dict[str, str]]:
    """No query at all; each value of each enumerated parameter; the largest page."""
    queries: list[dict[str, str]] = [{}]
    for parameter in operation.get("parameters", []):
        if parameter["in"] != "query":
            continue
        schema = parameter.get("schema", {})
        options = [schema, *schema.get("anyOf", [])]
        for option in options:
            if "$ref" in option:
                option = document["components"]["schemas"][option["$ref"].rsplit("/", 1)[1]]
            for value in option.get("enum", []):
                queries.append({parameter["name"]: str(value)})
            if "maximum" in option:
                queries.append({parameter["name"]: str(int(option["maximum"]))})
    return queries


def test_a_read_token_never_receives_sealed_text_from_any_get_endpoint(live_server: LiveServer, engine: Engine) -> None:
    world = sealed_world(engine, live_server.url)
    secrets = world.secrets
    url = live_server.url
    reader, admin = auth(token(engine, "read", name="walker")), auth(token(engine, "admin", name="boss"))
    assert httpx.get(f"{url}/v1/audit", headers=admin, timeout=30).status_code == 200

    document = httpx.get(f"{url}/openapi.json", timeout=30).json()
    values = path_values(engine)
    statuses: dict[str, set[int]] = {}
    requests = 0
    with httpx.Client(base_url=url, headers=reader, timeout=30) as client:
        for template, operations in document["paths"].items():
            if "get" not in operations:
                continue
            for path in fill_paths(template, values):
                for query in _queries(operations["get"], document):
                    response = client.get(path, params=query)
                    requests += 1
                    statuses.setdefault(template, set()).add(response.status_code)
                    assert response.status_code < 500, (path, query, response.text[:300])
                    leaked = [secret for secret in secrets if secret and secret in response.text]
                    assert not leaked, f"GET {path} {query} returned sealed text: {leaked[:2]}"
    # Every GET endpoint answered something; only the admin's audit and the curators' low-margin
    # duplicates, review queue and review team refused the reader outright. (The temporal-split
    # report needs `model` and `eval` or `corpus` in the query, the public-inflation report all
    # three: 422 without them; this world has no scale fitted, so the scale answers 404 and a
    # score change 422.)
    expected_refusals = {
        "/v1/audit",
        "/v1/dedup/low-margin",
        "/v1/evals/{name}/review-queue",
        "/v1/evals/{name}/review/team",
        "/v1/reports/temporal-split",
        "/v1/reports/public-inflation",
        "/v1/evals/{name}/scale",
        "/v1/reports/score-change",
    }
    assert {template for template, codes in statuses.items() if 200 not in codes} == expected_refusals
    # The review queue is the curators': a `curate` token without `sealed` pages through it, and its
    # text filter finds nothing by a sealed item's title or input.
    with httpx.Client(base_url=url, headers=auth(token(engine, "curate", name="curator")), timeout=30) as client:
        searched = sorted(secret for secret in secrets if len(secret) <= 200)[:20]
        pages: list[dict[str, str | int]] = [{"limit": 500}, {"limit": 3, "offset": 4}]
        pages += [{"text": secret} for secret in searched]
        for params in pages:
            response = client.get("/v1/evals/ops/review-queue", params=params)
            assert response.status_code == 200, response.text[:300]
            assert not [secret for secret in secrets if secret in response.text], params
            if "text" in params:
                assert response.json()["total"] == 0, params
    assert statuses["/v1/evals/{name}/releases/{ref}/items"] >= {200, 403}
    assert requests > 200
