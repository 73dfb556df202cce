"""The service's own routes: liveness and metrics (`/healthz` needs no token; `/metrics` needs
`read`), and the audit trail (`admin`)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST
from sqlalchemy import text

from schemas.audit import AuditPage
from schemas.common import MAX_ROW_ID, Instant
from service.core.audit import list_events
from service.core.auth import AdminPrincipal, ReadPrincipal
from service.core.deps import MetricsDep, SecretKeyDep, SessionDep
from service.core.problems import ProblemError, problem_doc

system_router = APIRouter(tags=["system"])


@system_router.get("/healthz", responses=problem_doc(503))
def healthz(request: Request, session: SessionDep) -> dict[str, str]:
    """Liveness, database reachability and the process's role (`all`, `api`; docs/deploying.md, "Roles");
    the only endpoint without a token. 503 while the database is unreachable."""
    try:
        session.exec(text("SELECT 1"))  # type: ignore[call-overload]
    except Exception as exc:
        raise ProblemError(503, "Service Unavailable", f"the database is unreachable: {type(exc).__name__}") from exc
    return {"status": "ok", "database": "ok", "role": request.app.state.role}


@system_router.get("/metrics", response_class=Response, responses=problem_doc(401, 403))
def metrics(_: ReadPrincipal, metrics: MetricsDep) -> Response:
    """Prometheus metrics; `read` scope. This process's ingest counters and request durations, and
    the state of the whole system read from the database (items, pending candidates, curation
    decisions, pulls, releases, review backlog, sealed-read budget, probes, runs)."""
    return Response(metrics.render(), media_type=CONTENT_TYPE_LATEST)


audit_router = APIRouter(prefix="/v1/audit", tags=["audit"])
MAX_PAGE = 500


@audit_router.get("", response_model=AuditPage, responses=problem_doc(401, 403, 422))
def audit(
    _: AdminPrincipal,
    session: SessionDep,
    secret_key: SecretKeyDep,
    actor: Annotated[str | None, Query(description="Exact actor, e.g. 'token:pipeline' or 'cli'.")] = None,
    token: Annotated[str | None, Query(description="A token's name (the same as actor 'token:<name>'): every token that carried it.")] = None,
    token_id: Annotated[int | None, Query(ge=1, le=MAX_ROW_ID, description="One token, by id (`goldenset token list`); names are labels, ids are identities.")] = None,
    action: Annotated[str | None, Query(description="Exact action, or a prefix ending in '*' (e.g. 'run.*').")] = None,
    object_type: str | None = None,
    object_id: str | None = None,
    since: Annotated[Instant | None, Query(description="Events at or after this time (with zone).")] = None,
    until: Annotated[Instant | None, Query(description="Events before this time (with zone).")] = None,
    sealed: Annotated[bool, Query(description="Only events about the sealed slice (reads, sealed runs, refusals).")] = False,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 100,
    cursor: str | None = None,
) -> AuditPage:
    """Audit events, newest first, filtered; each marked `sealed` when it concerns the sealed slice.
    Pass `next_cursor` as `cursor` for the next page."""
    if actor is not None and token is not None and actor != f"token:{token}":
        raise ProblemError(422, "Invalid request", "actor and token name different actors; give one", reason="conflicting_filters")
    return list_events(
        session=session,
        secret_key=secret_key,
        actor=actor if actor is not None else (f"token:{token}" if token is not None else None),
        token_id=token_id,
        action=action,
        object_type=object_type,
        object_id=object_id,
        since=since,
        until=until,
        sealed_only=sealed,
        limit=limit,
        cursor=cursor,
    )


router = APIRouter()
router.include_router(system_router)
router.include_router(audit_router)
