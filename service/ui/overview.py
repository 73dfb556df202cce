"""The overview page's figures: sources and their pulls, review waiting per eval, the next
refreshes, the latest releases, and what needs someone's attention."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from apscheduler.triggers.cron import CronTrigger
from sqlmodel import Session, col, select

from curation.review_backlog import waiting_for_review
from schemas.common import utcnow
from schemas.evals import Eval
from schemas.model_registry import Endpoint
from schemas.release import Release
from schemas.source import Source, SourceStatus
from service.core.settings import Settings
from service.evals.definitions import list_evals
from service.evals.releases import sealed_reads_used
from service.runs.model_registry import endpoint_read

LATEST_RELEASES = 8
BUDGET_WARNING_SHARE = 0.8
"""A release whose sealed reads have used this share of its budget is called out."""


@dataclass
class EvalRow:
    name: str
    sources: list[str]
    pending: int
    next_refresh: datetime | None
    latest: int | None


@dataclass
class Overview:
    sources: list[Source]
    evals: list[EvalRow]
    releases: list[tuple[str, Release]]
    warnings: list[str] = field(default_factory=list)


def next_refresh(schedule: str, now: datetime) -> datetime | None:
    """When a crontab schedule (UTC) fires next; None for one that never does or does not parse."""
    try:
        fire: datetime | None = CronTrigger.from_crontab(schedule, timezone="UTC").get_next_fire_time(None, now)
    except ValueError:
        return None
    return fire


def overview(session: Session, settings: Settings) -> dict[str, object]:
    """What the overview page shows (see the module docstring), as template context."""
    now = utcnow()
    sources = list(session.exec(select(Source).order_by(col(Source.name))).all())
    evals: list[EvalRow] = []
    warnings: list[str] = []
    evaluations: list[Eval] = list_evals(session=session)
    waiting = waiting_for_review(session, evaluations)
    for evaluation in evaluations:
        assert evaluation.id is not None
        wanted = set(evaluation.sources)
        pending = waiting[evaluation.name]
        in_force = select(Release).where(Release.eval_id == evaluation.id, col(Release.withdrawn_at).is_(None))
        latest = session.exec(in_force.order_by(col(Release.number).desc())).first()
        evals.append(EvalRow(evaluation.name, sorted(wanted), pending, next_refresh(evaluation.schedule, now), latest.number if latest else None))
        if latest is not None and evaluation.sealed_read_budget > 0:
            used = sealed_reads_used(session=session, release=latest)
            if used >= BUDGET_WARNING_SHARE * evaluation.sealed_read_budget:
                warnings.append(f"eval {evaluation.name}: release {latest.number} has used {used} of its {evaluation.sealed_read_budget} sealed reads")
    for source in sources:
        if source.status == SourceStatus.AUTH_FAILED.value:
            warnings.append(f"source {source.name}: its credentials were refused, so scheduled pulls are stopped until they change")
    for endpoint in session.exec(select(Endpoint).order_by(col(Endpoint.name))).all():
        terms = endpoint_read(session, endpoint, terms_max_age_days=settings.terms_max_age_days, now=now)
        if terms.terms_age_days is None:
            warnings.append(f"endpoint {endpoint.name}: its retention terms were never checked")
        elif terms.terms_age_days > settings.terms_max_age_days:
            warnings.append(f"endpoint {endpoint.name}: its retention terms were checked {terms.terms_age_days} days ago (more than {settings.terms_max_age_days})")
    by_eval = {evaluation.id: evaluation.name for evaluation in evaluations}
    releases = [(by_eval.get(release.eval_id, "?"), release) for release in session.exec(select(Release).order_by(col(Release.created_at).desc()).limit(LATEST_RELEASES)).all()]
    return {"overview": Overview(sources, evals, releases, warnings)}
