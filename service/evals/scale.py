"""An eval's common scale as the service keeps it: fitted (`curation.scale.irt`) over the per-item
results of the eval's dev runs, stored as a numbered version (`schemas.scale.ScaleFit`) with its
summary and posterior draws, refitted when newer results exist (`refit_stale`, run by the
scheduler; `goldenset scale refit` does it now), and read back as the API shows it.

Sealed runs are left out: their per-item results are for the `sealed` scope only, and a scale any
reader can see must not be shaped by them. A run scored on no item contributes nothing; a release
is placed on the scale through the dev items of it that some run scored.

The difficulty index of a release is the expected score (0-100) of ability 0 (the mean model's)
on its scored dev items; a run's equated score is its ability's expected score on the reference
release (the newest release any run scored, unless another is asked for).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from sqlalchemy import func
from sqlalchemy import select as all_columns
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from curation.scale.equating import Estimate, difficulty_index, equated_score, estimate, expected_score, score_change
from curation.scale.irt import MAX_DENSE_PARAMETERS, Responses, ScaleParameters, fit_scale, laplace_draws, parameter_count
from schemas.common import utcnow
from schemas.evals import Eval, Split
from schemas.model_registry import Model
from schemas.release import Release, ReleaseItem
from schemas.runs import Result, Run
from schemas.scale import EvalScale, ModelScale, ReleaseScale, RunOnScale, RunScale, ScaleEstimate, ScaleFit, ScoreChangePart, ScoreChangeReport
from service.core.db import write_transaction
from service.core.problems import ProblemError

logger = logging.getLogger("goldenset.scale")
METHOD = "2pl-marginal-laplace/2"
METHOD_DIAGONAL = "2pl-marginal-laplace-diagonal/2"
"""The method of a fit too large for the dense covariance (`curation.scale.irt.MAX_DENSE_PARAMETERS`)."""
DRAWS = 200
SEED = 20_261_205
WORDING = (
    "The change is split on the eval's common scale: the set's part is what the first run's ability would lose or gain on the second release's items, "
    "the model's part what the second run's ability adds on those items. It is an estimate from the fit's items and models, with its interval, not a verdict."
)


@dataclass(frozen=True)
class FitInput:
    """What a fit reads: the responses, each run's release number and raw mean, each release's
    scored dev items (item ids), and the newest result id read."""

    responses: Responses
    release_of_run: dict[int, int]
    mean_of_run: dict[int, float]
    release_items: dict[int, list[int]]
    results_through: int


def read_fit_input(session: Session, evaluation: Eval) -> FitInput | None:
    """The per-item results of the eval's dev runs (None when there is none)."""
    assert evaluation.id is not None
    rows = session.execute(
        all_columns(col(Run.id), col(Model.name), col(Result.item_id), col(Result.score), col(Result.id), col(Release.number))
        .join(Result, col(Result.run_id) == col(Run.id))
        .join(Model, col(Model.id) == col(Run.model_id))
        .join(Release, col(Release.id) == col(Run.release_id))
        .where(col(Run.eval_id) == evaluation.id, col(Run.split) == Split.DEV.value)
    ).all()
    if not rows:
        return None
    release_of_run = {int(run_id): int(number) for run_id, _, _, _, _, number in rows if run_id is not None}
    first_release: dict[int, int] = {}
    for _, _, item_id, _, _, number in rows:
        first_release[int(item_id)] = min(int(number), first_release.get(int(item_id), int(number)))
    # An item's cohort: the first release it was served in, so that a release made harder as a whole is found so.
    responses = Responses.of([(int(run_id), str(model), int(item_id), float(score)) for run_id, model, item_id, score, _, _ in rows if run_id is not None], cohort_of=first_release)
    scores: dict[int, list[float]] = defaultdict(list)
    for run_id, _, _, score, _, _ in rows:
        scores[int(run_id or 0)].append(float(score))
    scored = set(responses.item_ids)
    numbers = sorted(set(release_of_run.values()))
    members = session.exec(
        select(Release.number, ReleaseItem.item_id)
        .join(ReleaseItem, col(ReleaseItem.release_id) == col(Release.id))
        .where(Release.eval_id == evaluation.id, col(Release.number).in_(numbers), ReleaseItem.split == Split.DEV.value)
    ).all()
    release_items: dict[int, list[int]] = defaultdict(list)
    for number, item_id in members:
        if item_id in scored:
            release_items[int(number)].append(int(item_id))
    return FitInput(
        responses=responses,
        release_of_run=release_of_run,
        mean_of_run={run_id: float(np.mean(values)) * 100 for run_id, values in scores.items()},
        release_items=dict(release_items),
        results_through=max(int(result_id or 0) for _, _, _, _, result_id, _ in rows),
    )


