"""Pages: contamination evidence. Completion probes with their status, figures and charts; the
temporal-split report of a model on an eval's run results or a public corpus's uploaded results,
with its chart; and, for an admin, starting a probe.

Reading needs `read` and starting a probe `admin`, as in the API (`service.evidence.routes`).
Reports carry ids, counts and scores, never item text. A started probe runs on the app's probe
worker (`service.evidence.probe_worker`), never in the request: the page answers as soon as the
probe is recorded. A report that cannot be made (no cutoff, no results, too few items) or a probe
refused (the gate, too few items) is shown on the page with what to do, not as a server error.
Charts are drawn only when their image is asked for.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import Form, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse
from pydantic import ValidationError
from sqlmodel import Session, col, select

from schemas.common import MAX_ROW_ID
from schemas.evidence import TemporalSplitReport
from schemas.probe_tests import ProbeMetric, ProbeTestChoice
from schemas.probes import ProbeCreate, ProbeStatus
from schemas.source import Source, SourceKind
from schemas.token import Scope
from service.core.problems import ProblemError
from service.evals.definitions import list_evals
from service.evidence.probe_worker import ProbeWorker
from service.evidence.probes import list_probes, prepare_probe, probe_read, require_probe
from service.evidence.temporal_split import temporal_split
from service.runs.model_registry import list_endpoints, list_models
from service.ui.pages import UiRefused, done, field_errors, need, page, ui_router

router = ui_router()

ChartFormat = Literal["svg", "png"]
MEDIA_TYPES: dict[str, str] = {"svg": "image/svg+xml", "png": "image/png"}
PROBES_SHOWN = 50
PROBE_FIELDS = (
    "eval", "release", "corpus", "model", "endpoint", "limit", "primary_metric", "remote_model", "concurrency", "timeout_seconds", "max_attempts", "test", "reference_endpoint",
)  # fmt: skip
PROBE_DEFAULTS = {"release": "latest", "primary_metric": "", "test": ProbeTestChoice.AUTO.value, "concurrency": "4", "timeout_seconds": "60", "max_attempts": "4"}


def _chart(image: bytes, image_format: str, filename: str) -> Response:
    return Response(image, media_type=MEDIA_TYPES[image_format], headers={"Cache-Control": "no-store", "Content-Disposition": f'inline; filename="{filename}.{image_format}"'})


def _format(value: str) -> ChartFormat:
    if value not in MEDIA_TYPES:
        raise UiRefused(404, "No such chart", f"charts come as .svg or .png, not .{value}")
    return value  # type: ignore[return-value]


def _choices(session: Session) -> dict[str, Any]:
    """What the forms offer: models (with their cutoffs), endpoints, evals and public corpora."""
    corpora = session.exec(select(Source.name).where(Source.kind == SourceKind.REFERENCE.value).order_by(col(Source.name))).all()
    return {
        "models": list_models(session=session),
        "endpoint_names": [endpoint.name for endpoint in list_endpoints(session=session)],
        "eval_names": [evaluation.name for evaluation in list_evals(session=session)],
        "corpus_names": list(corpora),
        "metrics": [metric.value for metric in ProbeMetric],
        "tests": [choice.value for choice in ProbeTestChoice],
    }


def _split(session: Session, model: str, eval_name: str, corpus: str) -> tuple[TemporalSplitReport | None, str]:
    """The report asked for, or why there is none."""
    if not model:
        return None, ""
    if bool(eval_name) == bool(corpus):
        return None, "Pick the results to compare: an eval's run results or a public corpus's uploaded results (one of the two)."
    try:
        return temporal_split(session=session, model_name=model, eval_name=eval_name or None, corpus_name=corpus or None), ""
    except ProblemError as exc:
        return None, f"{exc.title}: {exc.detail}"


def evidence_context(session: Session, *, model: str = "", eval_name: str = "", corpus: str = "") -> dict[str, Any]:
    choices = _choices(session)
    if model and not eval_name and not corpus and choices["eval_names"]:
        eval_name = choices["eval_names"][0]
    report, split_error = _split(session, model, eval_name, corpus)
    return {
        **choices,
        "probes": list_probes(session=session, limit=PROBES_SHOWN),
        "split": {"model": model, "eval": eval_name, "corpus": corpus},
        "report": report,
        "split_error": split_error,
        "probe_form": dict(PROBE_DEFAULTS),
        "probe_errors": {},
        "probe_refused": "",
    }


@router.get("/ui/evidence")
def evidence(request: Request, model: str = "", eval: str = "", corpus: str = "") -> HTMLResponse:
    need(request, Scope.READ, "Reading contamination evidence")
    with Session(request.app.state.engine) as session:
        return page(request, "evidence.html", evidence_context(session, model=model.strip(), eval_name=eval.strip(), corpus=corpus.strip()))


@router.get("/ui/evidence/probes/{probe_id}/chart.{image_format}")
def probe_chart(request: Request, probe_id: str, image_format: str) -> Response:
    need(request, Scope.READ, "Reading contamination evidence")
    chosen = _format(image_format)
    if not probe_id.isdigit() or int(probe_id) > MAX_ROW_ID:
        raise UiRefused(404, "No such probe", f"no probe with id {probe_id!r}")
    with Session(request.app.state.engine) as session:
        try:
            shown = probe_read(session, require_probe(session=session, probe_id=int(probe_id)))
        except ProblemError as exc:
            raise UiRefused(404, "No such probe", exc.detail) from exc
    if shown.status is not ProbeStatus.DONE or shown.report is None:
        raise UiRefused(409, "No chart yet", f"probe {probe_id} is {shown.status.value} ({shown.done} of {shown.total} items): its chart comes with its report")
    from curation.evidence.charts import probe_chart as draw  # matplotlib loads only when a chart is asked for

    return _chart(draw(shown.report, image_format=chosen), chosen, f"probe-{probe_id}")


@router.get("/ui/evidence/temporal-split/chart.{image_format}")
def temporal_split_chart(request: Request, image_format: str, model: str = "", eval: str = "", corpus: str = "") -> Response:
    need(request, Scope.READ, "Reading contamination evidence")
    chosen = _format(image_format)
    with Session(request.app.state.engine) as session:
        report, why = _split(session, model.strip(), eval.strip(), corpus.strip())
    if report is None:
        raise UiRefused(422, "No report", why or "Pick a model.")
    from curation.evidence.charts import temporal_split_chart as draw  # matplotlib loads only when a chart is asked for

    return _chart(draw(report, image_format=chosen), chosen, f"temporal-split-{report.model}".replace("/", "_"))


def probe_request(typed: dict[str, str], *, allow_exposure: bool, api_key: str) -> ProbeCreate:
    """The probe the form asks for; blank fields take the API's defaults. Raises ValidationError."""
    given: dict[str, Any] = {name: value.strip() for name, value in typed.items() if value.strip()}
    if given.get("release", "").isdigit():
        given["release"] = int(given["release"])
    if allow_exposure:
        given["allow_exposure"] = True
    if api_key:
        given["api_key"] = api_key
    return ProbeCreate.model_validate(given)


