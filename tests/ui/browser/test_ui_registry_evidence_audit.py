"""The registry, evidence and audit pages in Chromium: endpoint terms coloured by the age of their
check and edited by an admin only; a finished completion probe (run in the setup against a word
n-gram model served on loopback) and a temporal-split report with their charts; starting a probe
from the page; the audit log filtered, closed to anyone without `admin`, and never showing what a
person wrote about a sealed item to someone without `sealed`."""

from __future__ import annotations

import json
import re
import time
from datetime import date, timedelta

from playwright.sync_api import BrowserContext, Page, expect
from sqlalchemy import func
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from curation.review import decide
from schemas.audit import AuditEvent
from schemas.common import utcnow
from schemas.evals import Eval, Split
from schemas.item import Item, ItemStatus
from schemas.model_registry import Endpoint, EndpointCreate, ModelCreate, TrainsOnInputs
from schemas.probes import Probe, ProbeCreate
from schemas.release import Release, ReleaseItem
from schemas.review import Decision
from schemas.runs import ResultIn, ResultsPost, Run, RunItem
from service.core.audit import CONTENT_READS
from service.core.db import write_session, write_transaction
from service.core.tokens import create_token
from service.evidence.probe_execution import execute_probe
from service.evidence.probes import prepare_probe
from service.items.shaping import withheld
from service.runs.model_registry import create_endpoint, create_model
from service.runs.runs import post_results
from tests.conftest import TEST_SECRET_KEY
from tests.support.ngram_server import WordNgramModel, serve_model
from tests.ui.browser.conftest import EVAL, Shots, UiServer, seed_pool, sign_in

MODEL = "kev-ngram"
SEALED_REASON = "sealed-reason-marker: the reviewer quoted this item"
OPEN_REASON = "open-reason-marker: not an incident"


def _endpoint(name: str, model: str, base_url: str, terms: TrainsOnInputs, checked_days_ago: int | None) -> EndpointCreate:
    checked = utcnow() - timedelta(days=checked_days_ago) if checked_days_ago is not None else None
    return EndpointCreate(
        name=name, base_url=base_url, provider="acme", model=model, trains_on_inputs=terms, retention_days=30, terms_url="https://acme.test/terms", terms_checked_at=checked
    )


