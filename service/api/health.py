"""Liveness and metrics."""

from __future__ import annotations

from fastapi import APIRouter, Response
from prometheus_client import CONTENT_TYPE_LATEST
from sqlalchemy import text

from service.api.deps import MetricsDep, SessionDep
from service.auth import ReadPrincipal
from service.problems import ProblemError, problem_doc

router = APIRouter(tags=["system"])


@router.get("/healthz", responses=problem_doc(503))
def healthz(session: SessionDep) -> dict[str, str]:
    """Liveness and database reachability; the only endpoint without a token."""
    try:
        session.exec(text("SELECT 1"))  # type: ignore[call-overload]
    except Exception as exc:
        raise ProblemError(503, "Service Unavailable", f"the database is unreachable: {type(exc).__name__}") from exc
    return {"status": "ok", "database": "ok"}


@router.get("/metrics", response_class=Response, responses=problem_doc(401, 403))
def metrics(_: ReadPrincipal, metrics: MetricsDep) -> Response:
    """Prometheus metrics (items ingested and rejected by source, request durations); `read` scope."""
    return Response(metrics.render(), media_type=CONTENT_TYPE_LATEST)
