"""Contamination evidence over HTTP: the temporal-split report of a model on an eval's run results
or on a public corpus's uploaded results, as JSON or as a chart; and the upload of per-item
results on a public corpus.

Reading reports and uploading corpus results need `read` (as posting a run's results does).
Reports carry counts, means and item ids, never item text.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Header, Query, Response

from schemas.corpus_results import CorpusResultsAccepted, CorpusResultsPost
from schemas.evidence import TemporalSplitReport
from service.api.deps import SessionDep, WriteSessionDep
from service.auth import ReadPrincipal
from service.evidence import post_corpus_results, require_corpus, temporal_split
from service.problems import ProblemError, problem_doc

router = APIRouter(tags=["evidence"])

ChartFormat = Literal["json", "svg", "png"]
MEDIA_TYPES = {"svg": "image/svg+xml", "png": "image/png"}
_CHART_RESPONSES: dict[int | str, dict[str, object]] = {
    200: {"content": {"image/svg+xml": {}, "image/png": {}}, "description": "The report as JSON, or its chart with format=svg|png (or Accept: image/svg+xml|image/png)."}
}


def negotiate(format_: str | None, accept: str | None) -> ChartFormat:
    """`format` when given; else the first of SVG or PNG the Accept header names; else JSON."""
    if format_ is not None:
        if format_ not in ("json", "svg", "png"):
            raise ProblemError(422, "Invalid request", f"format must be json, svg or png (got {format_!r})")
        return format_  # type: ignore[return-value]
    for part in (accept or "").split(","):
        media = part.split(";", 1)[0].strip().lower()
        if media == "image/svg+xml":
            return "svg"
        if media == "image/png":
            return "png"
    return "json"


def chart_response(chart: bytes, chosen: ChartFormat, filename: str) -> Response:
    """The chart bytes with their media type, marked as varying by Accept."""
    return Response(chart, media_type=MEDIA_TYPES[chosen], headers={"Vary": "Accept", "Content-Disposition": f'inline; filename="{filename}.{chosen}"'})


@router.get("/v1/reports/temporal-split", response_model=TemporalSplitReport, responses={**_CHART_RESPONSES, **problem_doc(401, 403, 404, 422)})
def temporal_split_report(
    _: ReadPrincipal,
    session: SessionDep,
    model: Annotated[str, Query(description="A registered model with a training cutoff.")],
    eval: Annotated[str | None, Query(description="An eval: its runs' results for the model.")] = None,
    corpus: Annotated[str | None, Query(description="A public corpus: the results uploaded for the model.")] = None,
    format: Annotated[str | None, Query(description="json (default), svg or png; or send Accept: image/svg+xml or image/png.")] = None,
    accept: Annotated[str | None, Header()] = None,
) -> TemporalSplitReport | Response:
    """The model's score on items dated before its training cutoff against items dated after it:
    the difference with a 95% bootstrap interval and a permutation p-value, counts per half, the
    human success rate on both halves where known, a monthly series and warnings. Evidence about
    one score for one model, not an accusation; on a positive result, decide on the items dated
    after the cutoff."""
    chosen = negotiate(format, accept)
    report = temporal_split(session=session, model_name=model, eval_name=eval, corpus_name=corpus)
    if chosen == "json":
        return report
    from curation.evidence.charts import temporal_split_chart  # matplotlib loads only when a chart is asked for

    return chart_response(temporal_split_chart(report, image_format=chosen), chosen, f"temporal-split-{model}".replace("/", "_"))


@router.post("/v1/corpora/{name}/results", response_model=CorpusResultsAccepted, responses=problem_doc(401, 403, 404, 422))
def upload_corpus_results(name: str, data: CorpusResultsPost, principal: ReadPrincipal, session: WriteSessionDep) -> CorpusResultsAccepted:
    """Store a model's per-item results on a registered public corpus, items named by the corpus's
    own ids. A result for an unknown item, a repeated one, or one changing a stored score without
    `replace` is refused by position; the rest are kept."""
    corpus = require_corpus(session=session, name=name)
    return post_corpus_results(session=session, corpus=corpus, data=data, actor=principal.actor)
