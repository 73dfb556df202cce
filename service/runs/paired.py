"""The paired difference of two models' scores on the same items: the mean of the per-item
differences (first − second) with Student's t interval over those differences.

Pairing removes what the items share (an item both models find hard counts against neither), so
the interval is the one of a paired t test: mean(d) ± t(confidence, n − 1) · sd(d) / √n, with
sd the sample standard deviation (n − 1 in the denominator). A pure function: the caller reads
and pairs the scores (`service.runs.comparison`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from scipy import stats

T_INTERVAL = "t"
NO_INTERVAL = "none"


@dataclass(frozen=True)
class PairedDifference:
    """`n` pairs; the two means over them and the mean difference (first − second); the interval
    [`low`, `high`] at `confidence` (`method` `t`), or None with `method` `none` when fewer than
    two pairs leave no spread to measure. `sd`: the sample standard deviation of the differences."""

    n: int
    mean_first: float | None
    mean_second: float | None
    mean_difference: float | None
    sd: float | None
    low: float | None
    high: float | None
    confidence: float
    method: str


def paired_difference(first: Sequence[float], second: Sequence[float], confidence: float = 0.95) -> PairedDifference:
    """The mean of `first[i] − second[i]` with its t interval at `confidence`.

    `first` and `second` hold one score per item, in the same order (pair i is item i), and are
    finite. Raises ValueError when their lengths differ, a value is not finite or `confidence` is
    not strictly between 0 and 1. No pairs: every figure None. One pair: its difference, no
    interval. Differences all equal: the interval is that value at both ends.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie strictly between 0 and 1, not {confidence}")
    if len(first) != len(second):
        raise ValueError(f"the scores must come in pairs: {len(first)} first scores and {len(second)} second scores")
    if not all(math.isfinite(value) for value in (*first, *second)):
        raise ValueError("the scores must be finite numbers; found NaN or infinity")
    n = len(first)
    if n == 0:
        return PairedDifference(0, None, None, None, None, None, None, confidence, NO_INTERVAL)
    differences = [a - b for a, b in zip(first, second, strict=True)]
    mean = math.fsum(differences) / n
    means = (math.fsum(first) / n, math.fsum(second) / n)
    if n == 1:
        return PairedDifference(1, *means, mean, None, None, None, confidence, NO_INTERVAL)
    if all(d == differences[0] for d in differences):
        return PairedDifference(n, *means, differences[0], 0.0, differences[0], differences[0], confidence, T_INTERVAL)
    sd = math.sqrt(math.fsum((d - mean) ** 2 for d in differences) / (n - 1))
    half = float(stats.t.ppf((1.0 + confidence) / 2.0, n - 1)) * sd / math.sqrt(n)
    return PairedDifference(n, *means, mean, sd, mean - half, mean + half, confidence, T_INTERVAL)