def newest_result(session: Session, evaluation: Eval) -> int:
    """The newest result id of the eval's dev runs (0 without any)."""
    newest = session.exec(select(func.max(Result.id)).join(Run, col(Run.id) == col(Result.run_id)).where(Run.eval_id == evaluation.id, Run.split == Split.DEV.value)).one()
    return int(newest or 0)


def newest_fit(session: Session, evaluation: Eval) -> ScaleFit | None:
    return session.exec(select(ScaleFit).where(ScaleFit.eval_id == evaluation.id).order_by(col(ScaleFit.version).desc()).limit(1)).first()


def _interval(found: Estimate, *, points: bool = False) -> dict[str, float]:
    shown = found.points() if points else found
    return {"value": round(shown.value, 4), "low": round(shown.low, 4), "high": round(shown.high, 4)}


def _indices(found: FitInput, items: list[int]) -> np.ndarray:
    position = {item_id: index for index, item_id in enumerate(found.responses.item_ids)}
    return np.array([position[item_id] for item_id in items if item_id in position], dtype=np.int64)


def _model_ability(index: int) -> Callable[[ScaleParameters], float]:
    return lambda fit: float(fit.model_ability[index])


def _run_ability(index: int) -> Callable[[ScaleParameters], float]:
    return lambda fit: float(fit.ability[index])


def summarise(found: FitInput, mode: ScaleParameters, draws: list[ScaleParameters], reference: int) -> dict[str, object]:
    """What `GET .../scale` shows of a fit, on reference release `reference`."""
    responses = found.responses
    releases = [
        {"number": number, "items": len(items), "difficulty_index": _interval(difficulty_index(mode, draws, _indices(found, items)), points=True)}
        for number, items in sorted(found.release_items.items())
        if items
    ]
    runs_of_model = np.bincount(responses.model_of_run, minlength=responses.models)
    models = [
        {"name": name, "ability": _interval(estimate(_model_ability(index), mode, draws)), "runs": int(runs_of_model[index])} for index, name in enumerate(responses.model_names)
    ]
    reference_items = _indices(found, found.release_items.get(reference, []))
    runs = []
    for index, run_id in enumerate(responses.run_ids):
        ability = estimate(_run_ability(index), mode, draws)
        equated = equated_score(mode, draws, index, reference_items) if len(reference_items) else Estimate(float("nan"), float("nan"), float("nan"))
        runs.append(
            {
                "id": run_id,
                "model": responses.model_names[int(responses.model_of_run[index])],
                "release": found.release_of_run[run_id],
                "mean_score": round(found.mean_of_run[run_id], 4),
                "ability": _interval(ability),
                "equated_score": _interval(equated, points=True),
            }
        )
    return {"reference_release": reference, "releases": releases, "models": models, "runs": runs}


def refit(engine: Engine, *, evaluation: Eval) -> ScaleFit | None:
    """Fit the eval's scale now and store it as its next version (the older versions keep their
    summaries, not their draws), in a unit of work of its own. None when no dev run has results."""
    with Session(engine) as session:
        found = read_fit_input(session, evaluation)
    if found is None:
        return None
    rng = np.random.default_rng(SEED)
    mode = fit_scale(found.responses)
    draws = laplace_draws(found.responses, mode, draws=DRAWS, rng=rng)
    reference = max((number for number, items in found.release_items.items() if items), default=max(found.release_of_run.values()))
    summary = summarise(found, mode, draws, reference)
    matrix = np.stack([draw.vector() for draw in draws]).astype(np.float32)
    parameters = {
        "models": list(found.responses.model_names),
        "runs": list(found.responses.run_ids),
        "model_of_run": [int(index) for index in found.responses.model_of_run],
        "items": list(found.responses.item_ids),
        "mode": [float(value) for value in mode.vector()],
        "release_of_run": {str(run_id): number for run_id, number in found.release_of_run.items()},
        "mean_of_run": {str(run_id): value for run_id, value in found.mean_of_run.items()},
        "release_items": {str(number): items for number, items in found.release_items.items()},
    }
    with write_transaction(engine) as session:
        previous = newest_fit(session, evaluation)
        if previous is not None:
            previous.draws, previous.draw_count = None, 0
            session.add(previous)
        assert evaluation.id is not None
        fit = ScaleFit(
            eval_id=evaluation.id,
            version=(previous.version + 1) if previous is not None else 1,
            fitted_at=utcnow(),
            method=METHOD if parameter_count(found.responses) <= MAX_DENSE_PARAMETERS else METHOD_DIAGONAL,
            results_through=found.results_through,
            observations=len(found.responses.score),
            log_posterior=mode.log_posterior,
            converged=mode.converged,
            summary=summary,
            parameters=parameters,
            draw_count=len(draws),
            draws=matrix.tobytes(),
        )
        session.add(fit)
        session.flush()
        session.expunge(fit)
    logger.info("eval %s: scale version %s fitted on %s results of %s runs", evaluation.name, fit.version, fit.observations, found.responses.runs)
    return fit


