"""The completion probe's report: each completion scored against the true remainder, and items
dated before the model's training cutoff compared with the control band of items dated after it,
per item and in aggregate.

Dated corpora drift: older items may be shorter or written differently, and a length-normalised
similarity moves with length even for a model that has seen nothing. So beside the plain
Mann–Whitney U test, each metric gets a length-matched one (items compared only within strata of
similar remainder length), and the decision rests on the length-matched test.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats

from curation.evidence.probing import ProbePlan, similarity
from curation.evidence.wording import evidence_statement, p_text, probe_conclusion, probe_test_name
from schemas.evidence import CutPolicy, EvidenceWarning, MetricComparison, ProbeBand, ProbeCompletion, ProbeItem, ProbeItemResult, ProbeReport, cutoff_instant
from schemas.probe_tests import COMPLETION_METRICS, TEST_SEES, ProbeMetric, ProbeTest

FloatArray = NDArray[np.float64]

CONTROL_QUANTILE = 0.95
MIN_PRE_CUTOFF_ITEMS = 1
MIN_CONTROL_ITEMS = 2
"""The fewest answered items in each band for any comparison at all (the control band needs two
for a spread); below them there is no report."""
MIN_BAND = 20
"""Below this many items in a band, the control's 95th percentile is its maximum or beyond and the
U test has little power: the report warns."""
LENGTH_STRATA = 10
"""Strata of remainder length for the length-matched test (quantiles of all probed remainders)."""


@dataclass(frozen=True)
class BandComparison:
    """Pre-cutoff similarities against the control band, one value per leading index of the inputs.

    `p_value` is the one-sided Mann–Whitney U p-value for "pre-cutoff items are not more similar"
    (asymptotic with tie correction where the exact distribution does not apply)."""

    pre_median: FloatArray
    control_median: FloatArray
    median_gap: FloatArray
    control_p95: FloatArray
    share_above_control_p95: FloatArray
    u_statistic: FloatArray
    p_value: FloatArray


def compare_bands(pre: ArrayLike, control: ArrayLike) -> BandComparison:
    """Compare along the last axis: `pre` (..., n1) against `control` (..., n2), same leading shape
    (each leading index one data set; the simulations in the tests pass thousands at once)."""
    pre = np.asarray(pre, dtype=np.float64)
    control = np.asarray(control, dtype=np.float64)
    if pre.shape[-1] < 1 or control.shape[-1] < 2:
        raise ValueError(f"need at least 1 pre-cutoff and 2 control items (got {pre.shape[-1]} and {control.shape[-1]})")
    pre_median = np.median(pre, axis=-1)
    control_median = np.median(control, axis=-1)
    p95 = np.quantile(control, CONTROL_QUANTILE, axis=-1)
    share = np.mean(pre > p95[..., None], axis=-1)
    result = stats.mannwhitneyu(pre, control, alternative="greater", axis=-1)
    return BandComparison(
        pre_median=np.asarray(pre_median, dtype=np.float64),
        control_median=np.asarray(control_median, dtype=np.float64),
        median_gap=np.asarray(pre_median - control_median, dtype=np.float64),
        control_p95=np.asarray(p95, dtype=np.float64),
        share_above_control_p95=np.asarray(share, dtype=np.float64),
        u_statistic=np.asarray(result.statistic, dtype=np.float64),
        p_value=np.asarray(result.pvalue, dtype=np.float64),
    )


def control_tail(values: ArrayLike, control: ArrayLike, *, in_control: bool) -> FloatArray:
    """Per value, the share of the control band scoring at least as high: (k + 1) / (n + 1) for an
    outside value (a conformal p-value), k / n for a control member (itself left out: k counts it)."""
    ordered = np.sort(np.asarray(control, dtype=np.float64))
    at_least = ordered.size - np.searchsorted(ordered, np.asarray(values, dtype=np.float64), side="left")
    if in_control:
        return np.asarray(at_least / ordered.size, dtype=np.float64)
    return np.asarray((at_least + 1) / (ordered.size + 1), dtype=np.float64)


def length_matched_mann_whitney(pre: FloatArray, control: FloatArray, *, pre_lengths: NDArray[np.int64], control_lengths: NDArray[np.int64], strata: int = LENGTH_STRATA) -> float:
    """One-sided p-value that pre-cutoff similarities are not higher than the control's when items
    are compared only with items of similar remainder length.

    Strata are `strata` quantile bins of all remainder lengths; within each, the Mann–Whitney U of
    pre against control is taken, and the sum of the U's is tested against its null mean and
    tie-corrected variance (normal approximation with continuity correction). Strata missing one
    of the bands contribute nothing; with no usable stratum, or all values tied, the p-value is 1.
    """
    pre, control = np.asarray(pre, dtype=np.float64), np.asarray(control, dtype=np.float64)
    lengths = np.concatenate([pre_lengths, control_lengths]).astype(np.float64)
    edges = np.quantile(lengths, np.linspace(0.0, 1.0, strata + 1)[1:-1])
    stratum = np.searchsorted(edges, lengths, side="right")
    values = np.concatenate([pre, control])
    is_pre = np.arange(values.size) < pre.size
    # Rank within each stratum in one pass: sort by (stratum, value), average the ranks of tied runs.
    order = np.lexsort((values, stratum))
    sorted_stratum, sorted_values = stratum[order], values[order]
    new_run = np.r_[True, (sorted_stratum[1:] != sorted_stratum[:-1]) | (sorted_values[1:] != sorted_values[:-1])]
    run_id = np.cumsum(new_run) - 1
    run_start = np.flatnonzero(new_run)
    run_size = np.diff(np.r_[run_start, values.size])
    stratum_start = np.searchsorted(sorted_stratum, sorted_stratum, side="left")
    ranks = np.empty(values.size)
    ranks[order] = (run_start[run_id] + (run_size[run_id] - 1) / 2.0) - stratum_start + 1.0
    n1 = np.bincount(stratum[is_pre], minlength=strata).astype(np.float64)
    n2 = np.bincount(stratum[~is_pre], minlength=strata).astype(np.float64)
    rank_sum = np.bincount(stratum[is_pre], weights=ranks[is_pre], minlength=strata)
    ties = np.bincount(sorted_stratum[run_start], weights=run_size.astype(np.float64) ** 3 - run_size, minlength=strata)
    usable = (n1 > 0) & (n2 > 0)
    n = n1 + n2
    u_total = float(np.sum((rank_sum - n1 * (n1 + 1) / 2.0)[usable]))
    mean_total = float(np.sum((n1 * n2 / 2.0)[usable]))
    variance_total = float(np.sum((n1 * n2 / 12.0 * ((n + 1) - ties / np.maximum(n * (n - 1), 1.0)))[usable]))
    if variance_total <= 0.0:
        return 1.0
    z = (u_total - mean_total - 0.5) / np.sqrt(variance_total)
    return float(stats.norm.sf(z))


BANDS: tuple[ProbeBand, ProbeBand] = ("pre_cutoff", "control")


class Answered(NamedTuple):
    """One answered probe: its item, the length of the true remainder (characters, whitespace
    collapsed) and the completion's similarity to it by metric."""

    item: ProbeItem
    remainder_chars: int
    scores: dict[ProbeMetric, float]


