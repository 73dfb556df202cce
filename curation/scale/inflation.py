"""Public-score inflation, after ConStat (Dekoninck et al., NeurIPS 2024): is a model's score on a
public benchmark higher than its score on the private, fresh eval predicts, judged by how other
models' public scores follow their private ones?

The relation is fitted across reference models as a line on the probit scale,
probit(public) = a + b · probit(private) with b ≥ 0, least squares with each model counted once;
the target's private score gives its predicted public score, and the report is the difference
(observed − predicted). A score is the mean over the items a model was scored on; before the
probit, scores are held half an item away from 0 and 1.

Why this fit: measured with `bench/public_inflation.py --compare-fits` on its simulation (models
with one latent ability; a harder private eval of free-answer items and an easier multiple-choice
public benchmark with a guessing floor, so the relation bends), 300 + 300 items, 300 clean and 300
targets with a 10-point inflation per cell, 500 draws, alpha 0.05; false positives and power at 10
and at 20 reference models:

- a straight line on raw scores: 7.0% and 13.7% false positives (power 0.86, 0.91): the relation
  bends, and a line misses it at both ends, more often the more models pin it down;
- a line on the logit scale: 1.7% and 2.7% (power 0.83, 0.88);
- a line on the probit scale: 3.7% and 3.3% (power 0.85, 0.91), chosen;
- a smoothing spline with its smoothness chosen by generalised cross-validation, as ConStat fits:
  4.0% and 3.0% (power 0.76, 0.90). With 10 models it loses power, and 2.4% of its fits could not
  be made (a resample of 10 models holds only 6 or 7 distinct ones; below 5 distinct models no
  cubic smoothing spline exists, so a report on 2 to 4 reference models could never use it).

The logit and probit lines are within noise of each other; the probit line had the higher power in
both cells, at a false-positive rate still under alpha.

Uncertainty is a bootstrap: every draw resamples the private items and the public items (each the
same for every model, so an easy draw lifts every model and cancels in the difference) and the
reference models (with replacement), refits the line and recomputes the difference. The p-value is
one-sided, the share of draws (counting the observed difference as one) whose difference is 0 or
below; the interval is the percentile interval at 1 − 2·alpha, whose low end is the one-sided bound.
Resampling the models as well as their items counts the models' item noise twice, so the test is
conservative: at alpha 0.05 it flags 2.9% of clean targets with 10 reference models and 300 + 300
items (1,000 simulated), between 1% and 5.3% across 5 to 20 models and 100 or 300 items a side.

What it cannot see: a model that is simply better at what the public benchmark tests than the
reference models are lies above the line too. Each reference model's own distance from the line
through the others is in the report, and a flagged report warns when one of them lies as far above.

Pure computation: arrays in, a report out; the random generator is passed in.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import expit, logit, ndtr, ndtri

from curation.evidence.wording import p_text, points, public_inflation_statement
from curation.intervals import resample_batch
from schemas.evidence import EvidenceWarning, InflationFit, Interval, PublicInflationReport, ReferenceModelScore

FloatArray = NDArray[np.float64]
Link = Literal["probit", "logit", "identity"]

BOOTSTRAP_RESAMPLES = 2000
"""Draws of the bootstrap: p-values resolve to 1/2001, and the interval's bounds move by about 0.2 points (sd) between seeds."""
MIN_RESAMPLES = 99
MIN_REFERENCE_MODELS = 5
"""Below this many reference models the line rests on too few points to trust (warned)."""
FULL_COVERAGE = 0.9
"""A reference model scored on less than this share of the target's items on a side is compared on a
different mix of items (warned)."""


