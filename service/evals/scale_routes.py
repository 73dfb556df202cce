"""The common scale over HTTP (`read`): an eval's newest fit, `GET /v1/evals/{name}/scale`, and a
score change between two runs split into the set and the model, `GET /v1/reports/score-change`
(`service.evals.scale`). Both read stored fits: nothing is fitted in a request."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from schemas.common import MAX_ROW_ID
from schemas.scale import EvalScale, ScoreChangeReport
from service.core.auth import ReadPrincipal
from service.core.deps import SessionDep
from service.core.problems import problem_doc
from service.evals.definitions import require_eval
from service.evals.scale import eval_scale, score_change_report

scale_router = APIRouter(tags=["scale"])
RunId = Annotated[int, Query(ge=1, le=MAX_ROW_ID)]


@scale_router.get("/v1/evals/{name}/scale", response_model=EvalScale, responses=problem_doc(401, 403, 404))
def scale(name: str, _: ReadPrincipal, session: SessionDep) -> EvalScale:
    """The eval's newest scale fit over its dev runs' per-item results: per release its difficulty
    index (the mean model's expected score, 0-100; lower is harder), per model and per run the
    ability, per run its equated score on the reference release, each with a 95% interval; the
    fit's version, when it was made, and `stale` when results arrived since (404 `no_scale` before
    any fit)."""
    return eval_scale(session, require_eval(session=session, name=name))


@scale_router.get("/v1/reports/score-change", response_model=ScoreChangeReport, responses=problem_doc(401, 403, 404, 422))
def score_change(run_a: RunId, run_b: RunId, _: ReadPrincipal, session: SessionDep) -> ScoreChangeReport:
    """Run B's expected score minus run A's, each on its own release, split into the part due to
    the set and the part due to the model, with 95% intervals, on the newest fit of their eval.
    422 for runs of two evals, a sealed run, or a run the fit does not hold yet."""
    return score_change_report(session, run_a=run_a, run_b=run_b)