@dataclass(frozen=True)
class Scored:
    """The completions scored: the answered ones in the order given, and how many failed."""

    answered: list[Answered]
    failed: int


@dataclass(frozen=True)
class Banded:
    """The answered probes split at the cutoff: each item's band (`band_of`, by item id), the
    members of each band, and their remainder lengths (`lengths`, per band, in member order)."""

    band_of: dict[str, ProbeBand]
    members: dict[ProbeBand, list[Answered]]
    lengths: dict[ProbeBand, NDArray[np.int64]]

    def values(self, metric: ProbeMetric) -> dict[ProbeBand, FloatArray]:
        """Each band's similarities by `metric`, in member order."""
        return {band: np.array([entry.scores[metric] for entry in self.members[band]], dtype=np.float64) for band in BANDS}


@dataclass(frozen=True)
class MetricOutcome:
    """One metric's comparison of the bands, the control's 95th percentile (`threshold`), and each
    item's control tail (`tails`, by item id: `control_tail`)."""

    comparison: MetricComparison
    threshold: float
    tails: dict[str, float]


def probe_report(
    plan: ProbePlan,
    completions: Sequence[ProbeCompletion],
    *,
    cutoff: date,
    model: str,
    alpha: float = 0.05,
    primary_metric: ProbeMetric = ProbeMetric.LEVENSHTEIN,
    min_band: int = MIN_BAND,
) -> ProbeReport:
    """Score `completions` against the plan's remainders (`score_completions`) and compare the
    bands (`compare_scored`), as the completion test's report."""
    scored = score_completions(plan, completions)
    setting = TestSetting(test=ProbeTest.COMPLETION, metrics=COMPLETION_METRICS, primary_metric=primary_metric, cut_policy=plan.policy, not_cut=plan.not_cut)
    return compare_scored(scored, setting, dataset=plan.dataset, split=plan.split, sent=len(completions), cutoff=cutoff, model=model, alpha=alpha, min_band=min_band)


