"""Refreshing an eval: one new immutable release per schedule period, exactly once.

A refresh for the period holding `at` (`curation.releases.periods.period_at`):
- holds the `refresh` lock (`service.core.locks.exclusive`), waiting its turn, so concurrent
  refreshes (a second scheduler, a retried job, an external cron, a manual call) run one after
  the other: the later ones find the release the first wrote, and two evals over one source each
  see the split the other recorded for an item they share (`curation.releases.visibility`);
- returns the existing release when the period already has one (the unique `(eval,
  period_start)` constraint backs this up should two writers ever get past the lock);
- otherwise has `curation.releases.writer` write the release, its frozen items and the
  membership changes, and commits them in ONE transaction: a refresh killed at any point leaves
  no trace, and the next run writes the whole release.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import select

from curation.releases.periods import period_at
from curation.releases.writer import PeriodOutOfOrder, release_of_period, write_release
from schemas.common import utcnow
from schemas.evals import Eval
from schemas.release import Release
from service.core.db import write_session
from service.core.locks import LockBusy, exclusive
from service.evals.definitions import get_eval, seal_keys

logger = logging.getLogger("goldenset.refresh")
LOCK_WAIT_SECONDS = 600.0
LOCK_NAME = "refresh"


class RefreshError(RuntimeError):
    """The refresh cannot run as asked (unknown eval, a period before the newest release's)."""


class RefreshBusy(RuntimeError):
    """Another refresh of the eval held the lock for longer than the caller would wait."""


@dataclass(frozen=True)
class RefreshOutcome:
    """The release of the period; `created` is False when it existed already."""

    release: Release
    created: bool
    eval_name: str


def refresh_eval(engine: Engine, *, name: str, at: datetime | None = None, secret_key: str, actor: str, wait_seconds: float = LOCK_WAIT_SECONDS) -> RefreshOutcome:
    """Write the release of the period holding `at` (default: now) unless it exists; returns it.

    Raises RefreshError (unknown eval, period earlier than the newest release's, bad schedule,
    unreadable seal key) and RefreshBusy (waited `wait_seconds` for another refresh of this eval)."""
    when = at if at is not None else utcnow()
    if when.tzinfo is None:
        raise RefreshError("the refresh time needs a time zone, e.g. 2024-01-01T00:00:00Z")
    deadline = time.monotonic() + wait_seconds
    while True:
        try:
            with exclusive(engine, LOCK_NAME):
                return _refresh_locked(engine, name=name, at=when, secret_key=secret_key, actor=actor)
        except LockBusy as exc:
            if time.monotonic() >= deadline:
                raise RefreshBusy(f"another refresh is running (refreshes write one at a time); try eval {name!r} again when it is done") from exc
            time.sleep(0.1)


def _refresh_locked(engine: Engine, *, name: str, at: datetime, secret_key: str, actor: str) -> RefreshOutcome:
    with write_session(engine) as session:
        evaluation = get_eval(session=session, name=name)
        if evaluation is None or evaluation.id is None:
            raise RefreshError(f"eval {name!r} does not exist; create it with `goldenset eval create`")
        try:
            period = period_at(evaluation.schedule, at)
        except ValueError as exc:
            raise RefreshError(str(exc)) from exc
        existing = release_of_period(session, evaluation=evaluation, period=period)
        if existing is not None:
            return RefreshOutcome(existing, False, name)
        keys = seal_keys(secret_key=secret_key)
        for other in session.exec(select(Eval)).all():
            if other.id == evaluation.id or set(other.sources) & set(evaluation.sources):
                try:
                    keys(other)
                except ValueError as exc:
                    raise RefreshError(f"the seal key of eval {other.name!r} cannot be read ({exc}); it decides which shared items are sealed") from exc
        try:
            release = write_release(session, evaluation=evaluation, period=period, seal_key_of=keys, actor=actor)
            session.commit()
        except PeriodOutOfOrder as exc:
            raise RefreshError(str(exc)) from exc
        except IntegrityError:
            # Another writer got past the lock (it is per process group on SQLite): its release stands.
            session.rollback()
            existing = release_of_period(session, evaluation=evaluation, period=period)
            if existing is None:
                raise
            return RefreshOutcome(existing, False, name)
    logger.info("eval %s: release %s for the period from %s written", name, release.number, period.start.isoformat())
    return RefreshOutcome(release, True, name)
