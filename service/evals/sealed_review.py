"""The sealed review window: a reviewer with the `sealed` scope sees the sealed-bound items of an
eval's review queue in full, for `GOLDENSET_SEALED_RUN_READ_HOURS`, at the price of one unit of
the eval's sealed-read budget for its coming release.

The ledger is the audit trail, so it needs no table of its own: each opening is an
`eval.sealed_review_opened` event on the eval (details: `token_id`, null for the command line,
and `until`); a refusal is `eval.sealed_review_refused`. The openings counted against the budget
are those since the eval's latest release was written (or since the eval was created): each
release's sealed slice gets the eval's whole budget, as sealed reads of a release do. A window
belongs to the token that opened it (the command line's windows to the command line); opening
again while it is open returns it and counts nothing.

Every sealed-bound entry a window shows is audited as it is served (`item.sealed_review_read`,
one event per page, naming the item ids); `serve_queue` does that for every caller (routes, the
web UI, the command line).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, func
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from curation.releases.visibility import sealing_evals
from curation.review_backlog import taken_without_review
from schemas.audit import AuditAction, AuditEvent
from schemas.common import utcnow
from schemas.evals import Eval
from schemas.release import Release
from schemas.review import ReviewQueuePage, SealedReviewWindow
from schemas.token import Scope
from service.core.audit import record_read
from service.core.auth import Principal
from service.core.db import write_transaction
from service.evals.definitions import require_eval, seal_keys
from service.evals.refusal_audit import AuditedRefusal, refusals_audited
from service.evals.review_queue import QueueFilters, source_queue

OPENED = AuditAction.EVAL_SEALED_REVIEW_OPENED
REFUSED = AuditAction.EVAL_SEALED_REVIEW_REFUSED
READ = AuditAction.ITEM_SEALED_REVIEW_READ
LONGEST_WINDOW = timedelta(hours=24 * 30)
"""No window outlasts this (the largest `GOLDENSET_SEALED_RUN_READ_HOURS`): older openings are closed."""


class SealedReviewBudgetSpent(PermissionError):
    """The eval's sealed-read budget for its coming release is spent by sealed review windows."""

    def __init__(self, evaluation: Eval, used: int) -> None:
        self.budget = evaluation.sealed_read_budget
        self.used = used
        super().__init__(
            f"the sealed-read budget of eval {evaluation.name!r} is {evaluation.sealed_read_budget} per release and {used} sealed review window(s) were opened "
            "since its latest release; review sealed-bound items by their metadata, or wait for the next release"
        )


@dataclass(frozen=True)
class Viewer:
    """Who reads the review queue: the actor written to the audit trail, the token (None: the
    command line), whether it may see sealed content at all (the `sealed` scope, or the command
    line's `--sealed-view`), and the endpoint or command named in the audit trail."""

    actor: str
    token_id: int | None
    may_see_sealed: bool
    endpoint: str


def _budget_start(session: Session, evaluation: Eval) -> datetime:
    """When the eval's latest release in force was written, or the eval created: the budget counts
    from there (a withdrawn release is not the one the windows' reviews went into)."""
    written = session.exec(
        select(Release.created_at).where(Release.eval_id == evaluation.id, col(Release.withdrawn_at).is_(None)).order_by(col(Release.number).desc()).limit(1)
    ).first()
    return written if written is not None else evaluation.created_at


def sealed_reviews_used(*, session: Session, evaluation: Eval) -> int:
    """How many sealed review windows on the eval were opened since its latest release (or since
    it was created): what they took of the budget of its coming release."""
    since = _budget_start(session, evaluation)
    query = select(func.count()).select_from(AuditEvent).where(AuditEvent.action == OPENED, AuditEvent.object_id == evaluation.name, col(AuditEvent.at) >= since)
    return int(session.exec(query).one())


