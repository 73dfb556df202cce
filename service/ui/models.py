"""Pages: a model's page. What the registry knows of it (provider, dates, notes, its endpoints
with their data-retention terms), and per eval its history over releases: every run with its
release, dates and mean with the interval of `GET /v1/runs/{id}` (`service.ui.run_rows`), as a
table and a chart (`service.ui.history_chart`), linked to the runs page. Two downloads: the
per-item results of its dev runs as CSV, and its runs' summaries as JSON.

Reading it needs `read`, as the API's model and run routes do. Sealed runs appear as their
aggregate score only: their per-item results are never listed or downloaded, and neither is an
item some eval holds sealed (`curation.releases.visibility.sealed_anywhere`).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass

from fastapi import Request
from fastapi.responses import HTMLResponse, Response
from sqlalchemy import select as sa_select
from sqlmodel import Session, col

from curation.releases.visibility import sealed_anywhere
from schemas.evals import Eval, Split
from schemas.model_registry import Endpoint, EndpointRead, Model
from schemas.release import Release
from schemas.runs import Result, Run, RunItem
from schemas.scale import RunScale, ScaleEstimate
from service.core.problems import ProblemError
from service.evals.definitions import get_eval
from service.evals.scale import scale_if_fitted
from service.runs.model_registry import endpoint_read, list_endpoints, model_read, require_model
from service.ui.history_chart import HistoryChart, HistoryPoint, history_chart
from service.ui.pages import UiRefused, page, ui_router
from service.ui.run_rows import RunRow, newest_runs, run_rows
from service.ui.runs import reader, runs_url

router = ui_router()

RESULT_COLUMNS = ("run_id", "eval", "release", "endpoint", "run_created_at", "item_id", "occurred_at", "score", "human_success")


@dataclass(frozen=True)
class ScaleHistory:
    """The model's runs on an eval's common scale (its newest fit): each run's equated score on
    the reference release and its ability, the difficulty index of each release, and the chart
    of the equated scores by release."""

    version: int
    stale: bool
    reference_release: int
    runs: list[RunScale]
    difficulty: dict[int, ScaleEstimate]
    chart: HistoryChart | None


@dataclass(frozen=True)
class EvalHistory:
    """The model's runs on one eval, by release then run, with their chart, and the model on the
    eval's common scale when it has been fitted."""

    name: str
    rows: list[RunRow]
    chart: HistoryChart | None
    runs_url: str
    compare_url: str
    scale: ScaleHistory | None = None


def _scale_label(run: RunScale, reference: int) -> str:
    equated = run.equated_score
    return f"release {run.release}, run {run.id}: equated {equated.value:.1f} [{equated.low:.1f}, {equated.high:.1f}] on release {reference}, raw mean {run.mean_score:.1f}"


def scale_history(session: Session, model: Model, eval_name: str) -> ScaleHistory | None:
    """The model on the eval's newest scale fit, None when the eval has none or the model no run on it."""
    evaluation = get_eval(session=session, name=eval_name)
    scale = scale_if_fitted(session, evaluation) if evaluation is not None else None
    if scale is None:
        return None
    runs = sorted((run for run in scale.runs if run.model == model.name), key=lambda run: (run.release, run.id))
    if not runs:
        return None
    points = [
        HistoryPoint(run.release, run.equated_score.value / 100, run.equated_score.low / 100, run.equated_score.high / 100, "dev", _scale_label(run, scale.reference_release))
        for run in runs
    ]
    difficulty = {release.number: release.difficulty_index for release in scale.releases}
    return ScaleHistory(scale.version, scale.stale, scale.reference_release, runs, difficulty, history_chart(points))


def _model(session: Session, name: str) -> Model:
    try:
        return require_model(session=session, name=name)
    except ProblemError as exc:
        raise UiRefused(404, "No such model", f"There is no registered model called {name!r}: the Registry page lists the models.") from exc


def _label(row: RunRow) -> str:
    run, score = row.summary, row.summary.score
    shown = f"{score.mean:.3f}" + (f" [{score.low:.3f}, {score.high:.3f}]" if score.low is not None and score.high is not None else "")
    return f"release {run.release}, {run.split} run {run.id} through {run.endpoint}: mean {shown}, n = {score.n}"