@dataclass(frozen=True)
class TestSetting:
    """What a report is of: the `test`, the `metrics` compared (every answered item has each), the
    summary's `primary_metric`, the completion test's `cut_policy` and the items it could not cut
    (`not_cut`), and a reference test's `reference_model` and `reference_endpoint`."""

    test: ProbeTest
    metrics: Sequence[ProbeMetric]
    primary_metric: ProbeMetric
    cut_policy: CutPolicy | None = None
    not_cut: Mapping[str, str] = field(default_factory=dict)
    reference_model: str | None = None
    reference_endpoint: str | None = None


def compare_scored(scored: Scored, setting: TestSetting, *, dataset: str, split: str, sent: int, cutoff: date, model: str, alpha: float, min_band: int = MIN_BAND) -> ProbeReport:
    """Compare the bands on every metric of `setting`, from items scored by any test.

    Items dated before 00:00 UTC on `cutoff` are the pre-cutoff band, the rest the control band.
    Items that got no answer are counted in `n_failed` (of `sent`). A metric is flagged where its
    length-matched Mann–Whitney p-value is below `alpha`. Raises `ValueError` when, after failures,
    fewer than 1 pre-cutoff or 2 control items are left, or the primary metric is not compared.

    The steps: split the items at the cutoff (`split_at_cutoff`), compare the bands on each metric
    (`compare_metric`), then judge each item (`item_results`) and gather the warnings (`_warnings`,
    `length_drift`)."""
    if setting.primary_metric not in setting.metrics:
        raise ValueError(f"the {setting.test.value} test compares {', '.join(m.value for m in setting.metrics)}; {setting.primary_metric.value} is not among them")
    banded = split_at_cutoff(scored.answered, cutoff)
    n_pre, n_control = len(banded.members["pre_cutoff"]), len(banded.members["control"])
    if n_pre < MIN_PRE_CUTOFF_ITEMS or n_control < MIN_CONTROL_ITEMS:
        raise ValueError(
            f"after {scored.failed} failed probes, {n_pre} pre-cutoff and {n_control} control items are left; "
            f"the comparison needs items on both sides of {cutoff.isoformat()} (at least {min_band} each to be useful)"
        )
    outcomes = {metric: compare_metric(metric, banded, alpha=alpha) for metric in setting.metrics}
    pre_chars, control_chars = float(np.median(banded.lengths["pre_cutoff"])), float(np.median(banded.lengths["control"]))
    warnings = _warnings(n_pre, n_control, scored.failed, sent, setting.not_cut, min_band)
    if (drift := length_drift(banded, alpha=alpha)) is not None:
        warnings.append(drift)
    primary = outcomes[setting.primary_metric].comparison
    return ProbeReport(
        test=setting.test,
        test_sees=TEST_SEES[setting.test],
        model=model,
        reference_model=setting.reference_model,
        reference_endpoint=setting.reference_endpoint,
        dataset=dataset,
        split=split,
        cutoff=cutoff,
        alpha=alpha,
        cut_policy=setting.cut_policy,
        n_pre_cutoff=n_pre,
        n_control=n_control,
        n_failed=scored.failed,
        n_not_cut=len(setting.not_cut),
        pre_remainder_median_chars=pre_chars,
        control_remainder_median_chars=control_chars,
        primary_metric=setting.primary_metric,
        metrics=[outcome.comparison for outcome in outcomes.values()],
        items=item_results(scored.answered, banded, outcomes),
        warnings=warnings,
        summary=_summary(primary, n_pre, n_control, cutoff, setting.test),
        statement=evidence_statement(
            what=f"{probe_test_name(setting.test)} ({setting.primary_metric.value})", model=model, corpus=f"{dataset} ({split})", cutoff=cutoff, n_after=n_control
        ),
    )


