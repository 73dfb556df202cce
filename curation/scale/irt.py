"""An item response model over an eval's per-item results: one scale for every release, linked
through the items releases share and the models that ran on several.

The model (two-parameter logistic, for scores in [0, 1]): a run `r` of model `m` scores item `i`
with expectation p = sigmoid(a_i (theta_r - b_i)), where `b_i` is the item's difficulty, `a_i > 0`
its discrimination and theta_r = mu_m + delta_r the run's ability (the model's, plus a small
deviation of the run). A graded score y in [0, 1] enters through the Bernoulli log-likelihood
y log p + (1 - y) log(1 - p), exact for 0/1 scores and a quasi-likelihood for graded ones.

The priors also fix the scale's origin and unit: mu_m ~ N(0, 1), delta_r ~ N(0, RUN_SPREAD^2),
log a_i ~ N(0, DISCRIMINATION_SPREAD^2), and for difficulties a hierarchy by cohort (the release an
item first appeared in): b_i ~ N(beta_c, DIFFICULTY_SPREAD^2), with the cohort means beta_c ~
Student t (COHORT_TAIL degrees of freedom, scale COHORT_SPREAD). The t prior says what the
rotation is built for: releases are alike as a whole (a small cohort mean is shrunk hard to 0, so
every release is placed by its own items, not only through the chain of links to its neighbours),
yet a release that is harder as a whole (a shift its items show clearly) keeps its shift, which a
normal prior that tight would pull back.

The fit (`curation.scale.marginal`): items are many and each is seen by few runs, so their
parameters are integrated out over a grid, and the posterior mode is found for what many items
inform: abilities, run deviations and cohort means (L-BFGS with the analytic gradient, `scipy`).
Each item's estimate is then its posterior mean given those. Uncertainty: `laplace_draws` samples
the normal approximation of the structure's posterior at the mode and each item from its posterior
(intervals of any derived quantity, `curation.scale.equating`, are percentiles over draws, and an
estimate the mean over them); `bootstrap_fits` re-weights items and models with Exp(1) weights and
refits, slower, kept for comparison. No maintained Python IRT library fits this
case (sparse matrices of graded scores, runs tied to models): `girth` (last release 2021) takes
complete 0/1 matrices only, `py-irt` needs Pyro and a GPU-sized stack, `mirt` is R.

Pure computation: arrays in, arrays out; no database, no clock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import minimize
from scipy.special import expit

from curation.scale.marginal import DIFFICULTY_NODES, Grid, Layout, item_scores, layout, structure_gradient

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

RUN_SPREAD = 0.1
"""Prior spread of a run's ability around its model's (in ability units): runs of one model agree
unless their results say otherwise."""
DIFFICULTY_SPREAD = 1.0
DISCRIMINATION_SPREAD = 0.2
COHORT_SPREAD = 0.1
COHORT_TAIL = 1.0
"""The cohort means' prior, Student t (Cauchy with 1 degree of freedom) of scale COHORT_SPREAD:
half of all releases within 0.1 of the others as a whole, one in eight more than 0.5 away."""
MAX_ITERATIONS = 500
MAX_DENSE_PARAMETERS = 6000
"""Above this many structural parameters (models, runs and cohorts), `laplace_draws` uses each
parameter's own curvature instead of the dense covariance (whose matrix would take 290 MB and more)."""


