"""The log-probability tests as the product runs them, against the served models: each item's
whole text scored through `/v1/completions` echo (`curation.evidence.logprob_runner`), membership
scores and the report (`curation.evidence.membership`, `curation.evidence.membership_report`),
with R, a model trained on background only, as the reference of the reference-calibrated test
(and N as R's, where R is scored as a second clean target)."""

from __future__ import annotations

import time
from datetime import date
from typing import Any

import httpx

from bench.tinylm.corpus import Design
from curation.evidence.logprob_runner import plan_membership, score_texts_sync
from curation.evidence.membership_report import membership_report
from curation.evidence.probe_report import probe_report
from curation.evidence.probing import plan_probes
from schemas.evidence import ProbeCompletion, ProbeEndpoint
from schemas.model_registry import LogprobSupport

REFERENCE = "R"
REFERENCE_OF = {"C": REFERENCE, "N": REFERENCE, "R": "N"}
"""Each target's reference: R for C and N; N for R, the second clean model (both clean, so each is
a fair reference for the other)."""


def logprob_reports(client: httpx.Client, base_url: str, plan: Design, *, targets: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """Per target: each item's membership scores (`scores`, item id → metric → value, higher
    meaning more like a seen text; the reference gap against `REFERENCE_OF` the target), its scored
    length (`lengths`) and the report's verdict per metric on all pre-cutoff items against the
    control band."""
    items = [item.probe_item() for item in plan.probed()]
    membership = plan_membership(items, dataset=plan.source.dataset, split=plan.source.split)
    answers = {}
    for name in dict.fromkeys([*targets, *(REFERENCE_OF[target] for target in targets)]):
        endpoint = ProbeEndpoint(base_url=base_url, model=name, concurrency=2, timeout_seconds=120.0)
        answers[name] = score_texts_sync(client, membership, endpoint, via=LogprobSupport.COMPLETIONS_ECHO, endpoint_name=f"bench-{name}", clock=time.time)
    out = {}
    for name in targets:
        reference = REFERENCE_OF[name]
        report = membership_report(
            membership, answers[name], cutoff=plan.cutoff, model=name, reference=answers[reference], reference_model=reference, reference_endpoint=f"bench-{reference}"
        )
        out[name] = {
            "scores": {entry.item_id: {metric.value: value for metric, value in entry.similarity.items()} for entry in report.items},
            "lengths": {entry.item_id: entry.remainder_chars for entry in report.items},
            "report": {
                metric.metric.value: {"flagged": metric.flagged, "length_matched_p": metric.length_matched_p_value, "median_gap": metric.median_gap}
                for metric in report.metrics
            },
            "test": report.test.value,
            "summary": report.summary,
            "failed": report.n_failed,
        }
    return out


def completion_report(plan: Design, completions: dict[str, str], *, model: str, cutoff: date | None = None) -> dict[str, Any]:
    """The completion probe's report from stored completions (item id → text), as the product makes
    it with the bands split at `cutoff` (the plan's by default; `levenshtein_margin` compares each
    completion with the items of its own band, so it moves with the cutoff): each item's scores
    (item id → metric → value), its remainder length, and the verdict on the primary metric."""
    items = [item.probe_item() for item in plan.probed()]
    probes = plan_probes(items, dataset=plan.source.dataset, split=plan.source.split)
    answers = [ProbeCompletion(item_id=item_id, completion=text) for item_id, text in completions.items()]
    report = probe_report(probes, answers, cutoff=cutoff or plan.cutoff, model=model)
    primary = report.comparison(report.primary_metric)
    return {
        "scores": {entry.item_id: {metric.value: value for metric, value in entry.similarity.items()} for entry in report.items},
        "lengths": {entry.item_id: entry.remainder_chars for entry in report.items},
        "completions": completions,
        "report": {
            "metric": report.primary_metric.value, "flagged": primary.flagged, "length_matched_p": primary.length_matched_p_value,
            "median_gap": primary.median_gap, "summary": report.summary,
        },
        "failed": report.n_failed,
    }  # fmt: skip