def _check(
    reference_private: ArrayLike,
    reference_public: ArrayLike,
    target_private: ArrayLike,
    target_public: ArrayLike,
    reference_models: Sequence[str],
    model: str,
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """The four score arrays as floats, or ValueError saying what to fix."""
    ref_private = np.asarray(reference_private, dtype=np.float64)
    ref_public = np.asarray(reference_public, dtype=np.float64)
    own_private = np.asarray(target_private, dtype=np.float64)
    own_public = np.asarray(target_public, dtype=np.float64)
    if ref_private.ndim != 2 or ref_public.ndim != 2:
        raise ValueError(f"reference scores must be 2-D (reference models × items), got shapes {ref_private.shape} and {ref_public.shape}")
    if own_private.ndim != 1 or own_public.ndim != 1:
        raise ValueError(f"the target's scores must be 1-D (one score per item), got shapes {own_private.shape} and {own_public.shape}")
    if ref_private.shape[0] != ref_public.shape[0]:
        raise ValueError(f"reference scores name {ref_private.shape[0]} models on the private eval but {ref_public.shape[0]} on the public corpus; give one row per model on both")
    if ref_private.shape[1] != own_private.size or ref_public.shape[1] != own_public.size:
        raise ValueError(
            f"the target has {own_private.size} private and {own_public.size} public items but the reference scores have "
            f"{ref_private.shape[1]} and {ref_public.shape[1]} columns; give one column per item the target was scored on (NaN where a reference model was not)"
        )
    if len(reference_models) != ref_private.shape[0]:
        raise ValueError(f"{len(reference_models)} reference model names for {ref_private.shape[0]} rows of scores; name each row")
    if len(set(reference_models)) != len(reference_models):
        raise ValueError("a reference model is named twice; give each model's scores once (average repeated runs first)")
    if model in reference_models:
        raise ValueError(f"the target {model!r} is among the reference models; compare it with other models only")
    if len(reference_models) < 2:
        raise ValueError(f"the test needs at least 2 reference models to fit a line through (got {len(reference_models)}), and 5 or more to be trusted")
    if own_private.size < 2 or own_public.size < 2:
        raise ValueError(f"each side needs at least 2 items (got {own_private.size} private and {own_public.size} public)")
    if not (np.all(np.isfinite(own_private)) and np.all(np.isfinite(own_public))):
        raise ValueError("the target's scores must be finite: give a score for every item it was scored on, and only those")
    for name, values in (("private", ref_private), ("public", ref_public), ("private", own_private), ("public", own_public)):
        known = values[~np.isnan(values)]
        if np.any(np.isinf(known)) or np.any(known < 0.0) or np.any(known > 1.0):
            raise ValueError(f"{name} scores must lie in [0, 1] (NaN marks an item a reference model was not scored on)")
    for side, values in (("private eval", ref_private), ("public corpus", ref_public)):
        unscored = [name for name, row in zip(reference_models, values, strict=True) if np.all(np.isnan(row))]
        if unscored:
            raise ValueError(f"reference model(s) {', '.join(unscored)} have no score on any of the target's items of the {side}; leave them out")
    return ref_private, ref_public, own_private, own_public


def _to_line_scale(scores: FloatArray, items: FloatArray, link: Link) -> FloatArray:
    """Scores on the scale the line is fitted on, held half an item (of `items`) away from 0 and 1."""
    if link == "identity":
        return scores
    half = 0.5 / np.maximum(items, 1.0)
    held = np.clip(scores, half, 1.0 - half)
    return np.asarray(ndtri(held) if link == "probit" else logit(held), dtype=np.float64)


def _from_line_scale(values: FloatArray, link: Link) -> FloatArray:
    if link == "identity":
        return np.clip(values, 0.0, 1.0)
    return np.asarray(ndtr(values) if link == "probit" else expit(values), dtype=np.float64)


def _line(x: FloatArray, y: FloatArray, weights: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Weighted least squares of y on x along the last axis: (intercept, slope), slope at 0 or above;
    where x does not vary (one distinct model) the line is flat through the weighted mean of y."""
    total = weights.sum(axis=-1)
    mean_x = (weights * x).sum(axis=-1) / total
    mean_y = (weights * y).sum(axis=-1) / total
    spread = (weights * (x - mean_x[..., None]) ** 2).sum(axis=-1)
    covariance = (weights * (x - mean_x[..., None]) * (y - mean_y[..., None])).sum(axis=-1)
    varies = spread > 1e-12 * np.maximum(total, 1.0)
    slope = np.where(varies, np.maximum(covariance / np.where(varies, spread, 1.0), 0.0), 0.0)
    return mean_y - slope * mean_x, slope


def _predict(
    private: FloatArray, private_items: FloatArray, public: FloatArray, public_items: FloatArray, weights: FloatArray, at: FloatArray, at_items: FloatArray, link: Link
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """The public score the line through the reference models (weighted by `weights`) predicts at
    private score `at`: (prediction, intercept, slope); `*_items` are the counts the scores are over."""
    intercept, slope = _line(_to_line_scale(private, private_items, link), _to_line_scale(public, public_items, link), weights)
    return _from_line_scale(intercept + slope * _to_line_scale(at, at_items, link), link), intercept, slope


def _counts(rng: np.random.Generator, draws: int, size: int) -> FloatArray:
    """How often each of `size` positions is drawn in each of `draws` resamples of `size` with replacement."""
    picks = rng.integers(0, size, size=(draws, size)) + size * np.arange(draws)[:, None]
    return np.bincount(picks.ravel(), minlength=draws * size).reshape(draws, size).astype(np.float64)


def _resampled(counts: FloatArray, values: FloatArray, scored: FloatArray, fallback: FloatArray, fallback_items: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Each model's mean over the drawn items and how many of them it was scored on; a model none of
    whose items were drawn keeps its full-sample mean (rare, and only with partial coverage)."""
    sums = counts @ values.T
    sizes = counts @ scored.T
    empty = sizes <= 0
    means = np.where(empty, fallback, sums / np.where(empty, 1.0, sizes))
    return means, np.where(empty, fallback_items, sizes)


def bootstrap_differences(
    reference_private: FloatArray,
    reference_public: FloatArray,
    target_private: FloatArray,
    target_public: FloatArray,
    *,
    rng: np.random.Generator,
    resamples: int,
    link: Link = "probit",
) -> FloatArray:
    """The difference (public − predicted) in each of `resamples` draws, each resampling the private
    items, the public items and the reference models; drawn in blocks of bounded size."""
    rows_private = np.vstack([reference_private, target_private])
    rows_public = np.vstack([reference_public, target_public])
    scored_private, scored_public = (~np.isnan(rows_private)).astype(np.float64), (~np.isnan(rows_public)).astype(np.float64)
    filled_private, filled_public = np.nan_to_num(rows_private), np.nan_to_num(rows_public)
    full_private, full_public = np.nanmean(rows_private, axis=1), np.nanmean(rows_public, axis=1)
    items_private, items_public = scored_private.sum(axis=1), scored_public.sum(axis=1)
    references = reference_private.shape[0]
    block = resample_batch(rows_private.shape[1] + rows_public.shape[1] + references, resamples)
    differences: list[FloatArray] = []
    for start in range(0, resamples, block):
        draws = min(block, resamples - start)
        private, private_n = _resampled(_counts(rng, draws, rows_private.shape[1]), filled_private, scored_private, full_private, items_private)
        public, public_n = _resampled(_counts(rng, draws, rows_public.shape[1]), filled_public, scored_public, full_public, items_public)
        weights = _counts(rng, draws, references)
        predicted, _, _ = _predict(private[:, :-1], private_n[:, :-1], public[:, :-1], public_n[:, :-1], weights, private[:, -1], private_n[:, -1], link)
        differences.append(public[:, -1] - predicted)
    return np.concatenate(differences)


def public_inflation_report(
    reference_private: ArrayLike,
    reference_public: ArrayLike,
    target_private: ArrayLike,
    target_public: ArrayLike,
    *,
    reference_models: Sequence[str],
    model: str,
    eval_name: str,
    corpus: str,
    rng: np.random.Generator,
    alpha: float = 0.05,
    resamples: int = BOOTSTRAP_RESAMPLES,
    link: Link = "probit",
) -> PublicInflationReport:
    """The public-inflation report of `model` on the public `corpus` against the private eval `eval_name`.

    `reference_private` (reference models × the target's private items) and `reference_public`
    (reference models × the target's public items) hold the reference models' per-item scores in
    [0, 1], NaN where a model was not scored on an item; `target_private` and `target_public` the
    target's scores on every item (no NaN); `reference_models` names the rows. `link` is the scale
    of the line (the report uses probit; the others are kept for the benchmark's comparison).

    Warnings: fewer than 5 reference models (`few_reference_models`); the target's private score
    outside the reference models' (`outside_reference_range`); a reference model scored on less
    than 90% of the target's items on a side (`partial_coverage`); a flagged target with a
    reference model lying at least as far above the line through the others
    (`reference_scatter`). Raises ValueError on inputs it cannot test: fewer than 2 reference
    models, shapes that do not match, scores outside [0, 1], a reference model with no score on a
    side, alpha outside (0, 0.5), fewer than 99 resamples.
    """
    if not 0.0 < alpha < 0.5:
        raise ValueError(f"alpha must lie strictly between 0 and 0.5 (got {alpha}); the interval is at 1 − 2·alpha")
    if resamples < MIN_RESAMPLES:
        raise ValueError(f"resamples must be at least {MIN_RESAMPLES} (got {resamples}); p-values resolve only to 1/(resamples + 1)")
    ref_private, ref_public, own_private, own_public = _check(reference_private, reference_public, target_private, target_public, reference_models, model)
    names = list(reference_models)
    count = len(names)
    private_items, public_items = (~np.isnan(ref_private)).sum(axis=1).astype(np.float64), (~np.isnan(ref_public)).sum(axis=1).astype(np.float64)
    private_means, public_means = np.nanmean(ref_private, axis=1), np.nanmean(ref_public, axis=1)
    private_score, public_score = float(own_private.mean()), float(own_public.mean())
    target_items = np.array(float(own_private.size))

    predicted, intercept, slope = _predict(private_means, private_items, public_means, public_items, np.ones(count), np.array(private_score), target_items, link)
    difference = public_score - float(predicted)
    # Row k: the line through every reference model but k, at k's private score.
    square = (count, count)
    others = 1.0 - np.eye(count)
    grid = [np.broadcast_to(values, square) for values in (private_means, private_items, public_means, public_items)]
    from_others, _, _ = _predict(grid[0], grid[1], grid[2], grid[3], others, private_means, private_items, link)
    draws = bootstrap_differences(ref_private, ref_public, own_private, own_public, rng=rng, resamples=resamples, link=link)
    p_value = float((1 + np.count_nonzero(draws <= 0.0)) / (resamples + 1))
    low, high = np.quantile(draws, [alpha, 1.0 - alpha])
    interval = Interval(low=float(low), high=float(high), level=round(1.0 - 2.0 * alpha, 10))
    flagged = difference > 0.0 and p_value < alpha

    references = [
        ReferenceModelScore(
            model=name,
            private_score=float(private_means[k]),
            public_score=float(public_means[k]),
            private_items=int(private_items[k]),
            public_items=int(public_items[k]),
            difference_from_others=float(public_means[k] - from_others[k]),
        )
        for k, name in enumerate(names)
    ]
    low_private, high_private = float(private_means.min()), float(private_means.max())
    items = (own_private.size, own_public.size)
    warnings = _warnings(references, private_score=private_score, low=low_private, high=high_private, flagged=flagged, difference=difference, items=items)
    summary = _summary(
        model=model, eval_name=eval_name, corpus=corpus, scores=(private_score, public_score, float(predicted)),
        difference=difference, interval=interval, p_value=p_value, flagged=flagged, alpha=alpha, references=count,
    )  # fmt: skip
    return PublicInflationReport(
        model=model,
        eval=eval_name,
        corpus=corpus,
        alpha=alpha,
        private_score=private_score,
        private_items=own_private.size,
        public_score=public_score,
        public_items=own_public.size,
        predicted_public_score=float(predicted),
        difference=difference,
        interval=interval,
        p_value=p_value,
        flagged=flagged,
        fit=InflationFit(link=link, intercept=float(intercept), slope=float(slope)),
        reference_private_low=low_private,
        reference_private_high=high_private,
        references=references,
        bootstrap_resamples=resamples,
        warnings=warnings,
        summary=summary,
        statement=public_inflation_statement(model=model, corpus=corpus, eval_name=eval_name, references=count, private_items=own_private.size),
    )


def _warnings(
    references: list[ReferenceModelScore], *, private_score: float, low: float, high: float, flagged: bool, difference: float, items: tuple[int, int]
) -> list[EvidenceWarning]:
    """The report's warnings (see `public_inflation_report`); `items` counts the target's private and public items."""
    warnings: list[EvidenceWarning] = []
    if len(references) < MIN_REFERENCE_MODELS:
        warnings.append(
            EvidenceWarning(
                code="few_reference_models",
                message=(
                    f"Only {len(references)} reference models ({', '.join(reference.model for reference in references)}) carry the line; "
                    f"below {MIN_REFERENCE_MODELS} one unusual model moves it by several points. Score more models on both the eval and the corpus."
                ),
            )
        )
    if not low <= private_score <= high:
        side = "below" if private_score < low else "above"
        warnings.append(
            EvidenceWarning(
                code="outside_reference_range",
                message=(
                    f"The model's private score {private_score:.3f} lies {side} every reference model's ({low:.3f} to {high:.3f}), so its "
                    "predicted public score is an extrapolation of the line, which nothing here checks. "
                    f"Add reference models scoring {side} {private_score:.3f} on the private eval."
                ),
            )
        )
    partial = [
        f"{reference.model} ({reference.private_items} of {items[0]} private, {reference.public_items} of {items[1]} public)"
        for reference in references
        if reference.private_items < FULL_COVERAGE * items[0] or reference.public_items < FULL_COVERAGE * items[1]
    ]
    if partial:
        warnings.append(
            EvidenceWarning(
                code="partial_coverage",
                message=(
                    f"Some reference models were scored on only part of the model's items: {'; '.join(partial)}. Their scores are over "
                    "another mix of items (an eval's releases differ), which can move the line. Score them on the same release and items."
                ),
            )
        )
    strays = [reference for reference in references if reference.difference_from_others >= difference]
    if flagged and strays:
        named = ", ".join(f"{reference.model} ({points(reference.difference_from_others)})" for reference in strays)
        warnings.append(
            EvidenceWarning(
                code="reference_scatter",
                message=(
                    f"Reference model(s) {named} lie as far above the line through the other reference models as this model lies above "
                    "theirs: models nobody suspects stray this far too, so the public benchmark may simply reward skills the private "
                    "eval does not test. Weigh this report with that in mind."
                ),
            )
        )
    return warnings


def _summary(
    *, model: str, eval_name: str, corpus: str, scores: tuple[float, float, float],
    difference: float, interval: Interval, p_value: float, flagged: bool, alpha: float, references: int,
) -> str:  # fmt: skip
    """The report in words; `scores` are the private, public and predicted public scores."""
    private_score, public_score, predicted = scores
    head = (
        f"{model} scored {public_score:.3f} on the public corpus {corpus} and {private_score:.3f} on the private eval {eval_name}. "
        f"Across {references} reference models, that private score predicts {predicted:.3f} on the public corpus, so the public score lies "
        f"{points(difference)} from the prediction ({interval.level:.0%} interval {interval.low * 100:+.1f} to {interval.high * 100:+.1f}; "
        f"one-sided bootstrap {p_text(p_value)})."
    )
    if flagged:
        return head + (
            " The public score is higher than the private eval predicts by more than chance explains, which is what training on the public "
            "benchmark (or tuning to it) would produce."
        )
    if difference < 0 and interval.high < 0:
        return head + " The public score is lower than predicted: nothing here suggests it is inflated."
    if difference > 0 and p_value < 2 * alpha:
        return head + " The public score is somewhat higher than predicted, but not by more than chance explains at this level: no firm sign of inflation."
    return head + " The difference is within what chance explains: no sign here that the public score is inflated."
