"""The temporal-split report: its statistical validity by simulation, the acceptance check on the
real KEV catalog, and what the report says and warns about."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from curation.evidence.temporal_split import NotEnoughItems, difference_test, is_flagged, monthly_series, temporal_split_report
from schemas.evidence import ItemResult, TemporalSplitReport
from tests.support.corpora import KEV_CUTOFF, KevRecord, graded_scores, load_kev, synthetic_results

SIMULATIONS = 500
PER_HALF = 200
ALPHA = 0.05
# Fewer resamples than a report's defaults keep 500 simulations to about a second; the p-value still
# resolves to 1/1000 and the interval's bounds to well under a point.
SIM_BOOTSTRAP = 1000
SIM_PERMUTATIONS = 999
CUTOFF = date(2024, 1, 1)


def _results(scores: list[float], start: datetime, step: timedelta = timedelta(days=1), human: list[bool | None] | None = None) -> list[ItemResult]:
    human = human or [None] * len(scores)
    return [
        ItemResult(item_id=f"{start.date()}-{index}", occurred_at=start + index * step, score=score, human_success=success)
        for index, (score, success) in enumerate(zip(scores, human, strict=True))
    ]


def test_false_positive_rate_under_the_null_is_at_most_six_percent() -> None:
    """500 simulated evals where both halves come from the same score distribution: the report flags
    at most 6% of them, and the permutation p-value is calibrated (about 5% below 0.05)."""
    rng = np.random.default_rng(20240101)
    before = graded_scores(rng, 0.55, (SIMULATIONS, PER_HALF))
    after = graded_scores(rng, 0.55, (SIMULATIONS, PER_HALF))
    test = difference_test(before, after, rng=rng, bootstrap_resamples=SIM_BOOTSTRAP, permutation_resamples=SIM_PERMUTATIONS)

    flag_rate = float(is_flagged(test, alpha=ALPHA).mean())
    two_sided_rate = float((test.p_value < ALPHA).mean())
    interval_rate = float(((test.low > 0) | (test.high < 0)).mean())
    assert flag_rate <= 0.06, flag_rate
    # A calibrated p-value rejects 5% of nulls: with 500 simulations, anything in [2.5%, 8%] is within
    # the 99.9% binomial band, outside it the test is miscalibrated.
    assert 0.025 <= two_sided_rate <= 0.08, two_sided_rate
    assert 0.025 <= interval_rate <= 0.08, interval_rate


def test_power_for_a_ten_point_inflation_with_200_items_per_half_is_at_least_080() -> None:
    rng = np.random.default_rng(7)
    before = graded_scores(rng, 0.60, (SIMULATIONS, PER_HALF))
    after = graded_scores(rng, 0.50, (SIMULATIONS, PER_HALF))
    test = difference_test(before, after, rng=rng, bootstrap_resamples=SIM_BOOTSTRAP, permutation_resamples=SIM_PERMUTATIONS)
    power = float(is_flagged(test, alpha=ALPHA).mean())
    assert power >= 0.8, power


def test_pass_fail_scores_on_200_items_per_half_are_reported_underpowered() -> None:
    """With pass/fail scores near 50%, 200 items a half detect only a gap of about 14 points: the report says so."""
    rng = np.random.default_rng(3)
    start = datetime(2023, 1, 1, tzinfo=UTC)
    scores = [float(value) for value in rng.random(400) < 0.5]
    results = _results(scores[:200], start) + _results(scores[200:], datetime(2024, 1, 2, tzinfo=UTC))
    report = temporal_split_report(results, cutoff=CUTOFF, model="m", corpus="c", rng=rng)
    assert report.minimum_detectable_difference == pytest.approx(0.14, abs=0.015)
    assert "underpowered" in {warning.code for warning in report.warnings}


@pytest.fixture(scope="module")
def kev(shared_data: Path) -> list[KevRecord]:
    return load_kev(shared_data)


def test_kev_with_a_ten_point_pre_cutoff_inflation_is_flagged(kev: list[KevRecord]) -> None:
    results = synthetic_results(kev, cutoff=KEV_CUTOFF, rng=np.random.default_rng(11), inflation=0.10)
    report = temporal_split_report(results, cutoff=KEV_CUTOFF, model="example-model", corpus="cisa_kev", rng=np.random.default_rng(12))
    assert (report.before.n, report.after.n) == (1053, 351)
    assert report.interval.low > 0
    assert report.flagged
    assert report.interval.low < report.difference < report.interval.high
    assert report.difference == pytest.approx(0.10, abs=0.04)
    assert report.p_value <= 2 / (report.permutation_resamples + 1)  # the two-sided floor: no permutation came close
    assert "older items scored higher" in report.summary
    assert [warning.code for warning in report.warnings] == []


def test_kev_without_inflation_is_not_flagged(kev: list[KevRecord]) -> None:
    results = synthetic_results(kev, cutoff=KEV_CUTOFF, rng=np.random.default_rng(11), inflation=0.0)
    report = temporal_split_report(results, cutoff=KEV_CUTOFF, model="example-model", corpus="cisa_kev", rng=np.random.default_rng(12))
    assert report.interval.low < 0 < report.interval.high
    assert not report.flagged
    assert "within what chance explains" in report.summary


def test_statement_says_evidence_not_accusation_and_names_the_action(kev: list[KevRecord]) -> None:
    results = synthetic_results(kev, cutoff=KEV_CUTOFF, rng=np.random.default_rng(1), inflation=0.10)
    report = temporal_split_report(results, cutoff=KEV_CUTOFF, model="example-model", corpus="cisa_kev", rng=np.random.default_rng(2), score_name="pass rate")
    statement = report.statement
    assert "evidence about one score (pass rate) for one model (example-model)" in statement
    assert "not an accusation" in statement
    assert "move the decision onto items dated on or after the model's training cutoff (2024-01-01; 351 such items here)" in statement


def test_the_same_seed_gives_the_same_report(kev: list[KevRecord]) -> None:
    results = synthetic_results(kev[:400] + kev[-100:], cutoff=KEV_CUTOFF, rng=np.random.default_rng(5))
    first = temporal_split_report(results, cutoff=KEV_CUTOFF, model="m", corpus="c", rng=np.random.default_rng(9))
    second = temporal_split_report(results, cutoff=KEV_CUTOFF, model="m", corpus="c", rng=np.random.default_rng(9))
    assert first == second
    assert TemporalSplitReport.model_validate_json(first.model_dump_json()) == first


def test_small_halves_are_warned_about_with_the_size_and_why() -> None:
    rng = np.random.default_rng(0)
    results = _results(list(graded_scores(rng, 0.5, 12)), datetime(2023, 11, 1, tzinfo=UTC)) + _results(list(graded_scores(rng, 0.5, 100)), datetime(2024, 1, 1, tzinfo=UTC))
    report = temporal_split_report(results, cutoff=CUTOFF, model="m", corpus="c", rng=rng)
    small = [warning for warning in report.warnings if warning.code == "small_half"]
    assert len(small) == 1
    assert "Only 12 items are dated before the cutoff; below 30" in small[0].message


def test_a_half_with_fewer_than_two_items_is_refused_with_a_reason() -> None:
    results = _results([0.5, 0.6, 0.7], datetime(2024, 2, 1, tzinfo=UTC)) + _results([0.4], datetime(2023, 2, 1, tzinfo=UTC))
    with pytest.raises(NotEnoughItems, match="1 items before and 3 after"):
        temporal_split_report(results, cutoff=CUTOFF, model="m", corpus="c", rng=np.random.default_rng(0))


def test_an_item_with_two_results_is_refused() -> None:
    results = _results([0.5, 0.6, 0.7], datetime(2024, 2, 1, tzinfo=UTC)) + _results([0.4, 0.3, 0.2], datetime(2023, 2, 1, tzinfo=UTC))
    with pytest.raises(ValueError, match="has two results"):
        temporal_split_report([*results, results[0]], cutoff=CUTOFF, model="m", corpus="c", rng=np.random.default_rng(0))


def test_difficulty_drift_in_human_success_is_warned_about() -> None:
    rng = np.random.default_rng(4)
    human_before: list[bool | None] = [bool(value) for value in rng.random(150) < 0.8]
    human_after: list[bool | None] = [bool(value) for value in rng.random(150) < 0.5]
    results = _results(list(graded_scores(rng, 0.6, 150)), datetime(2023, 3, 1, tzinfo=UTC), human=human_before) + _results(
        list(graded_scores(rng, 0.5, 150)), datetime(2024, 1, 5, tzinfo=UTC), human=human_after
    )
    report = temporal_split_report(results, cutoff=CUTOFF, model="m", corpus="c", rng=rng)
    assert report.before.human_success_rate is not None and report.before.human_success_rate > 0.7
    assert report.after.human_success_rate is not None and report.after.human_success_rate < 0.6
    assert report.human_difference is not None and report.human_difference > 0.2
    drift = [warning for warning in report.warnings if warning.code == "difficulty_drift"]
    assert len(drift) == 1 and "the older items look easier" in drift[0].message


def test_stable_human_success_raises_no_drift_warning() -> None:
    rng = np.random.default_rng(5)
    human: list[bool | None] = [index % 3 != 0 for index in range(150)]
    results = _results(list(graded_scores(rng, 0.5, 150)), datetime(2023, 3, 1, tzinfo=UTC), human=human) + _results(
        list(graded_scores(rng, 0.5, 150)), datetime(2024, 1, 5, tzinfo=UTC), human=human
    )
    report = temporal_split_report(results, cutoff=CUTOFF, model="m", corpus="c", rng=rng)
    assert report.human_difference == pytest.approx(0.0)
    assert not {"difficulty_drift", "human_success_partial"} & {warning.code for warning in report.warnings}


def test_monthly_series_groups_by_utc_month_and_marks_the_cutoff_month() -> None:
    results = [
        ItemResult(item_id="a", occurred_at=datetime(2023, 12, 31, 23, 30, tzinfo=UTC), score=1.0),
        ItemResult(item_id="b", occurred_at=datetime(2024, 1, 1, 0, 30, tzinfo=UTC), score=0.0),
        ItemResult(item_id="c", occurred_at=datetime(2024, 1, 20, tzinfo=UTC), score=0.5, human_success=True),
        ItemResult(item_id="d", occurred_at=datetime(2024, 3, 3, tzinfo=UTC), score=0.25),
    ]
    assert [(point.month, point.half, point.n, point.mean_score, point.human_success_rate) for point in monthly_series(results, cutoff=CUTOFF)] == [
        ("2023-12", "before_cutoff", 1, 1.0, None),
        ("2024-01", "after_cutoff", 2, 0.25, 1.0),
        ("2024-03", "after_cutoff", 1, 0.25, None),
    ]
    assert [point.half for point in monthly_series(results, cutoff=date(2024, 1, 15))][1] == "straddles_cutoff"


def test_scores_outside_zero_to_one_are_refused() -> None:
    with pytest.raises(ValueError, match="less than or equal to 1"):
        ItemResult(item_id="x", occurred_at=datetime(2024, 1, 1, tzinfo=UTC), score=1.5)
    with pytest.raises(ValueError, match="timezone"):
        ItemResult(item_id="x", occurred_at=datetime(2024, 1, 1), score=0.5)
