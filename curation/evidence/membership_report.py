"""The log-probability tests' report: each item's membership scores (`curation.evidence.membership`)
from the target's log-probabilities of its text (and a reference model's, for the reference test),
compared between the pre-cutoff band and the control band exactly as the completion test's
similarities are (`curation.evidence.probe_report.compare_scored`: length-matched, with the same
statistics, warnings and wording). An item's length is its scored text's characters.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date

from curation.evidence.logprob_runner import MembershipPlan, TextScore
from curation.evidence.membership import membership_scores
from curation.evidence.probe_report import MIN_BAND, Answered, Scored, TestSetting, compare_scored
from schemas.evidence import ProbeReport
from schemas.probe_tests import LOGPROB_METRICS, ProbeMetric, ProbeTest, primary_metric_for


def score_texts(plan: MembershipPlan, target: Sequence[TextScore], reference: Sequence[TextScore] | None = None) -> Scored:
    """Each item's membership scores where the target (and the reference, when given) answered;
    an item either of them failed is only counted. Raises `ValueError` for a score of an item the
    plan did not send."""
    references = {score.item_id: score for score in reference or ()}
    answered: list[Answered] = []
    failed = 0
    for score in target:
        text = plan.texts.get(score.item_id)
        if text is None:
            raise ValueError(f"log-probabilities for item {score.item_id}, which the plan did not send")
        calibration = references.get(score.item_id)
        if score.logprobs is None or not score.logprobs.tokens or (reference is not None and (calibration is None or calibration.logprobs is None)):
            failed += 1
            continue
        scores = membership_scores(score.logprobs, calibration.logprobs if calibration is not None else None)
        answered.append(Answered(plan.items[score.item_id], len(" ".join(text.split())), scores))
    return Scored(answered=answered, failed=failed)


def compared_metrics(scored: Scored, test: ProbeTest) -> list[ProbeMetric]:
    """The metrics every answered item has: the target's own (`min_k_plus_plus` only where every
    answer came with top-k log-probabilities), then `reference_gap` for the reference test."""
    common = set.intersection(*(set(entry.scores) for entry in scored.answered)) if scored.answered else set(LOGPROB_METRICS)
    metrics = [metric for metric in LOGPROB_METRICS if metric in common]
    if test is ProbeTest.REFERENCE_LOGPROB:
        metrics.append(ProbeMetric.REFERENCE_GAP)
    return metrics


def membership_report(
    plan: MembershipPlan,
    target: Sequence[TextScore],
    *,
    cutoff: date,
    model: str,
    reference: Sequence[TextScore] | None = None,
    reference_model: str | None = None,
    reference_endpoint: str | None = None,
    alpha: float = 0.05,
    primary_metric: ProbeMetric | None = None,
    min_band: int = MIN_BAND,
) -> ProbeReport:
    """The `logprob` test's report, or the `reference_logprob` test's where `reference` (the
    reference model's log-probabilities of the same texts) is given. `primary_metric` defaults to
    `primary_metric_for` the test. Raises `ValueError` as `compare_scored` does, and when the
    primary metric asked for is one this test cannot compute (`min_k_plus_plus` without top-k)."""
    test = ProbeTest.REFERENCE_LOGPROB if reference is not None else ProbeTest.LOGPROB
    scored = score_texts(plan, target, reference)
    metrics = compared_metrics(scored, test)
    primary = primary_metric or primary_metric_for(test, has_top_logprobs=ProbeMetric.MIN_K_PLUS_PLUS in metrics)
    if primary not in metrics:
        raise ValueError(f"the {test.value} test here compares {', '.join(metric.value for metric in metrics)}; {primary.value} is not among them")
    # The reference gap flags only where the target's own test flags too (`confirmed`).
    own = primary_metric_for(ProbeTest.LOGPROB, has_top_logprobs=ProbeMetric.MIN_K_PLUS_PLUS in metrics)
    setting = TestSetting(
        test=test, metrics=metrics, primary_metric=primary, reference_model=reference_model, reference_endpoint=reference_endpoint, near_pre_cutoff=plan.near_pre_cutoff,
        confirmed_by=own if primary is ProbeMetric.REFERENCE_GAP else None,
    )  # fmt: skip
    return compare_scored(scored, setting, dataset=plan.dataset, split=plan.split, sent=len(plan.texts), cutoff=cutoff, model=model, alpha=alpha, min_band=min_band)
