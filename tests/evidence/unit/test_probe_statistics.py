"""The probe's statistics on simulated similarity scores: false positives under the null, power for a
planted share of memorised items, and the length-matched test under length drift."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from curation.evidence.length_strata import length_matched_mann_whitney
from curation.evidence.probe_report import compare_bands

PER_BAND = 200
ALPHA = 0.05
# 2,000 null simulations rather than 500: the rate's own sampling error shrinks to ±0.5 points, so a
# bound of 6% tests the calibration of a 5% test rather than the luck of the seed. Vectorised, they
# take well under a second.
NULL_SIMULATIONS = 2000
SIMULATIONS = 500


def _chance(rng: np.random.Generator, size: tuple[int, ...]) -> np.ndarray:
    """Similarity of a model that has not seen the item: low and spread (median ≈ 0.26)."""
    return rng.beta(2.0, 5.0, size=size)


def _with_memorised(rng: np.random.Generator, share: float, size: tuple[int, ...]) -> np.ndarray:
    """Pre-cutoff similarities where `share` of the items were memorised (near-verbatim reproductions)."""
    values = _chance(rng, size)
    memorised = rng.random(size) < share
    values[memorised] = rng.beta(8.0, 2.0, size=int(memorised.sum()))
    return values


def test_false_positive_rate_under_the_null_is_at_most_six_percent() -> None:
    rng = np.random.default_rng(101)
    compared = compare_bands(_chance(rng, (NULL_SIMULATIONS, PER_BAND)), _chance(rng, (NULL_SIMULATIONS, PER_BAND)))
    rate = float((compared.p_value < ALPHA).mean())
    assert rate <= 0.06, rate
    # By chance about 5% of pre-cutoff items lie above the control's 95th percentile, and the medians agree.
    assert 0.04 <= float(compared.share_above_control_p95.mean()) <= 0.07
    assert abs(float(compared.median_gap.mean())) < 0.01


def test_power_when_a_fifth_of_pre_cutoff_items_were_memorised_is_at_least_080() -> None:
    rng = np.random.default_rng(102)
    compared = compare_bands(_with_memorised(rng, 0.20, (SIMULATIONS, PER_BAND)), _chance(rng, (SIMULATIONS, PER_BAND)))
    power = float((compared.p_value < ALPHA).mean())
    assert power >= 0.8, power
    # The share above the control's 95th percentile rises by about the memorised share.
    assert 0.2 <= float(compared.share_above_control_p95.mean()) <= 0.28


def _drifting_lengths(rng: np.random.Generator, memorised_share: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Older items are shorter, and chance similarity falls with length (as normalised scores do)."""
    pre_lengths = rng.lognormal(np.log(85.0), 0.35, PER_BAND).astype(np.int64) + 10
    control_lengths = rng.lognormal(np.log(110.0), 0.35, PER_BAND).astype(np.int64) + 10

    def chance(lengths: np.ndarray) -> np.ndarray:
        mean = np.clip(0.28 * np.sqrt(100.0 / lengths), 0.05, 0.9)
        return rng.beta(mean * 6.0, (1.0 - mean) * 6.0)

    pre = chance(pre_lengths)
    memorised = rng.random(PER_BAND) < memorised_share
    pre[memorised] = rng.beta(8.0, 2.0, size=int(memorised.sum()))
    return pre, chance(control_lengths), pre_lengths, control_lengths


def test_length_drift_misleads_the_plain_test_but_not_the_length_matched_one() -> None:
    rng = np.random.default_rng(103)
    plain = matched = 0
    for _ in range(SIMULATIONS):
        pre, control, pre_lengths, control_lengths = _drifting_lengths(rng, 0.0)
        plain += float(compare_bands(pre, control).p_value) < ALPHA
        matched += length_matched_mann_whitney(pre, control, pre_lengths=pre_lengths, control_lengths=control_lengths) < ALPHA
    assert plain / SIMULATIONS > 0.3, plain / SIMULATIONS
    assert matched / SIMULATIONS <= 0.08, matched / SIMULATIONS


def test_the_length_matched_test_keeps_its_power() -> None:
    rng = np.random.default_rng(104)
    detected = 0
    for _ in range(SIMULATIONS):
        pre, control, pre_lengths, control_lengths = _drifting_lengths(rng, 0.20)
        detected += length_matched_mann_whitney(pre, control, pre_lengths=pre_lengths, control_lengths=control_lengths) < ALPHA
    assert detected / SIMULATIONS >= 0.8, detected / SIMULATIONS


def test_the_length_matched_test_is_calibrated_without_drift() -> None:
    rng = np.random.default_rng(105)
    lengths = rng.integers(40, 200, size=(SIMULATIONS, 2, PER_BAND))
    rejected = sum(
        length_matched_mann_whitney(_chance(rng, (PER_BAND,)), _chance(rng, (PER_BAND,)), pre_lengths=lengths[index, 0], control_lengths=lengths[index, 1]) < ALPHA
        for index in range(SIMULATIONS)
    )
    assert rejected / SIMULATIONS <= 0.06 + 0.02, rejected / SIMULATIONS


def test_with_one_length_the_length_matched_test_is_scipys_mann_whitney() -> None:
    rng = np.random.default_rng(106)
    pre, control = np.round(rng.random(57), 1), np.round(rng.random(43), 1)  # rounded: many ties
    lengths = np.full(100, 80, dtype=np.int64)
    expected = stats.mannwhitneyu(pre, control, alternative="greater", method="asymptotic").pvalue
    assert length_matched_mann_whitney(pre, control, pre_lengths=lengths[:57], control_lengths=lengths[57:]) == pytest.approx(expected, rel=1e-9)
