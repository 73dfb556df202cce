"""The paired difference of two models' per-item scores (`service.runs.paired`): a case worked by
hand, agreement with scipy's paired t test on random scores, the degenerate cases, and refusals."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from service.runs.paired import NO_INTERVAL, T_INTERVAL, paired_difference


def test_a_case_worked_by_hand() -> None:
    # Differences 1, 0, 0, 1, 0: mean 0.4; squared deviations 0.36 · 2 + 0.16 · 3 = 1.2, so
    # sd = √(1.2 / 4) = √0.3 ≈ 0.5477 and the standard error √0.3 / √5 ≈ 0.2449. Student's t for
    # 4 degrees of freedom at 97.5% is 2.776 (printed tables), so the half-width is ≈ 0.680.
    found = paired_difference([1, 1, 0, 1, 0.5], [0, 1, 0, 0, 0.5])
    assert (found.n, found.method, found.confidence) == (5, T_INTERVAL, 0.95)
    assert found.mean_first == pytest.approx(0.7) and found.mean_second == pytest.approx(0.3)
    assert found.mean_difference == pytest.approx(0.4)
    assert found.sd == pytest.approx(math.sqrt(0.3))
    assert found.low == pytest.approx(0.4 - 0.680, abs=1e-3)
    assert found.high == pytest.approx(0.4 + 0.680, abs=1e-3)


@pytest.mark.parametrize(("n", "confidence", "seed"), [(2, 0.95, 1), (12, 0.9, 2), (200, 0.95, 3), (57, 0.99, 4)])
def test_the_interval_is_scipys_paired_t_interval(n: int, confidence: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    first, second = rng.random(n), rng.integers(0, 2, n).astype(float)
    found = paired_difference(first.tolist(), second.tolist(), confidence)
    expected = stats.ttest_rel(first, second).confidence_interval(confidence_level=confidence)
    assert found.mean_difference == pytest.approx(float(np.mean(first - second)))
    assert (found.low, found.high) == pytest.approx((float(expected.low), float(expected.high)), rel=1e-9)


def test_pairing_matters_where_the_items_differ_more_than_the_models() -> None:
    # Items of very unequal difficulty, the first model a little better on every one: paired, the
    # difference is sure; the two means' own spreads would hide it.
    first = [0.95, 0.75, 0.55, 0.35, 0.15]
    second = [0.9, 0.7, 0.5, 0.3, 0.1]
    found = paired_difference(first, second)
    assert found.mean_difference == pytest.approx(0.05)
    assert found.low == pytest.approx(0.05) and found.high == pytest.approx(0.05)


def test_no_pairs_one_pair_and_equal_differences() -> None:
    empty = paired_difference([], [])
    assert (empty.n, empty.mean_difference, empty.low, empty.high, empty.method) == (0, None, None, None, NO_INTERVAL)
    one = paired_difference([0.8], [0.3])
    assert (one.n, one.low, one.high, one.method) == (1, None, None, NO_INTERVAL)
    assert one.mean_difference == pytest.approx(0.5)
    same = paired_difference([1, 0, 1], [1, 0, 1])
    assert (same.mean_difference, same.sd, same.low, same.high) == (0.0, 0.0, 0.0, 0.0)


def test_refusals_say_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="in pairs: 2 first scores and 1 second"):
        paired_difference([0.1, 0.2], [0.3])
    with pytest.raises(ValueError, match="finite"):
        paired_difference([0.1, float("nan")], [0.3, 0.4])
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        paired_difference([0.1, 0.2], [0.3, 0.4], 1.0)
