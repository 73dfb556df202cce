"""The public-inflation test (`curation.scale.inflation`) on small simulated worlds with fixed seeds
(`tests/support/inflation_world.py`): clean targets pass, inflated ones are flagged, the warnings
say when the line cannot be trusted, and inputs it cannot test are refused with what to fix."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from scipy.special import ndtr, ndtri

from curation.scale.inflation import public_inflation_report
from schemas.evidence import PublicInflationReport
from tests.support.inflation_world import InflationWorld, inflation_world


def report(world: InflationWorld, *, seed: int = 7, resamples: int = 2000, **overrides: Any) -> PublicInflationReport:
    arguments: dict[str, Any] = {
        "reference_private": world.reference_private,
        "reference_public": world.reference_public,
        "target_private": world.target_private,
        "target_public": world.target_public,
        "reference_models": world.reference_models,
        "model": "target",
        "eval_name": "ops",
        "corpus": "public-bench",
        "rng": np.random.default_rng(seed),
        "resamples": resamples,
    }
    arguments.update(overrides)
    return public_inflation_report(**arguments)


def codes(found: PublicInflationReport) -> set[str]:
    return {warning.code for warning in found.warnings}


def test_a_clean_target_is_not_flagged_and_the_report_names_its_references() -> None:
    world = inflation_world(np.random.default_rng(1), references=10, inflation=0.0, target_ability=0.3)
    found = report(world)
    assert not found.flagged and found.p_value > 0.05
    assert found.interval.low < 0 < found.interval.high and found.interval.level == pytest.approx(0.90)
    assert abs(found.difference) < 0.06
    assert [reference.model for reference in found.references] == world.reference_models
    assert found.public_score == pytest.approx(world.target_public.mean()) and found.private_score == pytest.approx(world.target_private.mean())
    assert found.predicted_public_score == pytest.approx(found.public_score - found.difference)
    assert found.fit.link == "probit" and found.fit.slope > 0
    assert codes(found) == set()
    assert "evidence about one score (the public score on public-bench) for one model (target)" in found.statement
    assert "not a verdict on the model" in found.statement and "base decisions on the private eval (300 items here)" in found.statement
    assert "within what chance explains" in found.summary


def test_a_strongly_inflated_target_is_flagged() -> None:
    world = inflation_world(np.random.default_rng(2), references=10, inflation=0.20, target_ability=0.0)
    found = report(world)
    assert world.planted == 60
    assert found.flagged and found.p_value < 0.01 and found.interval.low > 0
    assert 0.12 < found.difference < 0.28
    assert "higher than the private eval predicts by more than chance explains" in found.summary


def test_the_same_inputs_and_seed_give_the_same_report() -> None:
    world = inflation_world(np.random.default_rng(3), references=6, private_items=80, public_items=120, inflation=0.05)
    assert report(world, seed=11) == report(world, seed=11)


def test_fewer_than_five_references_are_warned_and_named() -> None:
    world = inflation_world(np.random.default_rng(4), references=4, target_ability=0.0)
    found = report(world)
    warning = next(warning for warning in found.warnings if warning.code == "few_reference_models")
    assert "Only 4 reference models (ref-00, ref-01, ref-02, ref-03)" in warning.message


def test_a_target_outside_the_references_range_is_warned() -> None:
    world = inflation_world(np.random.default_rng(5), references=8, target_ability=3.5)
    found = report(world)
    assert found.private_score > found.reference_private_high
    warning = next(warning for warning in found.warnings if warning.code == "outside_reference_range")
    assert "lies above every reference model's" in warning.message and "extrapolation" in warning.message


def test_two_references_draw_a_line_with_warnings() -> None:
    world = inflation_world(np.random.default_rng(6), references=2, target_ability=0.0)
    found = report(world, resamples=200)
    assert len(found.references) == 2 and "few_reference_models" in codes(found)
    assert 0.0 <= found.p_value <= 1.0


def test_references_scored_on_part_of_the_items_are_compared_on_the_rest_and_warned() -> None:
    world = inflation_world(np.random.default_rng(7), references=6, target_ability=0.2)
    private = world.reference_private.copy()
    private[0, :150] = np.nan  # ref-00 ran another release: half of the target's items
    found = report(world, reference_private=private)
    assert found.references[0].private_items == 150 and found.references[0].private_score == pytest.approx(np.nanmean(private[0]))
    warning = next(warning for warning in found.warnings if warning.code == "partial_coverage")
    assert "ref-00 (150 of 300 private, 300 of 300 public)" in warning.message


def test_a_reference_as_far_above_the_line_is_warned_on_a_flagged_report() -> None:
    world = inflation_world(np.random.default_rng(8), references=8, inflation=0.15, target_ability=0.0)
    public = world.reference_public.copy()
    weakest = int(np.argmin(world.reference_private.mean(axis=1)))  # far from the ceiling
    failed = np.flatnonzero(public[weakest] == 0)
    public[weakest, failed[:75]] = 1.0  # it lies 25 points above the others' line too
    found = report(world, reference_public=public)
    assert found.flagged
    stray = found.references[weakest]
    assert stray.difference_from_others >= found.difference
    assert stray.model in next(warning.message for warning in found.warnings if warning.code == "reference_scatter")


def test_the_line_never_slopes_down() -> None:
    rng = np.random.default_rng(9)
    ability = np.linspace(0.1, 0.9, 6)
    private = (rng.random((6, 200)) < ability[:, None]).astype(float)
    public = (rng.random((6, 200)) < ability[::-1, None]).astype(float)  # better privately, worse publicly
    names = [f"m{number}" for number in range(6)]
    found = public_inflation_report(private, public, private[2], public[2] * 0 + 1, reference_models=names, model="t", eval_name="e", corpus="c", rng=rng, resamples=200)
    assert found.fit.slope == 0.0
    # Flat through the reference models' mean public score on the probit scale.
    assert found.predicted_public_score == pytest.approx(ndtr(np.mean(ndtri(public.mean(axis=1)))))


def test_on_a_few_small_worlds_clean_targets_are_rarely_flagged_and_inflated_ones_mostly() -> None:
    rng = np.random.default_rng(10)
    clean = sum(report(inflation_world(rng, references=10, private_items=200, public_items=200), seed=index, resamples=400).flagged for index in range(40))
    inflated = sum(report(inflation_world(rng, references=10, private_items=200, public_items=200, inflation=0.15), seed=index, resamples=400).flagged for index in range(40))
    assert clean <= 3
    assert inflated >= 32


WORLD = inflation_world(np.random.default_rng(12), references=5, private_items=20, public_items=30)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"reference_private": WORLD.reference_private[0]}, "reference scores must be 2-D"),
        ({"target_public": WORLD.reference_public}, "the target's scores must be 1-D"),
        ({"reference_public": WORLD.reference_public[:4]}, "name 5 models on the private eval but 4 on the public corpus"),
        ({"target_private": WORLD.target_private[:10]}, "the target has 10 private and 30 public items but the reference scores have 20 and 30 columns"),
        ({"reference_models": ["a", "b"]}, "2 reference model names for 5 rows of scores"),
        ({"reference_models": ["a", "a", "b", "c", "d"]}, "a reference model is named twice"),
        ({"model": "ref-02"}, "the target 'ref-02' is among the reference models"),
        ({"reference_private": WORLD.reference_private[:1], "reference_public": WORLD.reference_public[:1], "reference_models": ["ref-00"]}, "needs at least 2 reference models"),
        ({"target_private": np.append(WORLD.target_private[:19], np.nan)}, "the target's scores must be finite"),
        ({"target_public": WORLD.target_public * 2}, "public scores must lie in [0, 1]"),
        ({"reference_private": np.where(np.arange(20) == 0, -0.5, WORLD.reference_private)}, "private scores must lie in [0, 1]"),
        ({"reference_public": np.vstack([np.full(30, np.nan), WORLD.reference_public[1:]])}, "ref-00 have no score on any of the target's items of the public corpus"),
        (
            {"reference_private": WORLD.reference_private[:, :1], "target_private": WORLD.target_private[:1]},
            "each side needs at least 2 items (got 1 private and 30 public)",
        ),
        ({"alpha": 0.5}, "alpha must lie strictly between 0 and 0.5"),
        ({"resamples": 10}, "resamples must be at least 99"),
    ],
)
def test_inputs_it_cannot_test_are_refused_saying_what_to_fix(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as refused:
        report(WORLD, **overrides)
    assert message in str(refused.value)
