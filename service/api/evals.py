"""Eval definitions and refreshes: create, list, read and change evals; write the release of a period."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response

from schemas.evals import EvalCreate, EvalRead, EvalUpdate
from schemas.release import RefreshResult
from service.api.deps import SessionDep, SettingsDep
from service.auth import AdminPrincipal, ReadPrincipal
from service.evals import create_eval, list_evals, require_eval, to_read, update_eval
from service.problems import ProblemError, problem_doc, require_aware
from service.refresh import RefreshBusy, RefreshError, refresh_eval
from service.releases import summary

router = APIRouter(prefix="/v1/evals", tags=["evals"])


@router.post("", status_code=201, response_model=EvalRead, responses=problem_doc(401, 403, 409, 422))
def create(data: EvalCreate, principal: AdminPrincipal, session: SessionDep, settings: SettingsDep) -> EvalRead:
    """Define an eval; it gets a canary GUID and a secret seal key (which never leaves the server)."""
    evaluation = create_eval(session=session, data=data, secret_key=settings.secret_key.get_secret_value(), actor=principal.actor)
    return to_read(session, evaluation)


@router.get("", response_model=list[EvalRead], responses=problem_doc(401, 403))
def list_all(_: ReadPrincipal, session: SessionDep) -> list[EvalRead]:
    """Every eval, by name, with its newest release number."""
    return [to_read(session, evaluation) for evaluation in list_evals(session=session)]


@router.get("/{name}", response_model=EvalRead, responses=problem_doc(401, 403, 404))
def get_one(name: str, _: ReadPrincipal, session: SessionDep) -> EvalRead:
    """One eval's definition."""
    return to_read(session, require_eval(session=session, name=name))


@router.patch("/{name}", response_model=EvalRead, responses=problem_doc(401, 403, 404, 409, 422))
def change(name: str, data: EvalUpdate, principal: AdminPrincipal, session: SessionDep) -> EvalRead:
    """Change an eval's settings; they apply from its next refresh."""
    evaluation = update_eval(session=session, evaluation=require_eval(session=session, name=name), data=data, actor=principal.actor)
    return to_read(session, evaluation)


@router.post("/{name}/refresh", response_model=RefreshResult, responses={**problem_doc(401, 403, 404, 409, 422), 201: {"description": "A release was written."}})
def refresh(
    name: str,
    request: Request,
    response: Response,
    principal: AdminPrincipal,
    session: SessionDep,
    settings: SettingsDep,
    at: Annotated[datetime | None, Query(description="Refresh as of this time (with zone); default now. The release is that of the period holding it.")] = None,
) -> RefreshResult:
    """Write the release of the schedule period holding `at` (201), or return the one that period
    already has (200): one release per period, however often this is called."""
    evaluation = require_eval(session=session, name=name)
    require_aware(at, "at")
    try:
        outcome = refresh_eval(request.app.state.engine, name=name, at=at, secret_key=settings.secret_key.get_secret_value(), actor=principal.actor, wait_seconds=60)
    except RefreshBusy as exc:
        raise ProblemError(409, "Conflict", str(exc), headers={"Retry-After": "10"}) from exc
    except RefreshError as exc:
        raise ProblemError(409, "Conflict", str(exc)) from exc
    response.status_code = 201 if outcome.created else 200
    return RefreshResult(created=outcome.created, release=summary(evaluation, outcome.release))
