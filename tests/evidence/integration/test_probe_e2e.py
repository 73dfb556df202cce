"""The completion probe end to end, through real HTTP: a word n-gram model trained in the setup on the
pre-cutoff half of the CISA KEV catalog (so it has memorised those descriptions) is served as an
OpenAI-compatible endpoint on loopback; probing must put the pre-cutoff items above the control band.
The same server with a model trained on news headlines must not. Probes go the way the service sends
them: `plan_probes` → `complete_sync` → `probe_report`."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from curation.evidence.charts import probe_chart
from curation.evidence.probe_report import probe_report
from curation.evidence.probe_runner import complete_sync
from curation.evidence.probing import cut_item, plan_probes
from schemas.evidence import ProbeEndpoint, ProbeItem, ProbeReport
from schemas.probe_tests import COMPLETION_METRICS
from tests.support.corpora import KEV_CUTOFF, KevRecord, kev_probe_items, load_kev
from tests.support.images import assert_png, assert_svg
from tests.support.ngram_server import WordNgramModel, serve_model

PER_BAND = 150
METRICS = list(COMPLETION_METRICS)


@pytest.fixture(scope="module")
def kev(shared_data: Path) -> list[KevRecord]:
    return load_kev(shared_data)


@pytest.fixture(scope="module")
def probe_items(kev: list[KevRecord]) -> list[ProbeItem]:
    """150 items dated before the cutoff and 150 after, drawn with a fixed seed."""
    items = kev_probe_items(kev)
    rng = np.random.default_rng(2024)
    pre = [item for item in items if item.occurred_at.date() < KEV_CUTOFF]
    post = [item for item in items if item.occurred_at.date() >= KEV_CUTOFF]
    return [pre[index] for index in sorted(rng.choice(len(pre), PER_BAND, replace=False))] + [post[index] for index in sorted(rng.choice(len(post), PER_BAND, replace=False))]


@pytest.fixture(scope="module")
def memorising_model(kev: list[KevRecord]) -> WordNgramModel:
    return WordNgramModel.train([record.description for record in kev if record.date_added.date() < KEV_CUTOFF])


@pytest.fixture(scope="module")
def clean_model(shared_data: Path) -> WordNgramModel:
    headlines = []
    for line in (shared_data / "sts_headlines" / "pairs.jsonl").read_text(encoding="utf-8").splitlines():
        pair = json.loads(line)
        headlines += [pair["s1"], pair["s2"]]
    return WordNgramModel.train(headlines)


def test_the_trained_model_has_memorised_its_training_items(kev: list[KevRecord], memorising_model: WordNgramModel) -> None:
    """From the first half of a description, greedy decoding gives back the second half verbatim for
    about 42% of the training (pre-cutoff) items, and only for the 4% of later items whose
    description repeats an earlier one word for word (KEV reuses descriptions across CVEs)."""
    verbatim: dict[bool, list[bool]] = {True: [], False: []}
    for item in kev_probe_items(kev):
        cut = cut_item(item)
        continuation, _ = memorising_model.continue_text(cut.prefix, max_words=200)
        verbatim[item.occurred_at.date() < KEV_CUTOFF].append(continuation == cut.remainder)
    assert np.mean(verbatim[True]) > 0.35
    assert np.mean(verbatim[False]) < 0.10


def _check_renders(report: ProbeReport, tmp_path: Path, name: str) -> None:
    (tmp_path / f"{name}.json").write_text(report.model_dump_json(indent=2), encoding="utf-8")
    assert ProbeReport.model_validate_json((tmp_path / f"{name}.json").read_text(encoding="utf-8")) == report
    (tmp_path / f"{name}.svg").write_bytes(probe_chart(report))
    assert_svg((tmp_path / f"{name}.svg").read_bytes())


def _probe(model: WordNgramModel, name: str, items: list[ProbeItem]) -> tuple[ProbeReport, list[dict[str, Any]]]:
    """Probe `items` against `model` served over loopback HTTP; the report and the request bodies the server saw."""
    with serve_model(model, model_name=name) as server, httpx.Client() as client:
        endpoint = ProbeEndpoint(base_url=server.base_url, model=name, concurrency=8, timeout_seconds=10)
        plan = plan_probes(items, dataset="CISA KEV", split="catalog", max_tokens_cap=endpoint.max_tokens_cap)
        completions = complete_sync(client, plan.prompts, endpoint, clock=time.time)
        return probe_report(plan, completions, cutoff=KEV_CUTOFF, model=endpoint.model), server.bodies


def test_probing_the_memorising_model_over_http_separates_pre_cutoff_items(probe_items: list[ProbeItem], memorising_model: WordNgramModel, tmp_path: Path) -> None:
    report, bodies = _probe(memorising_model, "kev-ngram", probe_items)
    assert len(bodies) == 2 * PER_BAND
    assert {body["temperature"] for body in bodies} == {0}
    assert all("the catalog split of the CISA KEV dataset" in body["messages"][-1]["content"] for body in bodies)
    assert (report.n_pre_cutoff, report.n_control, report.n_failed) == (PER_BAND, PER_BAND, 0)
    for metric in METRICS:
        comparison = report.comparison(metric)
        assert comparison.flagged, comparison
        assert comparison.length_matched_p_value < 1e-6 and comparison.p_value < 1e-6
        assert comparison.median_gap > 0.3
        assert comparison.share_above_control_p95 > 0.3
    assert "reproduces the older items more closely" in report.summary
    assert "not an accusation" in report.statement
    _check_renders(report, tmp_path, "memorising")
    assert_png(probe_chart(report, image_format="png", dpi=60))


def test_probing_a_model_trained_on_unrelated_text_flags_nothing(probe_items: list[ProbeItem], clean_model: WordNgramModel, tmp_path: Path) -> None:
    report, _ = _probe(clean_model, "news-ngram", probe_items)
    assert (report.n_pre_cutoff, report.n_control, report.n_failed) == (PER_BAND, PER_BAND, 0)
    for metric in METRICS:
        comparison = report.comparison(metric)
        assert not comparison.flagged, comparison
        assert comparison.length_matched_p_value > 0.05
        assert abs(comparison.median_gap) < 0.05
    assert "no sign here that the model has seen them" in report.summary
    _check_renders(report, tmp_path, "clean")
