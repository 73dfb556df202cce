"""Every page on any screen, from a 360-pixel phone to a 1400-pixel desktop: signed in as an
admin over a world with real data (the releases, registry, probe, temporal split and audit trail
of the registry module's seed, and open dedup questions), each page reachable from the navigation
and each main detail page fits the window's width (tables and charts scroll in their own box),
keeps every link of the header on its dark bar, never squeezes a table column to a letter a line
nor breaks a word of a button or a label, and shows no backtick-quoted text raw (it is code).

A full-page screenshot of each goes to `var/screenshots/<page>-<width>.png`: look at them.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import numpy as np
import pytest
from playwright.sync_api import Page, expect
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from schemas.corpus_results import CorpusResultIn, CorpusResultsPost
from schemas.dedup_questions import DedupQuestion
from schemas.evals import Eval, EvalItem, Split
from schemas.item import Item, ItemStatus
from schemas.model_registry import Model, TrainsOnInputs
from schemas.probes import Probe
from schemas.runs import ResultIn, ResultsPost, Run, RunCreate, RunItem
from service.core.db import write_transaction
from service.evals.scale import refit
from service.evidence.temporal_split import post_corpus_results, require_corpus
from service.items.shaping import withheld
from service.runs.runs import post_results, start_run
from tests.conftest import REPO_ROOT, TEST_SECRET_KEY
from tests.eval_support import kev_records
from tests.evidence_support import PUBLIC_CORPUS, register_corpus, register_model
from tests.ui.browser.conftest import EVAL, UiServer, sign_in
from tests.ui.browser.test_ui_registry_evidence_audit import MODEL
from tests.ui.browser.test_ui_registry_evidence_audit import seed as evidence_seed

SCREENSHOTS = REPO_ROOT / "var" / "screenshots"
SCREENS = {"small-phone": (360, 740), "phone": (390, 844), "desktop": (1400, 900)}
HEADER_BACKGROUND = "rgb(29, 36, 48)"
"""The header's dark bar (`--ink` of app.css)."""
LONG_TEXT = 8
NARROWEST_CELL = 60
"""A table cell holding at least `LONG_TEXT` characters is at least this many pixels wide: a
narrower one has been squeezed to a letter or two a line."""


def _dev_run(engine: Engine, model: str, release: int, rng: np.random.Generator, ability: float) -> int:
    """A scored dev run of `model` on `release` of the eval (item scores drawn at `ability`); its id."""
    started = start_run(
        engine=engine, eval_name=EVAL, data=RunCreate(model=model, endpoint=f"{model}-api", release=release), actor="test", scopes=frozenset({"read"}), terms_max_age_days=90
    )
    scores = [ResultIn(item_id=item.item_id, score=float(rng.random() < ability)) for item in started.items]
    with write_transaction(engine) as session:
        run = session.exec(select(Run).where(Run.id == started.id)).one()
        post_results(session=session, run=run, data=ResultsPost(results=scores), actor="test")
    return started.id


def reports_world(engine: Engine) -> None:
    """What fills the evidence page's two reports: five reference models with dev runs on release 2
    and results on a public corpus of 60 KEV records, the probed model's results there too (its
    probe run is its dev run), a second run of one reference model on release 1, and the eval's
    scale fitted."""
    rng = np.random.default_rng(41)
    register_corpus(engine, PUBLIC_CORPUS, kev_records()[:60])
    with Session(engine) as session:
        corpus = require_corpus(session=session, name=PUBLIC_CORPUS)
        external = [str(item.external_id) for item in session.exec(select(Item).where(Item.source_id == corpus.id).order_by(col(Item.id))).all()]
    runs = []
    for number, model in enumerate([*(f"ref-{index}" for index in range(5)), MODEL]):
        ability = 0.3 + 0.1 * number
        if model != MODEL:
            register_model(engine, model, cutoff=None, endpoints={f"{model}-api": TrainsOnInputs.NO})
            runs.append(_dev_run(engine, model, 2, rng, ability))
        results = [CorpusResultIn(external_id=name, score=float(rng.random() < ability)) for name in external]
        with write_transaction(engine) as session:
            corpus = require_corpus(session=session, name=PUBLIC_CORPUS)
            post_corpus_results(session=session, corpus=corpus, data=CorpusResultsPost(model=model, results=results), actor="test")
    earlier = _dev_run(engine, "ref-0", 1, rng, 0.3)
    with Session(engine) as session:
        evaluation = session.exec(select(Eval).where(Eval.name == EVAL)).one()
    assert refit(engine, evaluation=evaluation) is not None
    assert earlier > runs[0]


