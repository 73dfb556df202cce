"""The log-probability tests through the service's HTTP API, against a real smoothed language model
served over loopback (`tests.support.logprob_server`): a character n-gram model trained on KEV-style
background text and on the pre-cutoff half of a KEV sample twice writes none of those items out
greedily (the completion test passes it), yet finds them likelier than the control band's (the
log-probability and reference tests flag it); the same model without them is not flagged. Every
rule of the probe holds for the new tests and for the reference endpoint: sealed items never sent,
the gate and the bare-model guard on both endpoints, and both endpoints' dev runs in the ledger."""

from __future__ import annotations

import json
from typing import Any

import httpx
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from schemas.model_registry import Augmentation, LogprobSupport, TrainsOnInputs
from schemas.probe_tests import ProbeMetric, ProbeTest
from schemas.probes import ProbeRead
from schemas.runs import Run, RunItem
from tests.conftest import SHARED_DATA, LiveServer
from tests.eval_support import kev_records
from tests.evidence.e2e.test_probe_service import EVAL_CUTOFF, inputs, wait_for
from tests.evidence_support import register_corpus, register_model
from tests.support.corpora import KEV_CUTOFF
from tests.support.logprob_server import serve_language_model
from tests.support.ngram_lm import CharNgramModel

CORPUS = "kev-sample"
PER_BAND = 150
BACKGROUND_PER_BAND = 200
EXPOSURES = 2


def _kev_input(record: dict[str, Any]) -> str:
    return " ".join(f"{record['vendorProject']} {record['product']}: {record['shortDescription']}".split())


def _headlines() -> list[str]:
    texts: list[str] = []
    for line in (SHARED_DATA / "sts_headlines" / "pairs.jsonl").read_text(encoding="utf-8").splitlines():
        pair = json.loads(line)
        texts += [pair["s1"], pair["s2"]]
    return texts


def _start(client: httpx.Client, model: str, endpoint: str, **extra: Any) -> httpx.Response:
    return client.post("/v1/probes", json={"corpus": CORPUS, "model": model, "endpoint": endpoint, "concurrency": 8, **extra})


def _finished(client: httpx.Client, response: httpx.Response) -> ProbeRead:
    assert response.status_code == 202, response.text
    return wait_for(client, response.json()["id"], timeout=180.0)


