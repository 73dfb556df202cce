"""The review queue page, `/ui/evals/{name}/review`: one item at a time, in full, beside its nearest
earlier items with the differing words marked, with approve, reject (with a reason), edit, skip,
back and undo, keyboard shortcuts, "n of N", filters, and bulk decisions over the queue's list.

The queue is `service.evals.sealed_review.serve_queue`, which audits what it serves and shows
sealed-bound items by metadata only unless the person opened a sealed review window (the
`sealed` scope; audited and budgeted) from this page. Its neighbours come from
`service.ui.review_neighbours` (stored vectors: no page runs the embedding model; never a
sealed-bound item); a withheld item gets no neighbours at all.

Every decision is taken where it is pressed, in the request's unit of work, and answered with a
redirect (303) to the queue at the same place, so the next item slides in; a refused one with a
redirect there whose notice says why (`service.ui.refusals`). "Undo" undoes this person's newest
decision.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from typing import Annotated, Any
from urllib.parse import urlencode, urlsplit

from fastapi import Depends, Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from sqlmodel import Session, col, select

from curation.review import UNDONE, decide, review_batch, undo_review, undoable
from curation.team_review import withdraw_vote
from curation.team_rounds import is_team_review
from schemas.audit import AuditAction, AuditEvent
from schemas.common import utcnow
from schemas.evals import Eval
from schemas.item import Item
from schemas.lifecycle import ItemAction
from schemas.review import Decision, ReviewDecision, ReviewQueueEntry, ReviewQueuePage
from schemas.team_review import QueueView
from schemas.token import Scope
from service.core.audit import record_read
from service.core.deps import SessionDep, WriteSessionDep, hand_back_connection
from service.core.problems import ProblemError
from service.evals.definitions import get_eval, require_eval
from service.evals.review_queue import QueueFilters
from service.evals.sealed_review import SealedReviewBudgetSpent, Viewer, open_sealed_review_window, serve_queue, unread_by
from service.evals.team_views import view_conditions
from service.ui.pages import UiRefused, done, need, page, principal, secret_key, ui_router
from service.ui.refusals import shows_refusal
from service.ui.review_neighbours import NEIGHBOUR_FLOOR, PREPARED, Neighbours, neighbours_of, prepare_next
from service.ui.review_team import VIEWS, TeamPlace, said, team_batch, team_decision, vote_still_open, votes_shown

router = ui_router()
LIST_SIZE = 25
MAX_BULK = 200
MAX_TEXT = 200
MAX_POSITION = 10_000_000
DECISIONS = (ItemAction.APPROVE, ItemAction.REJECT, UNDONE, AuditAction.REVIEW_VOTE, AuditAction.REVIEW_VOTE_WITHDRAWN)


@dataclass(frozen=True)
class Place:
    """Where a person is in a queue: its filters and the position (1-based) of the item shown."""

    source: str | None = None
    after: date | None = None
    before: date | None = None
    text: str | None = None
    at: int = 1
    view: str | None = None

    def query(self, **changes: Any) -> str:
        values = {"source": self.source, "after": self.after, "before": self.before, "text": self.text, "view": self.view, "at": self.at, **changes}
        return urlencode({key: str(value) for key, value in values.items() if value not in (None, "")})

    def filters(self) -> QueueFilters:
        return QueueFilters(
            occurred_after=datetime.combine(self.after, time(), UTC) if self.after else None,
            occurred_before=datetime.combine(self.before, time(), UTC) if self.before else None,
            text=self.text or None,
        )


def _eval(session: Session, name: str) -> Eval:
    try:
        return require_eval(session=session, name=name)
    except ProblemError as exc:
        raise UiRefused(404, "No such eval", exc.detail) from exc


def _url(name: str, place: Place, **changes: Any) -> str:
    return f"/ui/evals/{name}/review?{place.query(**changes)}"


def _last_decision(session: Session, actor: str) -> AuditEvent | None:
    """This person's newest review decision, when it can still be undone (what "Undo" undoes): a
    decision not undone, its item not moved since (a source change that reopened it, an edit, a
    ruling), and no release has acted on it; or a team-review vote still open."""
    newest = session.exec(
        select(AuditEvent).where(AuditEvent.actor == actor, col(AuditEvent.action).in_(DECISIONS), AuditEvent.object_type == "item").order_by(col(AuditEvent.id).desc()).limit(1)
    ).first()
    if newest is None or newest.action in (UNDONE, AuditAction.REVIEW_VOTE_WITHDRAWN):
        return None
    if newest.action == AuditAction.REVIEW_VOTE:
        return newest if vote_still_open(session, newest) else None
    return newest if undoable(session, newest) else None


def _links(metadata: dict[str, Any]) -> list[str]:
    """An item's web links from its metadata (http and https only)."""
    links = []
    for value in metadata.values():
        if isinstance(value, str) and urlsplit(value).scheme in ("http", "https") and urlsplit(value).netloc:
            links.append(value)
    return links[:5]


