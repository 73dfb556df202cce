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

from curation.evidence.clean_band import NearTo, clean_band_warning
from curation.evidence.completion_margin import margins_by_band
from curation.evidence.length_strata import expected_share_above, length_matched_mann_whitney
from curation.evidence.probing import ProbePlan, scored_answer, scored_remainder, similarity
from curation.evidence.wording import evidence_statement, expected_wording, p_text, probe_conclusion, probe_test_name
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
    primary_metric: ProbeMetric = ProbeMetric.LEVENSHTEIN_MARGIN,
    min_band: int = MIN_BAND,
) -> ProbeReport:
    """Score `completions` against the plan's remainders (`score_completions`) and compare the
    bands (`compare_scored`), as the completion test's report."""
    scored = score_completions(plan, completions, cutoff=cutoff)
    setting = TestSetting(
        test=ProbeTest.COMPLETION, metrics=COMPLETION_METRICS, primary_metric=primary_metric, cut_policy=plan.policy, not_cut=plan.not_cut, near_pre_cutoff=plan.near_pre_cutoff
    )
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
    near_pre_cutoff: Mapping[str, NearTo] = field(default_factory=dict)
    """Items left out of the control band before sampling, as near copies of older items (counted)."""
    confirmed_by: ProbeMetric | None = None
    """A metric the primary one's flag needs beside it (`confirmed`): the reference test's gap
    flags only where the target's own test flags too."""


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
    if setting.confirmed_by is not None:
        outcomes[setting.primary_metric], unconfirmed = confirmed(outcomes[setting.primary_metric], outcomes[setting.confirmed_by].comparison)
        warnings.extend([unconfirmed] if unconfirmed is not None else [])
    if (drift := length_drift(banded, alpha=alpha)) is not None:
        warnings.append(drift)
    if (unclean := clean_band_warning(setting.near_pre_cutoff)) is not None:
        warnings.append(unclean)
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
        n_control_near_pre_cutoff=len(setting.near_pre_cutoff),
        pre_remainder_median_chars=pre_chars,
        control_remainder_median_chars=control_chars,
        primary_metric=setting.primary_metric,
        metrics=[outcome.comparison for outcome in outcomes.values()],
        items=item_results(scored.answered, banded, outcomes),
        warnings=warnings,
        summary=_summary(primary, n_pre, n_control, cutoff, setting.test, left_out=len(setting.near_pre_cutoff)),
        statement=evidence_statement(
            what=f"{probe_test_name(setting.test)} ({setting.primary_metric.value})", model=model, corpus=f"{dataset} ({split})", cutoff=cutoff, n_after=n_control
        ),
    )


def confirmed(primary: MetricOutcome, own: MetricComparison) -> tuple[MetricOutcome, EvidenceWarning | None]:
    """The primary outcome flagged only where `own` (the target's own test) flags too: an
    intersection-union test, at level alpha whichever of the two nulls holds. A reference that
    differs from the target on unseen text can move the gap between older and newer items by
    itself; the target's own test cannot be fooled that way. The warning says when the gap alone
    was below alpha."""
    comparison = primary.comparison
    if not comparison.flagged or own.flagged:
        return primary, None
    warning = EvidenceWarning(
        code="reference_unconfirmed",
        message=(
            f"The {comparison.metric.value} comparison alone is below alpha (length-matched {p_text(comparison.length_matched_p_value)}), but the model's own "
            f"{own.metric.value} is not ({p_text(own.length_matched_p_value)}): the reference may differ from the model on text neither has seen, so this is not "
            "flagged. Probe again with a reference closer to the model (an older model of its family)."
        ),
    )
    return MetricOutcome(comparison.model_copy(update={"flagged": False}), primary.threshold, primary.tails), warning


def score_completions(plan: ProbePlan, completions: Sequence[ProbeCompletion], *, cutoff: date) -> Scored:
    """Each answered completion's similarity to its item's remainder (`similarity`) and margin over
    its band's items either side of `cutoff` (`margins_by_band`); failed ones (`error` set, or no
    completion) are only counted. Raises `ValueError` for an item the plan did not probe."""
    answered: list[Answered] = []
    texts: list[tuple[str, str, str]] = []
    failed = 0
    for completion in completions:
        cut = plan.cuts.get(completion.item_id)
        if cut is None:
            raise ValueError(f"completion for item {completion.item_id}, which the plan did not probe")
        if completion.error is not None or completion.completion is None:
            failed += 1
            continue
        scores = similarity(completion.completion, cut.remainder, prefix=cut.prefix)
        texts.append((scored_answer(completion.completion, prefix=cut.prefix), (truth := scored_remainder(cut.remainder)), cut.prefix))
        answered.append(Answered(plan.items[completion.item_id], len(truth), scores))
    answers, truths, prefixes = ([text[k] for text in texts] for k in range(3))
    for entry, margin in zip(answered, margins_by_band(answers, truths, prefixes, [entry.item.occurred_at < cutoff_instant(cutoff) for entry in answered]), strict=True):
        entry.scores[ProbeMetric.LEVENSHTEIN_MARGIN] = margin
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


def _summary(primary: MetricComparison, n_pre: int, n_control: int, cutoff: date, test: ProbeTest, *, left_out: int) -> str:
    """The report's headline: the medians, the share above the control's 95th percentile beside
    the share expected there by chance given the pre-cutoff items' lengths (never against a bare
    5%: `curation.evidence.length_strata`), both p-values, how many items were kept out of the
    control band as near copies of older items, and what a flag (or none) on `test` means."""
    clean = ""
    if left_out == 1:
        clean = "; 1 later item was left out of the control as a near copy of an older one"
    elif left_out:
        clean = f"; {left_out} later items were left out of the control as near copies of older ones"
    head = (
        f"{probe_test_name(test, capital=True)}, on {primary.metric.value}: the {n_pre} items dated before {cutoff.isoformat()} have a median of "
        f"{primary.pre_median:.3f} against {primary.control_median:.3f} for the {n_control} control items dated on or after it "
        f"(gap {primary.median_gap:+.3f}{clean}); {primary.share_above_control_p95:.0%} of them lie above the control's 95th percentile "
        f"({primary.control_p95:.3f}), {expected_wording(primary.expected_share_length_matched)} (Mann–Whitney {p_text(primary.p_value)}; "
        f"comparing items of similar length, {p_text(primary.length_matched_p_value)})."
    )
    return f"{head} {probe_conclusion(test, flagged=primary.flagged)}"

