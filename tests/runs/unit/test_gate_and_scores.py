"""The sealed-run gate and the summary score, as pure functions."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from curation.intervals import bootstrap_mean_interval, wilson_interval
from curation.runs.gate import GateCondition, SealedRunRequest, exposes, judge_sealed_run, judge_terms
from curation.runs.scores import summarise

NOW = datetime(2024, 6, 1, tzinfo=UTC)
OK = SealedRunRequest(
    has_sealed_scope=True, endpoint="zdr", trains_on_inputs="no", terms_checked_at=NOW - timedelta(days=10), now=NOW, terms_max_age_days=90, budget=3, used=2
)


def test_a_checked_non_training_endpoint_with_budget_left_passes() -> None:
    assert judge_sealed_run(OK).allowed
    assert judge_sealed_run(replace(OK, terms_checked_at=NOW - timedelta(days=90))).allowed


@pytest.mark.parametrize(
    ("change", "condition"),
    [
        ({"has_sealed_scope": False, "trains_on_inputs": "yes", "used": 3}, GateCondition.SEALED_SCOPE),
        ({"trains_on_inputs": "yes", "terms_checked_at": None, "used": 3}, GateCondition.TRAINS_ON_INPUTS),
        ({"trains_on_inputs": "unknown"}, GateCondition.TERMS_UNKNOWN),
        ({"terms_checked_at": None}, GateCondition.TERMS_UNCHECKED),
        ({"terms_checked_at": NOW - timedelta(days=90, seconds=1)}, GateCondition.TERMS_STALE),
        ({"terms_checked_at": NOW + timedelta(days=1)}, GateCondition.TERMS_STALE),
        ({"used": 3}, GateCondition.SEALED_BUDGET),
        ({"budget": 0, "used": 0}, GateCondition.SEALED_BUDGET),
    ],
)
def test_the_first_failing_condition_is_named(change: dict[str, object], condition: GateCondition) -> None:
    decision = judge_sealed_run(replace(OK, **change))  # type: ignore[arg-type]
    assert (decision.allowed, decision.condition) == (False, condition)
    assert decision.detail


def test_terms_and_exposure_rules() -> None:
    assert [exposes(value) for value in ("yes", "no", "unknown")] == [True, False, True]
    with pytest.raises(ValueError, match="yes, no or unknown"):
        exposes("maybe")
    with pytest.raises(ValueError, match="tz-aware"):
        judge_terms(endpoint="e", trains_on_inputs="no", terms_checked_at=datetime(2024, 1, 1), now=NOW, terms_max_age_days=90)
    stale = judge_terms(endpoint="zdr", trains_on_inputs="no", terms_checked_at=NOW - timedelta(days=200), now=NOW, terms_max_age_days=90)
    assert "2023-11-14" in stale.detail and "PATCH /v1/endpoints/zdr" in stale.detail


def test_wilson_interval_matches_the_textbook_values() -> None:
    low, high = wilson_interval(8, 10)
    assert (round(low, 4), round(high, 4)) == (0.4902, 0.9433)
    assert wilson_interval(0, 20)[0] == 0.0 and wilson_interval(20, 20)[1] == 1.0
    low, high = wilson_interval(0, 20)
    assert 0.15 < high < 0.17
    with pytest.raises(ValueError):
        wilson_interval(3, 2)


def test_summary_picks_wilson_for_binary_scores_and_the_bootstrap_otherwise() -> None:
    binary = summarise([1.0, 0.0, 1.0, 1.0])
    assert (binary.method, binary.n, binary.mean) == ("wilson", 4, 0.75)
    graded = [0.1, 0.4, 0.35, 0.8, 0.9, 0.5, 0.55, 0.2]
    first, second = summarise(graded), summarise(graded)
    assert first.method == "bootstrap" and first == second
    assert first.low is not None and first.high is not None and first.low < first.mean < first.high  # type: ignore[operator]
    empty = summarise([])
    assert (empty.method, empty.mean, empty.low) == ("none", None, None)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        summarise([1.2])


def test_bootstrap_interval_covers_the_true_mean_about_as_often_as_promised() -> None:
    rng = np.random.default_rng(7)
    covered = 0
    trials = 200
    for seed in range(trials):
        sample = rng.beta(2, 5, size=60)
        low, high = bootstrap_mean_interval(sample, n_resamples=1000, rng=np.random.default_rng(seed))
        covered += low <= 2 / 7 <= high
    assert 0.88 <= covered / trials <= 0.99