@router.get("/ui/evals/{name}/review")
def review_page(
    request: Request,
    name: str,
    source: Annotated[str | None, Query(max_length=200)] = None,
    after: Annotated[str, Query(max_length=40)] = "",
    before: Annotated[str, Query(max_length=40)] = "",
    text: Annotated[str, Query(max_length=MAX_TEXT)] = "",
    at: Annotated[int, Query(ge=1, le=MAX_POSITION)] = 1,
    view: Annotated[QueueView | None, Query()] = None,
) -> HTMLResponse:
    who = need(request, Scope.CURATE, "Reviewing items")
    key = secret_key(request)
    engine = request.app.state.engine
    now = utcnow()
    with Session(engine) as session:
        evaluation = _eval(session, name)
        team = TeamPlace.of(session, evaluation, view, who) if is_team_review(evaluation) else None
    if source and source not in evaluation.sources:
        raise UiRefused(422, "No such source", f"eval {name!r} takes {', '.join(evaluation.sources)}, not {source!r}.")
    place = _place(source or "", after, before, text, at, strict=True, view=team.view.value if team else None)
    viewer = Viewer(actor=who.actor, token_id=who.token_id, may_see_sealed=Scope.SEALED.value in who.scopes, endpoint=f"GET /ui/evals/{name}/review")
    offset = (at - 1) // LIST_SIZE * LIST_SIZE
    sources = [source] if source else evaluation.sources
    narrowed = view_conditions(evaluation, team.view, actor=who.actor, now=now) if team else []
    queue = serve_queue(
        engine, viewer=viewer, sources=sources, secret_key=key, filters=place.filters(), limit=LIST_SIZE, offset=offset, evaluation=evaluation, narrowed=narrowed
    )
    if queue.total and at > queue.total:
        return RedirectResponse(_url(name, place, at=queue.total), status_code=303)  # type: ignore[return-value]
    current = next((entry for entry in queue.entries if entry.position == at), None)
    neighbours = Neighbours([])
    links: list[str] = []
    with Session(engine) as session:
        if current is not None and not current.withheld:
            neighbours = neighbours_of(request, session, current, key)
            prepare_next(request, [entry.id for entry in queue.entries if entry.position > at and not entry.withheld][:PREPARED])
            links = _links(current.metadata)
        last = _last_decision(session, who.actor)
        last_item = int(last.object_id) if last is not None and last.object_id and last.object_id.isdigit() and session.get(Item, int(last.object_id)) is not None else None
        votes = votes_shown(session, evaluation, current.id, team, who.actor) if team is not None and current is not None else []
    if neighbours.shown:
        shown = [neighbour.item.id for neighbour in neighbours.shown if neighbour.item.id is not None]
        object_id = str(current.id) if current else None
        record_read(engine, actor=who.actor, action=AuditAction.ITEM_SIMILAR_READ, endpoint=viewer.endpoint, object_type="item", object_id=object_id, item_ids=shown)
    context = _context(evaluation, queue, place, current, neighbours, links, last, last_item, request)
    return page(request, "review.html", context | {"team": team, "votes": votes})