@dataclass(frozen=True)
class Responses:
    """Per-item results: observation `k` is run `run[k]` scoring item `item[k]` with `score[k]` in
    [0, 1]. Runs and items are numbered from 0 (`run_ids`, `item_ids` give the caller's ids); each
    run belongs to one model (`model_of_run`, numbered from 0, names in `model_names`), each item to
    one cohort (`cohort_of_item`, numbered from 0: the release it first appeared in; all in one
    cohort when not given)."""

    run: IntArray
    item: IntArray
    score: FloatArray
    model_of_run: IntArray
    run_ids: Sequence[int]
    item_ids: Sequence[int]
    model_names: Sequence[str]
    cohort_of_item: IntArray | None = None

    def __post_init__(self) -> None:
        if not (len(self.run) == len(self.item) == len(self.score)):
            raise ValueError("run, item and score must have one entry per observation")
        if len(self.score) and (np.nanmin(self.score) < 0 or np.nanmax(self.score) > 1 or not np.all(np.isfinite(self.score))):
            raise ValueError("scores must be finite and in [0, 1]")
        if len(self.model_of_run) != len(self.run_ids):
            raise ValueError("model_of_run needs one model per run")
        if self.cohort_of_item is not None and len(self.cohort_of_item) != len(self.item_ids):
            raise ValueError("cohort_of_item needs one cohort per item")

    def observations(self, keep: NDArray[np.bool_]) -> Responses:
        """The same runs, items, models and cohorts with only the observations where `keep` (one
        flag per observation) is true: a held-out fit's data."""
        if len(keep) != len(self.score):
            raise ValueError(f"keep needs one flag per observation ({len(self.score)}), got {len(keep)}")
        return replace(self, run=self.run[keep], item=self.item[keep], score=self.score[keep])

    @property
    def cohorts_of_items(self) -> IntArray:
        return np.zeros(len(self.item_ids), dtype=np.int64) if self.cohort_of_item is None else self.cohort_of_item

    @property
    def cohorts(self) -> int:
        return int(self.cohorts_of_items.max()) + 1 if len(self.item_ids) else 0

    @property
    def runs(self) -> int:
        return len(self.run_ids)

    @property
    def items(self) -> int:
        return len(self.item_ids)

    @property
    def models(self) -> int:
        return len(self.model_names)

    @classmethod
    def of(cls, rows: Sequence[tuple[int, str, int, float]], cohort_of: Mapping[int, int] | None = None) -> Responses:
        """From (run id, model name, item id, score) rows, numbering runs, items and models by
        sorted id (a stable numbering); `cohort_of`: each item id's cohort key (any integers,
        renumbered in order; items it does not name share the first cohort)."""
        run_ids = sorted({row[0] for row in rows})
        item_ids = sorted({row[2] for row in rows})
        model_of = {row[0]: row[1] for row in rows}
        model_names = sorted(set(model_of.values()))
        run_index = {run_id: index for index, run_id in enumerate(run_ids)}
        item_index = {item_id: index for index, item_id in enumerate(item_ids)}
        model_index = {name: index for index, name in enumerate(model_names)}
        return cls(
            run=np.array([run_index[row[0]] for row in rows], dtype=np.int64),
            item=np.array([item_index[row[2]] for row in rows], dtype=np.int64),
            score=np.array([row[3] for row in rows], dtype=np.float64),
            model_of_run=np.array([model_index[model_of[run_id]] for run_id in run_ids], dtype=np.int64),
            run_ids=run_ids,
            item_ids=item_ids,
            model_names=model_names,
            cohort_of_item=None if cohort_of is None else _renumbered([cohort_of.get(item_id, min(cohort_of.values(), default=0)) for item_id in item_ids]),
        )


def _renumbered(keys: Sequence[int]) -> IntArray:
    order = {key: index for index, key in enumerate(sorted(set(keys)))}
    return np.array([order[key] for key in keys], dtype=np.int64)


@dataclass(frozen=True)
class ScaleParameters:
    """One fit: per model its ability `model_ability`, per run its `run_deviation` and `ability`
    (its model's plus its deviation), per item `difficulty` and `discrimination`; the fit's
    `log_posterior` at the mode and whether the optimiser `converged`."""

    model_ability: FloatArray
    run_deviation: FloatArray
    ability: FloatArray
    difficulty: FloatArray
    discrimination: FloatArray
    cohort_mean: FloatArray
    log_posterior: float = 0.0
    converged: bool = True

    def vector(self) -> FloatArray:
        """Every parameter in one vector (model abilities, run deviations, difficulties, log
        discriminations), as `from_vector` reads it."""
        return _vector(self)

    @classmethod
    def from_vector(cls, vector: FloatArray, model_of_run: IntArray, *, models: int, items: int) -> ScaleParameters:
        """The parameters `vector` holds for `models` models, `len(model_of_run)` runs, `items`
        items and the cohorts after them."""
        runs = len(model_of_run)
        mu, delta = vector[:models], vector[models : models + runs]
        difficulty, log_a = vector[models + runs : models + runs + items], vector[models + runs + items : models + runs + 2 * items]
        return cls(
            model_ability=mu,
            run_deviation=delta,
            ability=mu[model_of_run] + delta,
            difficulty=difficulty,
            discrimination=np.exp(log_a),
            cohort_mean=vector[models + runs + 2 * items :],
        )

    def expected(self, run: IntArray, item: IntArray) -> FloatArray:
        """The model's expected score of each (run, item) pair."""
        return np.asarray(expit(self.discrimination[item] * (self.ability[run] - self.difficulty[item])), dtype=np.float64)


def _structure(responses: Responses, model_weight: FloatArray) -> tuple[Grid, Layout]:
    grid = Grid.of(DIFFICULTY_SPREAD, DISCRIMINATION_SPREAD)
    return grid, layout(responses.run, responses.item, responses.model_of_run, responses.cohorts_of_items, responses.items, model_weight)