def open_sealed_reviews(*, session: Session, token_id: int | None, now: datetime | None = None) -> dict[str, datetime]:
    """The evals (by name) on which `token_id` (None: the command line) holds an open window, and
    when each closes."""
    now = now or utcnow()
    rows = session.exec(
        select(AuditEvent.object_id, AuditEvent.details).where(AuditEvent.action == OPENED, col(AuditEvent.at) >= now - LONGEST_WINDOW).order_by(col(AuditEvent.id))
    ).all()
    windows: dict[str, datetime] = {}
    for eval_name, details in rows:
        if eval_name is None or details.get("token_id") != token_id:
            continue
        until = datetime.fromisoformat(str(details.get("until")))
        if until > now and until > windows.get(eval_name, now):
            windows[eval_name] = until
    return windows


def revealed_evals(*, session: Session, token_id: int | None, now: datetime | None = None) -> set[int]:
    """The ids of the evals on which `token_id` (None: the command line) holds an open window: the
    `revealed` of `service.items.shaping`."""
    windows = open_sealed_reviews(session=session, token_id=token_id, now=now)
    return {eval_id for eval_id in session.exec(select(Eval.id).where(col(Eval.name).in_(sorted(windows)))).all() if eval_id is not None}


def revealed_to(*, session: Session, principal: Principal) -> set[int]:
    """The evals on which `principal` holds an open sealed review window (`revealed_evals`); none
    without the `sealed` scope."""
    return revealed_evals(session=session, token_id=principal.token_id) if Scope.SEALED.value in principal.scopes else set()


def sealed_review_open_until(*, session: Session, evaluation: Eval, token_id: int | None, now: datetime | None = None) -> datetime | None:
    """When the window of `token_id` (None: the command line) on the eval closes; None when it
    holds no open window."""
    return open_sealed_reviews(session=session, token_id=token_id, now=now).get(evaluation.name)


def open_sealed_review(*, session: Session, evaluation: Eval, token_id: int | None, actor: str, hours: int, now: datetime | None = None) -> SealedReviewWindow:
    """Open a window of `hours` on the eval for `token_id` (None: the command line), counting one
    unit of the eval's sealed-read budget, and audit it, in the caller's unit of work; return the
    window already open instead, counting nothing. Once the openings since the latest release
    reach the budget, counts nothing and raises `AuditedRefusal` holding SealedReviewBudgetSpent
    and its audit event: the caller runs its unit of work inside
    `service.evals.refusal_audit.refusals_audited`. The caller has checked the `sealed` scope.
    Concurrent openings are serialised on the eval (a row lock on PostgreSQL; on SQLite, a
    `write_transaction`), so the budget is never overrun."""
    now = now or utcnow()
    session.exec(select(Eval.id).where(Eval.id == evaluation.id).with_for_update()).first()
    used = sealed_reviews_used(session=session, evaluation=evaluation)
    budget = evaluation.sealed_read_budget
    until = sealed_review_open_until(session=session, evaluation=evaluation, token_id=token_id, now=now)
    if until is not None:
        return SealedReviewWindow(eval=evaluation.name, until=until, opened=False, budget=budget, used=used)
    if used >= budget:
        refused = AuditEvent(actor=actor, action=REFUSED, object_type="eval", object_id=evaluation.name, count=0, details={"token_id": token_id, "budget": budget, "used": used})
        raise AuditedRefusal(refused, SealedReviewBudgetSpent(evaluation, used))
    until = now + timedelta(hours=hours)
    details = {"token_id": token_id, "until": until.isoformat(), "budget": budget, "used": used + 1}
    session.add(AuditEvent(actor=actor, action=OPENED, object_type="eval", object_id=evaluation.name, at=now, details=details))
    return SealedReviewWindow(eval=evaluation.name, until=until, opened=True, budget=budget, used=used + 1)


def open_sealed_review_window(engine: Engine, *, evaluation: Eval, token_id: int | None, actor: str, hours: int) -> SealedReviewWindow:
    """`open_sealed_review` on the eval as it is stored now (its budget read afresh), in a unit of
    work of its own, committed when it returns. Raises SealedReviewBudgetSpent, its refusal
    audited (`refusals_audited`), and ProblemError 404 when the eval is gone. The caller holds no
    other connection (a request hands its own back first)."""
    with refusals_audited(engine), write_transaction(engine) as session:
        current = require_eval(session=session, name=evaluation.name)
        return open_sealed_review(session=session, evaluation=current, token_id=token_id, actor=actor, hours=hours)


