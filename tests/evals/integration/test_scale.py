"""The common scale on both databases: fitted over the per-item results of an eval's dev runs on
two releases that share items, stored as numbered versions, refitted only when newer results
exist, read over the API (`GET /v1/evals/{name}/scale`) and used to split a score change between
two runs into the set and the model; sealed runs stay off it; refusals say what to do."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from schemas.evals import EvalCreate
from schemas.runs import ResultIn, ResultsPost, Run, RunCreate
from schemas.scale import ScaleFit
from service.cli import app
from service.core.db import write_transaction
from service.core.problems import ProblemError
from service.evals.definitions import create_eval, require_eval
from service.evals.refresh import refresh_eval
from service.evals.scale import eval_scale, refit, refit_stale, score_change_report
from service.runs.runs import post_results, start_run
from tests.conftest import TEST_SECRET_KEY
from tests.eval_support import HashingEncoder, ingest_and_curate, kev_records
from tests.run_support import auth, register, token
from tests.support.command_line import command_line
from tests.ui_support import make_token, sign_in

ABILITY = {"weak": -1.0, "fair": 0.0, "good": 0.8, "strong": 1.6}


@pytest.fixture
def api(app: FastAPI) -> Iterator[TestClient]:
    with TestClient(app) as client:
        yield client


def _difficulty(item_id: int) -> float:
    return float(np.random.default_rng(item_id).normal(0, 1))


def _run(engine: Engine, model: str, release: int, split: str = "dev") -> int:
    """A run of `model` on `release`, every item scored 0/1 from the model's ability and the item's
    difficulty (a fixed draw per item)."""
    started = start_run(
        engine=engine,
        eval_name="ops",
        data=RunCreate(model=model, endpoint=f"{model}-no", release=release, split=split),
        actor="token:pipeline",
        scopes=frozenset({"read", "sealed"}),
        terms_max_age_days=90,
    )
    rng = np.random.default_rng(started.id)
    scores = [ResultIn(item_id=item.item_id, score=float(rng.random() < 1 / (1 + np.exp(-(ABILITY[model] - _difficulty(item.item_id)))))) for item in started.items]
    with write_transaction(engine) as session:
        run = session.exec(select(Run).where(Run.id == started.id)).one()
        post_results(session=session, run=run, data=ResultsPost(results=scores), actor="token:pipeline")
    return started.id


@pytest.fixture
def world(engine: Engine) -> dict[tuple[str, int], int]:
    """An eval over KEV records of early 2024 with two releases (the second keeps the first's items
    and adds newer ones), four models, each with a dev run on both releases: run ids by (model, release)."""
    ingest_and_curate(engine, "kev", kev_records(since="2024-01-01", until="2024-04-01")[:60])
    with write_transaction(engine) as session:
        data = EvalCreate(name="ops", sources=["kev"], approval_policy="auto", max_age_days=None, sealed_fraction=0.2, target_size=500, sealed_read_budget=5)
        create_eval(session=session, data=data, secret_key=TEST_SECRET_KEY, actor="test", key=b"s" * 32)
    refresh_eval(engine, name="ops", at=datetime(2024, 4, 1, 3, tzinfo=UTC), secret_key=TEST_SECRET_KEY, actor="test")
    ingest_and_curate(engine, "kev", kev_records(since="2024-04-01", until="2024-07-01")[:60])
    refresh_eval(engine, name="ops", at=datetime(2024, 7, 1, 3, tzinfo=UTC), secret_key=TEST_SECRET_KEY, actor="test")
    for model in ABILITY:
        register(engine, model=model)
    return {(model, release): _run(engine, model, release) for model in ABILITY for release in (1, 2)}


def test_the_scale_orders_models_places_releases_and_splits_a_change(engine: Engine, api: TestClient, world: dict[tuple[str, int], int]) -> None:
    reader = auth(token(engine, "read"))
    missing = api.get("/v1/evals/ops/scale", headers=reader)
    assert missing.status_code == 404 and missing.json()["reason"] == "no_scale" and "goldenset scale refit --eval ops" in missing.json()["detail"]
    assert refit_stale(engine) == ["ops"]
    assert refit_stale(engine) == []  # nothing newer: no refit
    scale = api.get("/v1/evals/ops/scale", headers=reader).json()
    assert (scale["version"], scale["stale"], scale["reference_release"]) == (1, False, 2)
    abilities = {entry["name"]: entry["ability"]["value"] for entry in scale["models"]}
    assert sorted(abilities, key=abilities.__getitem__) == ["weak", "fair", "good", "strong"]
    assert [release["number"] for release in scale["releases"]] == [1, 2]
    for release in scale["releases"]:
        index = release["difficulty_index"]
        assert 0 < index["low"] <= index["value"] <= index["high"] < 100
    runs = {entry["id"]: entry for entry in scale["runs"]}
    assert set(runs) == set(world.values())
    for entry in runs.values():
        assert entry["equated_score"]["low"] <= entry["equated_score"]["value"] <= entry["equated_score"]["high"]
        assert entry["ability"]["low"] <= entry["ability"]["value"] <= entry["ability"]["high"]

    # Each run's own page says where it stands: the same ability and equated score as the fit.
    weak = api.get(f"/v1/runs/{world[('weak', 1)]}", headers=reader).json()["scale"]
    assert (weak["fit_version"], weak["stale"], weak["reference_release"]) == (1, False, 2)
    assert weak["equated_score"] == runs[world[("weak", 1)]]["equated_score"] and weak["ability"] == runs[world[("weak", 1)]]["ability"]

    change = api.get("/v1/reports/score-change", params={"run_a": world[("weak", 1)], "run_b": world[("strong", 2)]}, headers=reader).json()
    assert change["fit_version"] == 1 and change["model"]["value"] > 20 and change["model"]["excludes_zero"]
    assert abs(change["set"]["value"] + change["model"]["value"] - change["total"]["value"]) < 1.0
    same = api.get("/v1/reports/score-change", params={"run_a": world[("fair", 1)], "run_b": world[("fair", 2)]}, headers=reader).json()
    assert abs(same["model"]["value"]) < 5 and same["model"]["low"] <= 0 <= same["model"]["high"]
    assert "not a verdict" in same["wording"]


def test_newer_results_make_the_fit_stale_and_the_next_version_keeps_the_draws(engine: Engine, api: TestClient, world: dict[tuple[str, int], int]) -> None:
    reader = auth(token(engine, "read"))
    assert api.get(f"/v1/runs/{world[('good', 1)]}", headers=reader).json()["scale"] is None  # no fit yet
    with Session(engine) as session:
        evaluation = require_eval(session=session, name="ops")
    first = refit(engine, evaluation=evaluation)
    assert first is not None and first.version == 1 and first.draw_count > 0
    extra = _run(engine, "good", 2)
    # The new run is not on the fit yet; the runs that are say the fit is stale.
    assert api.get(f"/v1/runs/{extra}", headers=reader).json()["scale"] is None
    assert api.get(f"/v1/runs/{world[('good', 1)]}", headers=reader).json()["scale"]["stale"] is True
    with Session(engine) as session:
        assert eval_scale(session, evaluation).stale
        with pytest.raises(ProblemError) as refused:
            score_change_report(session, run_a=world[("good", 1)], run_b=extra)
        assert refused.value.status == 422 and "not on the newest scale" in refused.value.detail
    assert refit_stale(engine) == ["ops"]
    with Session(engine) as session:
        fits = sorted(session.exec(select(ScaleFit)).all(), key=lambda fit: fit.version)
        assert [(fit.version, fit.draws is not None) for fit in fits] == [(1, False), (2, True)]
        assert not eval_scale(session, evaluation).stale
        assert score_change_report(session, run_a=world[("good", 1)], run_b=extra).fit_version == 2


def test_sealed_runs_stay_off_the_scale_and_mismatched_runs_are_refused(engine: Engine, api: TestClient, world: dict[tuple[str, int], int]) -> None:
    sealed = _run(engine, "fair", 2, split="sealed")
    refit_stale(engine)
    reader = auth(token(engine, "read"))
    scale = api.get("/v1/evals/ops/scale", headers=reader).json()
    assert sealed not in {entry["id"] for entry in scale["runs"]}
    assert api.get(f"/v1/runs/{sealed}", headers=auth(token(engine, "read", "sealed"))).json()["scale"] is None
    refused = api.get("/v1/reports/score-change", params={"run_a": world[("fair", 1)], "run_b": sealed}, headers=reader)
    assert refused.status_code == 422 and refused.json()["reason"] == "sealed_run"
    unknown = api.get("/v1/reports/score-change", params={"run_a": world[("fair", 1)], "run_b": 999_999}, headers=reader)
    assert unknown.status_code == 404
    assert api.get("/v1/evals/ops/scale").status_code == 401


def test_the_command_line_refits_shows_and_splits_a_change(
    engine: Engine, database_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, world: dict[tuple[str, int], int]
) -> None:
    with command_line(database_url, monkeypatch, encoder=HashingEncoder(), wide=("service.evals.scale_cli",)) as runner:
        missing = runner.invoke(app, ["scale", "show", "--eval", "ops"])
        assert missing.exit_code != 0 and "goldenset scale refit --eval ops" in " ".join(missing.output.split())
        fitted = runner.invoke(app, ["scale", "refit", "--eval", "ops"])
        assert fitted.exit_code == 0, fitted.output
        assert "scale version 1 fitted on" in fitted.output
        shown = runner.invoke(app, ["scale", "show", "--eval", "ops", "--json"])
        assert shown.exit_code == 0 and json.loads(shown.stdout)["version"] == 1
        table = runner.invoke(app, ["scale", "show", "--eval", "ops"])
        assert "difficulty index" in table.output and "equated on release 2" in table.output
        change = runner.invoke(app, ["report", "score-change", "--run-a", str(world[("weak", 1)]), "--run-b", str(world[("strong", 2)])])
        assert change.exit_code == 0, change.output
        assert "due to the model: +" in change.output and "its interval excludes 0" in change.output
        drawn = runner.invoke(app, ["scale", "show", "--eval", "ops", "--chart", str(tmp_path / "scale.svg")])
        assert drawn.exit_code == 0 and (tmp_path / "scale.svg").read_text(encoding="utf-8").startswith("<?xml")
        pair = ["--run-a", str(world[("fair", 1)]), "--run-b", str(world[("fair", 2)])]
        split = runner.invoke(app, ["report", "score-change", *pair, "--json", "--chart", str(tmp_path / "change.png")])
        assert split.exit_code == 0 and (tmp_path / "change.png").read_bytes().startswith(b"\x89PNG")
        wrong = runner.invoke(app, ["report", "score-change", *pair, "--chart", str(tmp_path / "change.txt")])
        assert wrong.exit_code != 0 and ".svg or .png" in wrong.output
        unknown = runner.invoke(app, ["scale", "refit", "--eval", "nope"])
        assert unknown.exit_code != 0 and "nope" in unknown.output


def test_the_model_page_shows_its_runs_on_the_common_scale(engine: Engine, app: FastAPI, world: dict[tuple[str, int], int]) -> None:
    with TestClient(app, follow_redirects=False) as browser:
        reader, _ = make_token(engine, "reader", "read")
        sign_in(browser, reader)
        before = browser.get("/ui/models/good").text
        assert "On the common scale" not in before
        refit_stale(engine)
        page = browser.get("/ui/models/good").text
    assert "On the common scale of ops" in page and "scale version 1" in page and 'id="scale-chart-ops"' in page
    for release in (1, 2):
        assert f'data-scale-run="{world[("good", release)]}"' in page


def test_the_releases_page_shows_each_releases_difficulty_index(engine: Engine, app: FastAPI, world: dict[tuple[str, int], int]) -> None:
    refit_stale(engine)
    with TestClient(app, follow_redirects=False) as browser:
        reader, _ = make_token(engine, "reader", "read")
        sign_in(browser, reader)
        page = browser.get("/ui/evals/ops/releases").text
    assert "Difficulty index [95%]" in page and "common scale (version 1" in page


def test_the_evidence_page_splits_a_score_change_with_its_chart(engine: Engine, app: FastAPI, world: dict[tuple[str, int], int]) -> None:
    pair = {"run_a": world[("weak", 1)], "run_b": world[("strong", 2)]}
    with TestClient(app, follow_redirects=False) as browser:
        reader, _ = make_token(engine, "reader", "read")
        sign_in(browser, reader)
        before = browser.get("/ui/evidence", params=pair).text
        assert "are not on the newest scale of eval" in before and "<code>goldenset scale refit --eval ops</code>" in before
        assert browser.get("/ui/evidence", params={"run_a": "x", "run_b": "1"}).text.count("Give the ids of two runs of one eval") == 1
        refit_stale(engine)
        page = browser.get("/ui/evidence", params=pair).text
        svg = browser.get("/ui/evidence/score-change/chart.svg", params=pair)
        png = browser.get("/ui/evidence/score-change/chart.png", params=pair)
        missing = browser.get("/ui/evidence/score-change/chart.svg", params={"run_a": pair["run_a"], "run_b": 999_999})
    assert f"Run {pair['run_a']} (weak, release 1) to run {pair['run_b']} (strong, release 2) on ops" in page
    assert "Due to the set" in page and "Due to the model" in page and "common scale version 1" in page
    assert f"/ui/evidence/score-change/chart.svg?run_a={pair['run_a']}&amp;run_b={pair['run_b']}" in page
    assert svg.status_code == 200 and svg.headers["content-type"] == "image/svg+xml" and svg.text.lstrip().startswith("<?xml")
    assert png.status_code == 200 and png.content.startswith(b"\x89PNG")
    assert missing.status_code == 422 and "no run with id 999999" in missing.text