def _marginal_objective(vector: FloatArray, responses: Responses, grid: Grid, where: Layout, item_weight: FloatArray) -> tuple[float, FloatArray]:
    """The negative log marginal posterior of the structure (model abilities, run deviations,
    cohort means: `vector`), the items integrated out (`curation.scale.marginal`), and its gradient."""
    models, runs = responses.models, responses.runs
    mu, delta, beta = vector[:models], vector[models : models + runs], vector[models + runs :]
    theta = mu[responses.model_of_run] + delta
    gap = theta[responses.run] - beta[where.cohort_of_observation]
    log_marginal, per_observation, _ = structure_gradient(gap, responses.score, grid, where, responses.item, item_weight)
    value = -log_marginal + 0.5 * float(np.dot(mu, mu)) + 0.5 * float(np.dot(delta, delta)) / RUN_SPREAD**2
    value += _cohort_prior(beta)[0]
    g_theta = -np.bincount(responses.run, weights=per_observation, minlength=runs)
    g_mu = np.bincount(responses.model_of_run, weights=g_theta, minlength=models) + mu
    g_delta = g_theta + delta / RUN_SPREAD**2
    g_beta = np.bincount(where.cohort_of_observation, weights=per_observation, minlength=responses.cohorts) + _cohort_prior(beta)[1]
    return value, np.concatenate([g_mu, g_delta, g_beta])


def _cohort_prior(beta: FloatArray) -> tuple[float, FloatArray, FloatArray]:
    """The cohort means' negative log prior (Student t, COHORT_TAIL degrees of freedom, scale
    COHORT_SPREAD), its gradient and its curvature (kept >= 0, for the normal approximation)."""
    scale = COHORT_TAIL * COHORT_SPREAD**2
    value = 0.5 * (COHORT_TAIL + 1) * float(np.sum(np.log1p(beta * beta / scale)))
    curvature = (COHORT_TAIL + 1) * (scale - beta * beta) / (scale + beta * beta) ** 2
    return value, (COHORT_TAIL + 1) * beta / (scale + beta * beta), np.maximum(curvature, 0.0)


