"""Refreshing an eval: one new immutable release per schedule period, exactly once.

A refresh for the period holding `at` (`curation.periods.period_at`):
- holds the `refresh:<eval>` lock (`service.locks.exclusive`), waiting its turn, so concurrent
  refreshes of one eval (a second scheduler, a retried job, an external cron, a manual call) run
  one after the other, and the later ones find the release the first wrote;
- returns the existing release when the period already has one (the unique `(eval,
  period_start)` constraint backs this up should two writers ever get past the lock);
- otherwise plans the rotation (`curation.rotation`) and writes the release, its frozen items and
  the membership changes in ONE transaction: a refresh killed at any point leaves no trace, and
  the next run writes the whole release.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from curation.periods import Period, period_at
from curation.releases import canonical_json, content_digest, merkle_root, released_content
from curation.rotation import Candidate, RotationPolicy, plan_rotation
from curation.sealing import is_sealed
from schemas.audit import AuditEvent
from schemas.common import utcnow
from schemas.evals import ApprovalPolicy, Eval, EvalItem, Split
from schemas.item import Item, ItemStatus
from schemas.release import Release, ReleaseItem
from schemas.source import Source
from service.db import write_session
from service.evals import get_eval, seal_key
from service.locks import LockBusy, exclusive

logger = logging.getLogger("goldenset.refresh")
LOCK_WAIT_SECONDS = 600.0
# Test hook: pause this many seconds with half a release written and not committed (to kill the process there).
PAUSE_ENV = "GOLDENSET_TEST_REFRESH_PAUSE_SECONDS"
PAUSE_MARKER = "refresh paused before commit"


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

    Raises RefreshError (unknown eval, period earlier than the newest release's, bad schedule) and
    RefreshBusy (waited `wait_seconds` for another refresh of this eval)."""
    when = at if at is not None else utcnow()
    if when.tzinfo is None:
        raise RefreshError("the refresh time needs a time zone, e.g. 2024-01-01T00:00:00Z")
    deadline = time.monotonic() + wait_seconds
    while True:
        try:
            with exclusive(engine, f"refresh:{name}"):
                return _refresh_locked(engine, name=name, at=when, secret_key=secret_key, actor=actor)
        except LockBusy as exc:
            if time.monotonic() >= deadline:
                raise RefreshBusy(f"another refresh of eval {name!r} is running; try again when it is done") from exc
            time.sleep(0.1)


def _existing(session: Session, eval_id: int, period: Period) -> Release | None:
    return session.exec(select(Release).where(Release.eval_id == eval_id, Release.period_start == period.start)).first()


def _refresh_locked(engine: Engine, *, name: str, at: datetime, secret_key: str, actor: str) -> RefreshOutcome:
    with write_session(engine) as session:
        evaluation = get_eval(session=session, name=name)
        if evaluation is None or evaluation.id is None:
            raise RefreshError(f"eval {name!r} does not exist; create it with `goldenset eval create`")
        try:
            period = period_at(evaluation.schedule, at)
        except ValueError as exc:
            raise RefreshError(str(exc)) from exc
        existing = _existing(session, evaluation.id, period)
        if existing is not None:
            return RefreshOutcome(existing, False, name)
        latest = session.exec(select(Release).where(Release.eval_id == evaluation.id).order_by(col(Release.number).desc()).limit(1)).first()
        if latest is not None and latest.period_start > period.start:
            raise RefreshError(
                f"the period starting {period.start.isoformat()} is before that of release {latest.number} ({latest.period_start.isoformat()}); releases are written in order"
            )
        try:
            release = _write_release(session, evaluation, period, number=(latest.number if latest else 0) + 1, secret_key=secret_key, actor=actor)
            session.commit()
        except IntegrityError:
            # Another writer got past the lock (it is per process group on SQLite): its release stands.
            session.rollback()
            existing = _existing(session, evaluation.id, period)
            if existing is None:
                raise
            return RefreshOutcome(existing, False, name)
    logger.info("eval %s: release %s for the period from %s written", name, release.number, period.start.isoformat())
    return RefreshOutcome(release, True, name)


def rotation_policy(evaluation: Eval, period: Period) -> RotationPolicy:
    """The eval's rotation rules for a period: the window ends at the period's start."""
    starts = [start for start in (evaluation.earliest_occurred_at, period.start - timedelta(days=evaluation.max_age_days) if evaluation.max_age_days else None) if start]
    admitted = {ItemStatus.APPROVED.value}
    if evaluation.approval_policy == ApprovalPolicy.AUTO.value:
        admitted.add(ItemStatus.UNIQUE.value)
    return RotationPolicy(
        window_start=max(starts) if starts else None,
        window_end=period.start,
        target_size=evaluation.target_size,
        admitted=frozenset(admitted),
        source_quotas=dict(evaluation.source_quotas),
    )