def test_the_log_probability_tests_see_what_the_completion_test_cannot(live_server: LiveServer, engine: Engine) -> None:
    before, after = kev_records(until="2024-01-01"), kev_records(since="2024-01-01")
    probed = before[::7][:PER_BAND] + after[::2][:PER_BAND]
    unprobed_before = [record for record in before if record not in probed][:BACKGROUND_PER_BAND]
    unprobed_after = [record for record in after if record not in probed][:BACKGROUND_PER_BAND]
    register_corpus(engine, CORPUS, probed)
    background = _headlines() + [_kev_input(record) for record in unprobed_before + unprobed_after]
    seen = CharNgramModel.train(background + inputs(engine, before=KEV_CUTOFF) * EXPOSURES)
    clean = CharNgramModel.train(background)
    with serve_language_model(seen, "kev-lm") as target, serve_language_model(clean, "news-lm") as unseen, live_server.client("admin") as client:
        register_model(engine, "kev-lm", cutoff=KEV_CUTOFF, base_url=target.base_url, endpoints={"kev-lm-echo": TrainsOnInputs.UNKNOWN}, logprobs=LogprobSupport.COMPLETIONS_ECHO)
        for name, logprobs in (("kev-lm-chat", "chat"), ("kev-lm-tgi", "tgi_prefill")):
            assert client.post("/v1/endpoints", json={"name": name, "base_url": target.base_url, "model": "kev-lm", "logprobs": logprobs}).status_code == 201
        register_model(engine, "news-lm", cutoff=KEV_CUTOFF, base_url=unseen.base_url, endpoints={"news-lm-echo": TrainsOnInputs.UNKNOWN}, logprobs=LogprobSupport.COMPLETIONS_ECHO)
        started = {
            "completion": _start(client, "kev-lm", "kev-lm-chat"),
            "logprob": _start(client, "kev-lm", "kev-lm-echo"),
            "clean": _start(client, "news-lm", "news-lm-echo"),
            "reference": _start(client, "kev-lm", "kev-lm-echo", reference_endpoint="news-lm-echo"),
            "tgi": _start(client, "kev-lm", "kev-lm-tgi", test="logprob"),
        }
        refused = _start(client, "kev-lm", "kev-lm-chat", test="logprob")
        probes = {name: _finished(client, response) for name, response in started.items()}
        chart = client.get(f"/v1/probes/{probes['reference'].id}/chart")
    assert refused.status_code == 422 and refused.json()["reason"] == "test_not_available"
    assert "records logprobs 'chat'" in refused.json()["detail"] and "PATCH /v1/endpoints/kev-lm-chat" in refused.json()["detail"]
    reports = {}
    for name, probe in probes.items():
        assert probe.status == "done" and probe.report is not None, (name, probe.error)
        # Four control items are near copies of older KEV records: the clean band leaves them out.
        left_out = probe.report.n_control_near_pre_cutoff
        assert (probe.report.n_pre_cutoff, probe.report.n_control + left_out, probe.report.n_failed, left_out) == (PER_BAND, PER_BAND, 0, 4), name
        reports[name] = probe.report
    assert [reports[name].test for name in reports] == [ProbeTest.COMPLETION, ProbeTest.LOGPROB, ProbeTest.LOGPROB, ProbeTest.REFERENCE_LOGPROB, ProbeTest.LOGPROB]
    assert probes["reference"].test == ProbeTest.REFERENCE_LOGPROB and probes["reference"].reference_endpoint == "news-lm-echo"
    assert (reports["reference"].reference_model, reports["reference"].reference_endpoint) == ("news-lm", "news-lm-echo")
    # The completion test reads greedy text: the model writes none of the items it saw.
    assert not any(comparison.flagged for comparison in reports["completion"].metrics)
    assert "verbatim-level memorisation" in reports["completion"].test_sees
    # The log-probability tests read the probabilities: flagged on every metric, the primary one by default.
    for name, primary in (("logprob", ProbeMetric.MIN_K_PLUS_PLUS), ("reference", ProbeMetric.REFERENCE_GAP), ("tgi", ProbeMetric.MIN_K)):
        report = reports[name]
        assert report.primary_metric == primary, name
        assert all(comparison.flagged for comparison in report.metrics), name
        assert report.comparison(primary).length_matched_p_value < 1e-6, name
        assert report.summary.startswith(("Log-probability membership test", "Reference-calibrated")), report.summary
    assert ProbeMetric.MIN_K_PLUS_PLUS not in {comparison.metric for comparison in reports["tgi"].metrics}  # TGI gives no top-k
    assert "partial memorisation" in reports["logprob"].test_sees and "easy text" in reports["reference"].test_sees
    assert not any(comparison.flagged for comparison in reports["clean"].metrics)
    assert chart.status_code == 200 and chart.headers["content-type"] == "image/svg+xml"
    paths = [body["path"] for body in target.bodies]
    sent = 2 * PER_BAND - 4  # every probed item but the four near copies kept out of the control
    assert paths.count("/v1/completions") == 2 * sent and paths.count("/generate") == sent and paths.count("/v1/chat/completions") == sent
    assert all(body["echo"] and body["max_tokens"] == 1 and body["temperature"] == 0 for body in target.bodies if body["path"] == "/v1/completions")


def test_an_endpoint_that_scores_only_what_it_writes_gets_a_clear_error(live_server: LiveServer, engine: Engine) -> None:
    register_corpus(engine, CORPUS, kev_records(until="2024-01-01")[:6] + kev_records(since="2024-01-01")[:6])
    with serve_language_model(CharNgramModel.train(_headlines()[:200]), "m-cpp", scores_prompt=False) as server, live_server.client("admin") as client:
        register_model(engine, "m-cpp", cutoff=KEV_CUTOFF, base_url=server.base_url, endpoints={"m-cpp-local": TrainsOnInputs.UNKNOWN}, logprobs=LogprobSupport.COMPLETIONS_ECHO)
        failed = _finished(client, _start(client, "m-cpp", "m-cpp-local", concurrency=1))
    assert failed.status == "failed" and failed.test == ProbeTest.LOGPROB and failed.report is None
    assert failed.error is not None and "the logprob test cannot run: endpoint 'm-cpp-local'" in failed.error
    assert "score only the tokens they generate" in failed.error and "'chat' or 'none'" in failed.error
    assert len(server.bodies) < 12  # it stopped at the first answer


