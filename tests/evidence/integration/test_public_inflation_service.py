"""The public-inflation report through the service: simulated models (`tests/support/inflation_world.py`)
scored over HTTP on an eval's dev runs (about 300 KEV items) and on a public corpus (300 other KEV
items), the report read over HTTP; the same numbers as the library on the same arrays; sealed runs
never counting; and problems that say what is missing."""

from __future__ import annotations

import httpx
import numpy as np
import pytest
from sqlalchemy.engine import Engine

from curation.scale.inflation import public_inflation_report
from schemas.evidence import PublicInflationReport
from schemas.model_registry import TrainsOnInputs
from service.evidence.temporal_split import REPORT_SEED
from tests.conftest import LiveServer
from tests.eval_support import kev_records
from tests.evidence_support import PUBLIC_CORPUS, InflationBench, inflation_bench, post_scores, register_corpus, register_model
from tests.run_support import released_eval
from tests.support.images import assert_png, assert_svg
from tests.support.inflation_world import inflation_world
from tests.ui_support import sign_in

URL = "/v1/reports/public-inflation"
REFERENCES = [f"ref-{number:02d}" for number in range(10)]
STEADY, PRIMED = "steady", "primed"


@pytest.fixture
def bench(engine: Engine) -> InflationBench:
    return inflation_bench(engine, [*REFERENCES, STEADY, PRIMED])


def test_a_simulated_clean_and_inflated_model_give_the_librarys_numbers_over_http(live_server: LiveServer, bench: InflationBench) -> None:
    """Ten reference models and `steady` drawn from one simulated world; `primed` is `steady` with
    a planted 10-point inflation on the public corpus (30 failed items turned into passes). Each
    report is the library's report on the same arrays, references in name order, with the
    service's seed; `steady`'s sealed run, scored perfectly, changes nothing."""
    rng = np.random.default_rng(31)
    world = inflation_world(rng, references=len(REFERENCES), private_items=len(bench.dev), public_items=len(bench.corpus), target_ability=0.3)
    primed_public = world.target_public.copy()
    primed_public[rng.choice(np.flatnonzero(primed_public == 0), size=30, replace=False)] = 1.0
    rows = {name: (world.reference_private[k], world.reference_public[k]) for k, name in enumerate(REFERENCES)}
    rows[STEADY] = (world.target_private, world.target_public)
    rows[PRIMED] = (world.target_private, primed_public)
    with live_server.client("read") as client:
        for name, (private, public) in rows.items():
            post_scores(client, bench, name, private, public)
    with live_server.client("read", "sealed") as sealed:
        run = sealed.post("/v1/evals/ops/runs", json={"model": STEADY, "endpoint": f"{STEADY}-api", "split": "sealed"}).json()
        perfect = [{"item_id": item["item_id"], "score": 1.0} for item in run["items"]]
        assert run["split"] == "sealed" and sealed.post(f"/v1/runs/{run['id']}/results", json={"results": perfect}).status_code == 200
    with live_server.client("read") as client:
        answers = {name: client.get(URL, params={"eval": "ops", "corpus": PUBLIC_CORPUS, "model": name}) for name in (STEADY, PRIMED)}
        svg = client.get(URL, params={"eval": "ops", "corpus": PUBLIC_CORPUS, "model": PRIMED, "format": "svg"})
        png = client.get(URL, params={"eval": "ops", "corpus": PUBLIC_CORPUS, "model": PRIMED}, headers={"Accept": "image/png"})
    assert svg.headers["content-type"] == "image/svg+xml" and svg.headers["vary"] == "Accept" and b"primed on public-kev against ops" in svg.content
    assert_svg(svg.content)
    assert png.headers["content-type"] == "image/png"
    assert_png(png.content)
    assert {answer.status_code for answer in answers.values()} == {200}
    steady, primed = (PublicInflationReport.model_validate(answers[name].json()) for name in (STEADY, PRIMED))

    for name, report in ((STEADY, steady), (PRIMED, primed)):
        references = sorted(other for other in rows if other != name)
        expected = public_inflation_report(
            np.array([rows[other][0] for other in references]), np.array([rows[other][1] for other in references]), *rows[name],
            reference_models=references, model=name, eval_name="ops", corpus=PUBLIC_CORPUS, rng=np.random.default_rng(REPORT_SEED),
        )  # fmt: skip
        assert report == expected
    assert steady.private_items == len(bench.dev) and steady.public_items == len(bench.corpus) == 300
    assert [reference.model for reference in steady.references] == [PRIMED, *REFERENCES]
    assert not steady.flagged and steady.p_value > 0.05
    assert primed.flagged and primed.p_value < 0.05 and primed.interval.low > 0
    assert primed.difference - steady.difference == pytest.approx(0.10, abs=0.02)
    assert "evidence about one score (the public score on public-kev) for one model (primed)" in primed.statement
    assert "not a verdict" in primed.statement

    # The evidence page shows the same report, with its reference models and its chart.
    with httpx.Client(base_url=live_server.url, follow_redirects=False, timeout=60) as browser:
        sign_in(browser, live_server.token("read"))  # type: ignore[arg-type]  # the same calls as a TestClient
        asked = {"inflation_model": PRIMED, "inflation_eval": "ops", "inflation_corpus": PUBLIC_CORPUS}
        page = browser.get("/ui/evidence", params=asked).text
        chart = browser.get("/ui/evidence/public-inflation/chart.svg", params={"model": PRIMED, "eval": "ops", "corpus": PUBLIC_CORPUS})
        partial = browser.get("/ui/evidence", params={"inflation_model": PRIMED}).text
    assert f"{PRIMED} on {PUBLIC_CORPUS} against ops" in page and '<span class="state flag-yes">flagged</span>' in page
    assert f"{primed.difference:+.3f}" in page and all(f"<th scope=\"row\">{name}</th>" in page for name in REFERENCES)
    assert chart.status_code == 200 and b"primed on public-kev against ops" in chart.content
    assert "Pick the model, the private eval and the public corpus to compare." in partial


