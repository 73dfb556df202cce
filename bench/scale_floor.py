"""The item-side floor of the common scale's equated score on simulated rolling evals: how close
ANY estimator can get to a model's true expected score on the reference release when it knows
every ability and discrimination exactly and only the items' difficulties must be learnt from the
scores. Prints figures; not a test.

Each difficulty's posterior is exact here (a grid over its true prior N(0, 1), given the true
abilities and discriminations of the runs that scored it), and the estimate is the posterior mean
of the expected score, the best possible in mean squared error. What is left is the error of not
knowing the reference release's items from the few runs that scored them; the recovery bench's
floor (`bench/scale_recovery.py`) is the other side, the error of abilities fitted with the true
items. A real fit knows neither, so its error is above both.

Usage: .venv/bin/python bench/scale_floor.py [--seeds 5] [--first-seed 1000]
"""

from __future__ import annotations

import argparse

import numpy as np

from bench.scale_recovery import GRID, REFERENCE_RELEASE
from tests.support.scale_world import World, rolling_world

NODES = np.linspace(-6.0, 6.0, 121)


def item_floor(world: World) -> list[float]:
    """Per run, the absolute error (points) of the Bayes estimate of its model's expected score on
    the reference release, with abilities and discriminations known."""
    responses = world.responses
    number = np.array(responses.item_ids)[responses.item]
    ability = world.ability[[world.runs[run][0] for run in responses.run]]
    z = world.discrimination[number][:, None] * (ability[:, None] - NODES[None, :])
    table = np.zeros((responses.items, len(NODES)))
    np.add.at(table, responses.item, responses.score[:, None] * z - np.logaddexp(0.0, z))
    table += -0.5 * NODES**2
    weight = np.exp(table - table.max(axis=1, keepdims=True))
    weight /= weight.sum(axis=1, keepdims=True)
    reference = world.fitted_items(REFERENCE_RELEASE)
    numbers = np.array(responses.item_ids)[reference]
    errors = []
    for model, _release in world.runs:
        curve = 1 / (1 + np.exp(-world.discrimination[numbers][:, None] * (world.ability[model] - NODES[None, :])))
        estimate = float(np.mean(np.sum(weight[reference] * curve, axis=1)))
        errors.append(abs(estimate - world.true_expected(model, REFERENCE_RELEASE)) * 100)
    return errors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--first-seed", type=int, default=1000)
    args = parser.parse_args()
    print(f"{'items':>5} {'models':>6} {'item-side floor MAE':>19}   (points; abilities and discriminations known, difficulties Bayes)")
    for items, models in GRID:
        errors = [error for seed in range(args.seeds) for error in item_floor(rolling_world(np.random.default_rng(args.first_seed + seed), items_per_release=items, models=models))]
        print(f"{items:>5} {models:>6} {np.mean(errors):>19.2f}")


if __name__ == "__main__":
    main()
