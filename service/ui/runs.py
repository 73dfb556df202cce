"""Pages: runs and their scores, one section per eval (or the eval `?eval=NAME` names), newest
first, narrowed to one model by `?model=NAME`; and the listed runs as CSV.

Each run shows its model (linked to the model's page), endpoint, release, split, when it ran,
the items scored and its mean with the interval of `GET /v1/runs/{id}` (`service.ui.run_rows`),
and its status. Reading runs needs `read`, as the API's run routes do; a sealed run shows its
aggregate score only, never its items.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated
from urllib.parse import urlencode

from fastapi import Query, Request
from fastapi.responses import HTMLResponse, Response
from sqlmodel import Session

from schemas.evals import Eval
from schemas.model_registry import Model
from schemas.token import Scope
from service.core.problems import ProblemError
from service.evals.definitions import get_eval, list_evals
from service.runs.model_registry import list_models, require_model
from service.ui.pages import UiRefused, need, page, ui_router
from service.ui.run_rows import RunRow, count_runs, newest_runs, run_rows, runs_csv

router = ui_router()

PAGE_SIZE = 50
"""Runs listed on a page of one eval."""
SECTION_SIZE = 10
"""Runs listed per eval when every eval is shown (the section links to the rest)."""
MAX_DOWNLOAD = 1000
"""Runs in one CSV download (the newest); each needs its interval computed."""
Name = Annotated[str, Query(max_length=128)]
"""An eval's or a model's name in a query."""


@dataclass
class EvalSection:
    """One eval's runs on this page, with the links to the pages around it."""

    name: str
    rows: list[RunRow]
    total: int
    page: int
    pages: int
    all_url: str
    previous_url: str | None = None
    next_url: str | None = None


def reader(request: Request) -> None:
    need(request, Scope.READ, "Reading runs and their scores")


def chosen_eval(session: Session, name: str) -> Eval | None:
    """The eval named `name` (None for no name), or a 404 page naming those that exist."""
    if not name:
        return None
    found = get_eval(session=session, name=name)
    if found is None:
        names = ", ".join(evaluation.name for evaluation in list_evals(session=session)) or "none yet"
        raise UiRefused(404, "No such eval", f"There is no eval called {name!r}. Evals: {names}.")
    return found


def chosen_model(session: Session, name: str) -> Model | None:
    """The registered model named `name` (None for no name), or a 404 page."""
    if not name:
        return None
    try:
        return require_model(session=session, name=name)
    except ProblemError as exc:
        raise UiRefused(404, "No such model", f"There is no registered model called {name!r}: the Registry page lists the models.") from exc


def runs_url(path: str, **query: str | int) -> str:
    """`path` with the non-empty query values, in a stable order."""
    kept = {key: value for key, value in query.items() if value not in ("", None)}
    return path + (f"?{urlencode(kept)}" if kept else "")


def _section(session: Session, evaluation: Eval, model: Model | None, number: int, size: int) -> EvalSection:
    total = count_runs(session, evaluation=evaluation, model=model)
    pages = max(1, -(-total // size))
    number = min(max(1, number), pages)
    rows = run_rows(session, newest_runs(session, evaluation=evaluation, model=model, offset=(number - 1) * size, limit=size))
    model_name = model.name if model is not None else ""
    section = EvalSection(evaluation.name, rows, total, number, pages, runs_url("/ui/runs", eval=evaluation.name, model=model_name))
    if number > 1:
        section.previous_url = runs_url("/ui/runs", eval=evaluation.name, model=model_name, page=number - 1 if number > 2 else "")
    if number < pages:
        section.next_url = runs_url("/ui/runs", eval=evaluation.name, model=model_name, page=number + 1)
    return section


@router.get("/ui/runs")
def runs(request: Request, eval: Name = "", model: Name = "", page_number: Annotated[str, Query(alias="page", max_length=9)] = "") -> HTMLResponse:
    reader(request)
    with Session(request.app.state.engine) as session:
        evaluation, chosen = chosen_eval(session, eval.strip()), chosen_model(session, model.strip())
        if evaluation is not None:
            sections = [_section(session, evaluation, chosen, int(page_number) if page_number.isdigit() else 1, PAGE_SIZE)]
        else:
            sections = [_section(session, each, chosen, 1, SECTION_SIZE) for each in list_evals(session=session)]
            sections = [section for section in sections if section.total]
        context = {
            "sections": sections,
            "evals": [each.name for each in list_evals(session=session)],
            "models": [each.name for each in list_models(session=session)],
            "filters": {"eval": evaluation.name if evaluation else "", "model": chosen.name if chosen else ""},
            "csv_url": runs_url("/ui/runs.csv", eval=evaluation.name if evaluation else "", model=chosen.name if chosen else ""),
            "max_download": MAX_DOWNLOAD,
            "downloadable": count_runs(session, evaluation=evaluation, model=chosen),
        }
        return page(request, "runs.html", context)


@router.get("/ui/runs.csv")
def runs_download(request: Request, eval: Name = "", model: Name = "") -> Response:
    """The runs the page lists for these filters (every page of them, the newest `MAX_DOWNLOAD`), as CSV."""
    reader(request)
    with Session(request.app.state.engine) as session:
        evaluation, chosen = chosen_eval(session, eval.strip()), chosen_model(session, model.strip())
        body = runs_csv(run_rows(session, newest_runs(session, evaluation=evaluation, model=chosen, limit=MAX_DOWNLOAD)))
    filename = "-".join(["runs", *(name.replace("/", "_") for name in (eval.strip(), model.strip()) if name)]) + ".csv"
    return Response(body, media_type="text/csv; charset=utf-8", headers={"Content-Disposition": f'attachment; filename="{filename}"', "Cache-Control": "no-store"})
