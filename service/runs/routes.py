"""Runs over HTTP: start a run of a model endpoint on a release's split, page through its items,
post per-item results, read its score; and the exposure reports of the ledger.

Starting a dev run and reading dev runs need `read`; sealed runs need `sealed` and pass the gate
(403 naming the failing condition). Every response carrying item content is audited, and carries
the eval's canary.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Header, Query, Request, Response
from sqlmodel import Session

from curation.runs.exposure import eval_exposure, item_exposures
from schemas.audit import AuditAction
from schemas.evals import Split
from schemas.model_registry import EndpointCreate, EndpointRead, EndpointUpdate, ModelCreate, ModelRead, ModelUpdate
from schemas.release import Release
from schemas.runs import EvalExposure, ItemExposures, ResultRead, ResultsAccepted, ResultsPost, Run, RunCreate, RunItemPage, RunRead, RunStarted, RunSummary
from schemas.token import Scope
from service.core.audit import ContentRead, audit_request_read
from service.core.auth import AdminPrincipal, Principal, ReadPrincipal, authenticate, authorize_split, require_any
from service.core.cursors import decode_id_cursor, encode_cursor
from service.core.deps import IdPath, SecretKeyDep, SessionDep, SettingsDep, WriteSessionDep
from service.core.problems import ProblemError, problem_doc
from service.evals.definitions import require_eval
from service.items.reads import require_item
from service.runs.model_registry import (
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
from service.runs.runs import list_runs, post_results, require_run, require_run_owner, require_sealed_rereading, results, run_items, run_summary, start_run

run_router = APIRouter(tags=["runs"])
# Which of the two a run needs depends on its split, read from the body or the run; neither opens nothing.
READ_OR_SEALED = require_any(Scope.READ, Scope.SEALED)
registry_router = APIRouter(tags=["registry"])
MAX_PAGE = 1000
CURSOR_KIND = "run-items"


def _principal_for(request: Request, split: str) -> Principal:
    """`read` for dev runs; sealed runs need `sealed` (checked by the gate, so a refusal is audited)."""
    principal = authenticate(request)
    if split == Split.DEV.value and Scope.READ.value not in principal.scopes:
        raise ProblemError(403, "Forbidden", f"a dev run needs the 'read' scope; the token has: {', '.join(sorted(principal.scopes)) or 'none'}")
    return principal


def _canary(session: Session, run: Run) -> str:
    release = session.get(Release, run.release_id)
    assert release is not None
    return release.canary


@run_router.post(
    "/v1/evals/{name}/runs",
    status_code=201,
    response_model=RunStarted,
    responses=problem_doc(401, 403, 404, 409, 422, 503),
    dependencies=[Depends(READ_OR_SEALED)],
)
def start(
    name: str,
    data: RunCreate,
    request: Request,
    settings: SettingsDep,
    idempotency_key: Annotated[str | None, Header(max_length=128, description="Retrying with the same key returns the run already started.")] = None,
) -> RunStarted:
    """Start a run of `model` through `endpoint` on a release's split (dev by default) and return
    its items. Every item is recorded against the endpoint; an endpoint that may train on inputs
    marks them exposed (they leave the eval at its next refresh). Sealed runs need the `sealed`
    scope, an endpoint that does not train on inputs with terms checked recently, and the
    release's sealed budget; otherwise 403 with `condition` naming what failed."""
    principal = _principal_for(request, data.split)
    return start_run(
        engine=request.app.state.engine,
        eval_name=name,
        data=data,
        actor=principal.actor,
        scopes=principal.scopes,
        terms_max_age_days=settings.terms_max_age_days,
        idempotency_key=idempotency_key,
        token_id=principal.token_id,
    )


@run_router.get("/v1/evals/{name}/runs", response_model=list[RunRead], responses=problem_doc(401, 403, 404))
def runs_of_eval(name: str, _: ReadPrincipal, session: SessionDep, limit: Annotated[int, Query(ge=1, le=1000)] = 100) -> list[RunRead]:
    """The eval's runs, newest first."""
    return list_runs(session=session, evaluation=require_eval(session=session, name=name), limit=limit)


