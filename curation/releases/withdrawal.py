"""Withdrawing a release: the way back from a release that should not have been written (a
refresh for the wrong period, a release cut before its items were reviewed).

A withdrawn release is kept: its frozen items, digests, Merkle roots, sealed reads, runs and
exposures stay, and it reads as before by number, marked withdrawn with who, when and why. It no
longer counts as the eval's `latest` nor for the order of periods, so the next refresh may write a
period before the withdrawn one (after a mistaken 2030 release, the real next month is written).

Only the eval's newest release in force can be withdrawn: the releases after it were built on its
membership changes, so they go first (newest first). Withdrawing it undoes those changes, so the
eval's membership is again what the release before it left:
- members it retired (`retired_release` is its number) are members again; the next release
  decides afresh whether they stay;
- members it added stay members with their recorded split (an item once sealed stays sealed,
  `curation.releases.visibility`), but no release in force holds them yet: the next release that
  takes them lists them as added and becomes their first release (`curation.releases.writer`);
  one that leaves them out retires them as usual.
"""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Session, col, select

from curation.refusals import Refused
from schemas.audit import AuditAction, AuditEvent
from schemas.evals import Eval, EvalItem
from schemas.release import Release


class WithdrawRefused(Refused):
    """The release cannot be withdrawn (409): it is withdrawn already (`withdrawn`), or a newer
    release is in force (`newer_in_force`)."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(reason, detail, 409)


def withdraw_release(session: Session, *, evaluation: Eval, release: Release, actor: str, reason: str, now: datetime) -> Release:
    """Mark `release` withdrawn by `actor` for `reason` at `now`, undo its membership changes (see the
    module) and audit `release.withdrawn`, in `session`, flushed and not committed. The caller
    serialises this with refreshes of the eval. Raises WithdrawRefused."""
    assert evaluation.id is not None and release.eval_id == evaluation.id
    name = f"release {release.number} of eval {evaluation.name!r}"
    if release.withdrawn_at is not None:
        raise WithdrawRefused("withdrawn", f"{name} was withdrawn already, by {release.withdrawn_by} on {release.withdrawn_at.isoformat()}: {release.withdrawn_reason}")
    newer = session.exec(
        select(Release.number)
        .where(Release.eval_id == evaluation.id, Release.number > release.number, col(Release.withdrawn_at).is_(None))
        .order_by(col(Release.number).desc())
    ).all()
    if newer:
        raise WithdrawRefused("newer_in_force", f"{name} is not the newest release in force: withdraw release {', then '.join(str(number) for number in newer)} first")
    restored = 0
    for membership in session.exec(select(EvalItem).where(EvalItem.eval_id == evaluation.id, EvalItem.retired_release == release.number)).all():
        membership.retired_release = None
        membership.retired_at = None
        membership.retired_reason = None
        session.add(membership)
        restored += 1
    pending = len(session.exec(select(EvalItem.id).where(EvalItem.eval_id == evaluation.id, EvalItem.first_release == release.number)).all())
    release.withdrawn_at = now
    release.withdrawn_by = actor
    release.withdrawn_reason = reason
    session.add(release)
    details = {"release": release.number, "period_start": release.period_start.isoformat(), "reason": reason, "members_restored": restored, "members_pending": pending}
    session.add(AuditEvent(actor=actor, action=AuditAction.RELEASE_WITHDRAWN, object_type="release", object_id=f"{evaluation.name}/{release.number}", details=details, at=now))
    session.flush()
    return release