def _reports_query(engine: Engine) -> str:
    """The evidence page's query filling both reports of `reports_world`: the public inflation of
    the probed model, and the change from ref-0's run on release 1 to its run on release 2."""
    with Session(engine) as session:
        on_2, on_1 = session.exec(select(Run.id).join(Model, col(Model.id) == Run.model_id).where(Model.name == "ref-0").order_by(col(Run.id))).all()
    return urlencode({"inflation_model": MODEL, "inflation_eval": EVAL, "inflation_corpus": PUBLIC_CORPUS, "run_a": on_1, "run_b": on_2})


def seed(engine: Engine) -> dict[str, str]:
    """The registry module's world (releases 1 and 2 of eval `kev`, a model with endpoints, a
    finished probe whose run was scored, rejections), two open dedup questions between items
    anyone may see, and the evidence page's reports filled (`reports_world`)."""
    tokens = evidence_seed(engine)
    reports_world(engine)
    with Session(engine) as session:
        unique = [item.id for item in session.exec(select(Item).where(Item.status == ItemStatus.UNIQUE.value).order_by(col(Item.id))).all() if item.id is not None]
        hidden = withheld(session=session, item_ids=unique, secret_key=TEST_SECRET_KEY)
    visible = [item_id for item_id in unique if item_id not in hidden]
    assert len(visible) >= 3
    with write_transaction(engine) as session:
        for item_id in visible[-2:]:
            evidence = {"stage": "embedding", "features": {"body_cosine": 0.81, "title_cosine": 0.64}}
            session.add(DedupQuestion(item_id=item_id, other_id=visible[0], p_same=0.42, rules_outcome="unique", evidence=evidence))
    return tokens


def _pages(engine: Engine) -> dict[str, str]:
    """Each page to look at, by the name of its screenshot."""
    with Session(engine) as session:
        evaluation = session.exec(select(Eval).where(Eval.name == EVAL)).one()
        probe = session.exec(select(Probe).where(Probe.status == "done")).first()
        assert probe is not None and probe.run_id is not None
        served = select(RunItem.item_id).where(RunItem.run_id == probe.run_id)
        member = select(EvalItem.item_id).where(EvalItem.eval_id == evaluation.id, EvalItem.split == Split.DEV.value)
        # A released dev item a probe sent out: revisions, dedup history, exposures and releases to show.
        shown = session.exec(select(Item.id).where(col(Item.id).in_(served), col(Item.id).in_(member)).order_by(col(Item.id))).first()
        assert shown is not None
    return {
        "overview": "/ui",
        "evals": "/ui/evals",
        "eval-releases": f"/ui/evals/{EVAL}/releases",
        "release": f"/ui/evals/{EVAL}/releases/2",
        "release-diff": f"/ui/evals/{EVAL}/releases/1/diff/2",
        "review": f"/ui/evals/{EVAL}/review",
        "review-team": f"/ui/evals/{EVAL}/team",
        "items": "/ui/items",
        "item": f"/ui/items/{shown}",
        "item-edit": f"/ui/items/{shown}/edit",
        "questions": "/ui/dedup/questions",
        "registry": "/ui/registry",
        "evidence": "/ui/evidence",
        "temporal-split": f"/ui/evidence?model={MODEL}&eval={EVAL}",
        "evidence-reports": f"/ui/evidence?{_reports_query(engine)}",
        "audit": "/ui/audit",
        "sources": "/ui/sources",
        "source-new": "/ui/sources/new?kind=jira",
        "source-settings": "/ui/sources/kev",
        "upload": "/ui/upload",
        "tokens": "/ui/tokens",
        "eval-new": "/ui/evals/new",
        "runs": "/ui/runs",
        "model": f"/ui/models/{MODEL}",
    }


def _header_problems(page: Page) -> list[str]:
    """What is wrong with the header: a control of it hidden, or lying off its box."""
    found: list[str] = page.evaluate(
        """() => {
          const header = document.querySelector("header.top");
          const box = header.getBoundingClientRect();
          const problems = [];
          const controls = header.querySelectorAll("a, button, .who span");
          if (controls.length < 9) { problems.push(`only ${controls.length} controls in the header`); }
          for (const control of controls) {
            const rect = control.getBoundingClientRect();
            const name = control.textContent.trim().slice(0, 30);
            if (rect.width === 0 || rect.height === 0) { problems.push(`${name}: not visible`); continue; }
            if (rect.left < box.left - 0.5 || rect.right > box.right + 0.5 || rect.top < box.top - 0.5 || rect.bottom > box.bottom + 0.5) {
              problems.push(`${name}: at ${rect.left},${rect.top}-${rect.right},${rect.bottom}, outside the header's ${box.left},${box.top}-${box.right},${box.bottom}`);
            }
            if (rect.right > window.innerWidth + 0.5) { problems.push(`${name}: past the window's right edge`); }
          }
          return problems;
        }"""
    )
    return found