def serve_queue(
    engine: Engine,
    *,
    viewer: Viewer,
    sources: Collection[str],
    secret_key: str,
    filters: QueueFilters,
    limit: int,
    offset: int,
    evaluation: Eval | None = None,
    narrowed: Sequence[ColumnElement[bool]] = (),
) -> ReviewQueuePage:
    """One page of the review queue of `sources` (those of `evaluation` when given, less the items
    it took without review: `taken_without_review`; `narrowed`: more conditions on `item`, a team
    view) as `viewer` may see it, audited: the entries served with content (`item.read`), and apart from them the
    sealed-bound ones that open windows of the viewer revealed, each window covering an eval that
    seals them (`item.sealed_review_read`, on the page's eval, naming the windows)."""
    with Session(engine) as session:
        windows = open_sealed_reviews(session=session, token_id=viewer.token_id) if viewer.may_see_sealed else {}
        revealed = {eval_id for eval_id in session.exec(select(Eval.id).where(col(Eval.name).in_(sorted(windows)))).all() if eval_id is not None}
        eval_name = evaluation.name if evaluation is not None else None
        taken_by = taken_without_review(evaluation) if evaluation is not None else None
        page = source_queue(
            session=session,
            sources=sources,
            secret_key=secret_key,
            filters=filters,
            limit=limit,
            offset=offset,
            revealed=revealed,
            eval_name=eval_name,
            taken_by=taken_by,
            narrowed=narrowed,
        )
    if evaluation is not None:
        page.sealed_review_until = windows.get(evaluation.name)
    shown = [entry.id for entry in page.entries if not entry.sealed]
    sealed_shown = [entry.id for entry in page.entries if entry.sealed and not entry.withheld]
    record_read(engine, actor=viewer.actor, action=AuditAction.ITEM_READ, endpoint=viewer.endpoint, object_type="item", object_id=None, item_ids=shown)
    details = {"token_id": viewer.token_id, "windows": sorted(windows)}
    object_id = evaluation.name if evaluation is not None else ",".join(sorted(windows))
    record_read(engine, actor=viewer.actor, action=READ, endpoint=viewer.endpoint, object_type="eval", object_id=object_id, item_ids=sealed_shown, details=details)
    return page


def sealed_view_covers(*, session: Session, token_id: int | None, item_id: int, source: str, secret_key: str) -> tuple[bool, list[str]]:
    """Whether the open sealed review windows of `token_id` cover a sealed-bound item: every eval
    that seals it is among them. Also returns the names of the evals that seal it, so a page can
    say where to open a window."""
    sealers = sealing_evals(session=session, item_ids=[item_id], seal_key_of=seal_keys(secret_key=secret_key)).get(item_id, set())
    names = sorted(name for name in session.exec(select(Eval.name).where(col(Eval.id).in_(sorted(sealers)))).all())
    windows = open_sealed_reviews(session=session, token_id=token_id)
    return bool(names) and all(name in windows for name in names), names


def unread_by(*, session: Session, principal: Principal, item_ids: Collection[int], secret_key: str, through_window: bool) -> set[int]:
    """Of `item_ids`, those in (or bound for) a sealed slice whose text `principal` cannot have been
    shown, so it may not approve them (`curation.review.decide`'s `unread`): all of them without the
    `sealed` scope; with it, through the API none (it reads them in full), and on the review page
    (`through_window`) those that no open sealed view of its token covers (every eval that seals
    the item among its windows), since the page shows them by metadata only until then."""
    sealers = sealing_evals(session=session, item_ids=item_ids, seal_key_of=seal_keys(secret_key=secret_key))
    if not sealers:
        return set()
    if Scope.SEALED.value not in principal.scopes:
        return set(sealers)
    if not through_window:
        return set()
    revealed = revealed_evals(session=session, token_id=principal.token_id)
    return {item_id for item_id, evals in sealers.items() if not evals <= revealed}
