"""The judge refitted to one source from its curators' rulings.

The shipped judge (`curation.dedup.judge`) was fitted on other pools; on a new source its P ranks
pairs about as well as it did on the pools held out (AUC 0.74 to 0.97), but what a given P means
moves from pool to pool. Every answer a curator gives to a question (`curation.dedup.questions`)
is a label for one pair of that source, stored with the pair's features. Once a source has
`MIN_RULINGS` answers, of which at least `MIN_EACH` say *same* and as many *distinct*, its P is
refitted: a logistic regression on the shipped judge's log-odds and the pair's body and title
cosines (`INPUTS`), pulled towards the shipped judge (weight 1 on its log-odds, 0 elsewhere) by a
Gaussian prior worth `PRIOR_RULINGS` rulings. A few rulings therefore move P a little, and many
move it as far as they show, as the `dedupe` library's active learning lets a person's labels
take over from its defaults.

Pure functions: the caller reads the rulings and applies the refit; nothing here reads a
database. `bench/rulings_needed.py` measures how many rulings a pool the judge was not fitted on
needs before its duplicates reach the target precision.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import minimize

MIN_RULINGS = 12
"""Answers a source needs before its P is refitted."""

MIN_EACH = 3
"""Answers of each kind (same, distinct) a source needs before its P is refitted."""

PRIOR_RULINGS = 8.0
"""How many rulings the pull towards the shipped judge is worth."""

INPUTS: tuple[str, ...] = ("body_cosine", "title_cosine")
"""Pair features the refit weighs beside the shipped judge's log-odds (a missing one counts as 0)."""

_EDGE = 1e-6


def _logit(p: float) -> float:
    p = min(max(p, _EDGE), 1 - _EDGE)
    return math.log(p / (1 - p))


@dataclass(frozen=True)
class Ruling:
    """One curator's answer: the shipped judge's P for the pair, its features, and whether the
    two records are the same incident."""

    probability: float
    features: Mapping[str, float]
    same: bool


@dataclass(frozen=True)
class Refit:
    """A source's refitted P: `weights` over (the shipped log-odds, *`inputs`), plus `intercept`,
    from `rulings` answers."""

    weights: tuple[float, ...]
    intercept: float
    rulings: int
    inputs: tuple[str, ...] = INPUTS

    def probability(self, shipped: float, features: Mapping[str, float]) -> float:
        """P(same incident) for a pair of the source, from the shipped judge's P and its features."""
        row = _row(shipped, features, self.inputs)
        z = self.intercept + float(np.dot(self.weights, row))
        return 1.0 / (1.0 + math.exp(-max(min(z, 40.0), -40.0)))


def _row(shipped: float, features: Mapping[str, float], inputs: tuple[str, ...]) -> NDArray[np.float64]:
    values = [_logit(shipped)]
    for name in inputs:
        value = features.get(name)
        values.append(0.0 if value is None or math.isnan(value) else float(value))
    return np.array(values, dtype=np.float64)


def refit(rulings: Sequence[Ruling], *, prior_rulings: float = PRIOR_RULINGS, inputs: tuple[str, ...] = INPUTS) -> Refit | None:
    """The source's refit from its `rulings`, or None while there are too few (`MIN_RULINGS`,
    `MIN_EACH`): the shipped judge's P stands."""
    same = sum(ruling.same for ruling in rulings)
    if len(rulings) < MIN_RULINGS or same < MIN_EACH or len(rulings) - same < MIN_EACH:
        return None
    x = np.stack([_row(ruling.probability, ruling.features, inputs) for ruling in rulings])
    y = np.array([1.0 if ruling.same else 0.0 for ruling in rulings])
    prior = np.zeros(x.shape[1] + 1)
    prior[1] = 1.0  # intercept 0, weight 1 on the shipped log-odds, 0 on the rest
    # The prior's strength: `prior_rulings` rulings' worth of curvature on each parameter.
    strength = prior_rulings / 2.0

    def loss(theta: NDArray[np.float64]) -> tuple[float, NDArray[np.float64]]:
        z = theta[0] + x @ theta[1:]
        p = 1.0 / (1.0 + np.exp(-np.clip(z, -40, 40)))
        nll = float(np.sum(np.logaddexp(0.0, z) - y * z))
        gap = theta - prior
        gradient = np.concatenate(([np.sum(p - y)], x.T @ (p - y))) + 2 * strength * gap
        return nll + strength * float(gap @ gap), gradient

    solved = minimize(loss, prior, jac=True, method="L-BFGS-B")
    theta = solved.x if solved.success else prior
    return Refit(weights=tuple(float(value) for value in theta[1:]), intercept=float(theta[0]), rulings=len(rulings), inputs=inputs)


def duplicate_threshold(probabilities: Sequence[float], *, precision: float, floor: float) -> float:
    """The lowest P at which the source's pairs scored at or above it are, by their own
    (refitted, so calibrated) P, the same incident in at least `precision` of cases; never
    below `floor`. 1.0 (nothing merged) when no such P exists."""
    ranked = sorted((p for p in probabilities if p >= floor), reverse=True)
    threshold, total = 1.0, 0.0
    for count, p in enumerate(ranked, start=1):
        total += p
        if total / count >= precision:
            threshold = p
    return threshold
