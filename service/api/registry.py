"""The model registry over HTTP: models and endpoints (`read` to list, `admin` to change)."""

from __future__ import annotations

from fastapi import APIRouter, Response

from schemas.registry import EndpointCreate, EndpointRead, EndpointUpdate, ModelCreate, ModelRead, ModelUpdate
from service.api.deps import SessionDep, SettingsDep, WriteSessionDep
from service.auth import AdminPrincipal, ReadPrincipal
from service.problems import problem_doc
from service.registry import (
    create_endpoint,
    create_model,
    delete_endpoint,
    endpoint_read,
    list_endpoints,
    list_models,
    model_read,
    require_endpoint,
    require_model,
    update_endpoint,
    update_model,
)

router = APIRouter(tags=["registry"])


@router.get("/v1/models", response_model=list[ModelRead], responses=problem_doc(401, 403))
def models(_: ReadPrincipal, session: SessionDep) -> list[ModelRead]:
    """Every registered model, by name, with its training cutoff."""
    return [model_read(model) for model in list_models(session=session)]


@router.post("/v1/models", status_code=201, response_model=ModelRead, responses=problem_doc(401, 403, 409, 422))
def add_model(data: ModelCreate, principal: AdminPrincipal, session: WriteSessionDep) -> ModelRead:
    """Register a model: its name, provider, training cutoff and release dates, notes."""
    return model_read(create_model(session=session, data=data, actor=principal.actor))


@router.get("/v1/models/{name:path}", response_model=ModelRead, responses=problem_doc(401, 403, 404))
def model(name: str, _: ReadPrincipal, session: SessionDep) -> ModelRead:
    """One model."""
    return model_read(require_model(session=session, name=name))


@router.patch("/v1/models/{name:path}", response_model=ModelRead, responses=problem_doc(401, 403, 404, 422))
def change_model(name: str, data: ModelUpdate, principal: AdminPrincipal, session: WriteSessionDep) -> ModelRead:
    """Change a model's provider, dates or notes."""
    return model_read(update_model(session=session, model=require_model(session=session, name=name), data=data, actor=principal.actor))


@router.get("/v1/endpoints", response_model=list[EndpointRead], responses=problem_doc(401, 403, 404))
def endpoints(_: ReadPrincipal, session: SessionDep, settings: SettingsDep, model: str | None = None) -> list[EndpointRead]:
    """Every registered endpoint (of `model`, when given), with its data-retention terms and
    whether a sealed run may go there now."""
    return [endpoint_read(session, endpoint, terms_max_age_days=settings.terms_max_age_days) for endpoint in list_endpoints(session=session, model=model)]


@router.post("/v1/endpoints", status_code=201, response_model=EndpointRead, responses=problem_doc(401, 403, 404, 409, 422))
def add_endpoint(data: EndpointCreate, principal: AdminPrincipal, session: WriteSessionDep, settings: SettingsDep) -> EndpointRead:
    """Register an endpoint of a registered model with its terms: trains on inputs (yes, no,
    unknown; unknown exposes every item sent there), retention days, terms URL, when checked."""
    endpoint = create_endpoint(session=session, data=data, actor=principal.actor)
    return endpoint_read(session, endpoint, terms_max_age_days=settings.terms_max_age_days)


@router.get("/v1/endpoints/{name:path}", response_model=EndpointRead, responses=problem_doc(401, 403, 404))
def endpoint(name: str, _: ReadPrincipal, session: SessionDep, settings: SettingsDep) -> EndpointRead:
    """One endpoint with its terms."""
    return endpoint_read(session, require_endpoint(session=session, name=name), terms_max_age_days=settings.terms_max_age_days)


@router.patch("/v1/endpoints/{name:path}", response_model=EndpointRead, responses=problem_doc(401, 403, 404, 422))
def change_endpoint(name: str, data: EndpointUpdate, principal: AdminPrincipal, session: WriteSessionDep, settings: SettingsDep) -> EndpointRead:
    """Change an endpoint; new terms are recorded as checked now (or at `terms_checked_at`)."""
    changed = update_endpoint(session=session, endpoint=require_endpoint(session=session, name=name), data=data, actor=principal.actor)
    return endpoint_read(session, changed, terms_max_age_days=settings.terms_max_age_days)


@router.delete("/v1/endpoints/{name:path}", status_code=204, responses=problem_doc(401, 403, 404, 409))
def remove_endpoint(name: str, principal: AdminPrincipal, session: WriteSessionDep) -> Response:
    """Remove an endpoint that no run used (the ledger keeps the others)."""
    delete_endpoint(session=session, endpoint=require_endpoint(session=session, name=name), actor=principal.actor)
    return Response(status_code=204)
