"""The temporal-split report through the service: per-item results uploaded for the CISA KEV catalog
registered as a public corpus, and results of an eval's runs; JSON and charts over real HTTP, and
problems that say what is missing."""

from __future__ import annotations

from datetime import UTC, date, datetime

import numpy as np
import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from schemas.corpus_results import CorpusResult
from schemas.evidence import TemporalSplitReport
from schemas.model_registry import Model, ModelUpdate, TrainsOnInputs
from service.core.db import write_transaction
from service.runs.model_registry import update_model
from tests.conftest import LiveServer
from tests.eval_support import kev_records
from tests.evidence_support import register_corpus, register_model
from tests.run_support import released_eval
from tests.support.corpora import KEV_CUTOFF, KevRecord, synthetic_results
from tests.support.images import assert_png, assert_svg

CORPUS = "cisa-kev"


def _kev() -> list[KevRecord]:
    records = [
        KevRecord(cve_id=entry["cveID"], date_added=datetime.fromisoformat(entry["dateAdded"]).replace(tzinfo=UTC), description=entry["shortDescription"])
        for entry in kev_records()
    ]
    return sorted(records, key=lambda record: record.date_added)


def _upload(server: LiveServer, token_scopes: tuple[str, ...], model: str, inflation: float) -> None:
    results = synthetic_results(_kev(), cutoff=KEV_CUTOFF, rng=np.random.default_rng(11), inflation=inflation)
    body = {"model": model, "results": [{"external_id": result.item_id, "score": result.score} for result in results]}
    with server.client(*token_scopes) as client:
        response = client.post(f"/v1/corpora/{CORPUS}/results", json=body)
    assert response.status_code == 200, response.text
    accepted = response.json()
    assert (accepted["stored"], accepted["rejected"], accepted["scored"], accepted["corpus_items"]) == (len(results), 0, len(results), len(results))


@pytest.fixture
def kev_corpus(engine: Engine) -> None:
    register_corpus(engine, CORPUS, kev_records())
    register_model(engine, "inflated", cutoff=KEV_CUTOFF)
    register_model(engine, "honest", cutoff=KEV_CUTOFF)


def test_kev_with_ten_inflated_points_before_the_cutoff_is_flagged_over_http(live_server: LiveServer, kev_corpus: None) -> None:
    _upload(live_server, ("read",), "inflated", 0.10)
    _upload(live_server, ("read",), "honest", 0.0)
    with live_server.client("read") as client:
        inflated = TemporalSplitReport.model_validate(client.get("/v1/reports/temporal-split", params={"corpus": CORPUS, "model": "inflated"}).json())
        honest = TemporalSplitReport.model_validate(client.get("/v1/reports/temporal-split", params={"corpus": CORPUS, "model": "honest"}).json())
        again = client.get("/v1/reports/temporal-split", params={"corpus": CORPUS, "model": "inflated"}).json()
    assert (inflated.before.n, inflated.after.n) == (1053, 351)
    assert inflated.flagged and inflated.interval.low > 0 and inflated.p_value < 0.05
    assert 0.05 < inflated.difference < 0.15
    assert not honest.flagged and honest.interval.low < 0 < honest.interval.high
    assert TemporalSplitReport.model_validate(again) == inflated  # seeded: the same results give the same report
    assert "not an accusation" in inflated.statement and "move the decision onto items dated on or after" in inflated.statement
    assert [point.month for point in inflated.monthly][:1] == ["2021-11"]


def test_the_chart_comes_as_svg_or_png_by_format_or_accept(live_server: LiveServer, kev_corpus: None) -> None:
    _upload(live_server, ("read",), "inflated", 0.10)
    params = {"corpus": CORPUS, "model": "inflated"}
    with live_server.client("read") as client:
        svg = client.get("/v1/reports/temporal-split", params={**params, "format": "svg"})
        png = client.get("/v1/reports/temporal-split", params=params, headers={"Accept": "image/png"})
        bad = client.get("/v1/reports/temporal-split", params={**params, "format": "gif"})
    assert svg.headers["content-type"] == "image/svg+xml" and svg.headers["vary"] == "Accept"
    assert_svg(svg.content)
    assert png.headers["content-type"] == "image/png"
    assert_png(png.content)
    assert bad.status_code == 422 and "query.format: Input should be 'json', 'svg' or 'png'" in bad.json()["detail"]


def test_uploads_refuse_bad_results_by_position_and_keep_the_rest(live_server: LiveServer, kev_corpus: None, engine: Engine) -> None:
    body = {
        "model": "honest",
        "results": [
            {"external_id": "CVE-2021-27104", "score": 0.5},
            {"external_id": "CVE-0000-00000", "score": 1.0},
            {"external_id": "CVE-2021-27104", "score": 0.5},
        ],
    }
    with live_server.client("read") as client:
        first = client.post(f"/v1/corpora/{CORPUS}/results", json=body).json()
        changed = client.post(f"/v1/corpora/{CORPUS}/results", json={"model": "honest", "results": [{"external_id": "CVE-2021-27104", "score": 0.9}]}).json()
        replaced = client.post(f"/v1/corpora/{CORPUS}/results", json={"model": "honest", "replace": True, "results": [{"external_id": "CVE-2021-27104", "score": 0.9}]}).json()
        missing_model = client.post(f"/v1/corpora/{CORPUS}/results", json={"model": "nobody", "results": [{"external_id": "CVE-2021-27104", "score": 1}]})
        not_corpus = client.post("/v1/corpora/nothing/results", json=body)
    assert (first["stored"], first["rejected"]) == (1, 2)
    assert [(error["position"], error["reason"]) for error in first["errors"]] == [(1, "unknown_item"), (2, "duplicate")]
    assert (changed["stored"], changed["rejected"], changed["errors"][0]["reason"]) == (0, 1, "conflict")
    assert (replaced["replaced"], replaced["rejected"]) == (1, 0)
    with Session(engine) as session:
        assert [row.score for row in session.exec(select(CorpusResult))] == [0.9]
    assert missing_model.status_code == 404 and "not registered" in missing_model.json()["detail"]
    assert not_corpus.status_code == 404 and "goldenset reference add nothing" in not_corpus.json()["detail"]


