"""Confidence intervals for scores, built on `scipy.stats`: one home for every interval a report quotes.

- `wilson_interval(successes, n)`: Wilson's score interval for a proportion (`scipy.stats.binomtest`),
  exactly 0 at its low end when nothing succeeded and exactly 1 at its high end when everything did.
- `bootstrap_mean_interval(values, ...)`: the percentile-bootstrap interval of the mean of one sample.
  One value, or values all equal, give the degenerate interval (value, value) without resampling.
- `bootstrap_difference_interval(first, second, ...)`: the percentile-bootstrap interval of
  `mean_difference` = mean(first) − mean(second), resampling the two samples independently, along
  the last axis and vectorised over the leading axes (each leading index is one data set).

The contract shared by the bootstraps: `confidence` lies strictly between 0 and 1 and values are
finite (otherwise `ValueError`); the caller passes the random generator, so the same inputs,
generator state, `n_resamples` and `batch` always give the same interval. Resamples are drawn
`batch` at a time; the default batch (`resample_batch`, also right for scipy's permutation test)
keeps one block of resampled values within `BLOCK_VALUES` (or to one resample, where that is larger),
so memory is bounded by that block plus the bootstrap distribution (one value per leading index and resample).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats

FloatArray = NDArray[np.float64]

BLOCK_VALUES = 1 << 20
"""Resampled values held at once (8 MiB of float64). Smaller blocks stay in cache: for 500 simulated data
sets of 200 items a half, blocks of a few resamples are faster than one block of all of them."""


def resample_batch(values_per_resample: int, n_resamples: int, *, block_values: int = BLOCK_VALUES) -> int:
    """How many resamples to draw at once so that one block holds at most `block_values` values
    (at least 1, at most `n_resamples`); `values_per_resample` counts every value one resample draws,
    over all samples and leading indices."""
    return max(1, min(n_resamples, block_values // max(1, values_per_resample)))


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson's score interval for `successes` out of `n` trials (0 ≤ successes ≤ n, n > 0) at `confidence`."""
    if n <= 0 or not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n and n > 0, got {successes} of {n}")
    _check_confidence(confidence)
    interval = stats.binomtest(successes, n).proportion_ci(confidence_level=confidence, method="wilson")
    return float(interval.low), float(interval.high)


def bootstrap_mean_interval(values: ArrayLike, confidence: float = 0.95, *, n_resamples: int, rng: np.random.Generator, batch: int | None = None) -> tuple[float, float]:
    """The percentile-bootstrap interval at `confidence` of the mean of `values` (one-dimensional, non-empty).

    One value or all-equal values give (value, value) and draw nothing from `rng`: every resample
    would have that mean, and scipy refuses a single observation.
    """
    sample = np.asarray(values, dtype=np.float64)
    if sample.ndim != 1 or sample.size == 0:
        raise ValueError(f"the bootstrap needs a non-empty one-dimensional sample, got shape {sample.shape}")
    _check_confidence(confidence)
    _check_finite(sample)
    if np.all(sample == sample[0]):
        return float(sample[0]), float(sample[0])
    result = stats.bootstrap(
        (sample,),
        np.mean,
        n_resamples=n_resamples,
        batch=resample_batch(sample.size, n_resamples) if batch is None else batch,
        vectorized=True,
        axis=-1,
        confidence_level=confidence,
        method="percentile",
        rng=rng,
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def mean_difference(first: FloatArray, second: FloatArray, axis: int = -1) -> FloatArray:
    """mean(first) − mean(second) along `axis`: the statistic of the difference interval, vectorised as scipy's resampling wants."""
    return np.asarray(np.mean(first, axis=axis) - np.mean(second, axis=axis), dtype=np.float64)


def bootstrap_difference_interval(
    first: ArrayLike,
    second: ArrayLike,
    confidence: float = 0.95,
    *,
    n_resamples: int,
    rng: np.random.Generator,
    batch: int | None = None,
) -> tuple[FloatArray, FloatArray]:
    """The percentile-bootstrap interval at `confidence` of mean(first) − mean(second) along the last axis.

    `first` has shape (..., n1) and `second` (..., n2), n1 and n2 at least 2, with leading shapes
    that broadcast; the two samples are resampled independently (unpaired). Returns (low, high),
    each of the leading shape (0-d arrays for one-dimensional inputs). All leading data sets share
    the resampled positions, which is harmless when they are independent and keeps a batch of
    simulations to one pass.
    """
    first_values = np.asarray(first, dtype=np.float64)
    second_values = np.asarray(second, dtype=np.float64)
    if first_values.ndim == 0 or second_values.ndim == 0 or first_values.shape[-1] < 2 or second_values.shape[-1] < 2:
        raise ValueError(f"each sample needs at least 2 values along the last axis, got shapes {first_values.shape} and {second_values.shape}")
    _check_confidence(confidence)
    _check_finite(first_values)
    _check_finite(second_values)
    leading = np.broadcast_shapes(first_values.shape[:-1], second_values.shape[:-1])
    per_resample = int(np.prod(leading, dtype=np.int64)) * (first_values.shape[-1] + second_values.shape[-1])
    result = stats.bootstrap(
        (first_values, second_values),
        mean_difference,
        n_resamples=n_resamples,
        batch=resample_batch(per_resample, n_resamples) if batch is None else batch,
        vectorized=True,
        paired=False,
        axis=-1,
        confidence_level=confidence,
        method="percentile",
        rng=rng,
    )
    return np.asarray(result.confidence_interval.low, dtype=np.float64), np.asarray(result.confidence_interval.high, dtype=np.float64)


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie strictly between 0 and 1, not {confidence}")


def _check_finite(values: FloatArray) -> None:
    # A NaN would reach scipy's quantiles as a NaN bound (with a warning about BCa), not as an error.
    if not np.all(np.isfinite(values)):
        raise ValueError("the bootstrap needs finite values; found NaN or infinity")