def test_the_reference_endpoint_is_gated_guarded_and_ledgered_and_sealed_items_never_go(live_server: LiveServer, engine: Engine, private_eval: dict[str, Any]) -> None:
    model = CharNgramModel.train(_headlines()[:500])
    with serve_language_model(model, "m1") as server, serve_language_model(model, "r1") as reference, live_server.client("admin") as client:
        register_model(engine, "m1", cutoff=EVAL_CUTOFF, base_url=server.base_url, endpoints={"m1-no": TrainsOnInputs.NO}, logprobs=LogprobSupport.COMPLETIONS_ECHO)
        references = {"r1-no": TrainsOnInputs.NO, "r1-yes": TrainsOnInputs.YES}
        register_model(engine, "r1", cutoff=None, base_url=reference.base_url, endpoints=references, logprobs=LogprobSupport.TGI_PREFILL)
        rag = [Augmentation.RETRIEVAL]
        register_model(engine, "r2", cutoff=None, base_url=reference.base_url, endpoints={"r2-rag": TrainsOnInputs.NO}, logprobs=LogprobSupport.COMPLETIONS_ECHO, augmentations=rag)
        body = {"eval": "ops", "model": "m1", "endpoint": "m1-no"}
        gated = client.post("/v1/probes", json={**body, "reference_endpoint": "r1-yes"})
        guarded = client.post("/v1/probes", json={**body, "reference_endpoint": "r2-rag"})
        unmatched = client.post("/v1/probes", json={**body, "reference_endpoint": "r1-no", "reference_model": "m1"})
        assert server.bodies == [] and reference.bodies == []  # refused before anything was sent
        done = wait_for(client, client.post("/v1/probes", json={**body, "reference_endpoint": "r1-no"}).json()["id"])
    assert gated.status_code == 403 and gated.json()["condition"] == "trains_on_inputs"
    assert guarded.status_code == 403 and guarded.json()["condition"] == "augmented_endpoint" and "'r2-rag' is augmented" in guarded.json()["detail"]
    assert unmatched.status_code == 422 and unmatched.json()["reason"] == "endpoint_model_mismatch"
    assert done.status == "done" and done.report is not None, done.error
    assert done.test == ProbeTest.REFERENCE_LOGPROB and done.report.reference_endpoint == "r1-no"
    dev_texts = {" ".join(private_eval["texts"][item_id].split()) for item_id in private_eval["dev"]}
    sealed_only = {" ".join(private_eval["texts"][item_id].split()) for item_id in private_eval["sealed"]} - dev_texts
    target_sent = {" ".join(body["prompt"].split()) for body in server.bodies}
    reference_sent = {" ".join(body["inputs"].split()) for body in reference.bodies}
    # Every dev item goes to both endpoints but those the clean band kept out of the control (near copies of older items).
    assert target_sent == reference_sent and target_sent <= dev_texts and len(dev_texts - target_sent) == done.report.n_control_near_pre_cutoff
    assert sealed_only and sealed_only.isdisjoint(target_sent)
    assert all(body["path"] == "/generate" for body in reference.bodies)  # TGI's route, at the server's root
    with Session(engine) as session:
        runs = {run.id: run for run in session.exec(select(Run))}
        ledger = {(row.run_id, row.item_id, row.split) for row in session.exec(select(RunItem))}
    assert done.run_id is not None and done.reference_run_id is not None
    assert runs[done.reference_run_id].endpoint_id != runs[done.run_id].endpoint_id
    for run_id in (done.run_id, done.reference_run_id):
        sent_ids = {item_id for item_id in private_eval["dev"] if " ".join(private_eval["texts"][item_id].split()) in target_sent}
        assert {(item_id, split) for row_run, item_id, split in ledger if row_run == run_id} == {(item_id, "dev") for item_id in sent_ids}
