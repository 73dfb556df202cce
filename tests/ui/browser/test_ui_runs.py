"""The runs pages in Chromium: a reader opens Runs from the navigation, sees each eval's runs with
their scores, follows a model's link to its page and finds its history over the releases as a
chart and a table."""

from __future__ import annotations

import re
from datetime import date

from playwright.sync_api import Page, expect
from sqlalchemy.engine import Engine
from sqlmodel import select

from schemas.model_registry import EndpointCreate, ModelCreate, TrainsOnInputs
from schemas.runs import ResultIn, ResultsPost, Run, RunCreate
from service.core.db import write_transaction
from service.runs.model_registry import create_endpoint, create_model
from service.runs.runs import post_results, start_run
from tests.ui.browser.conftest import EVAL, Shots, UiServer, seed_pool, sign_in

ACTOR = "token:pipeline"


def _run(engine: Engine, model: str, release: int, split: str, score_of: dict[int, float] | None) -> None:
    """Start a run of `model` on `release` and post a score for each item `score_of` maps (by
    item id modulo its length)."""
    started = start_run(
        engine=engine,
        eval_name=EVAL,
        data=RunCreate(model=model, endpoint=f"{model}-api", release=release, split=split),
        actor=ACTOR,
        scopes=frozenset({"read", "sealed"}),
        terms_max_age_days=90,
    )
    if score_of is None:
        return
    scores = [ResultIn(item_id=item.item_id, score=score_of[item.item_id % len(score_of)]) for item in started.items]
    with write_transaction(engine) as session:
        run = session.exec(select(Run).where(Run.id == started.id)).one()
        post_results(session=session, run=run, data=ResultsPost(results=scores), actor=ACTOR)


def seed(engine: Engine) -> dict[str, str]:
    """The default pool (eval `kev`, releases 1 and 2), models m1 and m2 with an endpoint each
    that does not train on inputs; dev runs of both on both releases, and a sealed run of m1 on
    release 2, all scored."""
    tokens = seed_pool(engine)
    with write_transaction(engine) as session:
        for model in ("m1", "m2"):
            create_model(session=session, data=ModelCreate(name=model, provider="acme", training_cutoff=date(2021, 12, 1)), actor="test")
            endpoint = EndpointCreate(name=f"{model}-api", base_url="https://api.acme.test/v1", provider="acme", model=model, trains_on_inputs=TrainsOnInputs.NO, retention_days=0)
            create_endpoint(session=session, data=endpoint, actor="test")
    _run(engine, "m1", 1, "dev", {0: 1.0, 1: 0.0, 2: 1.0})
    _run(engine, "m2", 1, "dev", {0: 0.2, 1: 0.9, 2: 0.5, 3: 0.7})
    _run(engine, "m1", 2, "dev", {0: 1.0, 1: 1.0, 2: 0.0, 3: 1.0})
    _run(engine, "m2", 2, "dev", {0: 0.4, 1: 0.6})
    _run(engine, "m1", 2, "sealed", {0: 0.0, 1: 1.0})
    return tokens


def test_a_reader_follows_a_run_to_its_models_history(page: Page, ui_server: UiServer, shots: Shots) -> None:
    sign_in(page, ui_server, "reader")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Runs").click()
    expect(page.get_by_role("heading", name="Runs", exact=True)).to_be_visible()
    section = page.get_by_role("region", name=re.compile(f"^{EVAL}"))
    rows = section.get_by_role("row")
    expect(rows).to_have_count(1 + 5)
    expect(section).to_contain_text("sealed")
    expect(page.get_by_role("link", name="Download these runs as CSV")).to_be_visible()
    shots(page, "runs")

    section.get_by_role("link", name="m1", exact=True).first.click()
    expect(page).to_have_url(f"{ui_server.url}/ui/models/m1")
    expect(page.get_by_role("heading", name="Model m1")).to_be_visible()
    chart = page.get_by_role("img", name=re.compile(f"^Mean score of m1 on {EVAL} by release"))
    expect(chart).to_be_visible()
    expect(chart.locator("g.point")).to_have_count(3)
    history = page.get_by_role("table", name=f"Runs of m1 on {EVAL} by release")
    expect(history.get_by_role("row")).to_have_count(1 + 3)
    expect(history.get_by_role("row").nth(1)).to_contain_text("dev")
    expect(page.get_by_role("link", name="per-item results of its dev runs (CSV)")).to_be_visible()
    shots(page, "model m1")

    page.get_by_role("link", name="Compare with another model").click()
    page.get_by_label("Model b").select_option("m2")
    page.get_by_role("button", name="Compare").click()
    figures = page.get_by_role("table", name="The comparison's figures")
    expect(figures).to_contain_text("Items paired")
    shots(page, "compare m1 and m2")
