"""Registering models and endpoints from `/ui/registry` (admin): the forms of `POST /v1/models` and
`POST /v1/endpoints`, read into the same models (`ModelCreate`, `EndpointCreate`) and written by
the same functions, so a page refuses what the API refuses (a taken name, an unregistered model, a
URL that is no http(s) URL), naming the field, and the registry page comes back with the form as
typed. Both are audited with the signed-in person; an endpoint's terms given as yes or no count
as checked now, by them.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from pydantic import ValidationError
from sqlmodel import Session

from schemas.model_registry import EndpointCreate, ModelCreate
from schemas.token import Scope
from service.core.deps import WriteSessionDep
from service.core.problems import ProblemError
from service.runs.model_registry import create_endpoint, create_model
from service.ui.pages import done, field_errors, need, page, ui_router
from service.ui.refusals import Refusal, shows_refusal
from service.ui.registry import registry_context

router = ui_router()
Short = Annotated[str, Form(max_length=2048)]


def _registry_again(request: Request, form: str, typed: dict[str, Any], refusal: Refusal) -> HTMLResponse:
    with Session(request.app.state.engine) as session:
        context = registry_context(session, request.app.state.settings.terms_max_age_days)
    context["register"] = {"form": form, "typed": typed, "error": refusal.detail}
    return page(request, "registry.html", context, status=refusal.status)


def _refused(exc: ValidationError, what: str) -> ProblemError:
    return ProblemError(422, f"{what} not registered", "; ".join(f"{field.replace('_', ' ')}: {message}" for field, message in field_errors(exc).items()))


@router.post("/ui/registry/models", response_model=None)
def register_model(
    request: Request,
    session: WriteSessionDep,
    name: Short = "",
    provider: Short = "",
    training_cutoff: Short = "",
    release_date: Short = "",
    notes: Short = "",
) -> RedirectResponse:
    who = need(request, Scope.ADMIN, "Registering a model")
    typed = {"name": name, "provider": provider, "training_cutoff": training_cutoff, "release_date": release_date, "notes": notes}
    shows_refusal(request, lambda refusal: _registry_again(request, "model", typed, refusal))
    try:
        data = ModelCreate.model_validate({key: value.strip() for key, value in typed.items() if value.strip() or key in ("name",)})
    except ValidationError as exc:
        raise _refused(exc, "Model") from exc
    create_model(session=session, data=data, actor=who.actor)
    return done("/ui/registry", f"Registered model {data.name}.")


@router.post("/ui/registry/endpoints", response_model=None)
def register_endpoint(
    request: Request,
    session: WriteSessionDep,
    name: Short = "",
    model: Short = "",
    base_url: Short = "",
    provider: Short = "",
    trains_on_inputs: Short = "unknown",
    retention_days: Short = "",
    terms_url: Short = "",
    augmentations: Annotated[list[str] | None, Form()] = None,
    logprobs: Annotated[str, Form(max_length=24)] = "none",
) -> RedirectResponse:
    who = need(request, Scope.ADMIN, "Registering an endpoint")
    typed: dict[str, Any] = {
        "name": name,
        "model": model,
        "base_url": base_url,
        "provider": provider,
        "trains_on_inputs": trains_on_inputs,
        "retention_days": retention_days,
        "terms_url": terms_url,
        "augmentations": augmentations or [],
        "logprobs": logprobs,
    }
    shows_refusal(request, lambda refusal: _registry_again(request, "endpoint", typed, refusal))
    values: dict[str, Any] = {key: value.strip() for key, value in typed.items() if isinstance(value, str) and (value.strip() or key in ("name", "model", "base_url"))}
    values["augmentations"] = typed["augmentations"]
    try:
        data = EndpointCreate.model_validate(values)
    except ValidationError as exc:
        raise _refused(exc, "Endpoint") from exc
    create_endpoint(session=session, data=data, actor=who.actor)
    return done(f"/ui/registry#endpoint-{data.name}", f"Registered endpoint {data.name} of model {data.model}.")
