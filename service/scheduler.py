"""The scheduler: APScheduler 3.x in one process (inside `goldenset serve`, or alone as
`goldenset scheduler`). Every job is idempotent: a pull holds a per-source lock, so a second
scheduler or a manual pull at the same moment cannot run the same source twice; curation holds
the `curation` lock, so only one process decides duplicates at a time; an eval's refresh owns its
period's release, so a second scheduler, a retry or an external cron writes nothing new.

Each eval has a cron job on its schedule. When its job is added (at start, or after a change)
and the eval has been released before but the current period has no release yet (the service was
down at the tick), the refresh runs once at once: a missed period is caught up once, not once per
missed tick. A new eval's first release waits for its schedule's next tick or an explicit
refresh (`goldenset refresh`, `POST /v1/evals/{name}/refresh`), so a mistake in its settings can
be corrected, or the eval deleted, before anything is released.

A job answers nobody: each ends in `run_in_background`, the one place that logs what stopped it
(a refused decision, `curation.refusals.Refused`, as one line with its reason; anything else with
its traceback) and never raises, so the next tick runs it again."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from functools import partial
from typing import Any

from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.schedulers.base import BaseScheduler
from apscheduler.schedulers.blocking import BlockingScheduler
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from curation.refusals import Refused
from curation.releases.periods import cron_trigger, period_at
from embedding.http_encoder import EmbeddingServiceError
from ingest.connectors.base import ConnectorError
from schemas.common import utcnow
from schemas.evals import Eval
from schemas.release import Release
from schemas.source import Source, SourceStatus
from service.core.settings import Settings
from service.core.tracing import traced
from service.dedup.runner import CurationBusy, run_curation
from service.evals.definitions import release_count
from service.evals.refresh import RefreshBusy, RefreshError, refresh_eval
from service.evals.scale import refit_stale
from service.sources.definitions import PLAIN_KINDS
from service.sources.pulls import pull_source

logger = logging.getLogger("goldenset.scheduler")
SYNC_JOB_ID = "sync-source-jobs"
CURATE_JOB_ID = "curate"
SCALE_JOB_ID = "scale"
PULL_JOB_PREFIX = "pull:"
REFRESH_JOB_PREFIX = "refresh:"
JOB_DEFAULTS: dict[str, Any] = {"coalesce": True, "max_instances": 1, "misfire_grace_time": None}


def run_in_background(job: str, work: Callable[[], object], *, retried: str = "the next run retries") -> None:
    """Run one scheduled `job` (it answers nobody) and never raise. A decision the domain refused
    (`curation.refusals.Refused`: a pull that cannot start, an embedding endpoint the gate
    refuses) is logged as one line with its reason: a warning where a person must act (403, a
    gate), information otherwise (a source busy, disabled or gone). Any other failure is logged
    with its traceback and `retried` (what happens next)."""
    try:
        work()
    except Refused as exc:
        logger.log(logging.WARNING if exc.status == 403 else logging.INFO, "%s refused (%s): %s", job, exc.reason, exc.detail)
    except Exception:
        logger.exception("%s failed; %s", job, retried)


def due_pull_sources(session: Session) -> dict[str, int]:
    """Sources the scheduler should pull, with their interval: enabled connector sources with an
    interval whose credentials have not been refused."""
    query = select(Source.name, Source.pull_interval_seconds).where(
        col(Source.enabled).is_(True),
        col(Source.pull_interval_seconds).is_not(None),
        col(Source.kind).not_in(PLAIN_KINDS),
        Source.status != SourceStatus.AUTH_FAILED.value,
    )
    return {name: int(interval) for name, interval in session.exec(query).all() if interval}


class GoldensetScheduler:
    """Keeps one interval job per pull source in step with the database, and runs them; curates
    pending candidates every `settings.curate_interval_seconds`."""

    def __init__(self, engine: Engine, settings: Settings, *, blocking: bool = False, sync_seconds: int = 60) -> None:
        self.engine = engine
        self.settings = settings
        self.sync_seconds = sync_seconds
        scheduler_type = BlockingScheduler if blocking else BackgroundScheduler
        self.scheduler: BaseScheduler = scheduler_type(job_defaults=JOB_DEFAULTS, timezone="UTC")

    def start(self) -> None:
        """Start; a blocking scheduler returns only when shut down."""
        self.scheduler.add_job(self.sync_jobs, IntervalTrigger(seconds=self.sync_seconds), id=SYNC_JOB_ID, next_run_time=utcnow(), replace_existing=True)
        # The first run comes one interval after start (or sooner, after a pull stores something).
        self.scheduler.add_job(self.curate, IntervalTrigger(seconds=self.settings.curate_interval_seconds), id=CURATE_JOB_ID, replace_existing=True)
        self.scheduler.add_job(self.refit_scales, IntervalTrigger(seconds=self.settings.scale_refit_seconds), id=SCALE_JOB_ID, replace_existing=True)
        self.scheduler.start()

    def shutdown(self) -> None:
        if self.scheduler.running:
            self.scheduler.shutdown(wait=False)

    @traced("goldenset.job.sync")
    def sync_jobs(self) -> None:
        """Add, reschedule and remove pull jobs and eval refresh jobs to match the database."""
        self.sync_refresh_jobs()
        with Session(self.engine) as session:
            wanted = due_pull_sources(session)
        for job in self.scheduler.get_jobs():
            if job.id.startswith(PULL_JOB_PREFIX) and job.id[len(PULL_JOB_PREFIX) :] not in wanted:
                job.remove()
        for name, interval in wanted.items():
            job_id = f"{PULL_JOB_PREFIX}{name}"
            job = self.scheduler.get_job(job_id)
            if job is None:
                self.scheduler.add_job(self.pull, IntervalTrigger(seconds=interval), args=[name], id=job_id, next_run_time=utcnow())
                logger.info("scheduled pulls of %s every %s s", name, interval)
            elif getattr(job.trigger, "interval", None) is not None and job.trigger.interval.total_seconds() != interval:
                job.reschedule(IntervalTrigger(seconds=interval))

    @traced("goldenset.job.curate")
    def curate(self) -> None:
        """One scheduled curation run of whatever is pending; failures are logged, never raised."""
        run_in_background("scheduled curation", self._curate)

    def _curate(self) -> None:
        try:
            run_curation(self.engine, self.settings)
        except CurationBusy as exc:
            logger.info("scheduled curation skipped: %s", exc)
        except EmbeddingServiceError as exc:
            logger.warning("scheduled curation stopped: %s; the next run tries again", exc)

    @traced("goldenset.job.scale")
    def refit_scales(self) -> None:
        """Refit the common scale of every eval whose dev runs have results newer than its fit
        (`service.evals.scale.refit_stale`); failures are logged, never raised."""
        run_in_background("scale refit", partial(refit_stale, self.engine))

    def curate_soon(self) -> None:
        """Bring the next curation run forward to now (after a pull stored something)."""
        job = self.scheduler.get_job(CURATE_JOB_ID)
        if job is not None:
            job.modify(next_run_time=utcnow())

    @traced("goldenset.job.pull")
    def pull(self, name: str) -> None:
        """One scheduled pull; failures are recorded on the source and logged, never raised."""
        run_in_background(f"scheduled pull of {name}", partial(self._pull, name))

    def _pull(self, name: str) -> None:
        try:
            summary = pull_source(engine=self.engine, name=name, secret_key=self.settings.secret_key.get_secret_value(), actor="scheduler")
        except ConnectorError:
            return  # recorded on the source by pull_source
        if self.settings.curate_after_ingest and (summary.new or summary.updated):
            self.curate_soon()

    def sync_refresh_jobs(self) -> None:
        """One cron job per eval on its schedule; a new job whose current period has no release
        runs once now (the catch-up of a missed period)."""
        now = utcnow()
        with Session(self.engine) as session:
            evals = {evaluation.name: evaluation for evaluation in session.exec(select(Eval)).all()}
            missed = {name for name, evaluation in evals.items() if _period_missed(session, evaluation, now)}
        for job in self.scheduler.get_jobs():
            if job.id.startswith(REFRESH_JOB_PREFIX) and job.id[len(REFRESH_JOB_PREFIX) :] not in evals:
                job.remove()
        for name, evaluation in evals.items():
            job_id = f"{REFRESH_JOB_PREFIX}{name}"
            try:
                trigger = cron_trigger(evaluation.schedule)
            except ValueError:
                logger.warning("eval %s has an invalid schedule %r; it is not refreshed on schedule", name, evaluation.schedule)
                continue
            job = self.scheduler.get_job(job_id)
            if job is None:
                extra: dict[str, Any] = {"next_run_time": now} if name in missed else {}
                self.scheduler.add_job(self.refresh, trigger, args=[name], id=job_id, **extra)
                logger.info("scheduled refreshes of eval %s on %r%s", name, evaluation.schedule, " (catching up the current period now)" if name in missed else "")
            elif str(job.trigger) != str(trigger) and isinstance(job.trigger, CronTrigger):
                job.reschedule(trigger)

    @traced("goldenset.job.refresh")
    def refresh(self, name: str) -> None:
        """One scheduled refresh of an eval (the release of the current period, if it has none);
        failures are logged, never raised."""
        run_in_background(f"scheduled refresh of eval {name}", partial(self._refresh, name), retried="the next tick retries")

    def _refresh(self, name: str) -> None:
        try:
            outcome = refresh_eval(self.engine, name=name, secret_key=self.settings.secret_key.get_secret_value(), actor="scheduler")
        except (RefreshBusy, RefreshError) as exc:
            logger.warning("scheduled refresh of eval %s skipped: %s", name, exc)
            return
        if outcome.created:
            logger.info("eval %s: release %s written", name, outcome.release.number)


def _period_missed(session: Session, evaluation: Eval, now: datetime) -> bool:
    """True when the eval was released before and the period holding `now` has no release yet
    (a new eval's first release waits for its schedule or an explicit refresh)."""
    try:
        period = period_at(evaluation.schedule, now)
    except ValueError:
        return False
    assert evaluation.id is not None
    if not release_count(session, evaluation.id):
        return False
    return session.exec(select(Release.id).where(Release.eval_id == evaluation.id, Release.period_start == period.start)).first() is None
