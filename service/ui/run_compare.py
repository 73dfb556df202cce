"""Pages: two models compared on one eval, on the dev items both scored
(`service.runs.comparison`): the mean paired difference (a − b) with its t interval
(`service.runs.paired`), how many items were paired, and how many each scored that the other did
not; and the paired items as CSV.

`?release=N` pairs the items both scored in dev runs of release N; without it, items pair across
releases by id and released content. Sealed runs never enter a comparison. Reading it needs
`read`, as the API's run routes do.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Query, Request
from fastapi.responses import HTMLResponse, Response
from sqlmodel import Session, col, select

from schemas.evals import Eval
from schemas.model_registry import Model
from schemas.release import Release
from service.evals.definitions import get_eval, list_evals
from service.runs.comparison import Comparison, compare_models
from service.runs.model_registry import list_models
from service.ui.pages import UiRefused, page, ui_router
from service.ui.runs import Name, reader, runs_url

router = ui_router()

PAIR_COLUMNS = ("item_id", "content_digest", "release_a", "run_a", "score_a", "release_b", "run_b", "score_b", "difference")
Number = Annotated[str, Query(max_length=9)]


@dataclass
class Asked:
    """What the form asks for, as typed, and what it found: the eval, the two models, the release."""

    eval: str
    a: str
    b: str
    release: str
    errors: dict[str, str] = field(default_factory=dict)
    evaluation: Eval | None = None
    first: Model | None = None
    second: Model | None = None
    chosen_release: Release | None = None

    @property
    def complete(self) -> bool:
        return bool(self.eval and self.a and self.b) and not self.errors

    def query(self) -> dict[str, str]:
        return {"eval": self.eval, "a": self.a, "b": self.b, "release": self.release}


def _resolve(session: Session, asked: Asked) -> None:
    """Find what `asked` names, recording in `asked.errors` what does not exist or cannot be compared."""
    models = {model.name: model for model in list_models(session=session)}
    if asked.eval:
        asked.evaluation = get_eval(session=session, name=asked.eval)
        if asked.evaluation is None:
            asked.errors["eval"] = f"there is no eval called {asked.eval!r}"
    for key in ("a", "b"):
        name = getattr(asked, key)
        if name and name not in models:
            asked.errors[key] = f"there is no registered model called {name!r}"
    asked.first, asked.second = models.get(asked.a), models.get(asked.b)
    if asked.a and asked.b and not asked.eval:
        asked.errors["eval"] = "choose the eval to compare them on"
    if asked.a and asked.a == asked.b:
        asked.errors["b"] = "choose a model other than a: a model compared with itself differs by nothing"
    if asked.release and asked.evaluation is not None:
        number = int(asked.release) if asked.release.isdigit() else None
        found = session.exec(select(Release).where(Release.eval_id == asked.evaluation.id, Release.number == number)).first() if number is not None else None
        if found is None:
            asked.errors["release"] = f"{asked.eval} has no release {asked.release!r}: leave it empty to pair items across releases"
        asked.chosen_release = found


def _comparison(session: Session, asked: Asked) -> Comparison | None:
    _resolve(session, asked)
    if not asked.complete:
        return None
    assert asked.evaluation is not None and asked.first is not None and asked.second is not None
    return compare_models(session=session, evaluation=asked.evaluation, first=asked.first, second=asked.second, release=asked.chosen_release)


def _asked(eval: str, a: str, b: str, release: str) -> Asked:
    return Asked(eval.strip(), a.strip(), b.strip(), release.strip())




@router.get("/ui/runs/compare")
def compare(request: Request, eval: Name = "", a: Name = "", b: Name = "", release: Number = "") -> HTMLResponse:
    reader(request)
    asked = _asked(eval, a, b, release)
    with Session(request.app.state.engine) as session:
        comparison = _comparison(session, asked)
        evals = list_evals(session=session)
        releases = list(session.exec(select(Release.number).where(Release.eval_id == asked.evaluation.id).order_by(col(Release.number))).all()) if asked.evaluation else []
        context = {
            "asked": asked,
            "comparison": comparison,
            "evals": [each.name for each in evals],
            "models": [each.name for each in list_models(session=session)],
            "releases": releases,
            "csv_url": runs_url("/ui/runs/compare.csv", **asked.query()),
        }
        return page(request, "run_compare.html", context, status=422 if asked.errors else 200)


@router.get("/ui/runs/compare.csv")
def compare_download(request: Request, eval: Name = "", a: Name = "", b: Name = "", release: Number = "") -> Response:
    """The paired items of the comparison the page shows, one row per item, as CSV."""
    reader(request)
    asked = _asked(eval, a, b, release)
    with Session(request.app.state.engine) as session:
        comparison = _comparison(session, asked)
    if comparison is None:
        problems = "; ".join(asked.errors.values()) or "name an eval and two models: ?eval=NAME&a=MODEL&b=MODEL"
        raise UiRefused(422, "No comparison", f"Nothing to download: {problems}.")
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(PAIR_COLUMNS)
    for pair in comparison.pairs:
        first, second = pair.first, pair.second
        row = [pair.item_id, pair.content_digest, first.release, first.run_id, repr(first.score), second.release, second.run_id, repr(second.score)]
        writer.writerow([*row, repr(pair.difference)])
    parts = [asked.eval, asked.a, "vs", asked.b, *([f"release-{asked.release}"] if asked.release else [])]
    filename = "-".join(part.replace("/", "_") for part in parts) + ".csv"
    return Response(out.getvalue(), media_type="text/csv; charset=utf-8", headers={"Content-Disposition": f'attachment; filename="{filename}"', "Cache-Control": "no-store"})
