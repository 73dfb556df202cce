"""The temporal-split report: one model's score on items dated before its training cutoff versus
after it, with a bootstrap interval, a permutation-test p-value, the human success rate on both
halves as a difficulty control, and a monthly series.

Works on any dated corpus: incidents of a private eval, or a public benchmark whose items carry
dates, given per-item results. The random generator is passed in, so a report is reproducible.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats

from curation.evidence.wording import evidence_statement, p_text, points
from curation.intervals import bootstrap_difference_interval, mean_difference, resample_batch
from schemas.evidence import EvidenceWarning, Interval, ItemResult, MonthHalf, MonthlyPoint, SplitHalf, SplitHalfLabel, TemporalSplitReport, cutoff_instant

FloatArray = NDArray[np.float64]

BOOTSTRAP_RESAMPLES = 2000
"""Bootstrap resamples of the interval: percentile bounds at 95% move by well under a point between seeds."""
PERMUTATION_RESAMPLES = 1999
"""Permutations of the test: p-values resolve to 1/2000, far below any alpha worth using."""
MIN_ITEMS_PER_HALF = 30
"""Below this many items in a half, the bootstrap interval is too ragged to trust and one odd item moves
the mean by several points: the report warns."""
TARGET_DIFFERENCE = 0.10
"""The inflation worth detecting (ten points): the report warns when the counts and spread of scores
could not detect it with 80% power."""
POWER = 0.80


class NotEnoughItems(ValueError):
    """A half of the split has fewer than two items: there is nothing to compare."""


@dataclass(frozen=True)
class DifferenceTest:
    """Mean(before) − mean(after) with its bootstrap interval and two-sided permutation p-value,
    one value per leading index of the inputs (a 0-d array for 1-d inputs)."""

    difference: FloatArray
    low: FloatArray
    high: FloatArray
    p_value: FloatArray


def difference_test(
    before: ArrayLike,
    after: ArrayLike,
    *,
    rng: np.random.Generator,
    level: float = 0.95,
    bootstrap_resamples: int = BOOTSTRAP_RESAMPLES,
    permutation_resamples: int = PERMUTATION_RESAMPLES,
) -> DifferenceTest:
    """Test mean(before) = mean(after) along the last axis.

    `before` has shape (..., n1) and `after` (..., n2) with the same leading shape: each leading
    index is one data set (the simulations in the tests pass hundreds at once). The interval is the
    percentile bootstrap interval at `level`, resampling each half independently
    (`curation.intervals.bootstrap_difference_interval`); the p-value is
    scipy's two-sided permutation test of the difference of means, exact in expectation under
    exchangeability (p ≥ 1 / (permutation_resamples + 1)).
    """
    before = np.asarray(before, dtype=np.float64)
    after = np.asarray(after, dtype=np.float64)
    if before.shape[-1] < 2 or after.shape[-1] < 2:
        raise NotEnoughItems(f"each half needs at least 2 items (got {before.shape[-1]} before and {after.shape[-1]} after the cutoff)")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must lie strictly between 0 and 1 (got {level})")
    low, high = bootstrap_difference_interval(before, after, level, n_resamples=bootstrap_resamples, rng=rng)
    # Permutations are drawn in blocks of the same bounded size as the bootstrap's (p-values do not depend on the block size).
    leading = int(np.prod(before.shape[:-1], dtype=np.int64))
    batch = resample_batch(leading * (before.shape[-1] + after.shape[-1]), permutation_resamples)
    result = stats.permutation_test(
        (before, after),
        mean_difference,
        permutation_type="independent",
        vectorized=True,
        n_resamples=permutation_resamples,
        batch=batch,
        alternative="two-sided",
        axis=-1,
        rng=rng,
    )
    return DifferenceTest(
        difference=mean_difference(before, after, axis=-1),
        low=low,
        high=high,
        p_value=np.asarray(result.pvalue, dtype=np.float64),
    )


def is_flagged(test: DifferenceTest, *, alpha: float) -> NDArray[np.bool_]:
    """The report's decision, per data set: the older items scored higher, the permutation p-value
    is under `alpha` and the interval lies above zero. One-directional on purpose: newer items
    scoring higher is not what training on the older ones produces."""
    return np.asarray((test.difference > 0) & (test.p_value < alpha) & (test.low > 0), dtype=np.bool_)


def minimum_detectable_difference(before: FloatArray, after: FloatArray, *, alpha: float, power: float = POWER) -> float:
    """The smallest true difference of means that a two-sided test at `alpha` detects with `power`,
    given these counts and the observed spread (normal approximation: (z₁₋α/₂ + z_power) · SE)."""
    se = math.sqrt(float(np.var(before, ddof=1)) / before.size + float(np.var(after, ddof=1)) / after.size)
    return float((stats.norm.ppf(1.0 - alpha / 2.0) + stats.norm.ppf(power)) * se)


def _half(label: SplitHalfLabel, results: Sequence[ItemResult]) -> SplitHalf:
    human = [result.human_success for result in results if result.human_success is not None]
    return SplitHalf(
        label=label,
        n=len(results),
        mean_score=float(np.mean([result.score for result in results])),
        first_occurred_at=min(result.occurred_at for result in results).astimezone(UTC),
        last_occurred_at=max(result.occurred_at for result in results).astimezone(UTC),
        human_n=len(human),
        human_success_rate=float(np.mean(human)) if human else None,
    )


def monthly_series(results: Sequence[ItemResult], *, cutoff: date) -> list[MonthlyPoint]:
    """Mean score and human success rate per calendar month (UTC), oldest first; only months with items."""
    by_month: dict[tuple[int, int], list[ItemResult]] = defaultdict(list)
    for result in results:
        moment = result.occurred_at.astimezone(UTC)
        by_month[(moment.year, moment.month)].append(result)
    points_: list[MonthlyPoint] = []
    for (year, month), members in sorted(by_month.items()):
        first_day = date(year, month, 1)
        next_first = date(year + month // 12, month % 12 + 1, 1)
        half: MonthHalf
        if next_first <= cutoff:
            half = "before_cutoff"
        elif first_day >= cutoff:
            half = "after_cutoff"
        else:
            half = "straddles_cutoff"
        human = [member.human_success for member in members if member.human_success is not None]
        points_.append(
            MonthlyPoint(
                month=f"{year:04d}-{month:02d}",
                half=half,
                n=len(members),
                mean_score=float(np.mean([member.score for member in members])),
                human_success_rate=float(np.mean(human)) if human else None,
            )
        )
    return points_


def _human_drift(before: SplitHalf, after: SplitHalf, *, alpha: float, min_items: int) -> tuple[float | None, list[EvidenceWarning]]:
    """The human success difference (before − after) and warnings about it."""
    warnings: list[EvidenceWarning] = []
    if before.human_n == 0 and after.human_n == 0:
        return None, warnings
    if before.human_n < min_items or after.human_n < min_items:
        warnings.append(
            EvidenceWarning(
                code="human_success_partial",
                message=(
                    f"Human success is known for {before.human_n} items before and {after.human_n} after the cutoff; "
                    f"below {min_items} in a half it cannot show whether difficulty drifted. Record human success on more items."
                ),
            )
        )
        if before.human_n == 0 or after.human_n == 0:
            return None, warnings
    assert before.human_success_rate is not None and after.human_success_rate is not None
    difference = before.human_success_rate - after.human_success_rate
    solved_before = round(before.human_success_rate * before.human_n)
    solved_after = round(after.human_success_rate * after.human_n)
    table = [[solved_before, before.human_n - solved_before], [solved_after, after.human_n - solved_after]]
    p_value = float(stats.fisher_exact(table).pvalue)
    if p_value < alpha or abs(difference) >= TARGET_DIFFERENCE:
        easier = "older" if difference > 0 else "newer"
        warnings.append(
            EvidenceWarning(
                code="difficulty_drift",
                message=(
                    f"People solved {before.human_success_rate:.0%} of items before the cutoff and {after.human_success_rate:.0%} after "
                    f"({points(difference)}, Fisher {p_text(p_value)}): the {easier} items look easier, so part of any score gap "
                    "may be difficulty, not contamination. Compare the model's gap with the human gap before drawing conclusions."
                ),
            )
        )
    return difference, warnings


def _summary(report_difference: float, interval: Interval, p_value: float, before: SplitHalf, after: SplitHalf, cutoff: date, flagged: bool, alpha: float) -> str:
    head = (
        f"Items dated before {cutoff.isoformat()} scored {before.mean_score:.3f} on average (n = {before.n}); items on or after it "
        f"scored {after.mean_score:.3f} (n = {after.n}): a difference of {points(report_difference)} "
        f"(95% interval {interval.low * 100:+.1f} to {interval.high * 100:+.1f}; permutation {p_text(p_value)})."
    )
    if flagged:
        return head + " The older items scored higher by more than chance explains, which is what training on them would produce."
    if p_value < alpha and interval.excludes_zero() and report_difference < 0:
        return head + " The newer items scored higher, which training on the older ones would not explain; look for a change in difficulty."
    return head + " The difference is within what chance explains: no sign here that the score is inflated on the older items."


def temporal_split_report(
    results: Sequence[ItemResult],
    *,
    cutoff: date,
    model: str,
    corpus: str,
    rng: np.random.Generator,
    score_name: str = "score",
    alpha: float = 0.05,
    bootstrap_resamples: int = BOOTSTRAP_RESAMPLES,
    permutation_resamples: int = PERMUTATION_RESAMPLES,
    min_items_per_half: int = MIN_ITEMS_PER_HALF,
    target_difference: float = TARGET_DIFFERENCE,
) -> TemporalSplitReport:
    """The temporal-split report of one model's `results` on one corpus.

    Items dated before 00:00 UTC on `cutoff` form the `before` half, the rest the `after` half.
    The interval is at 95% whatever `alpha`; `flagged` needs the older items ahead, `p_value < alpha`
    and the interval excluding zero. Warnings: a half under `min_items_per_half` items
    (`small_half`); counts and spread that could not detect `target_difference` with 80% power
    (`underpowered`); human success drifting between halves (`difficulty_drift`) or known for too
    few items (`human_success_partial`). Raises `NotEnoughItems` when a half has fewer than 2 items
    and `ValueError` when an item has more than one result.
    """
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie strictly between 0 and 1 (got {alpha})")
    seen: set[str] = set()
    for result in results:
        if result.item_id in seen:
            raise ValueError(f"item {result.item_id} has two results; give one result per item (average repeated runs first)")
        seen.add(result.item_id)
    instant = cutoff_instant(cutoff)
    before_results = [result for result in results if result.occurred_at < instant]
    after_results = [result for result in results if result.occurred_at >= instant]
    if len(before_results) < 2 or len(after_results) < 2:
        raise NotEnoughItems(
            f"the split at {cutoff.isoformat()} leaves {len(before_results)} items before and {len(after_results)} after the cutoff; "
            "each half needs at least 2 (and 30 or more to be useful): check the cutoff date and that results cover both periods"
        )
    before_scores = np.array([result.score for result in before_results], dtype=np.float64)
    after_scores = np.array([result.score for result in after_results], dtype=np.float64)
    test = difference_test(before_scores, after_scores, rng=rng, bootstrap_resamples=bootstrap_resamples, permutation_resamples=permutation_resamples)
    difference = float(test.difference)
    interval = Interval(low=float(test.low), high=float(test.high), level=0.95)
    p_value = float(test.p_value)
    flagged = bool(is_flagged(test, alpha=alpha))
    before = _half("before_cutoff", before_results)
    after = _half("after_cutoff", after_results)

    warnings: list[EvidenceWarning] = []
    for half in (before, after):
        if half.n < min_items_per_half:
            side = "before" if half.label == "before_cutoff" else "on or after"
            warnings.append(
                EvidenceWarning(
                    code="small_half",
                    message=(
                        f"Only {half.n} items are dated {side} the cutoff; below {min_items_per_half} the interval is ragged and one odd "
                        "item moves the mean by several points. Add items to this half before relying on the result."
                    ),
                )
            )
    detectable = minimum_detectable_difference(before_scores, after_scores, alpha=alpha)
    if detectable > target_difference:
        warnings.append(
            EvidenceWarning(
                code="underpowered",
                message=(
                    f"With {before.n} and {after.n} items and this spread of scores, only a gap of {detectable * 100:.1f} points or more "
                    f"would be found 80% of the time; a {target_difference * 100:.0f}-point inflation could go unnoticed. "
                    "More items (or graded rather than pass/fail scores) narrow the interval."
                ),
            )
        )
    human_difference, human_warnings = _human_drift(before, after, alpha=alpha, min_items=min_items_per_half)
    warnings.extend(human_warnings)

    return TemporalSplitReport(
        model=model,
        corpus=corpus,
        score_name=score_name,
        cutoff=cutoff,
        alpha=alpha,
        before=before,
        after=after,
        difference=difference,
        interval=interval,
        p_value=p_value,
        flagged=flagged,
        minimum_detectable_difference=detectable,
        human_difference=human_difference,
        bootstrap_resamples=bootstrap_resamples,
        permutation_resamples=permutation_resamples,
        monthly=monthly_series(results, cutoff=cutoff),
        warnings=warnings,
        summary=_summary(difference, interval, p_value, before, after, cutoff, flagged, alpha),
        statement=evidence_statement(what=score_name, model=model, corpus=corpus, cutoff=cutoff, n_after=after.n),
    )
