"""What a fitted scale (`curation.scale.irt`) answers about releases and runs, each as an estimate
at the fit's mode with a percentile interval over its bootstrap draws:

- `difficulty_index`: the score a fixed reference ability (0, the mean model's) is expected to get
  on a release's items: a release with a lower index is harder;
- `equated_score`: the score a run's ability is expected to get on another release's items (what
  the model would have scored there);
- `score_change`: the change between two runs' scores, each expected on its own release, split into
  the part due to the set (the first run's ability moved from its release to the second's) and the
  part due to the model (the ability moved, on the second release). The two parts add up to the
  change.

Scores are shares in [0, 1]; `Estimate.points` gives them on 0-100.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from curation.scale.irt import FloatArray, IntArray, ScaleParameters

CONFIDENCE = 0.95


@dataclass(frozen=True)
class Estimate:
    """A quantity at the mode with its interval over the bootstrap draws."""

    value: float
    low: float
    high: float

    def points(self) -> Estimate:
        """The same on a 0-100 scale."""
        return Estimate(self.value * 100, self.low * 100, self.high * 100)

    def excludes_zero(self) -> bool:
        return self.low > 0 or self.high < 0


def estimate(quantity: Callable[[ScaleParameters], float], mode: ScaleParameters, draws: Sequence[ScaleParameters], confidence: float = CONFIDENCE) -> Estimate:
    """`quantity`'s posterior mean over `draws` with the central `confidence` interval of its
    values (at the mode, twice, when there is no draw). The mean, not the value at the mode: an
    expected score is a nonlinear function of the parameters, and at the mode it is pulled
    towards 50% wherever the priors shrink."""
    if not draws:
        value = quantity(mode)
        return Estimate(value, value, value)
    values = np.array([quantity(draw) for draw in draws])
    tail = (1 - confidence) / 2
    return Estimate(float(np.mean(values)), float(np.quantile(values, tail)), float(np.quantile(values, 1 - tail)))


def expected_score(parameters: ScaleParameters, ability: float, items: IntArray) -> float:
    """The mean expected score of `ability` over `items` (indices into the fit's items)."""
    if not len(items):
        raise ValueError("a release with no fitted item has no expected score")
    curve = parameters.discrimination[items] * (ability - parameters.difficulty[items])
    return float(np.mean(1.0 / (1.0 + np.exp(-curve))))


def difficulty_index(mode: ScaleParameters, draws: Sequence[ScaleParameters], items: IntArray, reference_ability: float = 0.0) -> Estimate:
    """The expected score of `reference_ability` on `items` (a release's): lower is harder."""
    return estimate(lambda fit: expected_score(fit, reference_ability, items), mode, draws)


def equated_score(mode: ScaleParameters, draws: Sequence[ScaleParameters], run: int, items: IntArray) -> Estimate:
    """The expected score of run `run`'s ability on `items` (a reference release's)."""
    return estimate(lambda fit: expected_score(fit, float(fit.ability[run]), items), mode, draws)


def ability(mode: ScaleParameters, draws: Sequence[ScaleParameters], run: int) -> Estimate:
    return estimate(lambda fit: float(fit.ability[run]), mode, draws)


@dataclass(frozen=True)
class ScoreChange:
    """Run B's expected score on its release minus run A's on its own (`total`), split into `set`
    (A's ability on B's release minus on A's) and `model` (B's ability minus A's, on B's release)."""

    total: Estimate
    set: Estimate
    model: Estimate


def score_change(mode: ScaleParameters, draws: Sequence[ScaleParameters], *, run_a: int, items_a: IntArray, run_b: int, items_b: IntArray) -> ScoreChange:
    """The change from run A (on `items_a`) to run B (on `items_b`), split (`ScoreChange`)."""

    def on(fit: ScaleParameters, run: int, items: FloatArray | IntArray) -> float:
        return expected_score(fit, float(fit.ability[run]), np.asarray(items, dtype=np.int64))

    return ScoreChange(
        total=estimate(lambda fit: on(fit, run_b, items_b) - on(fit, run_a, items_a), mode, draws),
        set=estimate(lambda fit: on(fit, run_a, items_b) - on(fit, run_a, items_a), mode, draws),
        model=estimate(lambda fit: on(fit, run_b, items_b) - on(fit, run_a, items_b), mode, draws),
    )
