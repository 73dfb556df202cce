"""Roles (docs/deploying.md, "Roles"): `goldenset serve` is `all`, `serve --no-scheduler` an `api` replica that
never loads the embedding model nor curates (unless GOLDENSET_API_CURATES), and `/healthz` says
which role a process has."""

from __future__ import annotations

from pathlib import Path

import httpx
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from schemas.item import Item, ItemStatus
from service.app import create_app
from service.core.db import write_transaction
from service.core.settings import Role, Settings
from service.core.tokens import create_token
from service.dedup.encoder import model_identity
from tests.dedup_support import curated_pool, hadoop_reports, shared_encoder
from tests.processes import start_serve


def test_the_model_id_is_known_without_loading_the_model(settings: Settings) -> None:
    identity = model_identity(settings)
    model = shared_encoder()
    assert (identity.model_id, identity.dim) == (model.model_id, model.dim)


def test_healthz_names_the_role_and_only_processes_with_the_model_curate(settings: Settings, engine: Engine) -> None:
    curating = settings.model_copy(update={"curate_after_ingest": True})
    cases: dict[tuple[Role, bool], bool] = {("all", False): True, ("api", False): False, ("api", True): True}
    for (role, api_curates), loads_model in cases.items():
        app = create_app(curating.model_copy(update={"api_curates": api_curates}), engine=engine, role=role)
        with TestClient(app) as client:
            assert client.get("/healthz").json() == {"status": "ok", "database": "ok", "role": role}
        assert app.state.curation_trigger.enabled is loads_model
        assert app.state.dedup_reader.can_encode is loads_model


def test_an_api_replica_stores_pushes_as_candidates_answers_similar_from_stored_vectors_and_refuses_checks(
    database_url: str, engine: Engine, settings: Settings, tmp_path: Path
) -> None:
    ids = curated_pool(engine, settings, shared_encoder())
    with write_transaction(engine) as session:
        token, _ = create_token(session=session, name="reader", scopes=["read", "ingest", "curate"])
    headers = {"Authorization": f"Bearer {token}"}
    replica = start_serve(database_url, tmp_path / "api.log", env={"CURATE_AFTER_INGEST": "true", "LOG_LEVEL": "INFO"})
    try:
        assert httpx.get(f"{replica.url}/healthz").json() == {"status": "ok", "database": "ok", "role": "api"}
        late = [dict(report, id=f"LATE-{report['id']}", created="2022-03-01T10:00:00") for report in hadoop_reports(3)]
        pushed = httpx.post(f"{replica.url}/v1/sources/hadoop/items", json=late, headers=headers, timeout=30)
        assert pushed.status_code in (200, 201) and pushed.json()["new"] == 3, pushed.text
        similar = httpx.get(f"{replica.url}/v1/items/{ids['PLANT-EXACT']}/similar", headers=headers, timeout=60)
        assert similar.status_code == 200, similar.text
        assert similar.json()[0]["id"] == ids["13395121"]
        check = httpx.post(f"{replica.url}/v1/dedup/check", json={"title": "t", "input": "a text"}, headers=headers, timeout=30)
        assert check.status_code == 503 and check.headers["content-type"].startswith("application/problem+json")
        assert "does not load the embedding model" in check.json()["detail"]
        page = httpx.get(f"{replica.url}/docs", timeout=30)
        assert page.status_code == 200
    finally:
        replica.stop()
    with Session(engine) as session:
        statuses = {item.status for item in session.exec(select(Item).where(col(Item.external_id).startswith("LATE-")))}
    assert statuses == {ItemStatus.CANDIDATE.value}  # left for the worker's scheduled curation
    log = replica.output()
    assert "loading the embedding model" not in log and "curated" not in log, log[-3000:]