def _context(
    evaluation: Eval,
    queue: ReviewQueuePage,
    place: Place,
    current: ReviewQueueEntry | None,
    neighbours: Neighbours,
    links: list[str],
    last: AuditEvent | None,
    last_item: int | None,
    request: Request,
) -> dict[str, Any]:
    name = evaluation.name
    return {
        "evaluation": evaluation,
        "queue": queue,
        "place": place,
        "current": current,
        "neighbours": neighbours,
        "neighbour_floor": NEIGHBOUR_FLOOR,
        "links": links,
        "last": last,
        "last_item": last_item,
        "here": _url(name, place),
        "previous": _url(name, place, at=place.at - 1) if place.at > 1 else None,
        "following": _url(name, place, at=place.at + 1) if place.at < queue.total else None,
        "edit_url": f"/ui/items/{current.id}/edit?{urlencode({'next': _url(name, place)})}" if current is not None else None,
        "at_url": lambda position: _url(name, place, at=max(int(position), 1)),
        "may_open_sealed": Scope.SEALED.value in principal(request).scopes,
        "window_until": queue.sealed_review_until,
    }


def _place(source: str, after: str, before: str, text: str, at: int, *, strict: bool = False, view: str | None = None) -> Place:
    """The place named by a page's address or a form's hidden fields. `strict`: a date that does
    not read as YYYY-MM-DD is a 422 page (an address typed by a person); otherwise it is dropped."""

    def day(value: str) -> date | None:
        try:
            return date.fromisoformat(value.strip()) if value.strip() else None
        except ValueError:
            if strict:
                raise UiRefused(422, "Not a date", f"{value!r} is not a date: write it as YYYY-MM-DD.") from None
            return None

    return Place(source or None, day(after), day(before), text.strip() or None, max(at, 1), view if view in VIEWS else None)


PlaceForm = Annotated[str, Form(max_length=MAX_TEXT)]


def _form_place(
    source: PlaceForm = "", after: PlaceForm = "", before: PlaceForm = "", text: PlaceForm = "", at: Annotated[int, Form(ge=1, le=MAX_POSITION)] = 1, view: PlaceForm = ""
) -> Place:
    """The queue's place carried by an action's hidden fields, to return to after it."""
    return _place(source, after, before, text, at, view=view or None)


FormPlace = Annotated[Place, Depends(_form_place)]


@router.post("/ui/evals/{name}/review/decide")
def decide_one(
    request: Request,
    name: str,
    item_id: Annotated[int, Form(ge=1)],
    decision: Annotated[Decision, Form()],
    place: FormPlace,
    session: WriteSessionDep,
    reason: Annotated[str, Form(max_length=2000)] = "",
) -> RedirectResponse:
    who = need(request, Scope.CURATE, "Approving or rejecting items")
    if decision is Decision.REJECT and not reason.strip():
        return done(_url(name, place), f"Item {item_id} was not rejected: say why in Reason.")
    shows_refusal(request, lambda refusal: done(_url(name, place), f"Item {item_id} was not decided: {refusal.detail}"))
    unread = unread_by(session=session, principal=who, item_ids=[item_id], secret_key=secret_key(request), through_window=True) if decision is Decision.APPROVE else set()
    evaluation = get_eval(session=session, name=name)
    if evaluation is not None and is_team_review(evaluation):
        outcome = team_decision(session, evaluation, who, item_id, decision, reason, adjudicating=place.view == QueueView.DISPUTED.value, unread=unread)
        return done(_url(name, place), said(outcome, decision))
    decide(session=session, item_id=item_id, decision=decision, reason=reason.strip(), actor=who.actor, now=utcnow(), unread=unread)
    verb = "approved" if decision is Decision.APPROVE else "rejected"
    return done(_url(name, place), f"Item {item_id} {verb}. Press u or Undo to take it back.")


