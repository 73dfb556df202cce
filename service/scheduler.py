"""The scheduler: APScheduler 3.x in one process (inside `goldenset serve`, or alone as
`goldenset scheduler`). Every job is idempotent: a pull holds a per-source lock, so a second
scheduler or a manual pull at the same moment cannot run the same source twice; curation holds
the `curation` lock, so only one process decides duplicates at a time."""

from __future__ import annotations

import logging
from typing import Any

from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.schedulers.base import BaseScheduler
from apscheduler.schedulers.blocking import BlockingScheduler
from apscheduler.triggers.interval import IntervalTrigger
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from ingest.connectors.base import ConnectorError
from schemas.common import utcnow
from schemas.source import Source, SourceStatus
from service.curation import CurationBusy, run_curation
from service.pulls import PullRefused, pull_source
from service.settings import Settings
from service.sources import PLAIN_KINDS

logger = logging.getLogger("goldenset.scheduler")
SYNC_JOB_ID = "sync-source-jobs"
CURATE_JOB_ID = "curate"
PULL_JOB_PREFIX = "pull:"
JOB_DEFAULTS: dict[str, Any] = {"coalesce": True, "max_instances": 1, "misfire_grace_time": None}


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
        self.scheduler.start()

    def shutdown(self) -> None:
        if self.scheduler.running:
            self.scheduler.shutdown(wait=False)

    def sync_jobs(self) -> None:
        """Add, reschedule and remove pull jobs to match the sources table."""
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

    def curate(self) -> None:
        """One scheduled curation run of whatever is pending; failures are logged, never raised."""
        try:
            run_curation(self.engine, self.settings)
        except CurationBusy as exc:
            logger.info("scheduled curation skipped: %s", exc)
        except Exception:
            logger.exception("scheduled curation failed; the next run retries")

    def curate_soon(self) -> None:
        """Bring the next curation run forward to now (after a pull stored something)."""
        job = self.scheduler.get_job(CURATE_JOB_ID)
        if job is not None:
            job.modify(next_run_time=utcnow())

    def pull(self, name: str) -> None:
        """One scheduled pull; failures are recorded on the source and logged, never raised."""
        try:
            summary = pull_source(engine=self.engine, name=name, secret_key=self.settings.secret_key.get_secret_value(), actor="scheduler")
            if self.settings.curate_after_ingest and (summary.new or summary.updated):
                self.curate_soon()
        except PullRefused as exc:
            logger.info("scheduled pull of %s skipped: %s", name, exc)
        except ConnectorError:
            pass  # recorded on the source by pull_source
        except Exception:
            logger.exception("scheduled pull of %s failed", name)