def histories(session: Session, model: Model) -> list[EvalHistory]:
    """Per eval the model ran on (by name), its runs by release number then run id."""
    by_eval: dict[str, list[RunRow]] = {}
    for row in run_rows(session, newest_runs(session, model=model)):
        by_eval.setdefault(row.summary.eval, []).append(row)
    found = []
    for name, rows in sorted(by_eval.items()):
        rows.sort(key=lambda row: (row.summary.release, row.summary.id))
        points = [
            HistoryPoint(row.summary.release, row.summary.score.mean, row.summary.score.low, row.summary.score.high, row.summary.split, _label(row))
            for row in rows
            if row.summary.score.mean is not None
        ]
        links = runs_url("/ui/runs", eval=name, model=model.name), runs_url("/ui/runs/compare", eval=name, a=model.name)
        found.append(EvalHistory(name, rows, history_chart(points), *links, scale=scale_history(session, model, name)))
    return found


@router.get("/ui/models/{name:path}/results.csv")
def results_download(request: Request, name: str) -> Response:
    """The per-item results of the model's dev runs, by run then item, as CSV."""
    reader(request)
    with Session(request.app.state.engine) as session:
        model = _model(session, name)
        body = dev_results_csv(session, model)
    filename = f"{model.name.replace('/', '_')}-dev-results.csv"
    return Response(body, media_type="text/csv; charset=utf-8", headers={"Content-Disposition": f'attachment; filename="{filename}"', "Cache-Control": "no-store"})


@router.get("/ui/models/{name:path}/runs.json")
def runs_download(request: Request, name: str) -> Response:
    """The model as the registry gives it, and its runs' summaries as `GET /v1/runs/{id}` gives them, newest first."""
    reader(request)
    with Session(request.app.state.engine) as session:
        model = _model(session, name)
        summaries = [row.summary.model_dump(mode="json") for row in run_rows(session, newest_runs(session, model=model))]
        body = {"model": model_read(model).model_dump(mode="json"), "runs": summaries}
    filename = f"{model.name.replace('/', '_')}-runs.json"
    headers = {"Content-Disposition": f'attachment; filename="{filename}"', "Cache-Control": "no-store"}
    return Response(json.dumps(body, indent=2, ensure_ascii=False), media_type="application/json", headers=headers)


@router.get("/ui/models/{name:path}")
def model_page(request: Request, name: str) -> HTMLResponse:
    reader(request)
    with Session(request.app.state.engine) as session:
        model = _model(session, name)
        max_age: int = request.app.state.settings.terms_max_age_days
        endpoints: Sequence[EndpointRead] = [endpoint_read(session, each, terms_max_age_days=max_age) for each in list_endpoints(session=session, model=model.name)]
        context = {"model": model_read(model), "endpoints": endpoints, "histories": histories(session, model), "max_age_days": max_age}
        return page(request, "model.html", context)


def dev_results_csv(session: Session, model: Model) -> str:
    """Every per-item result of the model's dev runs (`RESULT_COLUMNS`), by run then item,
    leaving out items some eval holds sealed."""
    columns = (Run.id, Eval.name, Release.number, Endpoint.name, Run.created_at, Result.item_id, RunItem.occurred_at, Result.score, Result.human_success)
    rows = session.execute(
        sa_select(*(col(column) for column in columns))
        .join(Result, col(Result.run_id) == col(Run.id))
        .join(RunItem, (col(RunItem.run_id) == col(Result.run_id)) & (col(RunItem.item_id) == col(Result.item_id)))
        .join(Eval, col(Eval.id) == col(Run.eval_id))
        .join(Release, col(Release.id) == col(Run.release_id))
        .join(Endpoint, col(Endpoint.id) == col(Run.endpoint_id))
        .where(col(Run.model_id) == model.id, col(Run.split) == Split.DEV.value)
        .order_by(col(Run.id), col(Result.item_id))
    ).all()
    hidden = sealed_anywhere(session, {row[5] for row in rows})
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(RESULT_COLUMNS)
    for run_id, eval_name, release, endpoint, created_at, item_id, occurred_at, score, human in rows:
        if item_id not in hidden:
            writer.writerow([run_id, eval_name, release, endpoint, created_at.isoformat(), item_id, occurred_at.isoformat(), repr(score), "" if human is None else repr(human)])
    return out.getvalue()