def test_problems_say_what_is_missing(live_server: LiveServer, engine: Engine) -> None:
    released = released_eval(engine, count=40)
    register_corpus(engine, PUBLIC_CORPUS, kev_records()[:40])
    for name in ("target", "first", "second", "corpus-only", "eval-only", "sealed-only"):
        register_model(engine, name, cutoff=None, endpoints={f"{name}-api": TrainsOnInputs.NO})
    corpus_ids = [record["cveID"] for record in kev_records()[:40]]

    def run(client_scopes: tuple[str, ...], model: str, scores: list[float], *, split: str = "dev") -> None:
        with live_server.client(*client_scopes) as client:
            started = client.post("/v1/evals/ops/runs", json={"model": model, "endpoint": f"{model}-api", "split": split}).json()
            results = [{"item_id": item["item_id"], "score": score} for item, score in zip(started["items"], scores * len(started["items"]), strict=False)]
            assert client.post(f"/v1/runs/{started['id']}/results", json={"results": results}).status_code == 200

    def upload(model: str, score: float) -> None:
        with live_server.client("read") as client:
            body = {"model": model, "results": [{"external_id": external_id, "score": score} for external_id in corpus_ids]}
            assert client.post(f"/v1/corpora/{PUBLIC_CORPUS}/results", json=body).status_code == 200

    with live_server.client("read") as client:

        def get(**params: str) -> tuple[int, dict[str, object]]:
            response = client.get(URL, params={"eval": "ops", "corpus": PUBLIC_CORPUS, "model": "target", **params})
            return response.status_code, response.json()

        status, problem = get(eval="nope")
        assert status == 404 and "eval 'nope' does not exist" in str(problem["detail"])
        status, problem = get(corpus="nothing")
        assert status == 404 and "goldenset reference add nothing" in str(problem["detail"])
        status, problem = get(corpus="kev")
        assert status == 422 and problem["reason"] == "not_a_corpus"
        status, problem = get(model="ghost")
        assert status == 404 and "model 'ghost' is not registered" in str(problem["detail"])
        missing = client.get(URL, params={"eval": "ops", "model": "target"})
        assert missing.status_code == 422 and "corpus" in missing.json()["detail"]

        # Only a sealed run's results: they never feed the report.
        run(("read", "sealed"), "sealed-only", [1.0], split="sealed")
        upload("sealed-only", 1.0)
        status, problem = get(model="sealed-only")
        assert status == 404 and problem["reason"] == "no_private_results" and "sealed runs never feed this report" in str(problem["detail"])

        run(("read",), "target", [0.0, 1.0])
        status, problem = get()
        assert status == 404 and problem["reason"] == "no_public_results" and f"POST /v1/corpora/{PUBLIC_CORPUS}/results" in str(problem["detail"])
        upload("target", 0.9)

        run(("read",), "first", [1.0, 1.0, 0.0])
        upload("first", 0.8)
        upload("corpus-only", 0.5)
        run(("read",), "eval-only", [0.5])
        status, problem = get()
        assert status == 422 and problem["reason"] == "too_few_reference_models"
        # `sealed-only` has results on the corpus only: its sealed run does not count.
        assert problem["references"] == ["first"] and problem["eval_only"] == ["eval-only"] and problem["corpus_only"] == ["corpus-only", "sealed-only"]
        detail = str(problem["detail"])
        assert "needs at least 2 other models with results on both eval 'ops' (dev runs) and corpus 'public-kev'" in detail
        assert "found 1 (first)" in detail and "results on the eval only: eval-only" in detail and "results on the corpus only: corpus-only" in detail

        # A second reference whose two dev runs are pooled: each item counts once, with its mean.
        run(("read",), "second", [0.0])
        run(("read",), "second", [1.0])
        upload("second", 0.6)
        status, body = get()
        assert status == 200, body
        report = PublicInflationReport.model_validate(body)
    assert [reference.model for reference in report.references] == ["first", "second"]
    assert report.references[1].private_score == pytest.approx(0.5) and report.references[1].private_items == len(released.dev)
    assert report.private_items == len(released.dev) and report.public_items == 40 and report.public_score == pytest.approx(0.9)
    assert {warning.code for warning in report.warnings} >= {"few_reference_models"}
    assert live_server.client().get(URL, params={"eval": "ops", "corpus": PUBLIC_CORPUS, "model": "target"}).status_code == 401
