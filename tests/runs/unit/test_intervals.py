"""Score intervals (`curation.intervals`): degenerate samples, reproducibility, the vectorised
difference interval agreeing with one data set at a time, and refusals."""

from __future__ import annotations

import numpy as np
import pytest

from curation.intervals import bootstrap_difference_interval, bootstrap_mean_interval, mean_difference, resample_batch, wilson_interval


def test_wilson_interval_narrows_with_n_and_refuses_a_bad_confidence() -> None:
    small, large = wilson_interval(8, 10), wilson_interval(80, 100)
    assert small[0] < large[0] < 0.8 < large[1] < small[1]
    assert wilson_interval(8, 10, 0.99)[0] < small[0]
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        wilson_interval(8, 10, 1.0)
    with pytest.raises(ValueError, match="n > 0"):
        wilson_interval(0, 0)


def test_one_value_or_equal_values_give_the_degenerate_interval_without_drawing() -> None:
    rng = np.random.default_rng(0)
    state = rng.bit_generator.state
    assert bootstrap_mean_interval([0.3], n_resamples=100, rng=rng) == (0.3, 0.3)
    assert bootstrap_mean_interval([0.7] * 50, n_resamples=100, rng=rng) == (0.7, 0.7)
    assert rng.bit_generator.state == state


def test_the_mean_interval_is_reproducible_and_brackets_the_mean() -> None:
    values = np.random.default_rng(1).beta(2, 5, size=40)
    first = bootstrap_mean_interval(values, n_resamples=2000, rng=np.random.default_rng(5))
    assert first == bootstrap_mean_interval(values.tolist(), n_resamples=2000, rng=np.random.default_rng(5))
    assert first[0] < float(np.mean(values)) < first[1]
    assert bootstrap_mean_interval(values, 0.5, n_resamples=2000, rng=np.random.default_rng(5))[1] < first[1]


def test_the_difference_interval_is_vectorised_over_leading_axes() -> None:
    rng = np.random.default_rng(2)
    first, second = rng.random((3, 4, 30)), rng.random((3, 4, 20))
    low, high = bootstrap_difference_interval(first, second, n_resamples=500, rng=np.random.default_rng(9), batch=7)
    assert low.shape == high.shape == (3, 4)
    difference = mean_difference(first, second)
    assert np.all((low < difference) & (difference < high))
    # Every data set shares the resampled positions, so one data set alone (with the same batch) gets the same interval.
    alone = bootstrap_difference_interval(first[1, 2], second[1, 2], n_resamples=500, rng=np.random.default_rng(9), batch=7)
    assert (float(alone[0]), float(alone[1])) == pytest.approx((low[1, 2], high[1, 2]))
    assert alone[0].shape == ()


def test_the_default_batch_bounds_one_block_of_resampled_values() -> None:
    assert resample_batch(500 * 400, 1000) == 5
    assert resample_batch(1404, 2000) == 746
    assert resample_batch(10**9, 1000) == 1
    assert resample_batch(10, 1000) == 1000


def test_refusals_say_what_is_wrong() -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="non-empty one-dimensional"):
        bootstrap_mean_interval([], n_resamples=100, rng=rng)
    with pytest.raises(ValueError, match="finite"):
        bootstrap_mean_interval([0.1, float("nan")], n_resamples=100, rng=rng)
    with pytest.raises(ValueError, match="at least 2 values"):
        bootstrap_difference_interval([0.1], [0.2, 0.3], n_resamples=100, rng=rng)
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        bootstrap_difference_interval([0.1, 0.2], [0.2, 0.3], 0.0, n_resamples=100, rng=rng)
