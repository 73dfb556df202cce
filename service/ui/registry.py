"""Pages: the model registry. Models with their training cutoffs; endpoints with their retention
terms, how old the check of those terms is (`ok`, `stale` past `GOLDENSET_TERMS_MAX_AGE_DAYS`,
`unknown` when never checked) and what each endpoint has seen (items and sealed items in the
exposure ledger); an admin edits an endpoint's terms here.

Reading needs `read`, as the API's registry reads do; editing needs `admin`, as
`PATCH /v1/endpoints/{name}` does. A form that does not validate comes back with the values typed
and what is wrong with each, never as a server error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from pydantic import ValidationError
from sqlalchemy import case, func
from sqlalchemy import select as sa_select
from sqlmodel import Session, col

from schemas.common import utcnow
from schemas.evals import Split
from schemas.model_registry import Augmentation, EndpointRead, EndpointUpdate, LogprobSupport, ModelRead, TrainsOnInputs
from schemas.runs import RunItem
from schemas.token import Scope
from service.core.deps import WriteSessionDep
from service.core.problems import ProblemError
from service.runs.model_registry import endpoint_read, list_endpoints, list_models, model_read, require_endpoint, update_endpoint
from service.ui.pages import UiRefused, done, field_errors, need, page, ui_router

router = ui_router()

TERMS_FORM_FIELDS = ("trains_on_inputs", "retention_days", "terms_url")


@dataclass
class Exposure:
    """What an endpoint has been sent, over every run and probe in the ledger."""

    runs: int = 0
    items: int = 0
    sealed_items: int = 0


@dataclass
class EndpointRow:
    endpoint: EndpointRead
    state: str
    """`ok`, `stale` or `unknown`: the age of the terms check against the configured maximum."""
    exposure: Exposure


def terms_state(terms_age_days: int | None, max_age_days: int) -> str:
    """`unknown` (never checked), `stale` (checked more than `max_age_days` ago) or `ok`."""
    if terms_age_days is None:
        return "unknown"
    return "stale" if terms_age_days > max_age_days else "ok"


def exposure_by_endpoint(session: Session) -> dict[int, Exposure]:
    """Per endpoint id: the runs that went there, the distinct items sent and the sealed ones among them."""
    rows = session.execute(
        sa_select(
            col(RunItem.endpoint_id),
            func.count(func.distinct(RunItem.run_id)),
            func.count(func.distinct(RunItem.item_id)),
            func.count(func.distinct(case((col(RunItem.split) == Split.SEALED.value, col(RunItem.item_id))))),
        ).group_by(col(RunItem.endpoint_id))
    ).all()
    return {endpoint_id: Exposure(int(runs), int(items), int(sealed)) for endpoint_id, runs, items, sealed in rows}


def registry_context(session: Session, max_age_days: int) -> dict[str, Any]:
    now = utcnow()
    models: list[ModelRead] = [model_read(model) for model in list_models(session=session)]
    exposure = exposure_by_endpoint(session)
    rows = []
    for endpoint in list_endpoints(session=session):
        shown = endpoint_read(session, endpoint, terms_max_age_days=max_age_days, now=now)
        rows.append(EndpointRow(shown, terms_state(shown.terms_age_days, max_age_days), exposure.get(shown.id, Exposure())))
    return {
        "models": models,
        "endpoints": rows,
        "max_age_days": max_age_days,
        "choices": [choice.value for choice in TrainsOnInputs],
        "augmentations": [choice.value for choice in Augmentation],
        "logprob_choices": [choice.value for choice in LogprobSupport],
        "errors": {},
        "typed": {},
        "register": {"form": "", "typed": {}, "error": ""},
    }


def _max_age(request: Request) -> int:
    days: int = request.app.state.settings.terms_max_age_days
    return days


@router.get("/ui/registry")
def registry(request: Request) -> HTMLResponse:
    need(request, Scope.READ, "Reading the model registry")
    with Session(request.app.state.engine) as session:
        return page(request, "registry.html", registry_context(session, _max_age(request)))


def terms_update(endpoint: EndpointRead, typed: dict[str, str], checked_now: bool) -> EndpointUpdate | None:
    """The update the form asks for: only the fields that differ from the stored terms (the API
    records changed terms as checked now), and `terms_checked_at` now when the box is ticked.
    None when nothing would change. Raises ValidationError as the API's input would."""
    wanted = EndpointUpdate.model_validate(
        {
            "trains_on_inputs": typed["trains_on_inputs"],
            "retention_days": typed["retention_days"].strip() or None,
            "terms_url": typed["terms_url"].strip(),
        }
    )
    current = {"trains_on_inputs": endpoint.trains_on_inputs, "retention_days": endpoint.retention_days, "terms_url": endpoint.terms_url}
    changes: dict[str, Any] = {key: getattr(wanted, key) for key in TERMS_FORM_FIELDS if getattr(wanted, key) != current[key]}
    if checked_now:
        changes["terms_checked_at"] = utcnow()
    if not changes:
        return None
    return EndpointUpdate.model_validate(changes)


@router.post("/ui/registry/endpoints/{name}/terms", response_model=None)
def save_terms(
    request: Request,
    name: str,
    session: WriteSessionDep,
    trains_on_inputs: Annotated[str, Form(max_length=16)] = "",
    retention_days: Annotated[str, Form(max_length=16)] = "",
    terms_url: Annotated[str, Form(max_length=4096)] = "",
    checked_now: Annotated[str, Form(max_length=8)] = "",
) -> HTMLResponse | RedirectResponse:
    who = need(request, Scope.ADMIN, "Editing an endpoint's terms")
    typed = {"trains_on_inputs": trains_on_inputs, "retention_days": retention_days, "terms_url": terms_url, "checked_now": checked_now}
    max_age = _max_age(request)
    try:
        endpoint = require_endpoint(session=session, name=name)
    except ProblemError as exc:
        raise UiRefused(404, "No such endpoint", exc.detail) from exc
    try:
        update = terms_update(endpoint_read(session, endpoint, terms_max_age_days=max_age), typed, checked_now == "yes")
    except ValidationError as exc:
        context = registry_context(session, max_age)
        context.update(errors={name: field_errors(exc)}, typed={name: typed})
        return page(request, "registry.html", context, status=422)
    if update is None:
        return done(f"/ui/registry#endpoint-{name}", f"Nothing changed on endpoint {name}: its terms already read so.")
    update_endpoint(session=session, endpoint=endpoint, data=update, actor=who.actor)
    return done(f"/ui/registry#endpoint-{name}", f"Saved the terms of endpoint {name}; they count as checked now, by {who.actor}.")
