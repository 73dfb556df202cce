"""An item response model over an eval's per-item results: one scale for every release, linked
through the items releases share and the models that ran on several.

The model (two-parameter logistic, for scores in [0, 1]): a run `r` of model `m` scores item `i`
with expectation p = sigmoid(a_i (theta_r - b_i)), where `b_i` is the item's difficulty, `a_i > 0`
its discrimination and theta_r = mu_m + delta_r the run's ability (the model's, plus a small
deviation of the run). A graded score y in [0, 1] enters through the Bernoulli log-likelihood
y log p + (1 - y) log(1 - p), exact for 0/1 scores and a quasi-likelihood for graded ones.

The fit is the posterior mode (MAP) under weakly informative priors that also fix the scale's
origin and unit: mu_m ~ N(0, 1), delta_r ~ N(0, RUN_SPREAD^2), log a_i ~ N(0,
DISCRIMINATION_SPREAD^2), and for difficulties a hierarchy by cohort (the release an item first
appeared in): b_i ~ N(beta_c, DIFFICULTY_SPREAD^2), beta_c ~ N(0, COHORT_SPREAD^2). An item seen by
few runs shrinks towards its cohort's mean, which all the cohort's items estimate together, not
towards 0: a release made harder as a whole is found harder, not pulled back to the others. Found
by L-BFGS with the analytic gradient (`scipy`). Uncertainty: `laplace_draws` samples the normal
approximation of the posterior at the mode (intervals of any derived quantity,
`curation.scale.equating`, are percentiles over draws); `bootstrap_fits` re-weights items and
models with Exp(1) weights and refits, slower, kept for comparison. No maintained Python IRT library fits this
case (sparse matrices of graded scores, runs tied to models): `girth` (last release 2021) takes
complete 0/1 matrices only, `py-irt` needs Pyro and a GPU-sized stack, `mirt` is R.

Pure computation: arrays in, arrays out; no database, no clock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import minimize
from scipy.special import expit, log_expit

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

RUN_SPREAD = 0.1
"""Prior spread of a run's ability around its model's (in ability units): runs of one model agree
unless their results say otherwise."""
DIFFICULTY_SPREAD = 1.0
DISCRIMINATION_SPREAD = 0.2
COHORT_SPREAD = 0.5
"""Prior spread of a cohort's mean difficulty: releases may differ this much as a whole."""
MAX_ITERATIONS = 500
MAX_DENSE_PARAMETERS = 6000
"""Above this many parameters (about 2,800 items), `laplace_draws` uses each parameter's own
curvature instead of the dense covariance (whose matrix would take 290 MB and more)."""


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


def _split(vector: FloatArray, responses: Responses) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, FloatArray]:
    models, runs, items = responses.models, responses.runs, responses.items
    ends = np.cumsum([models, runs, items, items])
    return vector[: ends[0]], vector[ends[0] : ends[1]], vector[ends[1] : ends[2]], vector[ends[2] : ends[3]], vector[ends[3] :]


def _objective(vector: FloatArray, responses: Responses, item_weight: FloatArray, model_weight: FloatArray) -> tuple[float, FloatArray]:
    """The negative log posterior and its gradient, each observation's log-likelihood weighted by
    its item's and its model's weights (all 1 for the fit itself)."""
    mu, delta, difficulty, log_a, beta = _split(vector, responses)
    run, item, score = responses.run, responses.item, responses.score
    cohort = responses.cohorts_of_items
    model = responses.model_of_run[run]
    weight = item_weight[item] * model_weight[model]
    a = np.exp(log_a)
    theta = mu[responses.model_of_run] + delta
    gap = theta[run] - difficulty[item]
    z = a[item] * gap
    log_likelihood = score * log_expit(z) + (1 - score) * log_expit(-z)
    offset = difficulty - beta[cohort]
    value = -float(np.dot(weight, log_likelihood))
    value += 0.5 * float(np.dot(mu, mu)) + 0.5 * float(np.dot(delta, delta)) / RUN_SPREAD**2
    value += 0.5 * float(np.dot(offset, offset)) / DIFFICULTY_SPREAD**2 + 0.5 * float(np.dot(beta, beta)) / COHORT_SPREAD**2
    value += 0.5 * float(np.dot(log_a, log_a)) / DISCRIMINATION_SPREAD**2
    error = weight * (expit(z) - score)  # d(-loglik)/dz
    g_theta = np.bincount(run, weights=error * a[item], minlength=responses.runs)
    g_delta = g_theta + delta / RUN_SPREAD**2
    g_mu = np.bincount(responses.model_of_run, weights=g_theta, minlength=responses.models) + mu
    g_b = np.bincount(item, weights=-error * a[item], minlength=responses.items) + offset / DIFFICULTY_SPREAD**2
    g_log_a = np.bincount(item, weights=error * z, minlength=responses.items) + log_a / DISCRIMINATION_SPREAD**2
    g_beta = -np.bincount(cohort, weights=offset, minlength=responses.cohorts) / DIFFICULTY_SPREAD**2 + beta / COHORT_SPREAD**2
    return value, np.concatenate([g_mu, g_delta, g_b, g_log_a, g_beta])


