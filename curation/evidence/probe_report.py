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
from dataclasses import dataclass
from datetime import date
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats

from curation.evidence.clean_band import clean_band_warning
from curation.evidence.length_strata import LENGTH_STRATA, expected_share_above, length_strata
from curation.evidence.probing import ProbePlan, similarity
from curation.evidence.wording import evidence_statement, p_text
from schemas.evidence import EvidenceWarning, MetricComparison, ProbeBand, ProbeCompletion, ProbeItem, ProbeItemResult, ProbeReport, SimilarityMetric, cutoff_instant

FloatArray = NDArray[np.float64]

CONTROL_QUANTILE = 0.95
MIN_PRE_CUTOFF_ITEMS = 1
MIN_CONTROL_ITEMS = 2
"""The fewest answered items in each band for any comparison at all (the control band needs two
for a spread); below them there is no report."""
MIN_BAND = 20
"""Below this many items in a band, the control's 95th percentile is its maximum or beyond and the
U test has little power: the report warns."""


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
    stratum = np.concatenate(length_strata(pre_lengths, control_lengths, strata=strata))
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
    scores: dict[SimilarityMetric, float]


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

    def values(self, metric: SimilarityMetric) -> dict[ProbeBand, FloatArray]:
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
    primary_metric: SimilarityMetric = SimilarityMetric.LEVENSHTEIN,
    min_band: int = MIN_BAND,
) -> ProbeReport:
    """Score `completions` against the plan's remainders and compare the bands.

    Items dated before 00:00 UTC on `cutoff` are the pre-cutoff band, the rest the control band.
    Completions that failed (`error` set) are counted in `n_failed` and left out. A metric is
    flagged where its length-matched Mann–Whitney p-value is below `alpha`. Raises `ValueError`
    when, after failures, fewer than 1 pre-cutoff or 2 control items are left.

    The steps: score the completions (`score_completions`), split them at the cutoff
    (`split_at_cutoff`), compare the bands on each metric (`compare_metric`), then judge each
    item (`item_results`) and gather the warnings (`_warnings`, `length_drift`)."""
    scored = score_completions(plan, completions)
    banded = split_at_cutoff(scored.answered, cutoff)
    n_pre, n_control = len(banded.members["pre_cutoff"]), len(banded.members["control"])
    if n_pre < MIN_PRE_CUTOFF_ITEMS or n_control < MIN_CONTROL_ITEMS:
        raise ValueError(
            f"after {scored.failed} failed probes, {n_pre} pre-cutoff and {n_control} control items are left; "
            f"the comparison needs items on both sides of {cutoff.isoformat()} (at least {min_band} each to be useful)"
        )
    outcomes = {metric: compare_metric(metric, banded, alpha=alpha) for metric in SimilarityMetric}
    comparisons = [outcome.comparison for outcome in outcomes.values()]
    pre_chars, control_chars = float(np.median(banded.lengths["pre_cutoff"])), float(np.median(banded.lengths["control"]))
    warnings = _warnings(n_pre, n_control, scored.failed, len(completions), plan.not_cut, min_band)
    if (drift := length_drift(banded, alpha=alpha)) is not None:
        warnings.append(drift)
    if (unclean := clean_band_warning(plan.near_pre_cutoff)) is not None:
        warnings.append(unclean)
    primary = outcomes[primary_metric].comparison
    return ProbeReport(
        model=model,
        dataset=plan.dataset,
        split=plan.split,
        cutoff=cutoff,
        alpha=alpha,
        cut_policy=plan.policy,
        n_pre_cutoff=n_pre,
        n_control=n_control,
        n_failed=scored.failed,
        n_not_cut=len(plan.not_cut),
        n_control_near_pre_cutoff=len(plan.near_pre_cutoff),
        pre_remainder_median_chars=pre_chars,
        control_remainder_median_chars=control_chars,
        primary_metric=primary_metric,
        metrics=comparisons,
        items=item_results(scored.answered, banded, outcomes),
        warnings=warnings,
        summary=_summary(primary, n_pre, n_control, cutoff, left_out=len(plan.near_pre_cutoff)),
        statement=evidence_statement(
            what=f"completion similarity ({primary_metric.value})", model=model, corpus=f"{plan.dataset} ({plan.split})", cutoff=cutoff, n_after=n_control
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


def compare_metric(metric: SimilarityMetric, banded: Banded, *, alpha: float) -> MetricOutcome:
    """Compare the bands on `metric` (`compare_bands`, and `length_matched_mann_whitney`, whose
    p-value below `alpha` flags it), with every item's control tail."""
    values = banded.values(metric)
    pre, control = values["pre_cutoff"], values["control"]
    compared = compare_bands(pre, control)
    matched = length_matched_mann_whitney(pre, control, pre_lengths=banded.lengths["pre_cutoff"], control_lengths=banded.lengths["control"])
    expected = expected_share_above(CONTROL_QUANTILE, pre_lengths=banded.lengths["pre_cutoff"], control=control, control_lengths=banded.lengths["control"])
    comparison = MetricComparison(
        metric=metric,
        pre_median=float(compared.pre_median),
        control_median=float(compared.control_median),
        median_gap=float(compared.median_gap),
        control_p95=float(compared.control_p95),
        share_above_control_p95=float(compared.share_above_control_p95),
        expected_share_length_matched=expected,
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


def item_results(answered: Sequence[Answered], banded: Banded, outcomes: Mapping[SimilarityMetric, MetricOutcome]) -> list[ProbeItemResult]:
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


def _summary(primary: MetricComparison, n_pre: int, n_control: int, cutoff: date, *, left_out: int) -> str:
    """The report's headline: the medians, the share above the control's 95th percentile beside
    the share expected there by chance given the pre-cutoff items' lengths (never against a bare
    5%: `curation.evidence.length_strata`), both p-values, and how many items were kept out of the
    control band as near copies of older items."""
    clean = ""
    if left_out == 1:
        clean = "; 1 later item was left out of the control as a near copy of an older one"
    elif left_out:
        clean = f"; {left_out} later items were left out of the control as near copies of older ones"
    head = (
        f"On {primary.metric.value} similarity, the {n_pre} items dated before {cutoff.isoformat()} have a median of "
        f"{primary.pre_median:.3f} against {primary.control_median:.3f} for the {n_control} control items dated on or after it "
        f"(gap {primary.median_gap:+.3f}{clean}); {primary.share_above_control_p95:.0%} of them lie above the control's 95th percentile "
        f"({primary.control_p95:.3f}), {expected_wording(primary)} (Mann–Whitney {p_text(primary.p_value)}; "
        f"comparing items of similar length, {p_text(primary.length_matched_p_value)})."
    )
    if primary.flagged:
        return head + " The model reproduces the older items more closely than items it cannot have seen, which is what having seen them would produce."
    return head + " The older items are reproduced no more closely than chance explains: no sign here that the model has seen them."


def expected_wording(comparison: MetricComparison) -> str:
    """What share of pre-cutoff items would lie above the control's 95th percentile by chance,
    given their remainder lengths, as a clause: `where about 9% would by chance, given their lengths`."""
    if comparison.expected_share_length_matched is None:
        return "where chance would put a share that depends on their lengths (not computed for this report)"
    return f"where about {comparison.expected_share_length_matched:.0%} would by chance, given their remainder lengths"
