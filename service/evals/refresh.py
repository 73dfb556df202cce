"""Refreshing an eval: one new immutable release per schedule period, exactly once.

A refresh for the period holding `at` (`curation.releases.periods.period_at`):
- holds the `refresh` lock (`service.core.locks.exclusive`), waiting its turn, so concurrent
  refreshes (a second scheduler, a retried job, an external cron, a manual call) run one after
  the other: the later ones find the release the first wrote, and two evals over one source each
  see the split the other recorded for an item they share (`curation.releases.visibility`);
- refuses a period that starts after the current one (by the eval's schedule) unless asked with
  `allow_future` (audited with the release): a mistaken `--at 2030-01-01` would otherwise become
  `latest` and hold back every real period until it is withdrawn;
- returns the existing release when the period already has one (the unique `(eval,
  period_start)` constraint backs this up should two writers ever get past the lock); a period
  whose release was withdrawn gets no other;
- otherwise has `curation.releases.writer` write the release, its frozen items and the
  membership changes, and commits them in ONE transaction: a refresh killed at any point leaves
  no trace, and the next run writes the whole release.

Withdrawing a release and deleting an eval take the same lock, so neither interleaves with a
refresh of the eval.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar

from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select

from curation.releases.periods import period_at
from curation.releases.withdrawal import withdraw_release
from curation.releases.writer import PeriodOutOfOrder, release_of_period, write_release
from curation.review_backlog import waiting_for_review
from schemas.common import utcnow
from schemas.evals import ApprovalPolicy, Eval
from schemas.release import Release
from service.core.db import write_transaction
from service.core.locks import LockBusy, exclusive
from service.core.problems import ProblemError
from service.core.tracing import annotate, traced
from service.evals.definitions import delete_eval, get_eval, require_eval, seal_keys

logger = logging.getLogger("goldenset.refresh")
LOCK_WAIT_SECONDS = 600.0
LOCK_NAME = "refresh"
T = TypeVar("T")


class RefreshError(RuntimeError):
    """The refresh cannot run as asked (unknown eval, a period before the newest release's)."""


class NothingToRelease(RefreshError):
    """The first release of an eval with manual approval would hold no item (nothing of its
    sources approved yet): none is written, so the period stays open for the release its review
    makes possible."""


class FuturePeriod(RefreshError):
    """The period asked for starts after the current one, and the caller did not allow it."""


class RefreshBusy(RuntimeError):
    """Another refresh of the eval held the lock for longer than the caller would wait."""


@dataclass(frozen=True)
class RefreshOutcome:
    """The release of the period; `created` is False when it existed already."""

    release: Release
    created: bool
    eval_name: str


@traced("goldenset.refresh")
def refresh_eval(
    engine: Engine,
    *,
    name: str,
    at: datetime | None = None,
    secret_key: str,
    actor: str,
    wait_seconds: float = LOCK_WAIT_SECONDS,
    allow_future: bool = False,
) -> RefreshOutcome:
    """Write the release of the period holding `at` (default: now) unless it exists; returns it.

    Raises FuturePeriod (the period starts after the current one and `allow_future` is False),
    RefreshError (unknown eval, period earlier than the newest release's in force, a period whose
    release was withdrawn, bad schedule, unreadable seal key) and RefreshBusy (waited
    `wait_seconds` for another refresh of this eval)."""
    annotate(eval=name)
    when = at if at is not None else utcnow()
    if when.tzinfo is None:
        raise RefreshError("the refresh time needs a time zone, e.g. 2024-01-01T00:00:00Z")
    outcome = _locked(lambda: _refresh_locked(engine, name=name, at=when, secret_key=secret_key, actor=actor, allow_future=allow_future), engine, name, wait_seconds)
    annotate(release=outcome.release.number, created=outcome.created)
    return outcome


def _locked(work: Callable[[], T], engine: Engine, name: str, wait_seconds: float) -> T:
    """`work()` run holding the refresh lock, waiting up to `wait_seconds` for it (RefreshBusy)."""
    deadline = time.monotonic() + wait_seconds
    while True:
        try:
            with exclusive(engine, LOCK_NAME):
                return work()
        except LockBusy as exc:
            if time.monotonic() >= deadline:
                raise RefreshBusy(f"another refresh is running (refreshes write one at a time); try eval {name!r} again when it is done") from exc
            time.sleep(0.1)


def withdraw(engine: Engine, *, name: str, number: int, actor: str, reason: str, wait_seconds: float = LOCK_WAIT_SECONDS) -> Release:
    """Withdraw release `number` of eval `name` (`curation.releases.withdrawal`) in one unit of
    work, committed before the refresh lock is released, one at a time with refreshes. Raises
    ProblemError 404 (no such eval or release), WithdrawRefused (withdrawn already, or a newer
    release is in force) and RefreshBusy."""

    def work() -> Release:
        with write_transaction(engine) as session:
            evaluation = require_eval(session=session, name=name)
            release = session.exec(select(Release).where(Release.eval_id == evaluation.id, Release.number == number)).first()
            if release is None:
                raise ProblemError(404, "Not Found", f"eval {name!r} has no release {number}")
            withdraw_release(session, evaluation=evaluation, release=release, actor=actor, reason=reason, now=utcnow())
        logger.info("eval %s: release %s withdrawn by %s", name, number, actor)
        return release

    return _locked(work, engine, name, wait_seconds)


def remove_eval(engine: Engine, *, name: str, actor: str, wait_seconds: float = LOCK_WAIT_SECONDS) -> None:
    """Delete eval `name`, which has no release in force (`service.evals.definitions.delete_eval`),
    in one unit of work committed before the refresh lock is released, one at a time with
    refreshes. Raises ProblemError (404, 409) and RefreshBusy."""

    def work() -> None:
        with write_transaction(engine) as session:
            delete_eval(session=session, evaluation=require_eval(session=session, name=name), actor=actor)

    _locked(work, engine, name, wait_seconds)


def _refresh_locked(engine: Engine, *, name: str, at: datetime, secret_key: str, actor: str, allow_future: bool) -> RefreshOutcome:
    """The refresh, holding the lock: the whole release in one unit of work (`_refresh_in`). A
    release of the period that another writer committed first (one that got past the lock: it is
    per process group on SQLite) stands, and is returned."""
    try:
        with write_transaction(engine) as session:
            outcome = _refresh_in(session, name=name, at=at, secret_key=secret_key, actor=actor, allow_future=allow_future)
    except IntegrityError:
        existing = _release_written_meanwhile(engine, name=name, at=at)
        if existing is None:
            raise
        return RefreshOutcome(existing, False, name)
    if outcome.created:
        logger.info("eval %s: release %s for the period from %s written", name, outcome.release.number, outcome.release.period_start.isoformat())
    return outcome


def _release_written_meanwhile(engine: Engine, *, name: str, at: datetime) -> Release | None:
    """The release of the period holding `at` as stored now, if any."""
    with Session(engine) as session:
        evaluation = get_eval(session=session, name=name)
        if evaluation is None:
            return None
        return release_of_period(session, evaluation=evaluation, period=period_at(evaluation.schedule, at))


def _refresh_in(session: Session, *, name: str, at: datetime, secret_key: str, actor: str, allow_future: bool) -> RefreshOutcome:
    """In `session` (the caller's unit of work): the release of the period holding `at`, the one
    stored or, unless refused (RefreshError, FuturePeriod), one written now."""
    evaluation = get_eval(session=session, name=name)
    if evaluation is None or evaluation.id is None:
        raise RefreshError(f"eval {name!r} does not exist; create it with `goldenset eval create`")
    try:
        period = period_at(evaluation.schedule, at)
        current = period_at(evaluation.schedule, utcnow())
    except ValueError as exc:
        raise RefreshError(str(exc)) from exc
    if period.start > current.start and not allow_future:
        raise FuturePeriod(
            f"the period starting {period.start.isoformat()} is after the current one (from {current.start.isoformat()}, schedule {evaluation.schedule!r}): "
            "a release for it would become `latest` and hold back every period before it; "
            "if that is really meant, refresh again with `--allow-future` (API: `allow_future=true`)"
        )
    existing = release_of_period(session, evaluation=evaluation, period=period)
    if existing is not None and existing.withdrawn_at is not None:
        raise RefreshError(
            f"release {existing.number} of eval {name!r} for the period starting {period.start.isoformat()} was withdrawn ({existing.withdrawn_reason}); "
            "a period gets one release: the next period's refresh takes its items"
        )
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
        extra = {"allow_future": True} if period.start > current.start else None
        release = write_release(session, evaluation=evaluation, period=period, seal_key_of=keys, actor=actor, now=utcnow(), audit_details=extra)
    except PeriodOutOfOrder as exc:
        raise RefreshError(str(exc)) from exc
    if release.number == 1 and release.dev_count + release.sealed_count == 0 and evaluation.approval_policy == ApprovalPolicy.MANUAL.value:
        waiting = waiting_for_review(session, [evaluation]).get(evaluation.name, 0)
        raise NothingToRelease(
            f"eval {name!r} has no item to release yet: nothing of its sources ({', '.join(evaluation.sources)}) is approved "
            f"({waiting} item(s) wait for review), so no empty first release was written; refresh again once items are approved"
        )
    return RefreshOutcome(release, True, name)
