"""Acceptance: a read-scope token walking every GET endpoint of the OpenAPI document, with every
path parameter filled with real ids and every enumerated query value tried, never receives the
text of a sealed item: neither one released in a sealed split nor one bound for it at the next
release. Runs, results, exposures and sealed reads exist, so every endpoint has data to show."""

from __future__ import annotations

import itertools
import json
from datetime import date
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from curation.releases.sealing import is_sealed
from schemas.evals import EvalItem
from schemas.item import Item
from schemas.model_registry import Endpoint, Model, TrainsOnInputs
from schemas.probes import Probe, ProbeCreate
from schemas.runs import Run
from schemas.source import Source
from service.app import create_app
from service.core.settings import Settings
from service.evidence.probes import execute_probe, prepare_probe
from tests.conftest import LiveServer
from tests.eval_support import HashingEncoder, ingest_and_curate, kev_records
from tests.evidence_support import register_model
from tests.run_support import KEY, auth, register, released_eval, token


@pytest.fixture
def app(settings: Settings, engine: Engine) -> FastAPI:
    """The app with the encoder the items were curated with, so `/similar` answers."""
    return create_app(settings, engine=engine, encoder=HashingEncoder())


def _values(engine: Engine) -> dict[str, list[str]]:
    with Session(engine) as session:
        return {
            "item_id": [str(i) for i in session.exec(select(Item.id)).all()],
            "run_id": [str(i) for i in session.exec(select(Run.id)).all()],
            "probe_id": [str(i) for i in session.exec(select(Probe.id)).all()],
            "/v1/sources/": list(session.exec(select(Source.name)).all()),
            "/v1/models/": list(session.exec(select(Model.name)).all()),
            "/v1/endpoints/": list(session.exec(select(Endpoint.name)).all()),
            "/v1/evals/": ["ops"],
            "ref": ["1", "latest"],
        }


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


def _paths(template: str, values: dict[str, list[str]]) -> list[str]:
    names = [part[1:-1] for part in template.split("/") if part.startswith("{")]
    choices = []
    for name in names:
        key = name if name in values else next(prefix for prefix in values if prefix.startswith("/") and template.startswith(prefix))
        choices.append(values[key])
    paths = []
    for combo in itertools.product(*choices):
        path = template
        for name, value in zip(names, combo, strict=True):
            path = path.replace("{" + name + "}", value, 1)
        paths.append(path)
    return paths


def test_a_read_token_never_receives_sealed_text_from_any_get_endpoint(live_server: LiveServer, engine: Engine) -> None:
    released = released_eval(engine, count=40, sealed_fraction=0.3)
    # Ten more items, curated after the release: some are bound for the sealed slice.
    ingest_and_curate(engine, "kev", kev_records(since="2024-01-01", until="2024-05-01")[40:50])
    register(engine)
    url = live_server.url
    reader, sealed, admin = auth(token(engine, "read", name="walker")), auth(token(engine, "read", "sealed", name="final")), auth(token(engine, "admin", name="boss"))
    dev_run = httpx.post(f"{url}/v1/evals/ops/runs", json={"model": "m1", "endpoint": "m1-no"}, headers=reader, timeout=30).json()
    httpx.post(f"{url}/v1/runs/{dev_run['id']}/results", json={"results": [{"item_id": i["item_id"], "score": 1} for i in dev_run["items"]]}, headers=reader, timeout=30)
    assert httpx.post(f"{url}/v1/evals/ops/runs", json={"model": "m1", "endpoint": "m1-no", "split": "sealed"}, headers=sealed, timeout=30).status_code == 201
    sealed_read = httpx.get(f"{url}/v1/evals/ops/releases/1/items", params={"split": "sealed"}, headers=sealed, timeout=30)
    assert sealed_read.status_code == 200
    assert httpx.post(f"{url}/v1/evals/ops/runs", json={"model": "m1", "endpoint": "m1-yes"}, headers=reader, timeout=30).status_code == 201
    assert httpx.get(f"{url}/v1/audit", headers=admin, timeout=30).status_code == 200
    # A finished completion probe of the eval's dev items (its report and chart hold ids and numbers only).
    register_model(engine, "m-probe", cutoff=date(2024, 3, 1), endpoints={"m-probe-no": TrainsOnInputs.NO})
    prepared = prepare_probe(engine=engine, data=ProbeCreate(eval="ops", model="m-probe", endpoint="m-probe-no"), actor="test", terms_max_age_days=90)
    answer = {"choices": [{"message": {"role": "assistant", "content": "a vulnerability"}, "finish_reason": "stop"}]}
    assert execute_probe(engine, prepared, transport=httpx.MockTransport(lambda _: httpx.Response(200, json=answer))) is not None

    with Session(engine) as session:
        members = set(session.exec(select(EvalItem.item_id)).all())
        items = session.exec(select(Item)).all()
        bound = {item.id for item in items if item.id is not None and item.id not in members and is_sealed(KEY, item.id, 0.3)}
        secret_ids = set(released.sealed) | bound
        assert bound and released.sealed, "the slice must hold both released and bound-for-sealed items"
        # A sealed item's id, input or long title counts as leaked unless a visible item says it too
        # (one KEV description names another CVE; some records share a description).
        visible = "\n".join(json.dumps([item.external_id, item.title, item.input, item.reference, item.meta]) for item in items if item.id not in secret_ids)
        candidates = {text for item in items if item.id in secret_ids for text in (item.external_id, item.input, item.title) if len(text) > 8}
        secrets = {text for text in candidates if text not in visible and json.dumps(text)[1:-1] not in visible}
        assert len(secrets) >= 2 * len(secret_ids)
    # The check can see a leak: the sealed scope's budgeted read shows the released sealed items' text.
    assert sum(secret in sealed_read.text for secret in secrets) >= len(released.sealed)

    document = httpx.get(f"{url}/openapi.json", timeout=30).json()
    values = _values(engine)
    statuses: dict[str, set[int]] = {}
    requests = 0
    with httpx.Client(base_url=url, headers=reader, timeout=30) as client:
        for template, operations in document["paths"].items():
            if "get" not in operations:
                continue
            for path in _paths(template, values):
                for query in _queries(operations["get"], document):
                    response = client.get(path, params=query)
                    requests += 1
                    statuses.setdefault(template, set()).add(response.status_code)
                    assert response.status_code < 500, (path, query, response.text[:300])
                    leaked = [secret for secret in secrets if secret and secret in response.text]
                    assert not leaked, f"GET {path} {query} returned sealed text: {leaked[:2]}"
    # Every GET endpoint answered something; only the admin's audit and the curators' low-margin
    # duplicates and review queue refused the reader outright. (The temporal-split report needs
    # `model` and `eval` or `corpus` in the query: 422 without them.)
    expected_refusals = {"/v1/audit", "/v1/dedup/low-margin", "/v1/evals/{name}/review-queue", "/v1/reports/temporal-split"}
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