def score_completions(plan: ProbePlan, completions: Sequence[ProbeCompletion]) -> Scored:
    """Each answered completion's similarity to its item's true remainder (`similarity`); failed
    ones (`error` set, or no completion) are only counted. Raises `ValueError` for a completion of
    an item the plan did not probe."""
    answered: list[Answered] = []
    failed = 0
    for completion in completions:
        cut = plan.cuts.get(completion.item_id)
        if cut is None:
            raise ValueError(f"completion for item {completion.item_id}, which the plan did not probe")
        if completion.error is not None or completion.completion is None:
            failed += 1
            continue
        scores = similarity(completion.completion, cut.remainder, prefix=cut.prefix)
        answered.append(Answered(plan.items[completion.item_id], len(" ".join(cut.remainder.split())), scores))
    return Scored(answered=answered, failed=failed)


def split_at_cutoff(answered: Sequence[Answered], cutoff: date) -> Banded:
    """Split the answered probes at 00:00 UTC on `cutoff`: items dated before it are `pre_cutoff`,
    the rest `control`."""
    instant = cutoff_instant(cutoff)
    band_of: dict[str, ProbeBand] = {entry.item.item_id: ("pre_cutoff" if entry.item.occurred_at < instant else "control") for entry in answered}
    members = {name: [entry for entry in answered if band_of[entry.item.item_id] == name] for name in BANDS}
    lengths = {name: np.array([entry.remainder_chars for entry in members[name]], dtype=np.int64) for name in BANDS}
    return Banded(band_of=band_of, members=members, lengths=lengths)


def compare_metric(metric: ProbeMetric, banded: Banded, *, alpha: float) -> MetricOutcome:
    """Compare the bands on `metric` (`compare_bands`, and `length_matched_mann_whitney`, whose
    p-value below `alpha` flags it), with every item's control tail."""
    values = banded.values(metric)
    pre, control = values["pre_cutoff"], values["control"]
    compared = compare_bands(pre, control)
    matched = length_matched_mann_whitney(pre, control, pre_lengths=banded.lengths["pre_cutoff"], control_lengths=banded.lengths["control"])
    comparison = MetricComparison(
        metric=metric,
        pre_median=float(compared.pre_median),
        control_median=float(compared.control_median),
        median_gap=float(compared.median_gap),
        control_p95=float(compared.control_p95),
        share_above_control_p95=float(compared.share_above_control_p95),
        mann_whitney_u=float(compared.u_statistic),
        p_value=float(compared.p_value),
        length_matched_p_value=matched,
        flagged=matched < alpha,
    )
    tails: dict[str, float] = {}
    for name in BANDS:
        ids = [entry.item.item_id for entry in banded.members[name]]
        tails.update(zip(ids, control_tail(values[name], control, in_control=name == "control").tolist(), strict=True))
    return MetricOutcome(comparison=comparison, threshold=float(compared.control_p95), tails=tails)