def _squeezed_cells(page: Page) -> list[str]:
    """Table cells with a long text squeezed narrower than `NARROWEST_CELL` pixels."""
    found: list[str] = page.evaluate(
        """([longText, narrowest]) => {
          // The text a cell shows: a label only for screen readers (.visually-hidden) takes no room.
          const spoken = (node) => node.classList && node.classList.contains("visually-hidden");
          const shown = (cell) => [...cell.childNodes].filter((node) => !spoken(node)).map((node) => node.textContent).join("").trim();
          return [...document.querySelectorAll("td, th")]
            .filter((cell) => cell.offsetParent !== null && shown(cell).length >= longText && cell.getBoundingClientRect().width < narrowest)
            .map((cell) => `${shown(cell).slice(0, 40)} (${Math.round(cell.getBoundingClientRect().width)} px)`);
        }""",
        [LONG_TEXT, NARROWEST_CELL],
    )
    return found


def _broken_words(page: Page) -> list[str]:
    """Words of a control's or a heading cell's text broken across two lines ("Reje" / "ct")."""
    found: list[str] = page.evaluate(
        """() => {
          const broken = [];
          for (const element of document.querySelectorAll("button, .button, label, th, header.top a")) {
            if (element.offsetParent === null || element.closest(".visually-hidden")) { continue; }
            const walker = document.createTreeWalker(element, NodeFilter.SHOW_TEXT);
            for (let node = walker.nextNode(); node; node = walker.nextNode()) {
              for (const match of node.textContent.matchAll(/\\S+/g)) {
                const range = document.createRange();
                range.setStart(node, match.index);
                range.setEnd(node, match.index + match[0].length);
                const tops = new Set([...range.getClientRects()].filter((rect) => rect.width > 0).map((rect) => Math.round(rect.top)));
                if (tops.size > 1) { broken.push(`${match[0]} in ${element.tagName.toLowerCase()} "${element.textContent.trim().slice(0, 40)}"`); }
              }
            }
          }
          return broken;
        }"""
    )
    return found


def _backticks(page: Page) -> list[str]:
    """Sentences of the page that show a backtick: a `quoted` command or setting is shown as code.
    Item texts (in `pre` and word diffs) and typed values are left out: they are the data's own."""
    found: list[str] = page.evaluate(
        """() => {
          const main = document.querySelector("main").cloneNode(true);
          main.querySelectorAll("pre, .diff, textarea, input, select").forEach((element) => element.remove());
          return main.textContent.split(/\\n/).filter((line) => line.includes("`")).map((line) => line.trim().slice(0, 80));
        }"""
    )
    return found


def _settled(page: Page) -> None:
    """Every image loaded (the evidence charts), before anything is measured."""
    page.wait_for_load_state()
    page.wait_for_function("() => [...document.images].every((image) => image.complete)")


@pytest.mark.parametrize("screen", list(SCREENS))
def test_every_page_fits_the_screen_with_its_header_on_the_dark_bar(page: Page, ui_server: UiServer, screen: str) -> None:
    width, height = SCREENS[screen]
    page.set_viewport_size({"width": width, "height": height})
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.goto("/ui/login")
    assert page.evaluate("() => document.documentElement.scrollWidth") <= width
    page.screenshot(path=str(SCREENSHOTS / f"login-{width}.png"), full_page=True)
    sign_in(page, ui_server, "admin")
    problems: dict[str, Any] = {}
    for name, path in _pages(ui_server.engine).items():
        answer = page.goto(path)
        assert answer is not None and answer.status == 200, f"{path}: {answer.status if answer else 'no answer'}"
        _settled(page)
        if name == "evidence-reports":
            for title in ("#inflation-title", "#change-title"):
                expect(page.locator(title)).to_be_visible()
            assert page.evaluate("() => [...document.querySelectorAll('img.chart')].filter((image) => image.naturalWidth > 0).length") >= 2
        page.screenshot(path=str(SCREENSHOTS / f"{name}-{width}.png"), full_page=True)
        header = page.locator("header.top")
        expect(header.get_by_role("link", name="Evidence")).to_be_visible()
        expect(header.get_by_role("button", name="Sign out")).to_be_visible()
        found = []
        page_width = page.evaluate("() => document.documentElement.scrollWidth")
        if page_width > width:
            found.append(f"the page is {page_width} px wide in a {width} px window")
        background = header.evaluate("(element) => getComputedStyle(element).backgroundColor")
        if background != HEADER_BACKGROUND:
            found.append(f"the header's background is {background}")
        found += _header_problems(page)
        found += [f"squeezed cell: {cell}" for cell in _squeezed_cells(page)]
        found += [f"broken word: {word}" for word in _broken_words(page)]
        found += [f"a backtick shown: {line}" for line in _backticks(page)]
        if found:
            problems[name] = found
    assert not problems, f"at {width}×{height}: {problems}"