def seed(engine: Engine) -> dict[str, str]:
    """The default pool, plus: a model whose cutoff halves the latest release's dev items, with
    endpoints whose terms are current, stale and unknown; a model without a cutoff; a finished
    probe of the eval through the current endpoint (a dev run, so exposure), with scores posted on
    its run for the temporal split; a rejection of a sealed-bound item and of an open one; and a
    token with `admin` and `sealed`."""
    tokens = seed_pool(engine)
    with write_session(engine) as session:
        tokens["auditor"], _ = create_token(session=session, name="auditor", scopes="admin,sealed")
        evaluation = session.exec(select(Eval).where(Eval.name == EVAL)).one()
        release = session.exec(select(Release).where(Release.eval_id == evaluation.id).order_by(col(Release.number).desc())).first()
        assert release is not None
        rows = session.exec(select(ReleaseItem).where(ReleaseItem.release_id == release.id, ReleaseItem.split == Split.DEV.value)).all()
        days = sorted(row.occurred_at.date() for row in rows)
        cutoff = days[len(days) // 2]
        texts = [json.loads(row.content)["input"] for row in rows if row.occurred_at.date() < cutoff]
        session.commit()
    with serve_model(WordNgramModel.train(texts), MODEL) as server:
        with write_transaction(engine) as session:
            create_model(session=session, data=ModelCreate(name=MODEL, provider="acme", training_cutoff=cutoff, notes="trained on the older dev items"), actor="test")
            create_model(session=session, data=ModelCreate(name="undated", provider="acme"), actor="test")
        for data in (
            _endpoint(f"{MODEL}-local", MODEL, server.base_url, TrainsOnInputs.NO, 1),
            _endpoint(f"{MODEL}-stale", MODEL, server.base_url, TrainsOnInputs.NO, 200),
            _endpoint(f"{MODEL}-unknown", MODEL, server.base_url, TrainsOnInputs.UNKNOWN, None),
            _endpoint("undated-api", "undated", "https://api.acme.test/v1", TrainsOnInputs.UNKNOWN, None),
        ):
            with write_transaction(engine) as session:
                create_endpoint(session=session, data=data, actor="test")
        prepared = prepare_probe(engine=engine, data=ProbeCreate(eval=EVAL, model=MODEL, endpoint=f"{MODEL}-local"), actor="token:admin", terms_max_age_days=90)
        assert execute_probe(engine, prepared) is not None
    with write_transaction(engine) as session:
        probe = session.get(Probe, prepared.probe_id)
        assert probe is not None and probe.run_id is not None
        run = session.get(Run, probe.run_id)
        assert run is not None
        served = session.exec(select(RunItem).where(RunItem.run_id == run.id)).all()
        scores = [ResultIn(item_id=entry.item_id, score=0.9 if entry.occurred_at.date() < cutoff else 0.4) for entry in served]
        post_results(session=session, run=run, data=ResultsPost(results=scores), actor="token:admin")
    with write_session(engine) as session:
        waiting = [item.id for item in session.exec(select(Item).where(Item.status == ItemStatus.UNIQUE.value).order_by(col(Item.id))).all() if item.id is not None]
        hidden = withheld(session=session, item_ids=waiting, secret_key=TEST_SECRET_KEY)
        sealed_one = next(item_id for item_id in waiting if item_id in hidden)
        open_one = next(item_id for item_id in waiting if item_id not in hidden)
        decide(session=session, item_id=sealed_one, decision=Decision.REJECT, reason=SEALED_REASON, actor="token:curator", now=utcnow())
        decide(session=session, item_id=open_one, decision=Decision.REJECT, reason=OPEN_REASON, actor="token:curator", now=utcnow())
        session.commit()
    return tokens


def _endpoint_row(engine: Engine, name: str) -> Endpoint:
    with Session(engine) as session:
        return session.exec(select(Endpoint).where(Endpoint.name == name)).one()


def _probe_status(engine: Engine, probe_id: int) -> str:
    with Session(engine) as session:
        probe = session.get(Probe, probe_id)
        assert probe is not None
        return probe.status


def _chart_loads(page: Page, alt_start: str) -> None:
    image = page.locator(f'img[alt^="{alt_start}"]').first
    expect(image).to_be_visible()
    image.scroll_into_view_if_needed()
    page.wait_for_function("(image) => image.complete && image.naturalWidth > 0", arg=image.element_handle())
    assert image.evaluate("(image) => image.naturalWidth") > 0


def _images_loaded(page: Page) -> None:
    """Every image of the page has loaded (before a screenshot)."""
    page.wait_for_function("() => [...document.images].every((image) => image.complete)")


def test_the_registry_shows_models_terms_by_age_and_exposure_per_endpoint(page: Page, ui_server: UiServer, shots: Shots) -> None:
    sign_in(page, ui_server, "reader")
    page.goto("/ui/registry")
    expect(page.get_by_role("heading", name="Model registry")).to_be_visible()
    models = page.get_by_role("table").first
    expect(models.get_by_role("row", name=re.compile(rf"^{MODEL} acme \d{{4}}-\d\d-\d\d"))).to_be_visible()
    expect(models.get_by_role("row", name=re.compile("^undated"))).to_contain_text("not registered")
    states = {f"{MODEL}-local": "ok", f"{MODEL}-stale": "stale", f"{MODEL}-unknown": "unknown", "undated-api": "unknown"}
    for name, state in states.items():
        row = page.locator(f'tr[id="endpoint-{name}"]')
        marker = row.locator("[data-terms-state]")
        expect(marker).to_have_text(state)
        expect(marker).to_have_class(re.compile(rf"\bage-{state}\b"))
    expect(page.locator(f'tr[id="endpoint-{MODEL}-stale"]')).to_contain_text("200 days ago")
    expect(page.locator('tr[id="endpoint-undated-api"]')).to_contain_text("never checked")
    with Session(ui_server.engine) as session:
        local = session.exec(select(Endpoint).where(Endpoint.name == f"{MODEL}-local")).one()
        seen = session.exec(select(func.count(func.distinct(RunItem.item_id))).where(RunItem.endpoint_id == local.id)).one()
    assert seen > 0
    cells = page.locator(f'tr[id="endpoint-{MODEL}-local"] td.num')
    expect(cells.nth(1)).to_have_text(str(seen))
    expect(cells.nth(2)).to_have_text("0")
    expect(page.locator(f'tr[id="endpoint-{MODEL}-unknown"] td.num').nth(1)).to_have_text("0")
    # A reader sees no control to change the terms.
    expect(page.get_by_role("button", name="Save")).to_have_count(0)
    expect(page.get_by_role("form", name=re.compile("^Terms of"))).to_have_count(0)
    shots(page, "registry as reader")


def test_a_reader_cannot_change_terms_or_start_a_probe_even_with_a_forged_post(page: Page, context: BrowserContext, ui_server: UiServer, shots: Shots) -> None:
    sign_in(page, ui_server, "reader")
    page.goto("/ui/evidence")
    expect(page.get_by_role("heading", name="Start probe")).to_have_count(0)
    expect(page.get_by_role("button", name="Start probe")).to_have_count(0)
    shots(page, "evidence as reader")
    csrf = page.locator('input[name="csrf"]').first.get_attribute("value")
    assert csrf
    before = _endpoint_row(ui_server.engine, "undated-api")
    with Session(ui_server.engine) as session:
        probes = session.exec(select(func.count()).select_from(Probe)).one()
    terms = context.request.post("/ui/registry/endpoints/undated-api/terms", form={"csrf": csrf, "trains_on_inputs": "no", "retention_days": "1", "terms_url": ""}, max_redirects=0)
    probe = context.request.post("/ui/evidence/probes", form={"csrf": csrf, "eval": EVAL, "model": MODEL, "endpoint": f"{MODEL}-local"}, max_redirects=0)
    assert terms.status == 403 and "Not allowed" in terms.text() and "&#39;admin&#39; scope" in terms.text()
    assert probe.status == 403 and "Starting a probe" in probe.text()
    after = _endpoint_row(ui_server.engine, "undated-api")
    assert (after.trains_on_inputs, after.retention_days, after.terms_checked_at, after.updated_at) == (before.trains_on_inputs, before.retention_days, None, before.updated_at)
    with Session(ui_server.engine) as session:
        assert session.exec(select(func.count()).select_from(Probe)).one() == probes
    page.goto("/ui/registry")
    shots(page, "registry after the forged post")


def test_the_evidence_page_shows_the_probe_its_figures_and_its_chart(page: Page, ui_server: UiServer, shots: Shots) -> None:
    sign_in(page, ui_server, "reader")
    page.goto("/ui/evidence")
    expect(page.get_by_role("heading", name="Contamination evidence")).to_be_visible()
    with Session(ui_server.engine) as session:
        probe = session.exec(select(Probe).where(Probe.status == "done").order_by(col(Probe.id))).first()
        assert probe is not None and probe.report is not None
    card = page.locator(f'article[id="probe-{probe.id}"]')
    expect(card.get_by_role("heading")).to_contain_text(f"Probe {probe.id}: {MODEL} through {MODEL}-local on eval {EVAL}")
    expect(card.locator(".state").first).to_have_text("done")
    expect(card).to_contain_text(f"{probe.report['n_pre_cutoff']} items before it, {probe.report['n_control']} in the control band")
    expect(card.get_by_role("row", name=re.compile("^levenshtein_margin \\(primary\\)"))).to_be_visible()
    expect(card.get_by_role("row", name=re.compile("^levenshtein [^(_]"))).to_be_visible()
    _chart_loads(page, f"Probe {probe.id} chart")
    _images_loaded(page)
    shots(page, "evidence with a probe")
    chart = page.request.get(f"/ui/evidence/probes/{probe.id}/chart.png")
    assert chart.status == 200 and chart.headers["content-type"] == "image/png" and chart.body().startswith(b"\x89PNG")
    assert page.request.get("/ui/evidence/probes/999999/chart.svg").status == 404
    assert page.request.get("/ui/evidence/probes/abc/chart.svg").status == 404
    assert page.request.get(f"/ui/evidence/probes/{probe.id}/chart.gif").status == 404


def test_the_temporal_split_form_shows_a_report_and_its_chart_or_why_there_is_none(page: Page, ui_server: UiServer, shots: Shots) -> None:
    sign_in(page, ui_server, "reader")
    page.goto("/ui/evidence")
    form = page.get_by_role("form", name="Temporal split")
    form.get_by_label("Model").select_option(MODEL)
    form.get_by_label("Eval").select_option(EVAL)
    form.get_by_role("button", name="Show report").click()
    expect(page).to_have_url(re.compile(rf"model={MODEL}&eval={EVAL}"))
    report = page.locator("article.evidence-report")
    expect(report.get_by_role("heading")).to_contain_text(f"{MODEL} on eval {EVAL}")
    with Session(ui_server.engine) as session:
        first = session.exec(select(Probe).order_by(col(Probe.id))).first()
        assert first is not None and first.report is not None
        scored = session.exec(select(RunItem.occurred_at).where(RunItem.run_id == first.run_id)).all()
    before = sum(1 for at in scored if at.date() < date.fromisoformat(first.report["cutoff"]))
    expect(report.get_by_role("row", name=re.compile("^Before the cutoff"))).to_contain_text(f"Before the cutoff {before} 0.900")
    expect(report.get_by_role("row", name=re.compile("^On or after the cutoff"))).to_contain_text("0.400")
    expect(report).to_contain_text("+0.500")
    _chart_loads(page, "Temporal-split chart")
    _images_loaded(page)
    shots(page, "temporal split report")

    form.get_by_label("Model").select_option("undated")
    form.get_by_role("button", name="Show report").click()
    expect(page.get_by_role("alert")).to_contain_text("Training cutoff missing")
    expect(page.locator("article.evidence-report")).to_have_count(0)
    _images_loaded(page)
    shots(page, "temporal split refused")
    page.goto(f"/ui/evidence?model={MODEL}&corpus=nothing-here")
    expect(page.get_by_role("alert")).to_contain_text("nothing-here")
    _images_loaded(page)
    shots(page, "temporal split unknown corpus")


def test_an_admin_starts_a_probe_that_runs_in_the_background(page: Page, ui_server: UiServer, shots: Shots) -> None:
    page.on("dialog", lambda dialog: dialog.accept())
    sign_in(page, ui_server, "admin")
    page.goto("/ui/evidence#start-probe")
    form = page.get_by_role("form", name="Start probe")
    expect(form).to_be_visible()
    with Session(ui_server.engine) as session:
        probes = session.exec(select(func.count()).select_from(Probe)).one()

    # The gate refuses unknown terms: a message on the page, nothing recorded but the refusal.
    form.get_by_label("Model", exact=True).select_option(MODEL)
    form.get_by_label("Endpoint", exact=True).select_option(f"{MODEL}-unknown")
    form.get_by_label("Eval to probe").select_option(EVAL)
    form.get_by_role("button", name="Start probe").click()
    expect(page.get_by_role("alert").first).to_contain_text("Probe refused")
    expect(page.get_by_role("form", name="Start probe").get_by_label("Endpoint", exact=True)).to_have_value(f"{MODEL}-unknown")
    _images_loaded(page)
    shots(page, "probe refused")

    # A value the API would refuse comes back with the typed values and what is wrong.
    form = page.get_by_role("form", name="Start probe")
    form.get_by_label("Endpoint", exact=True).select_option(f"{MODEL}-local")
    form.get_by_label("Limit").fill("2")
    form.get_by_role("button", name="Start probe").click()
    form = page.get_by_role("form", name="Start probe")
    expect(form).to_contain_text("greater than or equal to 4")
    expect(form.get_by_label("Limit")).to_have_value("2")
    _images_loaded(page)
    shots(page, "probe form invalid")
    with Session(ui_server.engine) as session:
        assert session.exec(select(func.count()).select_from(Probe)).one() == probes
        assert session.exec(select(AuditEvent).where(AuditEvent.action == "probe.refused", AuditEvent.actor == "token:admin")).first() is not None

    form.get_by_label("Limit").fill("10")
    form.get_by_label("Max attempts").fill("1")
    form.get_by_label("Timeout seconds").fill("5")
    form.get_by_role("button", name="Start probe").click()
    expect(page.get_by_role("status")).to_contain_text("started")
    with Session(ui_server.engine) as session:
        started = session.exec(select(Probe).order_by(col(Probe.id).desc())).first()
    assert started is not None and started.actor == "token:admin" and started.total == 10 and started.settings["max_attempts"] == 1
    assert started.id is not None
    card = page.locator(f'article[id="probe-{started.id}"]')
    expect(card).to_be_visible()
    _images_loaded(page)
    shots(page, "probe started")
    # It ran on the worker: its endpoint is gone (the setup's model server stopped), so it fails, and says why.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and _probe_status(ui_server.engine, started.id) not in ("done", "failed"):
        time.sleep(0.2)
    assert _probe_status(ui_server.engine, started.id) == "failed"
    page.goto("/ui/evidence")
    expect(card.locator(".state").first).to_have_text("failed")
    expect(card.locator("p.error")).to_contain_text("probe")
    _images_loaded(page)
    shots(page, "probe failed")


def test_an_admin_edits_an_endpoints_terms_and_mistakes_come_back_on_the_page(page: Page, ui_server: UiServer, shots: Shots) -> None:
    sign_in(page, ui_server, "admin")
    page.goto("/ui/registry")
    form = page.get_by_role("form", name="Terms of undated-api")
    form.get_by_label("Trains on inputs").select_option("no")
    form.get_by_label("Retention days").fill("14")
    form.get_by_label("Terms URL").fill("https://acme.test/terms-v2")
    form.get_by_role("button", name="Save").click()
    expect(page.get_by_role("status")).to_contain_text("Saved the terms of endpoint undated-api")
    expect(page.locator('tr[id="endpoint-undated-api"] [data-terms-state]')).to_have_text("ok")
    shots(page, "terms saved")
    saved = _endpoint_row(ui_server.engine, "undated-api")
    assert (saved.trains_on_inputs, saved.retention_days, saved.terms_url, saved.checked_by) == ("no", 14, "https://acme.test/terms-v2", "token:admin")
    assert saved.terms_checked_at is not None and utcnow() - saved.terms_checked_at < timedelta(minutes=5)

    before = _endpoint_row(ui_server.engine, f"{MODEL}-stale")
    form = page.get_by_role("form", name=f"Terms of {MODEL}-stale")
    form.get_by_label("Retention days").fill("-3")
    form.get_by_label("Terms URL").fill("ftp://acme.test/terms")
    form.get_by_role("button", name="Save").click()
    form = page.get_by_role("form", name=f"Terms of {MODEL}-stale")
    expect(page.get_by_role("alert").first).to_contain_text("not saved")
    expect(form).to_contain_text("greater than or equal to 0")
    expect(form).to_contain_text("http:// or https://")
    expect(form.get_by_label("Retention days")).to_have_value("-3")
    expect(form.get_by_label("Terms URL")).to_have_value("ftp://acme.test/terms")
    shots(page, "terms invalid")
    after = _endpoint_row(ui_server.engine, f"{MODEL}-stale")
    assert (after.retention_days, after.terms_url, after.terms_checked_at) == (before.retention_days, before.terms_url, before.terms_checked_at)

    # Found unchanged on a fresh look: only the date of the check moves.
    page.goto("/ui/registry")
    form = page.get_by_role("form", name=f"Terms of {MODEL}-stale")
    form.get_by_label("Terms checked now").check()
    form.get_by_role("button", name="Save").click()
    expect(page.locator(f'tr[id="endpoint-{MODEL}-stale"] [data-terms-state]')).to_have_text("ok")
    checked = _endpoint_row(ui_server.engine, f"{MODEL}-stale")
    assert (checked.trains_on_inputs, checked.retention_days) == ("no", 30) and checked.terms_checked_at is not None
    assert before.terms_checked_at is not None and checked.terms_checked_at > before.terms_checked_at
    shots(page, "terms checked now")


def test_the_audit_log_filters_by_action_and_pages_newest_first(page: Page, ui_server: UiServer, shots: Shots) -> None:
    sign_in(page, ui_server, "admin")
    page.goto("/ui/audit")
    expect(page.get_by_role("heading", name="Audit log")).to_be_visible()
    shots(page, "audit")
    page.get_by_label("Action").fill("model.create")
    page.get_by_role("button", name="Filter").click()
    expect(page).to_have_url(re.compile(r"action=model\.create"))
    rows = page.locator("table.audit tbody tr")
    expect(rows).to_have_count(2)
    for index in range(2):
        expect(rows.nth(index).locator("td").nth(2)).to_have_text("model.create")
    expect(rows.first).to_contain_text("undated")  # newest first
    shots(page, "audit filtered")

    page.get_by_label("Action").fill("item.reject")
    page.get_by_role("button", name="Filter").click()
    expect(rows).to_have_count(2)
    html = page.content()
    assert OPEN_REASON in html and "sealed-reason-marker" not in html and "withheld: the item is sealed" in html
    shots(page, "audit rejections as admin")

    with Session(ui_server.engine) as session:
        total = session.exec(select(func.count()).select_from(AuditEvent)).one()
    assert total > 20
    page.goto("/ui/audit?limit=20&reads=with")
    expect(rows).to_have_count(20)
    page.get_by_role("link", name="Older").click()
    expect(page).to_have_url(re.compile(r"reads=with&limit=20&cursor="))
    expect(page.get_by_role("link", name="Newest")).to_be_visible()
    expect(rows).to_have_count(min(20, total - 20))
    shots(page, "audit older page")

    page.goto("/ui/audit?since=yesterday")
    expect(page.get_by_role("alert")).to_contain_text("YYYY-MM-DD")
    shots(page, "audit bad date")
    answer = page.goto("/ui/audit?cursor=forged&limit=abc")
    assert answer is not None and answer.status == 422
    expect(page.get_by_role("alert")).to_contain_text("start again from the newest events")
    shots(page, "audit forged cursor")


def test_the_audit_log_shows_decisions_and_changes_and_counts_the_reads_it_leaves_out(page: Page, ui_server: UiServer, shots: Shots) -> None:
    sign_in(page, ui_server, "admin")
    page.goto("/ui/items")  # a page view: one more item.read
    page.goto("/ui/audit?limit=200")
    rows = page.locator("table.audit tbody tr")
    expect(rows.first).to_be_visible()
    with Session(ui_server.engine) as session:
        actions = list(session.exec(select(AuditEvent.action).order_by(col(AuditEvent.id).desc())).all())
    reads = [action for action in actions if action in CONTENT_READS]
    assert "item.read" in reads and "item.sealed_read" not in CONTENT_READS
    shown = [rows.nth(index).locator("td").nth(2).inner_text().split()[0] for index in range(rows.count())]
    assert shown == [action for action in actions if action not in CONTENT_READS][:200]
    expect(page.get_by_label("Show")).to_have_value("")
    expect(page.get_by_role("status")).to_have_text(re.compile(rf"^{len(reads)} content reads? matching these filters left out"))
    shots(page, "audit without reads")

    page.get_by_role("link", name="Show them too").click()
    expect(page.get_by_label("Show")).to_have_value("with")
    expect(page.locator("table.audit tbody tr td:nth-child(3)", has_text="item.read").first).to_be_visible()
    expect(page.get_by_role("status")).to_have_count(0)
    page.get_by_label("Show").select_option("only")
    page.get_by_role("button", name="Filter").click()
    expect(page).to_have_url(re.compile(r"reads=only"))
    only = [rows.nth(index).locator("td").nth(2).inner_text().split()[0] for index in range(rows.count())]
    assert only and set(only) <= CONTENT_READS
    shots(page, "audit reads only")

    # An action typed in the filter is shown even when it is a read.
    page.goto("/ui/audit?action=item.read")
    expect(rows.first.locator("td").nth(2)).to_have_text("item.read")


def test_a_person_with_sealed_reads_what_was_written_about_sealed_items(page: Page, ui_server: UiServer, shots: Shots) -> None:
    sign_in(page, ui_server, "auditor")
    page.goto("/ui/audit?action=item.reject")
    expect(page.locator("table.audit tbody tr")).to_have_count(2)
    assert SEALED_REASON in page.content()
    shots(page, "audit rejections with sealed")


def test_the_audit_log_is_refused_without_admin(page: Page, ui_server: UiServer, shots: Shots) -> None:
    for role in ("reader", "curator"):
        sign_in(page, ui_server, role)
        answer = page.goto("/ui/audit?action=item.reject")
        assert answer is not None and answer.status == 403
        expect(page.get_by_role("heading", name="Not allowed")).to_be_visible()
        expect(page.get_by_role("alert")).to_contain_text("'admin' scope")
        expect(page.locator("table")).to_have_count(0)
        assert OPEN_REASON not in page.content()
        shots(page, f"audit refused to {role}")
        page.get_by_role("button", name="Sign out").click()
