"""Completion probes over HTTP.

Starting a probe needs `admin`: the service itself then calls an external endpoint, with an API
key from its environment or the request, and may expose an eval's items (see `service.probes`).
Reading probes, their reports and charts needs `read`: reports carry item ids and numbers, never
item text.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Query, Request, Response

from schemas.probes import ProbeCreate, ProbeRead, ProbeStatus
from service.api.deps import SessionDep, SettingsDep
from service.api.reports import chart_response, negotiate
from service.auth import AdminPrincipal, ReadPrincipal
from service.probe_worker import ProbeWorker
from service.probes import list_probes, prepare_probe, probe_read, require_probe
from service.problems import ProblemError, problem_doc

router = APIRouter(tags=["evidence"])


@router.post("/v1/probes", status_code=202, response_model=ProbeRead, responses=problem_doc(401, 403, 404, 409, 422))
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


@router.get("/v1/probes", response_model=list[ProbeRead], responses=problem_doc(401, 403))
def probes(_: ReadPrincipal, session: SessionDep, limit: Annotated[int, Query(ge=1, le=500)] = 50) -> list[ProbeRead]:
    """Probes, newest first, with their reports when done."""
    return list_probes(session=session, limit=limit)


@router.get("/v1/probes/{probe_id}", response_model=ProbeRead, responses=problem_doc(401, 403, 404))
def probe(probe_id: int, _: ReadPrincipal, session: SessionDep) -> ProbeRead:
    """A probe's status and progress (`done` of `total` items), and its report once `done`."""
    return probe_read(session, require_probe(session=session, probe_id=probe_id))


@router.get(
    "/v1/probes/{probe_id}/chart",
    responses={200: {"content": {"image/svg+xml": {}, "image/png": {}}, "description": "The probe's chart."}, **problem_doc(401, 403, 404, 409, 422)},
    response_class=Response,
)
def probe_chart(
    probe_id: int,
    _: ReadPrincipal,
    session: SessionDep,
    format: Annotated[str | None, Query(description="svg (default) or png; or send Accept: image/png.")] = None,
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
