"""A run's summary score: the mean of per-item scores in [0, 1] with a confidence interval.

When every score is 0 or 1 the mean is a proportion and the interval is Wilson's score interval
(good coverage even for small n and proportions near 0 or 1). Otherwise it is the percentile
bootstrap of the mean, with a fixed seed so the same scores always give the same interval. Both
come from `curation.intervals`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from curation.intervals import bootstrap_mean_interval, wilson_interval
from schemas.runs import ScoreInterval

WILSON = "wilson"
BOOTSTRAP = "bootstrap"
NONE = "none"
BOOTSTRAP_RESAMPLES = 5000
BOOTSTRAP_SEED = 20240601


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
        low, high = wilson_interval(sum(1 for score in scores if score == 1.0), n, confidence)
        return ScoreInterval(n=n, mean=mean, low=low, high=high, confidence=confidence, method=WILSON)
    low, high = bootstrap_mean_interval(scores, confidence, n_resamples=BOOTSTRAP_RESAMPLES, rng=np.random.default_rng(BOOTSTRAP_SEED))
    return ScoreInterval(n=n, mean=mean, low=low, high=high, confidence=confidence, method=BOOTSTRAP)