def refit_stale(engine: Engine) -> list[str]:
    """Refit every eval whose dev runs have results newer than its newest fit; their names."""
    with Session(engine) as session:
        evaluations = list(session.exec(select(Eval)).all())
        stale = []
        for evaluation in evaluations:
            fit = newest_fit(session, evaluation)
            newest = newest_result(session, evaluation)
            if newest and (fit is None or newest > fit.results_through):
                stale.append(evaluation)
    for evaluation in stale:
        refit(engine, evaluation=evaluation)
    return [evaluation.name for evaluation in stale]


def _restored(fit: ScaleFit) -> tuple[ScaleParameters, list[ScaleParameters]]:
    """The fit's mode and draws, as parameters."""
    parameters = fit.parameters
    model_of_run = np.array(parameters["model_of_run"], dtype=np.int64)
    items, models = len(parameters["items"]), len(parameters["models"])
    mode = ScaleParameters.from_vector(np.array(parameters["mode"], dtype=np.float64), model_of_run, models=models, items=items)
    if not fit.draws or not fit.draw_count:
        return mode, []
    matrix = np.frombuffer(fit.draws, dtype=np.float32).reshape(fit.draw_count, -1).astype(np.float64)
    return mode, [ScaleParameters.from_vector(row, model_of_run, models=models, items=items) for row in matrix]


def eval_scale(session: Session, evaluation: Eval) -> EvalScale:
    """The newest fit as `GET /v1/evals/{name}/scale` shows it; 404 when none exists yet."""
    shown = scale_if_fitted(session, evaluation)
    if shown is None:
        detail = (
            f"eval {evaluation.name!r} has no scale yet: it is fitted over the per-item results of its dev runs, by the scheduler once results arrive, "
            f"or now with `goldenset scale refit --eval {evaluation.name}`"
        )
        raise ProblemError(404, "Not Found", detail, reason="no_scale")
    return shown


def scale_if_fitted(session: Session, evaluation: Eval) -> EvalScale | None:
    """The newest fit as `eval_scale` shows it, or None before the first (for pages that show it when there is one)."""
    fit = newest_fit(session, evaluation)
    if fit is None:
        return None
    summary = fit.summary
    return EvalScale(
        eval=evaluation.name,
        version=fit.version,
        fitted_at=fit.fitted_at,
        method=fit.method,
        stale=newest_result(session, evaluation) > fit.results_through,
        observations=fit.observations,
        reference_release=int(summary["reference_release"]),
        releases=[ReleaseScale.model_validate(entry) for entry in summary["releases"]],
        models=[ModelScale.model_validate(entry) for entry in summary["models"]],
        runs=[RunScale.model_validate(entry) for entry in summary["runs"]],
        note=(
            "Abilities are on the eval's common scale (0 is the mean model); a difficulty index is the score (0-100) the mean model is expected to get on a release's "
            "scored dev items, lower is harder; an equated score is what a run's ability is expected to score on the reference release. Intervals are 95%."
        ),
    )