@router.post("/ui/evals/{name}/review/undo")
def undo(
    request: Request,
    name: str,
    item_id: Annotated[int, Form(ge=1)],
    place: FormPlace,
    session: WriteSessionDep,
) -> RedirectResponse:
    who = need(request, Scope.CURATE, "Undoing a review decision")
    shows_refusal(request, lambda refusal: done(_url(name, place), f"Nothing undone: {refusal.detail}"))
    last = _last_decision(session, who.actor)
    if last is not None and last.action == AuditAction.REVIEW_VOTE and last.object_id == str(item_id):
        withdraw_vote(session=session, evaluation=_eval(session, name), item_id=item_id, actor=who.actor, now=utcnow())
        return done(_url(name, place), f"Your vote on item {item_id} is taken back: it waits for your vote again.")
    undone = undo_review(session=session, item_id=item_id, actor=who.actor, now=utcnow())
    return done(_url(name, place), f"Undone: item {item_id} is no longer {undone.undone.value}d and waits for review again.")


@router.post("/ui/evals/{name}/review/bulk")
def decide_many(
    request: Request,
    name: str,
    place: FormPlace,
    session: WriteSessionDep,
    item: Annotated[list[int], Form(max_length=MAX_BULK)] = [],  # noqa: B006 (FastAPI copies defaults)
    decision: Annotated[str, Form(max_length=16)] = "",
    reason: Annotated[str, Form(max_length=2000)] = "",
) -> RedirectResponse:
    who = need(request, Scope.CURATE, "Approving or rejecting items")
    ids = sorted({value for value in item if value > 0})
    reason = reason.strip()
    if not ids:
        return done(_url(name, place), "Nothing selected: tick the items to decide first.")
    if decision not in (Decision.APPROVE.value, Decision.REJECT.value):
        return done(_url(name, place), "Choose Approve selected or Reject selected.")
    if decision == Decision.REJECT.value and not reason:
        return done(_url(name, place), f"The {len(ids)} selected item(s) were not rejected: say why in the bulk Reason.")
    decisions = [ReviewDecision(item_id=item_id, decision=Decision(decision), reason=reason) for item_id in ids]
    unread = unread_by(session=session, principal=who, item_ids=ids, secret_key=secret_key(request), through_window=True) if decision == Decision.APPROVE.value else set()
    evaluation = get_eval(session=session, name=name)
    if evaluation is not None and is_team_review(evaluation):
        summary = team_batch(session, evaluation, who, decisions, adjudicating=place.view == QueueView.DISPUTED.value, unread=unread)
        return done(_url(name, place, at=1), summary)
    outcome = review_batch(session=session, decisions=decisions, actor=who.actor, now=utcnow(), unread=unread)
    parts = [f"approved {len(outcome.approved)}", f"rejected {len(outcome.rejected)}"]
    if outcome.errors:
        parts.append(f"refused {len(outcome.errors)} ({'; '.join(error.detail for error in outcome.errors[:3])})")
    return done(_url(name, place, at=1), "Bulk decision: " + ", ".join(parts) + ".")


@router.post("/ui/evals/{name}/review/sealed")
def open_sealed_view(
    request: Request,
    name: str,
    place: FormPlace,
    session: SessionDep,
) -> RedirectResponse:
    """Open the person's sealed review window on the eval, in a unit of work of its own once the
    request's connection is handed back. A spent budget is said in a notice, and its refusal is
    audited all the same (`open_sealed_review_window`)."""
    who = need(request, Scope.SEALED, "The sealed view")
    need(request, Scope.CURATE, "The sealed view")
    hours = request.app.state.settings.sealed_run_read_hours
    evaluation = _eval(session, name)
    hand_back_connection(session)
    try:
        window = open_sealed_review_window(request.app.state.engine, evaluation=evaluation, token_id=who.token_id, actor=who.actor, hours=hours)
    except SealedReviewBudgetSpent as exc:
        return done(_url(name, place), f"The sealed view did not open: {exc}")
    opened = "opened" if window.opened else "already open"
    until = f"{window.until:%Y-%m-%d %H:%M} UTC"
    return done(_url(name, place), f"Sealed view {opened} until {until} ({window.used} of {window.budget} sealed reads used). Every sealed item shown is audited.")