def item_results(answered: Sequence[Answered], banded: Banded, outcomes: Mapping[ProbeMetric, MetricOutcome]) -> list[ProbeItemResult]:
    """Each answered item in the order given: its band, remainder length, similarities, control
    tails and whether it lies above the control's 95th percentile, by metric."""
    return [
        ProbeItemResult(
            item_id=entry.item.item_id,
            occurred_at=entry.item.occurred_at,
            band=banded.band_of[entry.item.item_id],
            remainder_chars=entry.remainder_chars,
            similarity=entry.scores,
            control_tail={metric: outcome.tails[entry.item.item_id] for metric, outcome in outcomes.items()},
            above_control_p95={metric: entry.scores[metric] > outcome.threshold for metric, outcome in outcomes.items()},
        )
        for entry in answered
    ]


def length_drift(banded: Banded, *, alpha: float) -> EvidenceWarning | None:
    """The `length_drift` warning when the bands' remainder lengths differ (Mann–Whitney p-value
    below `alpha`), else None."""
    pre_chars, control_chars = float(np.median(banded.lengths["pre_cutoff"])), float(np.median(banded.lengths["control"]))
    length_p = float(stats.mannwhitneyu(banded.lengths["pre_cutoff"], banded.lengths["control"]).pvalue)
    if length_p >= alpha:
        return None
    shorter = "shorter" if pre_chars < control_chars else "longer"
    return EvidenceWarning(
        code="length_drift",
        message=(
            f"The remainders of pre-cutoff items are {shorter} (median {pre_chars:.0f} against {control_chars:.0f} characters, "
            f"Mann–Whitney {p_text(length_p)}). Similarity moves with length even for a model that has seen nothing, so the plain "
            "p-value can mislead; the decision rests on the length-matched test."
        ),
    )


def _warnings(n_pre: int, n_control: int, failed: int, sent: int, not_cut: Mapping[str, str], min_band: int) -> list[EvidenceWarning]:
    warnings: list[EvidenceWarning] = []
    if n_control < min_band:
        warnings.append(
            EvidenceWarning(
                code="small_control_band",
                message=(
                    f"Only {n_control} probed items are dated after the cutoff; below {min_band} the control's 95th percentile is "
                    "its top item or beyond, and the band says little about what an unseen item scores. Probe more recent items."
                ),
            )
        )
    if n_pre < min_band:
        warnings.append(
            EvidenceWarning(
                code="small_pre_cutoff_band",
                message=f"Only {n_pre} probed items are dated before the cutoff; below {min_band} the test has little power. Probe more of them.",
            )
        )
    if failed:
        warnings.append(
            EvidenceWarning(
                code="probe_failures",
                message=f"{failed} of {sent} probes got no answer after retries and are left out; if they cluster on one side of the cutoff the bands are skewed. Rerun them.",
            )
        )
    if not_cut:
        first = next(iter(not_cut.values()))
        warnings.append(EvidenceWarning(code="items_not_cut", message=f"{len(not_cut)} items could not be cut and were not probed (for example: {first})."))
    return warnings


def _summary(primary: MetricComparison, n_pre: int, n_control: int, cutoff: date, test: ProbeTest) -> str:
    head = (
        f"{probe_test_name(test, capital=True)}, on {primary.metric.value}: the {n_pre} items dated before {cutoff.isoformat()} have a median of "
        f"{primary.pre_median:.3f} against {primary.control_median:.3f} for the {n_control} control items dated on or after it "
        f"(gap {primary.median_gap:+.3f}); {primary.share_above_control_p95:.0%} of them lie above the control's 95th percentile "
        f"({primary.control_p95:.3f}), where about 5% would by chance (Mann–Whitney {p_text(primary.p_value)}; "
        f"comparing items of similar length, {p_text(primary.length_matched_p_value)})."
    )
    return f"{head} {probe_conclusion(test, flagged=primary.flagged)}"
