"""A run's summary score: the mean of per-item scores in [0, 1] with a confidence interval.

When every score is 0 or 1 the mean is a proportion and the interval is Wilson's score interval
(good coverage even for small n and proportions near 0 or 1). Otherwise it is the percentile
bootstrap of the mean, with a fixed seed so the same scores always give the same interval.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy.stats import norm

from schemas.runs import ScoreInterval

WILSON = "wilson"
BOOTSTRAP = "bootstrap"
NONE = "none"
BOOTSTRAP_RESAMPLES = 5000
BOOTSTRAP_SEED = 20240601


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson's score interval for `successes` out of `n` (n > 0)."""
    if n <= 0 or not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n and n > 0, got {successes} of {n}")
    z = float(norm.ppf(0.5 + confidence / 2))
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def bootstrap_interval(scores: Sequence[float], confidence: float = 0.95, *, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of `scores` (non-empty)."""
    values = np.asarray(scores, dtype=np.float64)
    if values.size == 0:
        raise ValueError("the bootstrap needs at least one score")
    rng = np.random.default_rng(seed)
    means = np.empty(resamples, dtype=np.float64)
    # Resample in blocks: one (resamples x n) index matrix would be large for big runs.
    block = max(1, 2_000_000 // values.size)
    for start in range(0, resamples, block):
        stop = min(resamples, start + block)
        means[start:stop] = values[rng.integers(0, values.size, size=(stop - start, values.size))].mean(axis=1)
    tail = (1 - confidence) / 2
    low, high = np.quantile(means, [tail, 1 - tail])
    return float(low), float(high)


def summarise(scores: Sequence[float], confidence: float = 0.95) -> ScoreInterval:
    """The mean of `scores` (each in [0, 1]) with its interval: Wilson when every score is 0 or 1,
    the bootstrap otherwise; no interval for no scores."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, not {confidence}")
    if any(not 0.0 <= score <= 1.0 for score in scores):
        raise ValueError("scores must lie in [0, 1]")
    n = len(scores)
    if n == 0:
        return ScoreInterval(n=0, mean=None, low=None, high=None, confidence=confidence, method=NONE)
    mean = float(math.fsum(scores) / n)
    if all(score in (0.0, 1.0) for score in scores):
        low, high = wilson_interval(int(sum(scores)), n, confidence)
        return ScoreInterval(n=n, mean=mean, low=low, high=high, confidence=confidence, method=WILSON)
    low, high = bootstrap_interval(scores, confidence)
    return ScoreInterval(n=n, mean=mean, low=low, high=high, confidence=confidence, method=BOOTSTRAP)