@run_router.get("/v1/evals/{name}/exposure", response_model=EvalExposure, responses=problem_doc(401, 403, 404))
def exposure_of_eval(name: str, _: ReadPrincipal, session: SessionDep) -> EvalExposure:
    """Per release: which endpoints saw what share of it, under which terms, and how many of its
    items are marked exposed."""
    return eval_exposure(session=session, evaluation=require_eval(session=session, name=name))


@run_router.get("/v1/items/{item_id}/exposures", response_model=ItemExposures, responses=problem_doc(401, 403, 404))
def exposures_of_item(item_id: IdPath, _: ReadPrincipal, session: SessionDep) -> ItemExposures:
    """Every run that sent the item to an endpoint, oldest first, and whether it is marked exposed."""
    item, _source = require_item(session, item_id)
    return item_exposures(session=session, item=item)


@run_router.get("/v1/runs/{run_id}", response_model=RunSummary, responses=problem_doc(401, 403, 404))
def summary(run_id: IdPath, _: ReadPrincipal, session: SessionDep) -> RunSummary:
    """The run with its mean score and 95% interval (`method`: `wilson` when every score is 0 or
    1, else `bootstrap`), and how many items are scored."""
    return run_summary(session=session, run=require_run(session=session, run_id=run_id))


@run_router.get("/v1/runs/{run_id}/items", response_model=RunItemPage, responses=problem_doc(401, 403, 404, 422), dependencies=[Depends(READ_OR_SEALED)])
def items(
    run_id: IdPath,
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    secret_key: SecretKeyDep,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 100,
    cursor: str | None = None,
) -> RunItemPage:
    """One page of the run's items, in the order they were served. A sealed run's items need the
    `sealed` scope, and only the token that started the run (by id, not name) may page through them again, for
    `GOLDENSET_SEALED_RUN_READ_HOURS` after it started: the run took one unit of the sealed
    budget, which buys one reading, not a standing copy. Each read is audited."""
    run = require_run(session=session, run_id=run_id)
    principal = authorize_split(request, Split(run.split), run=True)
    if run.split == Split.SEALED.value:
        require_sealed_rereading(run=run, token_id=principal.token_id, window_hours=settings.sealed_run_read_hours)
    after_id = decode_id_cursor(cursor, CURSOR_KIND, secret_key=secret_key) if cursor else None
    page, last = run_items(session=session, run=run, after_id=after_id, limit=limit)
    sealed = run.split == Split.SEALED.value
    action = AuditAction.RUN_SEALED_ITEMS_READ if sealed else AuditAction.RUN_ITEMS_READ
    audit_request_read(request, ContentRead(principal.actor, action, f"GET {request.url.path}", "run", str(run_id), [item.item_id for item in page]))
    next_cursor = encode_cursor(CURSOR_KIND, last, secret_key=secret_key) if last is not None else None
    return RunItemPage(run_id=run_id, canary=_canary(session, run), items=page, next_cursor=next_cursor)


@run_router.post("/v1/runs/{run_id}/results", response_model=ResultsAccepted, responses=problem_doc(401, 403, 404, 409, 422))
def add_results(run_id: IdPath, data: ResultsPost, principal: ReadPrincipal, session: WriteSessionDep) -> ResultsAccepted:
    """Store per-item scores in [0, 1] (and optionally the human success rate) for items of the
    run: all or nothing. 422 names items not in the run; 409 names items already scored
    differently (the same score again is accepted, so a retried request is harmless). Only the
    token that started the run (by id, not name), or an admin, may post."""
    run = require_run(session=session, run_id=run_id)
    require_run_owner(run=run, token_id=principal.token_id, admin=Scope.ADMIN.value in principal.scopes)
    return post_results(session=session, run=run, data=data, actor=principal.actor, token_id=principal.token_id)


@run_router.get("/v1/runs/{run_id}/results", response_model=list[ResultRead], responses=problem_doc(401, 403, 404))
def list_results(run_id: IdPath, principal: ReadPrincipal, session: SessionDep) -> list[ResultRead]:
    """The run's per-item results with each item's incident date, by item id. A sealed run's need
    the `sealed` scope (403 otherwise): which sealed items a model fails is what nobody may
    iterate against; its mean and interval are `GET /v1/runs/{id}` for every reader."""
    run = require_run(session=session, run_id=run_id)
    if run.split == Split.SEALED.value and Scope.SEALED.value not in principal.scopes:
        detail = f"run {run_id} is a sealed run: its per-item results need the '{Scope.SEALED.value}' scope; its mean score and interval are GET /v1/runs/{run_id}"
        raise ProblemError(403, "Forbidden", detail, reason="sealed_results")
    return results(session=session, run=run)


