"""The share of pre-cutoff items above the control's 95th percentile, read against the share chance
gives given their lengths: simulated models that saw nothing, where older items are shorter and
short items score higher by chance, and where most scores tie at exactly 0."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import numpy as np
import pytest

from curation.evidence.length_strata import expected_share_above, leave_one_out_quantile, length_strata
from curation.evidence.probe_report import CONTROL_QUANTILE, compare_bands, probe_report
from curation.evidence.probing import plan_probes
from schemas.evidence import ProbeCompletion, ProbeItem
from schemas.probe_tests import ProbeMetric

PER_BAND = 200
SIMULATIONS = 400


def _chance(rng: np.random.Generator, lengths: np.ndarray, *, zeros: float = 0.0) -> np.ndarray:
    """Similarity of a model that has seen nothing: falls with the remainder's length (as a
    length-normalised score does); `zeros` of the items score exactly 0 (the model wrote nothing alike)."""
    mean = np.clip(0.28 * np.sqrt(100.0 / lengths), 0.05, 0.9)
    values = rng.beta(mean * 6.0, (1.0 - mean) * 6.0)
    values[rng.random(lengths.size) < zeros * np.sqrt(lengths / 100.0)] = 0.0  # longer remainders tie at 0 more often
    return values


def _world(rng: np.random.Generator, *, pre_median: float, zeros: float = 0.0, memorised: float = 0.0) -> tuple[float, float]:
    """One probe's observed share above the control's 95th percentile and its length-matched expectation."""
    pre_lengths = rng.lognormal(np.log(pre_median), 0.35, PER_BAND).astype(np.int64) + 10
    control_lengths = rng.lognormal(np.log(100.0), 0.35, PER_BAND).astype(np.int64) + 10
    pre, control = _chance(rng, pre_lengths, zeros=zeros), _chance(rng, control_lengths, zeros=zeros)
    pre[rng.random(PER_BAND) < memorised] = 0.97
    observed = float(compare_bands(pre, control).share_above_control_p95)
    return observed, expected_share_above(CONTROL_QUANTILE, pre_lengths=pre_lengths, control=control, control_lengths=control_lengths)


def _average(seed: int, **world: float) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    draws = np.array([_world(rng, **world) for _ in range(SIMULATIONS)])
    return float(draws[:, 0].mean()), float(draws[:, 1].mean())


def test_where_older_items_are_shorter_and_nothing_was_seen_the_expectation_matches_the_share_and_5_percent_does_not() -> None:
    observed, expected = _average(201, pre_median=66.0)
    assert observed > 0.08, observed  # the bare 5% would read this as a sign of memorising
    assert expected == pytest.approx(observed, abs=0.01)


def test_with_most_control_scores_tied_at_zero_the_expectation_still_matches() -> None:
    observed, expected = _average(202, pre_median=66.0, zeros=0.6)
    assert expected == pytest.approx(observed, abs=0.01)


def test_with_the_same_lengths_the_expectation_is_about_five_percent() -> None:
    observed, expected = _average(203, pre_median=100.0)
    assert expected == pytest.approx(observed, abs=0.01)
    assert 0.04 <= expected <= 0.065


def test_memorised_items_lift_the_share_above_its_expectation() -> None:
    observed, expected = _average(204, pre_median=66.0, memorised=0.2)
    assert observed - expected > 0.15


def test_the_leave_one_out_quantile_is_the_quantile_of_the_other_values() -> None:
    values = np.array([0.0, 0.0, 0.0, 0.3, 0.1, 0.9, 0.0, 0.5])
    whole, without = leave_one_out_quantile(values, 0.95)
    assert whole == np.quantile(values, 0.95)
    assert without.tolist() == pytest.approx([np.quantile(np.delete(values, index), 0.95) for index in range(values.size)])
    with pytest.raises(ValueError, match="at least 2"):
        leave_one_out_quantile([0.5], 0.95)


def test_a_stratum_without_control_items_borrows_its_nearest_neighbours_share() -> None:
    pre_stratum, control_stratum = length_strata([10, 11, 12], [200, 210, 220, 230], strata=2)
    assert set(pre_stratum.tolist()) == {0} and set(control_stratum.tolist()) == {1}
    expected = expected_share_above(0.95, pre_lengths=[10, 11, 12], control=[0.1, 0.2, 0.3, 0.9], control_lengths=[200, 210, 220, 230], strata=2)
    assert expected == pytest.approx(0.25)  # only the top control item passes the quantile of the others


def test_the_report_states_the_share_against_its_length_matched_expectation() -> None:
    rng = np.random.default_rng(205)
    when = datetime(2023, 6, 1, tzinfo=UTC)
    items, completions = [], []
    for index in range(120):
        control = index % 2 == 1
        words = int(rng.integers(10, 40)) if control else int(rng.integers(6, 20))
        text = " ".join(f"w{index}x{position}" for position in range(words))
        items.append(ProbeItem(item_id=str(index), occurred_at=when + timedelta(days=400 if control else 0, hours=index), text=text))
    plan = plan_probes(items, dataset="d", split="s")
    for item_id, cut in plan.cuts.items():
        remainder = cut.remainder.split()
        completions.append(ProbeCompletion(item_id=item_id, completion=" ".join(remainder[: int(rng.integers(0, 3))]) or "nothing", attempts=1))
    report = probe_report(plan, completions, cutoff=date(2024, 1, 1), model="m")
    primary = report.comparison(ProbeMetric.LEVENSHTEIN)
    assert primary.expected_share_length_matched is not None and 0.0 <= primary.expected_share_length_matched <= 1.0
    assert f"where about {primary.expected_share_length_matched:.0%} would by chance, given their remainder lengths" in report.summary
    assert "where about 5% would by chance (" not in report.summary
