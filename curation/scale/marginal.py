"""The fit of the common scale with the items' parameters integrated out (marginal posterior mode).

An eval has many items and few models, and most items are scored by two to four runs: each item's
difficulty and discrimination rest on a handful of 0/1 scores. Fitted jointly with the abilities
(the joint posterior mode), they are incidental parameters: each is shrunk hard towards its prior,
the scale's unit is distorted (abilities come back compressed) and an expected score computed from
them inherits the distortion. Here the items are random effects instead: for item i of cohort c,
b_i = beta_c + DIFFICULTY_SPREAD x_i with x_i ~ N(0, 1) and log a_i ~ N(0, DISCRIMINATION_SPREAD^2),
integrated over a fixed grid of nodes (trapezoid in x, Gauss-Hermite in log a). What is fitted by
its posterior mode is only what many items inform: model abilities, run deviations and cohort
means (`Structure`). Given those, each item's posterior over the grid is exact (`item_posterior`):
the estimate of an item is its posterior mean, and its draws come from that posterior.

Uncertainty of the structural parameters: the normal approximation at the mode with the
information estimated by the outer product of the items' score vectors (items are independent
given the structure), plus the priors' precisions.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy import sparse
from scipy.special import logsumexp

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

DIFFICULTY_NODES = 41
"""Nodes over x in [-5, 5] (spacing 0.25): exact to many digits for an item's posterior as narrow as
a quarter of the prior's (an item scored by some 70 runs)."""
DISCRIMINATION_NODES = 5


@dataclass(frozen=True)
class Grid:
    """The integration nodes: `offset` (x, in units of the difficulty's prior spread) and
    `log_discrimination` for each of the `nodes`, with their prior log weights."""

    offset: FloatArray
    log_discrimination: FloatArray
    log_weight: FloatArray

    @property
    def nodes(self) -> int:
        return len(self.offset)

    @classmethod
    def of(cls, difficulty_spread: float, discrimination_spread: float) -> Grid:
        x = np.linspace(-5.0, 5.0, DIFFICULTY_NODES)
        x_weight = -0.5 * x * x
        hermite, hermite_weight = np.polynomial.hermite_e.hermegauss(DISCRIMINATION_NODES)
        offset = np.repeat(x * difficulty_spread, DISCRIMINATION_NODES)
        log_a = np.tile(hermite * discrimination_spread, DIFFICULTY_NODES)
        log_weight = np.repeat(x_weight, DISCRIMINATION_NODES) + np.tile(np.log(hermite_weight), DIFFICULTY_NODES)
        return cls(offset, log_a, log_weight - logsumexp(log_weight))


@dataclass(frozen=True)
class Layout:
    """The observations' fixed structure: `by_item` sums observations into items (weighted by
    their model's weight), `cohort_of_observation`, and each observation's model and run."""

    by_item: sparse.csr_matrix
    cohort_of_observation: IntArray
    model_of_observation: IntArray
    observation_weight: FloatArray


def layout(run: IntArray, item: IntArray, model_of_run: IntArray, cohort_of_item: IntArray, items: int, model_weight: FloatArray) -> Layout:
    count = len(run)
    weight = model_weight[model_of_run[run]]
    by_item = sparse.csr_matrix((weight, (item, np.arange(count))), shape=(items, count))
    return Layout(by_item, cohort_of_item[item], model_of_run[run], weight)


def item_log_likelihood(theta_gap: FloatArray, score: FloatArray, grid: Grid, where: Layout) -> tuple[FloatArray, FloatArray]:
    """Per item and node, the log prior weight plus the log-likelihood of the item's scores
    (items x nodes), and per observation and node d(log-lik)/d(theta - beta) (observations x nodes).
    `theta_gap`: each observation's run ability minus its item's cohort mean."""
    a = np.exp(grid.log_discrimination)
    z = a[None, :] * (theta_gap[:, None] - grid.offset[None, :])
    softplus = np.logaddexp(0.0, z)
    log_likelihood = score[:, None] * z - softplus
    slope = a[None, :] * (score[:, None] - np.exp(z - softplus))
    return np.asarray(where.by_item @ log_likelihood) + grid.log_weight[None, :], slope


def posterior(table: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Each item's log marginal likelihood and its posterior over the nodes, from `item_log_likelihood`."""
    log_marginal = logsumexp(table, axis=1)
    return log_marginal, np.exp(table - log_marginal[:, None])


def structure_gradient(
    theta_gap: FloatArray, score: FloatArray, grid: Grid, where: Layout, item: IntArray, item_weight: FloatArray
) -> tuple[float, FloatArray, FloatArray]:
    """The weighted log marginal likelihood sum_i w_i log m_i, its derivative by each observation's
    gap (theta - beta), and the items' posteriors over the nodes."""
    table, slope = item_log_likelihood(theta_gap, score, grid, where)
    log_marginal, weights = posterior(table)
    per_observation = where.observation_weight * item_weight[item] * np.einsum("kq,kq->k", weights[item], slope)
    return float(np.dot(item_weight, log_marginal)), per_observation, weights


def item_scores(theta_gap: FloatArray, score: FloatArray, grid: Grid, where: Layout, item: IntArray) -> FloatArray:
    """Per observation, d(log m_item)/d(gap): the item's score vector's entries."""
    table, slope = item_log_likelihood(theta_gap, score, grid, where)
    _, weights = posterior(table)
    return np.asarray(where.observation_weight * np.einsum("kq,kq->k", weights[item], slope), dtype=np.float64)