@router.post("/ui/evidence/probes", response_model=None)
def start_probe(
    request: Request,
    eval: Annotated[str, Form(max_length=128)] = "",
    release: Annotated[str, Form(max_length=32)] = "",
    corpus: Annotated[str, Form(max_length=128)] = "",
    model: Annotated[str, Form(max_length=128)] = "",
    endpoint: Annotated[str, Form(max_length=128)] = "",
    limit: Annotated[str, Form(max_length=16)] = "",
    primary_metric: Annotated[str, Form(max_length=32)] = "",
    test: Annotated[str, Form(max_length=32)] = "",
    reference_endpoint: Annotated[str, Form(max_length=128)] = "",
    remote_model: Annotated[str, Form(max_length=255)] = "",
    concurrency: Annotated[str, Form(max_length=16)] = "",
    timeout_seconds: Annotated[str, Form(max_length=16)] = "",
    max_attempts: Annotated[str, Form(max_length=16)] = "",
    allow_exposure: Annotated[str, Form(max_length=8)] = "",
    api_key: Annotated[str, Form(max_length=512)] = "",
) -> HTMLResponse | RedirectResponse:
    who = need(request, Scope.ADMIN, "Starting a probe")
    given = (eval, release, corpus, model, endpoint, limit, primary_metric, remote_model, concurrency, timeout_seconds, max_attempts, test, reference_endpoint)
    typed = dict(zip(PROBE_FIELDS, given, strict=True))
    errors: dict[str, str] = {}
    refused, status = "", 422
    try:
        data = probe_request(typed, allow_exposure=allow_exposure == "yes", api_key=api_key)
        prepared = prepare_probe(engine=request.app.state.engine, data=data, actor=who.actor, terms_max_age_days=request.app.state.settings.terms_max_age_days)
    except ValidationError as exc:
        errors = field_errors(exc)
    except ProblemError as exc:
        refused, status = f"{exc.title}: {exc.detail}", exc.status
    else:
        worker: ProbeWorker = request.app.state.probe_worker
        worker.submit(prepared)
        target = f"eval {data.eval}" if data.eval is not None else f"corpus {data.corpus}"
        started = f"Probe {prepared.probe_id} started, {prepared.test.value} test: {prepared.requests} requests for {target} go to {data.endpoint}."
        return done(f"/ui/evidence#probe-{prepared.probe_id}", started)
    with Session(request.app.state.engine) as session:
        context = evidence_context(session)
    # The typed values come back, except the API key: it is never written into a page.
    context.update(probe_form={**typed, "allow_exposure": allow_exposure}, probe_errors=errors, probe_refused=refused)
    return page(request, "evidence.html", context, status=status)