def _candidate(item: Item, source: str) -> Candidate:
    assert item.id is not None
    return Candidate(item_id=item.id, source=source, occurred_at=item.occurred_at, status=item.status, exposed=item.exposed_at is not None)


def _write_release(session: Session, evaluation: Eval, period: Period, *, number: int, secret_key: str, actor: str) -> Release:
    assert evaluation.id is not None
    policy = rotation_policy(evaluation, period)
    memberships = {
        membership.item_id: membership
        for membership in session.exec(select(EvalItem).where(EvalItem.eval_id == evaluation.id, col(EvalItem.retired_release).is_(None))).all()
    }
    rows: dict[int, tuple[Item, str]] = {}
    if memberships:
        query = select(Item, Source.name).join(Source, col(Source.id) == col(Item.source_id)).where(col(Item.id).in_(list(memberships)))
        rows.update((item.id, (item, source)) for item, source in session.exec(query).all() if item.id is not None)
    ever = select(EvalItem.item_id).where(EvalItem.eval_id == evaluation.id)
    fresh_query = (
        select(Item, Source.name)
        .join(Source, col(Source.id) == col(Item.source_id))
        .where(
            col(Source.name).in_(evaluation.sources),
            col(Item.status).in_(sorted(policy.admitted)),
            col(Item.exposed_at).is_(None),
            col(Item.occurred_at) < policy.window_end,
            col(Item.id).not_in(ever),
        )
    )
    if policy.window_start is not None:
        fresh_query = fresh_query.where(col(Item.occurred_at) >= policy.window_start)
    fresh_rows = {item.id: (item, source) for item, source in session.exec(fresh_query).all() if item.id is not None}
    plan = plan_rotation(policy, [_candidate(*rows[item_id]) for item_id in sorted(rows)], [_candidate(*fresh_rows[item_id]) for item_id in sorted(fresh_rows)])
    rows.update(fresh_rows)

    try:
        key = seal_key(evaluation, secret_key=secret_key)
    except ValueError as exc:
        raise RefreshError(f"the seal key of eval {evaluation.name!r} cannot be read: {exc}") from exc
    splits = {item_id: memberships[item_id].split for item_id in plan.members if item_id in memberships}
    splits.update({item_id: (Split.SEALED if is_sealed(key, item_id, evaluation.sealed_fraction) else Split.DEV).value for item_id in plan.added})
    frozen: list[ReleaseItem] = []
    for item_id in sorted(plan.members):
        item, source = rows[item_id]
        text = canonical_json(
            released_content(
                item_id=item_id,
                source=source,
                external_id=item.external_id,
                occurred_at=item.occurred_at,
                title=item.title,
                input=item.input,
                reference=item.reference,
                metadata=item.meta,
                tags=item.tags,
            )
        )
        frozen.append(ReleaseItem(release_id=0, item_id=item_id, split=splits[item_id], occurred_at=item.occurred_at, content_digest=content_digest(text), content=text))
    by_split = {split.value: [(entry.item_id, entry.content_digest) for entry in frozen if entry.split == split.value] for split in Split}
    now = utcnow()
    release = Release(
        eval_id=evaluation.id,
        number=number,
        period_start=period.start,
        period_end=period.end,
        created_at=now,
        canary=evaluation.canary,
        dev_root=merkle_root(by_split[Split.DEV.value]),
        sealed_root=merkle_root(by_split[Split.SEALED.value]),
        dev_count=len(by_split[Split.DEV.value]),
        sealed_count=len(by_split[Split.SEALED.value]),
        diff={
            "added": sorted(plan.added),
            "retired": [{"item_id": item_id, "reason": reason.value} for item_id, reason in sorted(plan.retired.items())],
            "withheld": plan.withheld,
        },
    )
    session.add(release)
    session.flush()
    assert release.id is not None
    for entry in frozen:
        entry.release_id = release.id
    half = len(frozen) // 2
    session.add_all(frozen[:half])
    session.flush()
    _pause_for_tests()
    session.add_all(frozen[half:])
    session.add_all(EvalItem(eval_id=evaluation.id, item_id=item_id, split=splits[item_id], first_release=number) for item_id in plan.added)
    for item_id, reason in plan.retired.items():
        membership = memberships[item_id]
        membership.retired_release = number
        membership.retired_at = now
        membership.retired_reason = reason.value
        session.add(membership)
    session.add(
        AuditEvent(
            actor=actor,
            action="release.create",
            object_type="eval",
            object_id=evaluation.name,
            count=len(frozen),
            details={"release": number, "period_start": period.start.isoformat(), "added": len(plan.added), "retired": len(plan.retired), "withheld": len(plan.withheld)},
        )
    )
    session.flush()
    return release


def _pause_for_tests() -> None:
    seconds = os.environ.get(PAUSE_ENV)
    if seconds:
        print(PAUSE_MARKER, file=sys.stderr, flush=True)
        time.sleep(float(seconds))
