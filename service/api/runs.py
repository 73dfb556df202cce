"""Runs over HTTP: start a run of a model endpoint on a release's split, page through its items,
post per-item results, read its score; and the exposure reports of the ledger.

Starting a dev run and reading dev runs need `read`; sealed runs need `sealed` and pass the gate
(403 naming the failing condition). Every response carrying item content is audited, and carries
the eval's canary.
"""

from __future__ import annotations

import base64
import binascii
from typing import Annotated

from fastapi import APIRouter, Header, Query, Request
from sqlmodel import Session

from schemas.evals import Split
from schemas.release import Release
from schemas.runs import EvalExposure, ItemExposures, ResultRead, ResultsAccepted, ResultsPost, Run, RunCreate, RunItemPage, RunRead, RunStarted, RunSummary
from schemas.token import Scope
from service.api.deps import SessionDep, SettingsDep, WriteSessionDep
from service.audit import record_read
from service.auth import Principal, ReadPrincipal, authenticate, authorize_split
from service.evals import require_eval
from service.exposure import eval_exposure, item_exposures
from service.problems import ProblemError, problem_doc
from service.runs import list_runs, post_results, require_run, results, run_items, run_summary, start_run

router = APIRouter(tags=["runs"])
MAX_PAGE = 1000


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


def _cursor(value: str | None) -> int | None:
    if not value:
        return None
    try:
        return int(base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)).decode().removeprefix("r"))
    except (binascii.Error, ValueError, UnicodeDecodeError) as exc:
        raise ProblemError(422, "Invalid cursor", "the cursor is not one this API returned; start again without it") from exc


@router.post("/v1/evals/{name}/runs", status_code=201, response_model=RunStarted, responses=problem_doc(401, 403, 404, 422))
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
    )


@router.get("/v1/evals/{name}/runs", response_model=list[RunRead], responses=problem_doc(401, 403, 404))
def runs_of_eval(name: str, _: ReadPrincipal, session: SessionDep, limit: Annotated[int, Query(ge=1, le=1000)] = 100) -> list[RunRead]:
    """The eval's runs, newest first."""
    return list_runs(session=session, evaluation=require_eval(session=session, name=name), limit=limit)


@router.get("/v1/evals/{name}/exposure", response_model=EvalExposure, responses=problem_doc(401, 403, 404))
def exposure_of_eval(name: str, _: ReadPrincipal, session: SessionDep) -> EvalExposure:
    """Per release: which endpoints saw what share of it, under which terms, and how many of its
    items are marked exposed."""
    return eval_exposure(session=session, evaluation=require_eval(session=session, name=name))


@router.get("/v1/items/{item_id}/exposures", response_model=ItemExposures, responses=problem_doc(401, 403, 404))
def exposures_of_item(item_id: int, _: ReadPrincipal, session: SessionDep) -> ItemExposures:
    """Every run that sent the item to an endpoint, oldest first, and whether it is marked exposed."""
    return item_exposures(session=session, item_id=item_id)


@router.get("/v1/runs/{run_id}", response_model=RunSummary, responses=problem_doc(401, 403, 404))
def summary(run_id: int, _: ReadPrincipal, session: SessionDep) -> RunSummary:
    """The run with its mean score and 95% interval (`method`: `wilson` when every score is 0 or
    1, else `bootstrap`), and how many items are scored."""
    return run_summary(session=session, run=require_run(session=session, run_id=run_id))


@router.get("/v1/runs/{run_id}/items", response_model=RunItemPage, responses=problem_doc(401, 403, 404, 422))
def items(
    run_id: int, request: Request, session: SessionDep, limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 100, cursor: str | None = None
) -> RunItemPage:
    """One page of the run's items, in the order they were served. A sealed run's items need the
    `sealed` scope (the run already took its budget; each read is audited)."""
    run = require_run(session=session, run_id=run_id)
    principal = authorize_split(request, Split(run.split), run=True)
    page, last = run_items(session=session, run=run, after_id=_cursor(cursor), limit=limit)
    sealed = run.split == Split.SEALED.value
    record_read(
        request.app.state.engine,
        actor=principal.actor,
        action="run.sealed_items_read" if sealed else "run.items_read",
        endpoint=f"GET {request.url.path}",
        object_type="run",
        object_id=str(run_id),
        item_ids=[item.item_id for item in page],
    )
    next_cursor = base64.urlsafe_b64encode(f"r{last}".encode()).decode().rstrip("=") if last is not None else None
    return RunItemPage(run_id=run_id, canary=_canary(session, run), items=page, next_cursor=next_cursor)


@router.post("/v1/runs/{run_id}/results", response_model=ResultsAccepted, responses=problem_doc(401, 403, 404, 409, 422))
def add_results(run_id: int, data: ResultsPost, principal: ReadPrincipal, session: WriteSessionDep) -> ResultsAccepted:
    """Store per-item scores in [0, 1] (and optionally the human success rate) for items of the
    run: all or nothing. 422 names items not in the run; 409 names items already scored
    differently (the same score again is accepted, so a retried request is harmless). Only the
    token that started the run, or an admin, may post."""
    run = require_run(session=session, run_id=run_id)
    if principal.actor != run.actor and Scope.ADMIN.value not in principal.scopes:
        raise ProblemError(403, "Forbidden", f"run {run_id} was started by {run.actor}; only that token or an admin may post its results")
    return post_results(session=session, run=run, data=data, actor=principal.actor)


@router.get("/v1/runs/{run_id}/results", response_model=list[ResultRead], responses=problem_doc(401, 403, 404))
def list_results(run_id: int, _: ReadPrincipal, session: SessionDep) -> list[ResultRead]:
    """The run's per-item results with each item's incident date, by item id."""
    return results(session=session, run=require_run(session=session, run_id=run_id))
