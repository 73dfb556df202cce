"""Pages: the evidence page's reports built on an eval's common scale and on public corpora: the
public-inflation report of a model (its public score against what its private score predicts,
judged by reference models) and a score change between two runs split into the set and the model,
each with its chart. Both need `read`, as their API routes do (`GET /v1/reports/public-inflation`,
`GET /v1/reports/score-change`). A report that cannot be made (unknown names, too few reference
models, a run the fit does not hold yet) is shown on the page with what to do, not as an error.
Charts are drawn only when their image is asked for.
"""

from __future__ import annotations

from typing import Any

from fastapi import Request, Response
from sqlmodel import Session

from schemas.common import MAX_ROW_ID
from schemas.evidence import PublicInflationReport
from schemas.scale import ScoreChangeReport
from schemas.token import Scope
from service.core.problems import ProblemError
from service.evals.scale import score_change_report
from service.evidence.public_inflation import public_inflation
from service.ui.charts import chart_answer, chart_format
from service.ui.pages import UiRefused, need, ui_router

router = ui_router()


def _inflation(session: Session, model: str, eval_name: str, corpus: str) -> tuple[PublicInflationReport | None, str]:
    """The report asked for, or why there is none (nothing asked: no report, no reason)."""
    if not (model or eval_name or corpus):
        return None, ""
    if not (model and eval_name and corpus):
        return None, "Pick the model, the private eval and the public corpus to compare."
    try:
        return public_inflation(session=session, eval_name=eval_name, corpus_name=corpus, model_name=model), ""
    except ProblemError as exc:
        return None, f"{exc.title}: {exc.detail}"


def _run_id(text: str) -> int | None:
    return int(text) if text.isdigit() and 0 < int(text) <= MAX_ROW_ID else None


def _change(session: Session, run_a: str, run_b: str) -> tuple[ScoreChangeReport | None, str]:
    """The score change asked for, or why there is none (nothing asked: no report, no reason)."""
    if not (run_a or run_b):
        return None, ""
    first, second = _run_id(run_a), _run_id(run_b)
    if first is None or second is None:
        return None, "Give the ids of two runs of one eval (numbers, as on the runs page)."
    try:
        return score_change_report(session, run_a=first, run_b=second), ""
    except ProblemError as exc:
        return None, f"{exc.title}: {exc.detail}"


def reports_context(session: Session, *, inflation: dict[str, str], change: dict[str, str]) -> dict[str, Any]:
    """What the evidence page's two sections show: the forms as typed (`inflation`: model, eval,
    corpus; `change`: run_a, run_b), each report or why there is none."""
    inflation_report, inflation_error = _inflation(session, inflation["model"], inflation["eval"], inflation["corpus"])
    change_report, change_error = _change(session, change["run_a"], change["run_b"])
    return {
        "inflation": inflation,
        "inflation_report": inflation_report,
        "inflation_error": inflation_error,
        "change": change,
        "change_report": change_report,
        "change_error": change_error,
    }


@router.get("/ui/evidence/public-inflation/chart.{image_format}")
def public_inflation_chart(request: Request, image_format: str, model: str = "", eval: str = "", corpus: str = "") -> Response:
    need(request, Scope.READ, "Reading contamination evidence")
    chosen = chart_format(image_format)
    with Session(request.app.state.engine) as session:
        report, why = _inflation(session, model.strip(), eval.strip(), corpus.strip())
    if report is None:
        raise UiRefused(422, "No report", why or "Pick the model, the private eval and the public corpus.")
    from curation.evidence.charts import public_inflation_chart as draw  # matplotlib loads only when a chart is asked for

    return chart_answer(draw(report, image_format=chosen), chosen, f"public-inflation-{report.model}".replace("/", "_"))


@router.get("/ui/evidence/score-change/chart.{image_format}")
def score_change_chart(request: Request, image_format: str, run_a: str = "", run_b: str = "") -> Response:
    need(request, Scope.READ, "Reading contamination evidence")
    chosen = chart_format(image_format)
    with Session(request.app.state.engine) as session:
        report, why = _change(session, run_a.strip(), run_b.strip())
    if report is None:
        raise UiRefused(422, "No report", why or "Give the ids of two runs.")
    from curation.scale.charts import score_change_chart as draw  # matplotlib loads only when a chart is asked for

    return chart_answer(draw(report, image_format=chosen), chosen, f"score-change-{report.run_a.id}-{report.run_b.id}")