def _items_given(structure: FloatArray, responses: Responses, grid: Grid, where: Layout) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Given the structure, each item's posterior over the grid's nodes, and its posterior means of
    the difficulty and the log discrimination."""
    models, runs = responses.models, responses.runs
    mu, delta, beta = structure[:models], structure[models : models + runs], structure[models + runs :]
    gap = (mu[responses.model_of_run] + delta)[responses.run] - beta[where.cohort_of_observation]
    _, _, weights = structure_gradient(gap, responses.score, grid, where, responses.item, np.ones(responses.items))
    difficulty = beta[responses.cohorts_of_items] + weights @ grid.offset
    return weights, difficulty, weights @ grid.log_discrimination


def _vector(parameters: ScaleParameters) -> FloatArray:
    return np.concatenate([parameters.model_ability, parameters.run_deviation, parameters.difficulty, np.log(parameters.discrimination), parameters.cohort_mean])


def _structure_of(parameters: ScaleParameters) -> FloatArray:
    return np.concatenate([parameters.model_ability, parameters.run_deviation, parameters.cohort_mean])


def fit_scale(
    responses: Responses, *, item_weight: FloatArray | None = None, model_weight: FloatArray | None = None, start: ScaleParameters | None = None
) -> ScaleParameters:
    """The marginal posterior mode of the structure (module docstring), each item at its posterior
    mean given it; optionally with each item's and model's log-likelihood weighted (the
    bootstrap's draws) and started from `start`. Raises ValueError without any observation."""
    if not len(responses.score):
        raise ValueError("no results to fit: the eval's runs have no per-item scores yet")
    items = np.ones(responses.items) if item_weight is None else item_weight
    models = np.ones(responses.models) if model_weight is None else model_weight
    grid, where = _structure(responses, models)
    origin = np.zeros(responses.models + responses.runs + responses.cohorts) if start is None else _structure_of(start)
    found = minimize(_marginal_objective, origin, args=(responses, grid, where, items), jac=True, method="L-BFGS-B", options={"maxiter": MAX_ITERATIONS})
    structure = np.asarray(found.x, dtype=np.float64)
    _, difficulty, log_a = _items_given(structure, responses, grid, where)
    mu, delta = structure[: responses.models], structure[responses.models : responses.models + responses.runs]
    return ScaleParameters(
        model_ability=mu,
        run_deviation=delta,
        ability=mu[responses.model_of_run] + delta,
        difficulty=difficulty,
        discrimination=np.exp(log_a),
        cohort_mean=structure[responses.models + responses.runs :],
        log_posterior=-float(found.fun),
        converged=bool(found.success),
    )


def bootstrap_fits(responses: Responses, mode: ScaleParameters, *, draws: int, rng: np.random.Generator) -> list[ScaleParameters]:
    """`draws` refits under Bayesian-bootstrap weights (Exp(1) per item and per model), each started
    from `mode`: the spread of any quantity over them is its uncertainty from which items and which
    models happened to be observed."""
    fits = []
    for _ in range(draws):
        item_weight = rng.exponential(1.0, responses.items)
        model_weight = rng.exponential(1.0, responses.models)
        fits.append(fit_scale(responses, item_weight=item_weight, model_weight=model_weight, start=mode))
    return fits


def log_likelihood(parameters: ScaleParameters, run: IntArray, item: IntArray, score: FloatArray) -> float:
    """The Bernoulli log-likelihood of held-out observations under `parameters` (probabilities
    kept off 0 and 1 by 1e-9)."""
    expected = np.clip(parameters.expected(run, item), 1e-9, 1 - 1e-9)
    return float(np.sum(score * np.log(expected) + (1 - score) * np.log(1 - expected)))


def parameter_count(responses: Responses) -> int:
    """The parameters the posterior's covariance spans: model abilities, run deviations and cohort
    means (the items are integrated out)."""
    return responses.models + responses.runs + responses.cohorts


def laplace_draws(responses: Responses, mode: ScaleParameters, *, draws: int, rng: np.random.Generator) -> list[ScaleParameters]:
    """`draws` parameter sets from the posterior: the structure (model abilities, run deviations,
    cohort means) from the normal approximation at `mode`, with the information estimated by the
    outer product of the items' score vectors plus the priors' precisions; each item's difficulty
    and discrimination from its posterior over the grid given the mode's structure, the difficulty
    spread uniformly within its node's cell and moved with its cohort's drawn mean."""
    from scipy import sparse
    from scipy.linalg import cho_factor, solve_triangular

    models, runs, items = responses.models, responses.runs, responses.items
    grid, where = _structure(responses, np.ones(models))
    centre = _structure_of(mode)
    size = len(centre)
    gap = mode.ability[responses.run] - mode.cohort_mean[where.cohort_of_observation]
    values = item_scores(gap, responses.score, grid, where, responses.item)
    count = len(gap)
    columns = np.stack([responses.model_of_run[responses.run], models + responses.run, models + runs + where.cohort_of_observation], axis=1).ravel()
    signed = np.repeat(values, 3) * np.tile([1.0, 1.0, -1.0], count)
    scores = sparse.csr_matrix((signed, (np.repeat(responses.item, 3), columns)), shape=(items, size))
    spreads = [(models, 1.0), (runs, RUN_SPREAD)]
    prior = np.concatenate([np.full(number, 1 / spread**2) for number, spread in spreads] + [_cohort_prior(mode.cohort_mean)[2]])
    if size > MAX_DENSE_PARAMETERS:
        # Too many parameters for a dense covariance: each parameter's own curvature only (narrower
        # intervals than the full covariance gives; `ScaleFit.method` says which was used).
        curvature = np.asarray(scores.multiply(scores).sum(axis=0)).ravel() + prior
        noise = rng.standard_normal((size, draws)) / np.sqrt(curvature)[:, None]
    else:
        information = (scores.T @ scores).toarray()
        information[np.diag_indices(size)] += prior
        factor, _ = cho_factor(information, lower=True)
        noise = solve_triangular(factor, rng.standard_normal((size, draws)), lower=True, trans="T")
    weights, _, _ = _items_given(centre, responses, grid, where)
    cumulative = np.cumsum(weights, axis=1)
    cell = DIFFICULTY_SPREAD * 10.0 / (DIFFICULTY_NODES - 1)
    found = []
    for index in range(draws):
        structure = centre + noise[:, index]
        node = np.minimum((cumulative < rng.random(items)[:, None] * cumulative[:, -1:]).sum(axis=1), grid.nodes - 1)
        beta = structure[models + runs :]
        difficulty = beta[responses.cohorts_of_items] + grid.offset[node] + (rng.random(items) - 0.5) * cell
        vector = np.concatenate([structure[: models + runs], difficulty, grid.log_discrimination[node], beta])
        found.append(ScaleParameters.from_vector(vector, responses.model_of_run, models=models, items=items))
    return found