def test_problems_say_what_is_missing(live_server: LiveServer, kev_corpus: None, engine: Engine) -> None:
    register_model(engine, "undated", cutoff=None)
    with live_server.client("read") as client:
        def get(**params: str) -> tuple[int, str]:
            response = client.get("/v1/reports/temporal-split", params=params)
            assert response.headers["content-type"] == "application/problem+json"
            return response.status_code, response.json()["detail"]

        assert get(corpus=CORPUS, model="honest")[0] == 404 and "upload them with POST /v1/corpora/cisa-kev/results" in get(corpus=CORPUS, model="honest")[1]
        status, detail = get(corpus=CORPUS, model="undated")
        assert status == 422 and "no training cutoff registered" in detail and "PATCH /v1/models/undated" in detail
        assert get(corpus=CORPUS, model="ghost")[0] == 404
        assert get(model="honest")[0] == 422
        assert get(eval="nope", model="honest")[0] == 404
        client.post(f"/v1/corpora/{CORPUS}/results", json={"model": "honest", "results": [{"external_id": r["cveID"], "score": 1.0} for r in kev_records(until="2022-01-01")[:40]]})
        status, detail = get(corpus=CORPUS, model="honest")
        assert status == 422 and "leaves 40 items before and 0 after" in detail
        assert client.get("/v1/reports/temporal-split", params={"corpus": CORPUS, "model": "honest"}, headers={"Authorization": "Bearer nope"}).status_code == 401


def test_an_evals_run_results_feed_the_report_one_result_per_item(live_server: LiveServer, engine: Engine) -> None:
    """Two runs score the same items: each item counts once, with its mean score; human success
    (a share of people) counts as solved from one half up."""
    released = released_eval(engine, count=60, sealed_fraction=0.0)
    register_model(engine, "m1", cutoff=date(2024, 3, 1), endpoints={"m1-no": TrainsOnInputs.NO})
    with live_server.client("read") as client:
        for score in (0.2, 0.6):
            run = client.post("/v1/evals/ops/runs", json={"model": "m1", "endpoint": "m1-no"}).json()
            results = [{"item_id": item["item_id"], "score": score, "human_success": 0.5} for item in run["items"]]
            assert client.post(f"/v1/runs/{run['id']}/results", json={"results": results}).status_code == 200
        report = TemporalSplitReport.model_validate(client.get("/v1/reports/temporal-split", params={"eval": "ops", "model": "m1"}).json())
    assert report.before.n + report.after.n == len(released.dev)
    assert report.before.mean_score == pytest.approx(0.4) and report.after.mean_score == pytest.approx(0.4)
    assert report.before.human_success_rate == 1.0 and report.corpus == "eval ops"
    assert not report.flagged and {warning.code for warning in report.warnings} >= {"small_half"}
    with write_transaction(engine) as session:
        model = session.exec(select(Model).where(Model.name == "m1")).one()
        update_model(session=session, model=model, data=ModelUpdate(training_cutoff=date(2020, 1, 1)), actor="test")
    with live_server.client("read") as client:
        response = client.get("/v1/reports/temporal-split", params={"eval": "ops", "model": "m1"})
    assert response.status_code == 422 and "leaves 0 items before" in response.json()["detail"]


def test_a_sealed_runs_results_never_reach_the_report(live_server: LiveServer, engine: Engine) -> None:
    """The report is for `read` tokens: a sealed run's per-item results (the `sealed` scope's)
    change nothing in it, not even its counts."""
    released = released_eval(engine, count=60, sealed_fraction=0.3, budget=3)
    register_model(engine, "m1", cutoff=date(2024, 3, 1), endpoints={"m1-no": TrainsOnInputs.NO})
    with live_server.client("read") as client:
        run = client.post("/v1/evals/ops/runs", json={"model": "m1", "endpoint": "m1-no"}).json()
        assert client.post(f"/v1/runs/{run['id']}/results", json={"results": [{"item_id": item["item_id"], "score": 0.5} for item in run["items"]]}).status_code == 200
        before = client.get("/v1/reports/temporal-split", params={"eval": "ops", "model": "m1"}).json()
    with live_server.client("read", "sealed") as client:
        sealed = client.post("/v1/evals/ops/runs", json={"model": "m1", "endpoint": "m1-no", "split": "sealed"})
        assert sealed.status_code == 201, sealed.text
        scores = [{"item_id": item["item_id"], "score": 1.0} for item in sealed.json()["items"]]
        assert client.post(f"/v1/runs/{sealed.json()['id']}/results", json={"results": scores}).status_code == 200
    with live_server.client("read") as client:
        after = client.get("/v1/reports/temporal-split", params={"eval": "ops", "model": "m1"}).json()
    assert released.sealed and after["before"] == before["before"] and after["after"] == before["after"] and after["monthly"] == before["monthly"]
