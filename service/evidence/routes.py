"""Contamination evidence over HTTP: the temporal-split report of a model on an eval's run results
or on a public corpus's uploaded results, as JSON or as a chart; the public-inflation report of a
model's score on a public corpus against the private eval; the upload of per-item results on a
public corpus; and completion probes.

Reading reports and probes and uploading corpus results need `read` (as posting a run's results
does); reports carry counts, means and item ids, never item text. Starting a probe needs `admin`:
the service itself then calls an external endpoint, with an API key from its environment or the
request, and may expose an eval's items (see `service.evidence.probes`).
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Header, Query, Request, Response

from schemas.corpus_results import CorpusResultsAccepted, CorpusResultsPost
from schemas.evidence import PublicInflationReport, TemporalSplitReport
from schemas.probes import ProbeCreate, ProbeRead, ProbeStatus
from service.core.auth import AdminPrincipal, ReadPrincipal
from service.core.deps import IdPath, SessionDep, SettingsDep, WriteSessionDep
from service.core.problems import ProblemError, problem_doc
from service.evidence.probe_worker import ProbeWorker
from service.evidence.probes import list_probes, prepare_probe, probe_read, require_probe
from service.evidence.public_inflation import public_inflation
from service.evidence.temporal_split import post_corpus_results, require_corpus, temporal_split

report_router = APIRouter(tags=["evidence"])

ChartFormat = Literal["json", "svg", "png"]
MEDIA_TYPES = {"svg": "image/svg+xml", "png": "image/png"}
_CHART_RESPONSES: dict[int | str, dict[str, object]] = {
    200: {"content": {"image/svg+xml": {}, "image/png": {}}, "description": "The report as JSON, or its chart with format=svg|png (or Accept: image/svg+xml|image/png)."}
}


def negotiate(format_: ChartFormat | None, accept: str | None) -> ChartFormat:
    """`format` when given (the query's enum has refused any other); else the first of SVG or PNG
    the Accept header names; else JSON."""
    if format_ is not None:
        return format_
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


@report_router.get("/v1/reports/temporal-split", response_model=TemporalSplitReport, responses={**_CHART_RESPONSES, **problem_doc(401, 403, 404, 422)})
def temporal_split_report(
    _: ReadPrincipal,
    session: SessionDep,
    model: Annotated[str, Query(description="A registered model with a training cutoff.")],
    eval: Annotated[str | None, Query(description="An eval: its runs' results for the model.")] = None,
    corpus: Annotated[str | None, Query(description="A public corpus: the results uploaded for the model.")] = None,
    format: Annotated[ChartFormat | None, Query(description="json (default), svg or png; or send Accept: image/svg+xml or image/png.")] = None,
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


@report_router.get("/v1/reports/public-inflation", response_model=PublicInflationReport, responses={**_CHART_RESPONSES, **problem_doc(401, 403, 404, 422)})
def public_inflation_report(
    _: ReadPrincipal,
    session: SessionDep,
    eval: Annotated[str, Query(description="The private eval: every model's results in its dev runs (sealed runs never count).")],
    corpus: Annotated[str, Query(description="A registered public corpus: the results uploaded for each model.")],
    model: Annotated[str, Query(description="The registered model whose public score is in question.")],
    format: Annotated[ChartFormat | None, Query(description="json (default), svg or png; or send Accept: image/svg+xml or image/png.")] = None,
    accept: Annotated[str | None, Header()] = None,
) -> PublicInflationReport | Response:
    """Is the model's score on the public corpus higher than its score on the private eval predicts,
    judged by how every other model with results on both relates the two? The difference (observed
    minus predicted) with a bootstrap interval over items and reference models, a one-sided p-value,
    the reference models used and warnings; or its chart. Evidence about one score for one model,
    never a verdict; on a positive result, decide on the private eval."""
    chosen = negotiate(format, accept)
    report = public_inflation(session=session, eval_name=eval, corpus_name=corpus, model_name=model)
    if chosen == "json":
        return report
    from curation.evidence.charts import public_inflation_chart  # matplotlib loads only when a chart is asked for

    return chart_response(public_inflation_chart(report, image_format=chosen), chosen, f"public-inflation-{model}".replace("/", "_"))


@report_router.post("/v1/corpora/{name}/results", response_model=CorpusResultsAccepted, responses=problem_doc(401, 403, 404, 422))
def upload_corpus_results(name: str, data: CorpusResultsPost, principal: ReadPrincipal, session: WriteSessionDep) -> CorpusResultsAccepted:
    """Store a model's per-item results on a registered public corpus, items named by the corpus's
    own ids. A result for an unknown item, a repeated one, or one changing a stored score without
    `replace` is refused by position; the rest are kept."""
    corpus = require_corpus(session=session, name=name)
    return post_corpus_results(session=session, corpus=corpus, data=data, actor=principal.actor)


probe_router = APIRouter(tags=["evidence"])


@probe_router.post("/v1/probes", status_code=202, response_model=ProbeRead, responses=problem_doc(401, 403, 404, 409, 422))
def start_probe(data: ProbeCreate, principal: AdminPrincipal, request: Request, response: Response, settings: SettingsDep, session: SessionDep) -> ProbeRead:
    """Start a completion probe of `model` through `endpoint` on an eval's dev items or a public
    corpus; it runs in the background (poll `GET /v1/probes/{id}`). For an eval, the endpoint's
    terms must pass the gate unless `allow_exposure` (403 with `condition` otherwise), sealed items
    are never probed, and every item sent is recorded in the exposure ledger first."""
    prepared = prepare_probe(engine=request.app.state.engine, data=data, actor=principal.actor, terms_max_age_days=settings.terms_max_age_days)
    worker: ProbeWorker = request.app.state.probe_worker
    worker.submit(prepared)
    response.headers["Location"] = f"/v1/probes/{prepared.probe_id}"
    return probe_read(session, require_probe(session=session, probe_id=prepared.probe_id))


@probe_router.get("/v1/probes", response_model=list[ProbeRead], responses=problem_doc(401, 403))
def probes(_: ReadPrincipal, session: SessionDep, limit: Annotated[int, Query(ge=1, le=500)] = 50) -> list[ProbeRead]:
    """Probes, newest first, with their reports when done."""
    return list_probes(session=session, limit=limit)


@probe_router.get("/v1/probes/{probe_id}", response_model=ProbeRead, responses=problem_doc(401, 403, 404))
def probe(probe_id: IdPath, _: ReadPrincipal, session: SessionDep) -> ProbeRead:
    """A probe's status and progress (`done` of `total` items), and its report once `done`."""
    return probe_read(session, require_probe(session=session, probe_id=probe_id))


@probe_router.get(
    "/v1/probes/{probe_id}/chart",
    responses={200: {"content": {"image/svg+xml": {}, "image/png": {}}, "description": "The probe's chart."}, **problem_doc(401, 403, 404, 409, 422)},
    response_class=Response,
)
def probe_chart(
    probe_id: IdPath,
    _: ReadPrincipal,
    session: SessionDep,
    format: Annotated[ChartFormat | None, Query(description="svg (default) or png (json is taken as svg); or send Accept: image/png.")] = None,
    accept: Annotated[str | None, Header()] = None,
) -> Response:
    """The probe's chart: similarity of pre-cutoff items against the control band."""
    chosen = negotiate(format, accept)
    chosen = "svg" if chosen == "json" else chosen
    shown = probe_read(session, require_probe(session=session, probe_id=probe_id))
    if shown.status is ProbeStatus.FAILED:
        raise ProblemError(409, "Probe failed", shown.error or "the probe failed", status_of_probe=shown.status.value)
    if shown.status is not ProbeStatus.DONE or shown.report is None:
        progress = f"{shown.done} of {shown.total} items"
        raise ProblemError(409, "No report yet", f"probe {probe_id} is {shown.status.value} ({progress}); poll GET /v1/probes/{probe_id}", status_of_probe=shown.status.value)
    from curation.evidence.charts import probe_chart as draw  # matplotlib loads only when a chart is asked for

    return chart_response(draw(shown.report, image_format=chosen), chosen, f"probe-{probe_id}")


router = APIRouter()
router.include_router(report_router)
router.include_router(probe_router)
