"""Completion probes through the service's HTTP API, against real language models served over
loopback: a word n-gram model trained in the setup on the pre-cutoff half of the CISA KEV catalog
(registered as a public corpus) is separated from the control band, one trained on news headlines
is not, and the catalog's near copies of older items are kept out of the control band. For an
eval's items: the gate, the exposure ledger, and sealed items never sent."""

from __future__ import annotations

import json
import time
from datetime import UTC, date, datetime
from typing import Any

import httpx
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from curation.evidence.clean_band import DatedText, near_any
from curation.evidence.probing import cut_item
from schemas.audit import AuditEvent
from schemas.evidence import ProbeItem, ProbeReport
from schemas.item import Item
from schemas.model_registry import TrainsOnInputs
from schemas.probe_tests import ProbeMetric
from schemas.probes import Probe, ProbeRead
from schemas.runs import RunItem
from tests.conftest import SHARED_DATA, LiveServer
from tests.eval_support import kev_records
from tests.evidence_support import register_corpus, register_model
from tests.support.corpora import KEV_CUTOFF
from tests.support.images import assert_png, assert_svg
from tests.support.ngram_server import WordNgramModel, serve_model

CORPUS = "cisa-kev"
EVAL_CUTOFF = date(2024, 3, 1)


def wait_for(client: httpx.Client, probe_id: int, timeout: float = 90.0) -> ProbeRead:
    """Poll the probe until it is done or failed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        probe = ProbeRead.model_validate(client.get(f"/v1/probes/{probe_id}").raise_for_status().json())
        if probe.status in ("done", "failed"):
            return probe
        time.sleep(0.1)
    raise AssertionError(f"probe {probe_id} did not finish in {timeout} s")


def inputs(engine: Engine, *, before: date | None = None) -> list[str]:
    """The stored input texts of every item (dated before `before` when given)."""
    with Session(engine) as session:
        query = select(Item.input)
        if before is not None:
            query = query.where(col(Item.occurred_at) < datetime(before.year, before.month, before.day, tzinfo=UTC))
        return list(session.exec(query).all())


def assert_clean_control_band(engine: Engine, report: ProbeReport) -> None:
    """The KEV catalog's 27 items dated after the cutoff that copy an older one (3 word for word, 24
    at the MinHash link level) were left out of the probe's control band, counted and warned about,
    and no probed control item is near any item of the corpus dated before the cutoff."""
    with Session(engine) as session:
        stored = [DatedText(item.external_id, item.input, item.occurred_at) for item in session.exec(select(Item))]
    control = {result.item_id for result in report.items if result.band == "control"}
    older = [item for item in stored if item.occurred_at < datetime(KEV_CUTOFF.year, KEV_CUTOFF.month, KEV_CUTOFF.day, tzinfo=UTC)]
    assert near_any([item for item in stored if item.item_id in control], older) == {}
    assert report.n_control_near_pre_cutoff == 27
    assert "; 27 later items were left out of the control as near copies of older ones)" in report.summary
    warning = next(warning for warning in report.warnings if warning.code == "control_near_pre_cutoff")
    assert warning.message.startswith("27 items dated on or after the cutoff were left out of the control band (24 minhash, 3 exact)")


def headlines_model() -> WordNgramModel:
    texts: list[str] = []
    for line in (SHARED_DATA / "sts_headlines" / "pairs.jsonl").read_text(encoding="utf-8").splitlines():
        pair = json.loads(line)
        texts += [pair["s1"], pair["s2"]]
    return WordNgramModel.train(texts)


def test_a_memorising_model_is_flagged_and_a_clean_one_is_not_through_the_api(live_server: LiveServer, engine: Engine) -> None:
    register_corpus(engine, CORPUS, kev_records())
    memorising = WordNgramModel.train(inputs(engine, before=KEV_CUTOFF))
    with serve_model(memorising, "kev-ngram") as seen, serve_model(headlines_model(), "news-ngram") as unseen, live_server.client("admin") as client:
        # Terms unknown on purpose: a public corpus needs no gate and exposes nothing.
        register_model(engine, "kev-ngram", cutoff=KEV_CUTOFF, base_url=seen.base_url, endpoints={"kev-ngram-local": TrainsOnInputs.UNKNOWN})
        register_model(engine, "news-ngram", cutoff=KEV_CUTOFF, base_url=unseen.base_url, endpoints={"news-ngram-local": TrainsOnInputs.UNKNOWN})
        names = {"dataset_name": "CISA KEV", "split_name": "catalog"}
        started = [
            client.post("/v1/probes", json={"corpus": CORPUS, "model": name, "endpoint": f"{name}-local", "limit": 300, "concurrency": 8, **names})
            for name in ("kev-ngram", "news-ngram")
        ]
        assert [response.status_code for response in started] == [202, 202], started[0].text
        assert started[0].headers["location"] == f"/v1/probes/{started[0].json()['id']}"
        flagged, clean = (wait_for(client, response.json()["id"]) for response in started)
        svg = client.get(f"/v1/probes/{flagged.id}/chart")
        png = client.get(f"/v1/probes/{clean.id}/chart", params={"format": "png"})
    assert flagged.status == "done" and clean.status == "done", (flagged.error, clean.error)
    assert flagged.report is not None and clean.report is not None
    assert (flagged.report.n_pre_cutoff, flagged.report.n_control, flagged.report.n_failed) == (150, 150, 0)
    assert len(seen.bodies) == 300 and {body["temperature"] for body in seen.bodies} == {0}
    assert all("the catalog split of the CISA KEV dataset" in body["messages"][-1]["content"] for body in seen.bodies)
    primary = flagged.report.comparison(ProbeMetric.LEVENSHTEIN)
    assert primary.flagged and primary.length_matched_p_value < 1e-6 and primary.median_gap > 0.3
    assert_clean_control_band(engine, flagged.report)
    # The headline share is read against the share chance gives at the items' lengths (not 5%).
    chance = clean.report.comparison(clean.report.primary_metric).expected_share_length_matched
    assert chance is not None and f"where about {chance:.0%} would by chance, given" in clean.report.summary
    assert "not an accusation" in flagged.report.statement
    for comparison in clean.report.metrics:
        assert not comparison.flagged and abs(comparison.median_gap) < 0.05
    assert svg.headers["content-type"] == "image/svg+xml"
    assert_svg(svg.content)
    assert_png(png.content)
    with Session(engine) as session:
        assert session.exec(select(RunItem)).all() == []
        assert session.exec(select(Item).where(col(Item.exposed_at).is_not(None))).all() == []
        assert {probe.run_id for probe in session.exec(select(Probe))} == {None}


def _probe(client: httpx.Client, endpoint: str, **extra: Any) -> httpx.Response:
    return client.post("/v1/probes", json={"eval": "ops", "model": "m1", "endpoint": endpoint, **extra})


def test_probing_an_eval_never_sends_sealed_items_and_records_every_item_sent(live_server: LiveServer, engine: Engine, private_eval: dict[str, Any]) -> None:
    model = WordNgramModel.train(private_eval["texts"].values())
    with serve_model(model, "m1") as server, live_server.client("admin") as client:
        endpoints = {"m1-no": TrainsOnInputs.NO, "m1-yes": TrainsOnInputs.YES, "m1-unknown": TrainsOnInputs.UNKNOWN}
        register_model(engine, "m1", cutoff=EVAL_CUTOFF, base_url=server.base_url, endpoints=endpoints)
        refused = _probe(client, "m1-yes")
        unknown = _probe(client, "m1-unknown")
        assert server.bodies == []  # refused before anything was sent
        clean = wait_for(client, _probe(client, "m1-no", api_key="sk-test-not-stored").json()["id"])
        exposing = wait_for(client, _probe(client, "m1-yes", allow_exposure=True, limit=10).json()["id"])
        reader = client.post("/v1/probes", json={"eval": "ops", "model": "m1", "endpoint": "m1-no"}, headers={"Authorization": f"Bearer {live_server.token('read')}"})
    assert refused.status_code == 403 and refused.json()["condition"] == "trains_on_inputs"
    assert "trains on its inputs" in refused.json()["detail"] and "allow_exposure" in refused.json()["detail"]
    assert unknown.status_code == 403 and unknown.json()["condition"] == "terms_unknown"
    assert reader.status_code == 403 and "'admin' scope" in reader.json()["detail"]
    assert clean.status == "done" and exposing.status == "done", (clean.error, exposing.error)

    sent = [body["messages"][-1]["content"].split("First part:\n", 1)[1] for body in server.bodies]
    assert clean.report is not None
    # Dev items after the cutoff that curation linked to an older item (KEV's Apple kernel entries) are kept out of the control band, and counted.
    assert clean.report.n_control_near_pre_cutoff >= 1
    probed = len(private_eval["dev"]) - clean.report.n_control_near_pre_cutoff
    assert len(sent) == probed + 10
    assert (clean.report.n_control_near_pre_cutoff > 0) == ("control_near_pre_cutoff" in {warning.code for warning in clean.report.warnings})

    def prefix(item_id: int) -> str:
        return cut_item(ProbeItem(item_id=str(item_id), occurred_at=datetime.now(UTC), text=private_eval["texts"][item_id])).prefix

    # KEV repeats descriptions across CVEs: only sealed items whose prefix no dev item shares can be told apart.
    sealed_only = {prefix(item_id) for item_id in private_eval["sealed"]} - {prefix(item_id) for item_id in private_eval["dev"]}
    assert len(sealed_only) >= len(private_eval["sealed"]) // 2
    assert sealed_only.isdisjoint(sent)
    assert set(sent[:probed]) <= {prefix(item_id) for item_id in private_eval["dev"]}
    assert {int(result.item_id) for result in clean.report.items} <= set(private_eval["dev"]) and len(clean.report.items) == probed

    with Session(engine) as session:
        ledger = {(row.run_id, row.item_id, row.split) for row in session.exec(select(RunItem))}
        probes = {probe.id: probe for probe in session.exec(select(Probe))}
        exposed = set(session.exec(select(Item.id).where(col(Item.exposed_at).is_not(None))).all())
        audit = [event.details for event in session.exec(select(AuditEvent).where(AuditEvent.action == "probe.refused"))]
        stored = json.dumps([probe.model_dump(mode="json") for probe in probes.values()]) + json.dumps([event.details for event in session.exec(select(AuditEvent))])
    assert {row for row in ledger if row[0] == clean.run_id} == {(clean.run_id, int(result.item_id), "dev") for result in clean.report.items}
    assert {item_id for run_id, item_id, _ in ledger if run_id == exposing.run_id} == set(probes[exposing.id].item_ids) and len(probes[exposing.id].item_ids) == 10
    assert exposed == set(probes[exposing.id].item_ids)  # only the items sent to the endpoint that trains on inputs
    assert exposing.exposes_items and not clean.exposes_items
    assert [details["condition"] for details in audit] == ["trains_on_inputs", "terms_unknown"]
    assert "sk-test-not-stored" not in stored and probes[clean.id].settings["api_key_from"] == "request"


def test_a_sample_is_balanced_around_the_cutoff_and_a_doomed_probe_sends_nothing(live_server: LiveServer, engine: Engine, private_eval: dict[str, Any]) -> None:
    with serve_model(WordNgramModel.train(["a b c d e f"]), "m1") as server, live_server.client("admin") as client:
        register_model(engine, "m1", cutoff=EVAL_CUTOFF, base_url=server.base_url, endpoints={"m1-no": TrainsOnInputs.NO})
        register_model(engine, "m2", cutoff=date(2020, 1, 1), base_url=server.base_url, endpoints={"m2-no": TrainsOnInputs.NO})
        sampled = wait_for(client, _probe(client, "m1-no", limit=12).json()["id"])
        doomed = client.post("/v1/probes", json={"eval": "ops", "model": "m2", "endpoint": "m2-no"})
        mismatched = client.post("/v1/probes", json={"eval": "ops", "model": "m1", "endpoint": "m2-no"})
        both = client.post("/v1/probes", json={"eval": "ops", "corpus": "x", "model": "m1", "endpoint": "m1-no"})
        bad_format = client.get(f"/v1/probes/{sampled.id}/chart", params={"format": "gif"})
    assert sampled.status == "done" and sampled.report is not None, sampled.error
    assert (sampled.report.n_pre_cutoff, sampled.report.n_control) == (6, 6)
    assert {warning.code for warning in sampled.report.warnings} >= {"small_control_band", "small_pre_cutoff_band"}
    assert len(server.bodies) == 12
    assert doomed.status_code == 422 and "0 items to probe are dated before" in doomed.json()["detail"]
    assert mismatched.status_code == 422 and "does not serve model" in mismatched.json()["detail"]
    assert both.status_code == 422
    assert bad_format.status_code == 422
    with Session(engine) as session:
        assert len(session.exec(select(Probe)).all()) == 1  # refused probes leave no probe and no ledger rows
        assert {row.run_id for row in session.exec(select(RunItem))} == {sampled.run_id}


def test_report_json_round_trips(live_server: LiveServer, engine: Engine, private_eval: dict[str, Any]) -> None:
    with serve_model(WordNgramModel.train(private_eval["texts"].values()), "m1") as server, live_server.client("admin") as client:
        register_model(engine, "m1", cutoff=EVAL_CUTOFF, base_url=server.base_url, endpoints={"m1-no": TrainsOnInputs.NO})
        done = wait_for(client, _probe(client, "m1-no").json()["id"])
        listed = client.get("/v1/probes").json()
    assert done.report is not None and ProbeReport.model_validate_json(done.report.model_dump_json()) == done.report
    assert [probe["id"] for probe in listed] == [done.id]

