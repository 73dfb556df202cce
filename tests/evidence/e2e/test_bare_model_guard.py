"""The bare-model guard over HTTP: endpoints record whether the model behind them has retrieval,
web search or tools; a completion probe of such an endpoint is refused (403 naming the condition,
nothing sent, the refusal audited), and a temporal-split report over runs through one warns."""

from __future__ import annotations

from datetime import date

from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from schemas.audit import AuditEvent
from schemas.model_registry import TrainsOnInputs
from schemas.probes import Probe
from tests.conftest import LiveServer
from tests.evidence.e2e.test_probe_service import wait_for
from tests.evidence_support import register_model
from tests.run_support import released_eval
from tests.support.ngram_server import WordNgramModel, serve_model

CUTOFF = date(2024, 3, 1)


def test_endpoints_record_augmentation_and_the_input_must_agree(live_server: LiveServer, engine: Engine) -> None:
    register_model(engine, "m1", cutoff=CUTOFF)
    with live_server.client("admin") as client:
        bare = client.post("/v1/endpoints", json={"name": "m1-bare", "base_url": "https://api.acme.test/v1", "model": "m1"}).json()
        rag = client.post("/v1/endpoints", json={"name": "m1-rag", "base_url": "https://api.acme.test/v1", "model": "m1", "augmentations": ["retrieval", "tools"]}).json()
        contradictory = client.post("/v1/endpoints", json={"name": "m1-x", "base_url": "https://a.test", "model": "m1", "augmented": False, "augmentations": ["web_search"]})
        unknown_kind = client.post("/v1/endpoints", json={"name": "m1-y", "base_url": "https://a.test", "model": "m1", "augmentations": ["telepathy"]})
        cleared = client.patch("/v1/endpoints/m1-rag", json={"augmented": False}).json()
        flagged = client.patch("/v1/endpoints/m1-bare", json={"augmented": True}).json()
    assert (bare["augmented"], bare["augmentations"]) == (False, [])
    assert (rag["augmented"], rag["augmentations"]) == (True, ["retrieval", "tools"])
    assert contradictory.status_code == 422 and "augmented is false but augmentations names web_search" in contradictory.text
    assert unknown_kind.status_code == 422 and "retrieval" in unknown_kind.text
    assert (cleared["augmented"], cleared["augmentations"]) == (False, [])
    assert (flagged["augmented"], flagged["augmentations"]) == (True, [])


def test_a_probe_of_an_augmented_endpoint_is_refused_before_anything_is_sent(live_server: LiveServer, engine: Engine) -> None:
    released = released_eval(engine, count=60, sealed_fraction=0.0)
    assert released.dev
    with serve_model(WordNgramModel.train(["a b c d e f"]), "m1") as server, live_server.client("admin") as client:
        register_model(engine, "m1", cutoff=CUTOFF, base_url=server.base_url, endpoints={"m1-no": TrainsOnInputs.NO})
        assert client.patch("/v1/endpoints/m1-no", json={"augmentations": ["web_search"]}).status_code == 200
        refused = client.post("/v1/probes", json={"eval": "ops", "model": "m1", "endpoint": "m1-no"})
        # accepting exposure does not lift it: exposure is about training, this about looking things up
        still = client.post("/v1/probes", json={"eval": "ops", "model": "m1", "endpoint": "m1-no", "allow_exposure": True})
        assert server.bodies == []
        assert client.patch("/v1/endpoints/m1-no", json={"augmented": False}).status_code == 200
        accepted = wait_for(client, client.post("/v1/probes", json={"eval": "ops", "model": "m1", "endpoint": "m1-no", "limit": 12}).json()["id"])
    for response in (refused, still):
        problem = response.json()
        assert response.status_code == 403 and problem["condition"] == "augmented_endpoint", response.text
        assert "'m1-no' is augmented (web_search)" in problem["detail"] and "bare model" in problem["detail"] and "nothing was sent" in problem["detail"]
    assert accepted.status == "done", accepted.error
    with Session(engine) as session:
        refusals = [event for event in session.exec(select(AuditEvent).where(AuditEvent.action == "probe.refused"))]
        probes = session.exec(select(Probe)).all()
    assert [(event.object_id, event.details["condition"], event.details["augmentations"]) for event in refusals] == [("m1-no", "augmented_endpoint", ["web_search"])] * 2
    assert [probe.id for probe in probes] == [accepted.id]


def test_the_temporal_split_warns_when_a_contributing_run_went_through_an_augmented_endpoint(live_server: LiveServer, engine: Engine) -> None:
    released_eval(engine, count=60, sealed_fraction=0.0)
    register_model(engine, "m1", cutoff=CUTOFF, endpoints={"m1-bare": TrainsOnInputs.NO, "m1-rag": TrainsOnInputs.NO})
    with live_server.client("admin") as client:
        assert client.patch("/v1/endpoints/m1-rag", json={"augmentations": ["retrieval"]}).status_code == 200
        bare = client.post("/v1/evals/ops/runs", json={"model": "m1", "endpoint": "m1-bare"}).json()
        client.post(f"/v1/runs/{bare['id']}/results", json={"results": [{"item_id": item["item_id"], "score": 0.5} for item in bare["items"]]}).raise_for_status()
        clean = client.get("/v1/reports/temporal-split", params={"eval": "ops", "model": "m1"}).json()
        rag = client.post("/v1/evals/ops/runs", json={"model": "m1", "endpoint": "m1-rag"}).json()
        # the endpoint is later recorded bare: the run keeps what it was when it started
        assert client.patch("/v1/endpoints/m1-rag", json={"augmented": False}).status_code == 200
        client.post(f"/v1/runs/{rag['id']}/results", json={"results": [{"item_id": item["item_id"], "score": 0.9} for item in rag["items"]]}).raise_for_status()
        warned = client.get("/v1/reports/temporal-split", params={"eval": "ops", "model": "m1"}).json()
        run = client.get(f"/v1/runs/{rag['id']}").json()
    assert (bare["augmented"], rag["augmented"], run["augmented"]) == (False, True, True)
    assert "augmented_endpoint" not in {warning["code"] for warning in clean["warnings"]}
    [warning] = [warning for warning in warned["warnings"] if warning["code"] == "augmented_endpoint"]
    assert f"({rag['id']})" in warning["message"] and "m1-rag" in warning["message"] and "bare model" in warning["message"]
