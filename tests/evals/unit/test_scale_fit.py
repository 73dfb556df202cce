"""The common scale's fit on small simulated rolling evals with known truth: the gradient is the
objective's, abilities come back in order, a release made harder as a whole is attributed to the
set and not to the model, intervals hold the truth, and bad input is refused with why."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import approx_fprime

from curation.scale.equating import Estimate, equated_score, estimate, expected_score, score_change
from curation.scale.irt import Responses, _marginal_objective, _structure, fit_scale, laplace_draws
from tests.support.scale_world import rolling_world


def test_the_gradient_is_the_objectives() -> None:
    world = rolling_world(np.random.default_rng(3), releases=3, items_per_release=12, models=4)
    responses = world.responses
    rng = np.random.default_rng(4)
    point = rng.normal(0, 0.5, responses.models + responses.runs + responses.cohorts)
    # Weighted, as the bootstrap weights them: the weights must reach the gradient too.
    item_weight, model_weight = rng.exponential(1.0, responses.items), rng.exponential(1.0, responses.models)
    grid, where = _structure(responses, model_weight)
    _, analytic = _marginal_objective(point, responses, grid, where, item_weight)
    numeric = approx_fprime(point, lambda vector: _marginal_objective(vector, responses, grid, where, item_weight)[0], 1e-6)
    assert np.max(np.abs(analytic - numeric)) < 1e-3 * max(1.0, float(np.max(np.abs(numeric))))


def test_abilities_come_back_in_order_and_the_intervals_hold_the_truth() -> None:
    rng = np.random.default_rng(7)
    world = rolling_world(rng, releases=6, items_per_release=80, models=12)
    mode = fit_scale(world.responses)
    assert mode.converged
    truth = world.ability[[int(name.split("-")[1]) for name in world.responses.model_names]]
    assert np.corrcoef(mode.model_ability, truth)[0, 1] > 0.9
    draws = laplace_draws(world.responses, mode, draws=200, rng=rng)
    reference = world.fitted_items(0)
    held = [equated_score(mode, draws, run, reference) for run in range(world.responses.runs)]
    covered = sum(found.low <= world.true_expected(model, 0) <= found.high for found, (model, _) in zip(held, world.runs, strict=True))
    assert covered / len(held) >= 0.8


def test_a_release_made_harder_is_the_sets_doing_not_the_models() -> None:
    rng = np.random.default_rng(2001)
    world = rolling_world(rng, releases=8, items_per_release=100, models=10, shift=(5, 1.3), pinned=((4, 5),))
    mode = fit_scale(world.responses)
    draws = laplace_draws(world.responses, mode, draws=300, rng=rng)
    pinned = len(world.ability) - 1
    before, after = sorted((run for run, (model, _) in enumerate(world.runs) if model == pinned), key=lambda run: world.runs[run][1])
    change = score_change(mode, draws, run_a=before, items_a=world.fitted_items(4), run_b=after, items_b=world.fitted_items(5))
    assert change.set.high < 0 and change.model.low <= 0 <= change.model.high
    assert change.set.value + change.model.value == pytest.approx(change.total.value, abs=0.01)


def test_an_estimate_without_draws_is_the_modes_value() -> None:
    world = rolling_world(np.random.default_rng(5), releases=2, items_per_release=20, models=3)
    mode = fit_scale(world.responses)
    items = world.fitted_items(0)
    found = estimate(lambda fit: expected_score(fit, 0.0, items), mode, [])
    assert found == Estimate(found.value, found.value, found.value) and 0 < found.value < 1
    assert Estimate(0.1, -0.2, 0.3).points() == Estimate(10.0, -20.0, 30.0)


def test_bad_results_are_refused_with_why() -> None:
    with pytest.raises(ValueError, match="in \\[0, 1\\]"):
        Responses.of([(1, "m", 1, 1.5)])
    with pytest.raises(ValueError, match="no results to fit"):
        fit_scale(Responses.of([]))
    with pytest.raises(ValueError, match="no fitted item"):
        expected_score(fit_scale(Responses.of([(1, "m", 1, 1.0), (1, "m", 2, 0.0)])), 0.0, np.array([], dtype=np.int64))


def test_a_fit_too_large_for_the_dense_covariance_still_gives_intervals(monkeypatch: pytest.MonkeyPatch) -> None:
    world = rolling_world(np.random.default_rng(11), releases=3, items_per_release=40, models=5)
    mode = fit_scale(world.responses)
    dense = laplace_draws(world.responses, mode, draws=300, rng=np.random.default_rng(1))
    monkeypatch.setattr("curation.scale.irt.MAX_DENSE_PARAMETERS", 10)
    diagonal = laplace_draws(world.responses, mode, draws=300, rng=np.random.default_rng(1))
    spread = [np.std([draw.ability[0] for draw in draws]) for draws in (dense, diagonal)]
    assert 0 < spread[1] <= spread[0] * 1.2


def test_a_held_out_fits_data_keeps_every_run_item_and_cohort() -> None:
    responses = rolling_world(np.random.default_rng(5), releases=3, items_per_release=10, models=3).responses
    assert responses.cohorts == 3
    keep = np.random.default_rng(6).random(len(responses.score)) >= 0.1
    kept = responses.observations(keep)
    assert len(kept.score) == int(keep.sum()) and np.array_equal(kept.item, responses.item[keep])
    assert kept.cohorts == 3 and np.array_equal(kept.cohorts_of_items, responses.cohorts_of_items)
    assert kept.run_ids == responses.run_ids and kept.item_ids == responses.item_ids and kept.model_names == responses.model_names
    with pytest.raises(ValueError, match="one flag per observation"):
        responses.observations(keep[:-1])