def run_on_scale(session: Session, run: Run) -> RunOnScale | None:
    """Where `run` stands on its eval's newest fit; None for a sealed run (the scale is fitted over
    dev runs only), before the first fit, or when the fit does not hold the run yet (no results
    when it was made)."""
    if run.split != Split.DEV.value:
        return None
    evaluation = session.get(Eval, run.eval_id)
    shown = scale_if_fitted(session, evaluation) if evaluation is not None else None
    placed = next((entry for entry in shown.runs if entry.id == run.id), None) if shown is not None else None
    if shown is None or placed is None:
        return None
    return RunOnScale(
        fit_version=shown.version,
        fitted_at=shown.fitted_at,
        stale=shown.stale,
        reference_release=shown.reference_release,
        ability=placed.ability,
        equated_score=placed.equated_score,
    )


def _part(found: Estimate) -> ScoreChangePart:
    shown = found.points()
    return ScoreChangePart(value=round(shown.value, 3), low=round(shown.low, 3), high=round(shown.high, 3), excludes_zero=shown.excludes_zero())


def score_change_report(session: Session, *, run_a: int, run_b: int) -> ScoreChangeReport:
    """The change from run A to run B split into the set and the model, on the newest fit of their
    eval. 404 for an unknown run; 422 for runs of two evals, a sealed run, or a run the fit does
    not hold (no results yet, or results newer than the fit)."""
    runs = {run.id: run for run in session.exec(select(Run).where(col(Run.id).in_([run_a, run_b]))).all()}
    for wanted in (run_a, run_b):
        if wanted not in runs:
            raise ProblemError(404, "Not Found", f"no run with id {wanted}")
    first, second = runs[run_a], runs[run_b]
    if first.eval_id != second.eval_id:
        raise ProblemError(422, "Invalid request", f"runs {run_a} and {run_b} are of two evals: a score change is read on one eval's scale", reason="two_evals")
    if Split.SEALED.value in (first.split, second.split):
        raise ProblemError(422, "Invalid request", "a sealed run is not on the scale: the scale is fitted over dev runs only", reason="sealed_run")
    evaluation = session.get(Eval, first.eval_id)
    assert evaluation is not None
    fit = newest_fit(session, evaluation)
    held = [int(run_id) for run_id in fit.parameters["runs"]] if fit is not None else []
    missing = [run_id for run_id in (run_a, run_b) if run_id not in held]
    if fit is None or missing:
        named = ", ".join(map(str, missing or [run_a, run_b]))
        detail = (
            f"run(s) {named} are not on the newest scale of eval {evaluation.name!r} (no per-item results yet, or newer than the fit): "
            f"refit it with `goldenset scale refit --eval {evaluation.name}`"
        )
        raise ProblemError(422, "Invalid request", detail, reason="not_on_scale")
    mode, draws = _restored(fit)
    parameters = fit.parameters
    position = {int(run_id): index for index, run_id in enumerate(parameters["runs"])}
    item_position = {int(item_id): index for index, item_id in enumerate(parameters["items"])}

    def items_of(run_id: int) -> np.ndarray:
        number = str(parameters["release_of_run"][str(run_id)])
        return np.array([item_position[item_id] for item_id in parameters["release_items"].get(number, []) if item_id in item_position], dtype=np.int64)

    change = score_change(mode, draws, run_a=position[run_a], items_a=items_of(run_a), run_b=position[run_b], items_b=items_of(run_b))
    shown = {entry["id"]: RunScale.model_validate(entry) for entry in fit.summary["runs"]}
    observed = float(parameters["mean_of_run"][str(run_b)]) - float(parameters["mean_of_run"][str(run_a)])
    return ScoreChangeReport(
        eval=evaluation.name,
        fit_version=fit.version,
        run_a=shown[run_a],
        run_b=shown[run_b],
        total=_part(change.total),
        set=_part(change.set),
        model=_part(change.model),
        observed_change=round(observed, 3),
        wording=WORDING,
    )


def expected_on(fit: ScaleFit, run_id: int, release: int) -> ScaleEstimate:
    """What run `run_id`'s ability is expected to score (0-100) on `release`'s scored dev items."""
    mode, draws = _restored(fit)
    parameters = fit.parameters
    position = {int(run): index for index, run in enumerate(parameters["runs"])}
    item_position = {int(item_id): index for index, item_id in enumerate(parameters["items"])}
    items = np.array([item_position[item_id] for item_id in parameters["release_items"].get(str(release), [])], dtype=np.int64)
    found = estimate(lambda fit_: expected_score(fit_, float(fit_.ability[position[run_id]]), items), mode, draws).points()
    return ScaleEstimate(value=found.value, low=found.low, high=found.high)