@registry_router.get("/v1/models", response_model=list[ModelRead], responses=problem_doc(401, 403))
def models(_: ReadPrincipal, session: SessionDep) -> list[ModelRead]:
    """Every registered model, by name, with its training cutoff."""
    return [model_read(model) for model in list_models(session=session)]


@registry_router.post("/v1/models", status_code=201, response_model=ModelRead, responses=problem_doc(401, 403, 409, 422, 503))
def add_model(data: ModelCreate, principal: AdminPrincipal, session: WriteSessionDep) -> ModelRead:
    """Register a model: its name, provider, training cutoff and release dates, notes."""
    return model_read(create_model(session=session, data=data, actor=principal.actor))


@registry_router.get("/v1/models/{name:path}", response_model=ModelRead, responses=problem_doc(401, 403, 404))
def model(name: str, _: ReadPrincipal, session: SessionDep) -> ModelRead:
    """One model."""
    return model_read(require_model(session=session, name=name))


@registry_router.patch("/v1/models/{name:path}", response_model=ModelRead, responses=problem_doc(401, 403, 404, 422))
def change_model(name: str, data: ModelUpdate, principal: AdminPrincipal, session: WriteSessionDep) -> ModelRead:
    """Change a model's provider, dates or notes."""
    return model_read(update_model(session=session, model=require_model(session=session, name=name), data=data, actor=principal.actor))


@registry_router.get("/v1/endpoints", response_model=list[EndpointRead], responses=problem_doc(401, 403, 404))
def endpoints(_: ReadPrincipal, session: SessionDep, settings: SettingsDep, model: str | None = None) -> list[EndpointRead]:
    """Every registered endpoint (of `model`, when given), with its data-retention terms and
    whether a sealed run may go there now."""
    return [endpoint_read(session, endpoint, terms_max_age_days=settings.terms_max_age_days) for endpoint in list_endpoints(session=session, model=model)]


@registry_router.post("/v1/endpoints", status_code=201, response_model=EndpointRead, responses=problem_doc(401, 403, 404, 409, 422, 503))
def add_endpoint(data: EndpointCreate, principal: AdminPrincipal, session: WriteSessionDep, settings: SettingsDep) -> EndpointRead:
    """Register an endpoint of a registered model with its terms: trains on inputs (yes, no,
    unknown; unknown exposes every item sent there), retention days, terms URL, when checked."""
    endpoint = create_endpoint(session=session, data=data, actor=principal.actor)
    return endpoint_read(session, endpoint, terms_max_age_days=settings.terms_max_age_days)


@registry_router.get("/v1/endpoints/{name:path}", response_model=EndpointRead, responses=problem_doc(401, 403, 404))
def endpoint(name: str, _: ReadPrincipal, session: SessionDep, settings: SettingsDep) -> EndpointRead:
    """One endpoint with its terms."""
    return endpoint_read(session, require_endpoint(session=session, name=name), terms_max_age_days=settings.terms_max_age_days)


@registry_router.patch("/v1/endpoints/{name:path}", response_model=EndpointRead, responses=problem_doc(401, 403, 404, 422))
def change_endpoint(name: str, data: EndpointUpdate, principal: AdminPrincipal, session: WriteSessionDep, settings: SettingsDep) -> EndpointRead:
    """Change an endpoint; new terms are recorded as checked now (or at `terms_checked_at`)."""
    changed = update_endpoint(session=session, endpoint=require_endpoint(session=session, name=name), data=data, actor=principal.actor)
    return endpoint_read(session, changed, terms_max_age_days=settings.terms_max_age_days)


@registry_router.delete("/v1/endpoints/{name:path}", status_code=204, responses=problem_doc(401, 403, 404, 409))
def remove_endpoint(name: str, principal: AdminPrincipal, session: WriteSessionDep) -> Response:
    """Remove an endpoint that no run used (the ledger keeps the others)."""
    delete_endpoint(session=session, endpoint=require_endpoint(session=session, name=name), actor=principal.actor)
    return Response(status_code=204)


router = APIRouter()
router.include_router(run_router)
router.include_router(registry_router)