def _start(responses: Responses) -> FloatArray:
    """A starting point: difficulties from each item's mean score (logit), abilities and cohort means at 0."""
    sums = np.bincount(responses.item, weights=responses.score, minlength=responses.items)
    counts = np.bincount(responses.item, minlength=responses.items)
    share = np.clip((sums + 0.5) / (counts + 1.0), 0.02, 0.98)
    difficulty = -np.log(share / (1 - share))
    return np.concatenate([np.zeros(responses.models), np.zeros(responses.runs), difficulty, np.zeros(responses.items), np.zeros(responses.cohorts)])


def _vector(parameters: ScaleParameters) -> FloatArray:
    return np.concatenate([parameters.model_ability, parameters.run_deviation, parameters.difficulty, np.log(parameters.discrimination), parameters.cohort_mean])


def fit_scale(
    responses: Responses, *, item_weight: FloatArray | None = None, model_weight: FloatArray | None = None, start: ScaleParameters | None = None
) -> ScaleParameters:
    """The posterior mode of the model (module docstring) for `responses`, optionally with each
    item's and model's log-likelihood weighted (the bootstrap's draws) and started from `start`.
    Raises ValueError without any observation."""
    if not len(responses.score):
        raise ValueError("no results to fit: the eval's runs have no per-item scores yet")
    items = np.ones(responses.items) if item_weight is None else item_weight
    models = np.ones(responses.models) if model_weight is None else model_weight
    origin = _start(responses) if start is None else _vector(start)
    found = minimize(_objective, origin, args=(responses, items, models), jac=True, method="L-BFGS-B", options={"maxiter": MAX_ITERATIONS})
    mu, delta, difficulty, log_a, beta = _split(np.asarray(found.x, dtype=np.float64), responses)
    return ScaleParameters(
        model_ability=mu,
        run_deviation=delta,
        ability=mu[responses.model_of_run] + delta,
        difficulty=difficulty,
        discrimination=np.exp(log_a),
        cohort_mean=beta,
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
    return responses.models + responses.runs + 2 * responses.items + responses.cohorts


def laplace_draws(responses: Responses, mode: ScaleParameters, *, draws: int, rng: np.random.Generator) -> list[ScaleParameters]:
    """`draws` parameter sets from the Laplace approximation of the posterior at `mode`: a normal
    with the inverse of the Fisher information (the Bernoulli likelihood's p(1 - p) weights on the
    linear predictor's gradient, plus the priors' precisions) as its covariance."""
    from scipy import sparse
    from scipy.linalg import cho_factor, solve_triangular

    models, runs, items, cohorts = responses.models, responses.runs, responses.items, responses.cohorts
    run, item = responses.run, responses.item
    a = mode.discrimination[item]
    z = a * (mode.ability[run] - mode.difficulty[item])
    p = expit(z)
    weight = p * (1 - p)
    count = len(run)
    rows = np.repeat(np.arange(count), 4)
    columns = np.stack([responses.model_of_run[run], models + run, models + runs + item, models + runs + items + item], axis=1).ravel()
    values = np.stack([a, a, -a, z], axis=1).ravel()
    size = models + runs + 2 * items + cohorts
    gradient = sparse.csr_matrix((values, (rows, columns)), shape=(count, size))
    spreads = [(models, 1.0), (runs, RUN_SPREAD), (items, DIFFICULTY_SPREAD), (items, DISCRIMINATION_SPREAD), (cohorts, COHORT_SPREAD)]
    prior = np.concatenate([np.full(number, 1 / spread**2) for number, spread in spreads])
    item_columns = models + runs + np.arange(items)
    cohort_columns = models + runs + 2 * items + responses.cohorts_of_items
    centre = _vector(mode)
    if size > MAX_DENSE_PARAMETERS:
        # Too many parameters for a dense covariance: each parameter's own curvature only (narrower
        # intervals than the full covariance gives; `ScaleFit.method` says which was used).
        curvature = np.asarray(gradient.multiply(gradient).T @ weight).ravel() + prior
        np.add.at(curvature, cohort_columns, 1 / DIFFICULTY_SPREAD**2)
        noise = rng.standard_normal((draws, size)) / np.sqrt(curvature)
        return [ScaleParameters.from_vector(centre + row, responses.model_of_run, models=models, items=items) for row in noise]
    information = (gradient.T @ sparse.diags(weight) @ gradient).toarray()
    information[np.diag_indices(size)] += prior
    # b_i ~ N(beta_c, s^2) ties each difficulty to its cohort's mean.
    np.add.at(information, (cohort_columns, cohort_columns), 1 / DIFFICULTY_SPREAD**2)
    np.add.at(information, (item_columns, cohort_columns), -1 / DIFFICULTY_SPREAD**2)
    np.add.at(information, (cohort_columns, item_columns), -1 / DIFFICULTY_SPREAD**2)
    factor, _ = cho_factor(information, lower=True)
    noise = solve_triangular(factor, rng.standard_normal((size, draws)), lower=True, trans="T")
    return [ScaleParameters.from_vector(centre + noise[:, index], responses.model_of_run, models=models, items=items) for index in range(draws)]
