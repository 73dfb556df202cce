"""The model registry: models and the endpoints that serve them, with their data-retention terms.
Every change is audited with what changed, in the caller's unit of work (a route's write session,
a command's `write_transaction`): nothing here commits."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from curation.runs.gate import judge_terms
from schemas.audit import AuditAction, AuditEvent
from schemas.common import read_model, utcnow
from schemas.model_registry import Endpoint, EndpointCreate, EndpointRead, EndpointUpdate, Model, ModelCreate, ModelRead, ModelUpdate, TrainsOnInputs
from schemas.runs import Run
from service.core.problems import ProblemError


def require_model(*, session: Session, name: str) -> Model:
    found = session.exec(select(Model).where(Model.name == name)).first()
    if found is None:
        raise ProblemError(404, "Not Found", f"model {name!r} is not registered; register it with POST /v1/models (admin scope)")
    return found


def require_endpoint(*, session: Session, name: str) -> Endpoint:
    found = session.exec(select(Endpoint).where(Endpoint.name == name)).first()
    if found is None:
        raise ProblemError(404, "Not Found", f"endpoint {name!r} is not registered; register it with POST /v1/endpoints (admin scope)")
    return found


def require_serving_endpoint(*, session: Session, model: str, endpoint: str) -> tuple[Model, Endpoint]:
    """The registered model and endpoint by name (404 for either missing), refusing (422) an
    endpoint that serves another model."""
    found_model = require_model(session=session, name=model)
    found_endpoint = require_endpoint(session=session, name=endpoint)
    if found_endpoint.model_id != found_model.id:
        detail = f"endpoint {found_endpoint.name!r} does not serve model {found_model.name!r}; register an endpoint for it"
        raise ProblemError(422, "Invalid request", detail, reason="endpoint_model_mismatch")
    return found_model, found_endpoint


def model_read(model: Model) -> ModelRead:
    """The model as the API shows it."""
    return read_model(ModelRead, model)


def endpoint_read(session: Session, endpoint: Endpoint, *, terms_max_age_days: int, now: datetime | None = None) -> EndpointRead:
    """The endpoint as the API shows it; `sealed_allowed` applies the gate's terms conditions
    (`curation.runs.gate.judge_terms`)."""
    assert endpoint.id is not None
    model = session.get(Model, endpoint.model_id)
    assert model is not None
    now = now or utcnow()
    age = (now - endpoint.terms_checked_at).days if endpoint.terms_checked_at is not None else None
    terms = judge_terms(
        endpoint=endpoint.name, trains_on_inputs=endpoint.trains_on_inputs, terms_checked_at=endpoint.terms_checked_at, now=now, terms_max_age_days=terms_max_age_days
    )
    return read_model(EndpointRead, endpoint, model=model.name, terms_age_days=age, sealed_allowed=terms.allowed)


def _audit(session: Session, actor: str, action: str, object_type: str, name: str, details: dict[str, Any]) -> None:
    session.add(AuditEvent(actor=actor, action=action, object_type=object_type, object_id=name, details=details))


def _flush_unique(session: Session, kind: str, name: str) -> None:
    """Flush a new row named `name`: 409 when a writer racing this one registered the name first
    (the caller's unit of work then rolls back)."""
    try:
        session.flush()
    except IntegrityError as exc:
        raise ProblemError(409, "Conflict", f"{kind} {name!r} is already registered") from exc


def create_model(*, session: Session, data: ModelCreate, actor: str) -> Model:
    """Register a model (409 when the name is taken); flushed, so it has its id."""
    if session.exec(select(Model.id).where(Model.name == data.name)).first() is not None:
        raise ProblemError(409, "Conflict", f"model {data.name!r} is already registered; change it with PATCH /v1/models/{data.name}")
    model = Model(**data.model_dump())
    session.add(model)
    _audit(session, actor, AuditAction.MODEL_CREATE, "model", data.name, data.model_dump(mode="json", exclude={"name"}))
    _flush_unique(session, "model", data.name)
    return model


def update_model(*, session: Session, model: Model, data: ModelUpdate, actor: str) -> Model:
    changes = data.model_dump(exclude_unset=True)
    for key, value in changes.items():
        setattr(model, key, value if key in ("training_cutoff", "release_date") else (value if value is not None else getattr(model, key)))
    model.updated_at = utcnow()
    session.add(model)
    _audit(session, actor, AuditAction.MODEL_UPDATE, "model", model.name, data.model_dump(mode="json", exclude_unset=True))
    return model


def list_models(*, session: Session) -> list[Model]:
    return list(session.exec(select(Model).order_by(col(Model.name))).all())


def create_endpoint(*, session: Session, data: EndpointCreate, actor: str) -> Endpoint:
    """Register an endpoint of a registered model; terms given as yes or no without a date count
    as checked now, by `checked_by` (default: the caller). Flushed, so it has its id; 409 when
    the name is taken."""
    model = require_model(session=session, name=data.model)
    if session.exec(select(Endpoint.id).where(Endpoint.name == data.name)).first() is not None:
        raise ProblemError(409, "Conflict", f"endpoint {data.name!r} is already registered; change it with PATCH /v1/endpoints/{data.name}")
    assert model.id is not None
    known = data.trains_on_inputs is not TrainsOnInputs.UNKNOWN
    checked_at = data.terms_checked_at or (utcnow() if known else None)
    endpoint = Endpoint(
        name=data.name,
        base_url=data.base_url,
        provider=data.provider,
        model_id=model.id,
        trains_on_inputs=data.trains_on_inputs.value,
        retention_days=data.retention_days,
        terms_url=data.terms_url,
        terms_checked_at=checked_at,
        checked_by=data.checked_by or (actor if checked_at is not None else ""),
        augmented=bool(data.augmented) or bool(data.augmentations),
        augmentations=[augmentation.value for augmentation in data.augmentations],
        logprobs=data.logprobs.value,
    )
    session.add(endpoint)
    _audit(session, actor, AuditAction.ENDPOINT_CREATE, "endpoint", data.name, data.model_dump(mode="json", exclude={"name"}))
    _flush_unique(session, "endpoint", data.name)
    return endpoint


TERMS_FIELDS = ("trains_on_inputs", "retention_days", "terms_url")


def update_endpoint(*, session: Session, endpoint: Endpoint, data: EndpointUpdate, actor: str) -> Endpoint:
    """Apply the fields set in `data`. Changing the terms without a `terms_checked_at` records
    them as checked now, by `checked_by` (default: the caller)."""
    changes = data.model_dump(exclude_unset=True)
    before = {key: getattr(endpoint, key) for key in (*TERMS_FIELDS, "terms_checked_at")}
    if "model" in changes:
        model = require_model(session=session, name=changes.pop("model"))
        assert model.id is not None
        endpoint.model_id = model.id
    for key in ("base_url", "provider", "terms_url"):
        if changes.get(key) is not None:
            setattr(endpoint, key, changes[key])
    if changes.get("trains_on_inputs") is not None:
        endpoint.trains_on_inputs = TrainsOnInputs(changes["trains_on_inputs"]).value
    if "retention_days" in changes:
        endpoint.retention_days = changes["retention_days"]
    terms_changed = any(key in changes for key in TERMS_FIELDS)
    if changes.get("terms_checked_at") is not None:
        endpoint.terms_checked_at = changes["terms_checked_at"]
        endpoint.checked_by = changes.get("checked_by") or actor
    elif terms_changed:
        endpoint.terms_checked_at = utcnow()
        endpoint.checked_by = changes.get("checked_by") or actor
    elif changes.get("checked_by") is not None:
        endpoint.checked_by = changes["checked_by"]
    _apply_augmentation(endpoint, data)
    if data.logprobs is not None:
        endpoint.logprobs = data.logprobs.value
    endpoint.updated_at = utcnow()
    session.add(endpoint)
    details: dict[str, Any] = {"changes": data.model_dump(mode="json", exclude_unset=True)}
    details["terms_before"] = {key: value.isoformat() if isinstance(value, datetime) else value for key, value in before.items()}
    _audit(session, actor, AuditAction.ENDPOINT_UPDATE, "endpoint", endpoint.name, details)
    return endpoint


def _apply_augmentation(endpoint: Endpoint, data: EndpointUpdate) -> None:
    """`augmented: false` clears the augmentations; naming augmentations sets them and makes the
    endpoint augmented; `augmented: true` alone keeps those recorded."""
    if data.augmentations is not None:
        endpoint.augmentations = [augmentation.value for augmentation in data.augmentations]
        if data.augmentations:
            endpoint.augmented = True
    if data.augmented is not None:
        endpoint.augmented = data.augmented
        if not data.augmented:
            endpoint.augmentations = []


def list_endpoints(*, session: Session, model: str | None = None) -> list[Endpoint]:
    query = select(Endpoint).order_by(col(Endpoint.name))
    if model is not None:
        query = query.where(Endpoint.model_id == require_model(session=session, name=model).id)
    return list(session.exec(query).all())


def delete_endpoint(*, session: Session, endpoint: Endpoint, actor: str) -> None:
    """Remove an endpoint no run used (409 otherwise: the ledger keeps what it saw)."""
    if session.exec(select(Run.id).where(Run.endpoint_id == endpoint.id).limit(1)).first() is not None:
        raise ProblemError(409, "Conflict", f"endpoint {endpoint.name!r} has runs in the exposure ledger and cannot be removed; mark its terms instead")
    session.delete(endpoint)
    _audit(session, actor, AuditAction.ENDPOINT_DELETE, "endpoint", endpoint.name, {})
