"""The audit trail over HTTP (`admin`)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query

from schemas.audit import AuditPage
from service.api.deps import SessionDep
from service.audit import list_events
from service.auth import AdminPrincipal
from service.problems import ProblemError, problem_doc, require_aware

router = APIRouter(prefix="/v1/audit", tags=["audit"])
MAX_PAGE = 500


@router.get("", response_model=AuditPage, responses=problem_doc(401, 403, 422))
def audit(
    _: AdminPrincipal,
    session: SessionDep,
    actor: Annotated[str | None, Query(description="Exact actor, e.g. 'token:pipeline' or 'cli'.")] = None,
    token: Annotated[str | None, Query(description="A token's name (the same as actor 'token:<name>').")] = None,
    action: Annotated[str | None, Query(description="Exact action, or a prefix ending in '*' (e.g. 'run.*').")] = None,
    object_type: str | None = None,
    object_id: str | None = None,
    since: Annotated[datetime | None, Query(description="Events at or after this time (with zone).")] = None,
    until: Annotated[datetime | None, Query(description="Events before this time (with zone).")] = None,
    sealed: Annotated[bool, Query(description="Only events about the sealed slice (reads, sealed runs, refusals).")] = False,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 100,
    cursor: str | None = None,
) -> AuditPage:
    """Audit events, newest first, filtered; each marked `sealed` when it concerns the sealed slice.
    Pass `next_cursor` as `cursor` for the next page."""
    if actor is not None and token is not None and actor != f"token:{token}":
        raise ProblemError(422, "Invalid request", "actor and token name different actors; give one")
    return list_events(
        session=session,
        actor=actor if actor is not None else (f"token:{token}" if token is not None else None),
        action=action,
        object_type=object_type,
        object_id=object_id,
        since=require_aware(since, "since"),
        until=require_aware(until, "until"),
        sealed_only=sealed,
        limit=limit,
        cursor=cursor,
    )
