"""Pages: the item list, an item's page (its content, revisions with word diffs, dedup history and
rulings and why dedup decided as it did, exposures, releases, review) and the edit form.

An item in (or bound for) a sealed slice (`service.items.reads.withheld`) is shown to a person
without the `sealed` scope by id, source and status only: no text, metadata, dates, revision
values or the items dedup matched it with; it is left out of the list altogether, and so are the
sealed-bound items another item names (shown as "a sealed item"). Editing one needs the `sealed`
scope. Each page that serves item content is audited: `item.read`, or `item.sealed_read` when a
person with the `sealed` scope reads a sealed-bound item's page or edit form.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Sequence
from functools import partial
from typing import Annotated, Any
from urllib.parse import urlencode, urlsplit

from fastapi import Form, Request
from fastapi.responses import HTMLResponse, Response
from markupsafe import Markup
from sqlalchemy import and_, or_
from sqlmodel import Session, col, select

from curation.dedup.overrides import overrides_of, rule_duplicate_of, rule_not_duplicate
from curation.editing import edit_item, item_revisions
from curation.review import decide
from curation.runs.exposure import item_exposures
from schemas.audit import AuditAction
from schemas.common import MAX_ROW_ID, utcnow
from schemas.dedup import DedupDecision
from schemas.evals import Eval, EvalItem
from schemas.item import MAX_NOTE, MAX_TAG_LENGTH, MAX_TAGS, FieldChange, Item, ItemStatus, RevisionKind, RevisionRead
from schemas.review import Decision
from schemas.source import Source
from schemas.token import Scope
from service.core.audit import audit_content_read
from service.core.auth import Principal
from service.core.cursors import decode_time_id_cursor, encode_cursor
from service.core.deps import WriteSessionDep, after_commit
from service.core.problems import ProblemError
from service.evals.definitions import seal_keys
from service.evals.sealed_review import revealed_to, sealed_view_covers, unread_by
from service.items.reads import explain_decision, named_items
from service.items.ruling_guard import guarded_ruling
from service.items.shaping import ShownItem, hidden_from_reader, remembered_keys, shape_item, shape_items
from service.ui.pages import UiRefused, done, need, page, secret_key, ui_router
from service.ui.refusals import Refusal, shows_refusal
from service.ui.worddiff import inline_diff

router = ui_router()
PAGE_SIZE = 50
CURSOR_KIND = "ui-items"
SEALED_READ = AuditAction.ITEM_SEALED_READ
MAX_TEXT = 1_000_000
"""Form fields are bounded by the request body limit; this only keeps a field from being unbounded."""
"""Longer texts are shown as removed and added whole: a word alignment of them would take too long."""
LINK_KEYS = ("url", "html_url", "link", "permalink")
KIND_LABELS = {RevisionKind.SOURCE.value: "source change", RevisionKind.CURATOR.value: "curator edit", RevisionKind.SOURCE_HELD.value: "held source change"}
Text = Annotated[str, Form(max_length=MAX_TEXT)]
Short = Annotated[str, Form(max_length=4000)]


def _item(session: Session, item_id: int) -> tuple[Item, str]:
    """The item and its source's name, or a 404 page."""
    query = select(Item, Source.name).join(Source, col(Source.id) == col(Item.source_id)).where(Item.id == item_id)
    row = session.exec(query).first() if 1 <= item_id <= MAX_ROW_ID else None
    if row is None:
        raise UiRefused(404, "No such item", f"There is no item {item_id}.")
    return row[0], row[1]


def _shown(session: Session, request: Request, who: Principal, item: Item, source: str) -> ShownItem:
    """The item as `who` may see it: a sealed-bound item in full only with the `sealed` scope and
    an open sealed review window on every eval that seals it (`service.items.shaping`)."""
    return shape_item(session=session, item=item, source=source, secret_key=secret_key(request), revealed=revealed_to(session=session, principal=who))


def _next_path(value: str | None) -> str | None:
    """A page of this UI to go back to (never another site), or None."""
    if not value or any(ch in value for ch in "\\\r\n\t") or value.startswith("//"):
        return None
    parts = urlsplit(value)
    if parts.scheme or parts.netloc or not (parts.path == "/ui" or parts.path.startswith("/ui/")):
        return None
    return value


def _diffs(changes: Sequence[FieldChange]) -> list[tuple[str, Markup]]:
    return [(change.field, inline_diff(change.before, change.after)) for change in changes]


def _revision_view(entry: RevisionRead) -> dict[str, Any]:
    first = entry.revision == 1 and entry.kind == RevisionKind.SOURCE.value and entry.actor is None
    kind = "first ingested" if first else KIND_LABELS.get(entry.kind, entry.kind)
    author = entry.actor or ("the source" if entry.kind != RevisionKind.CURATOR.value else "unknown")
    changes = _diffs(entry.changes)
    view = {"revision": entry.revision, "kind": kind, "held": entry.kind == RevisionKind.SOURCE_HELD.value, "author": author, "at": entry.at, "note": entry.note}
    return view | {"changes": changes, "fields": ", ".join(field for field, _ in changes), "first": first}


def _source_link(meta: dict[str, Any]) -> str | None:
    for key in LINK_KEYS:
        value = meta.get(key)
        if isinstance(value, str) and value.lower().startswith(("https://", "http://")):
            return value
    return None


def _audit(request: Request, who: Principal, item_id: int, *, sealed: bool, shown: bool) -> None:
    if shown or not sealed:
        audit_content_read(request, who, [item_id], SEALED_READ if sealed else AuditAction.ITEM_READ)


def _visible_page(
    session: Session, *, secret_key: str, source: str | None, status: str | None, text: str | None, cursor: str | None, limit: int = PAGE_SIZE
) -> tuple[list[ShownItem], str | None]:
    """A page of items newest incident first, never a sealed-bound one; the page is filled past
    them, so neither its size nor its cursor says whether any matched."""
    query = select(Item, Source.name).join(Source, col(Source.id) == col(Item.source_id))
    if source:
        query = query.where(Source.name == source)
    if status:
        query = query.where(Item.status == status)
    if text:
        query = query.where(or_(*(col(field).icontains(text, autoescape=True) for field in (Item.title, Item.input, Item.external_id))))
    position = decode_time_id_cursor(cursor, CURSOR_KIND, secret_key=secret_key) if cursor else None
    shown: list[ShownItem] = []
    batch_size = max(4 * limit, 200)
    while len(shown) <= limit:
        batch_query = query
        if position is not None:
            at, last_id = position
            batch_query = query.where(or_(col(Item.occurred_at) < at, and_(col(Item.occurred_at) == at, col(Item.id) < last_id)))
        batch = list(session.exec(batch_query.order_by(col(Item.occurred_at).desc(), col(Item.id).desc()).limit(batch_size)).all())
        shown.extend(item for item in shape_items(session=session, rows=batch, secret_key=secret_key) if not item.withheld)
        if len(batch) < batch_size:
            break
        position = (batch[-1][0].occurred_at, batch[-1][0].id or 0)
    rows = shown[:limit]
    last = rows[-1] if len(shown) > limit else None
    next_cursor = encode_cursor(CURSOR_KIND, last.occurred_at.isoformat(), last.id, secret_key=secret_key) if last is not None else None
    return rows, next_cursor


@router.get("/ui/items")
def item_list(request: Request, source: str = "", status: str = "", text: str = "", cursor: str = "") -> HTMLResponse:
    who = need(request, Scope.READ, "Reading items")
    source, status, text = source.strip()[:255], status.strip(), text.strip()[:500]
    if status and status not in {value.value for value in ItemStatus}:
        raise UiRefused(422, "Unknown status", f"There is no item status {status!r}.")
    with Session(request.app.state.engine) as session:
        try:
            rows, next_cursor = _visible_page(session, secret_key=secret_key(request), source=source, status=status, text=text, cursor=cursor or None)
        except ProblemError as exc:
            raise UiRefused(422, "Page link out of date", "This page link is not one goldenset made, or it is out of date. Start again from the first page.") from exc
        sources = list(session.exec(select(Source.name).order_by(col(Source.name))).all())
    audit_content_read(request, who, [item.id for item in rows])
    filters = {name: value for name, value in (("source", source), ("status", status), ("text", text)) if value}
    context = {
        "rows": rows,
        "filters": filters,
        "sources": sources,
        "statuses": [value.value for value in ItemStatus],
        "next_url": f"/ui/items?{urlencode({**filters, 'cursor': next_cursor})}" if next_cursor else None,
        "first_url": f"/ui/items?{urlencode(filters)}" if cursor else None,
    }
    return page(request, "items.html", context)


def _item_context(session: Session, item: Item, *, sealed: bool, shown: bool, secret_key: str, revealed: Collection[int]) -> dict[str, Any]:
    """What the item page shows: everything when the content may be shown, else the id, source
    and status. The items of a sealed slice it names (matched, weighed by dedup, ruled on) are
    named "a sealed item" unless `revealed` (the evals of the reader's open sealed review windows)
    covers every eval that seals them."""
    assert item.id is not None
    if sealed and not shown:
        return {}
    history = item_revisions(session, item, sealed=sealed, shown=shown)
    held = [entry for entry in history.revisions if entry.kind == RevisionKind.SOURCE_HELD.value]
    decisions = list(session.exec(select(DedupDecision).where(DedupDecision.item_id == item.id).order_by(col(DedupDecision.id).desc())).all())
    overrides = overrides_of(session, item.id)
    named = named_items(decisions) | {rule.other_id for rule in overrides} | {rule.item_id for rule in overrides} | {item.duplicate_of or 0}
    named -= {0, item.id}
    hidden = hidden_from_reader(session, named, remembered_keys(seal_keys(secret_key=secret_key)), revealed) if named else set()
    explanation = explain_decision(decisions[0], hidden=hidden) if decisions and item.status != ItemStatus.CANDIDATE.value else None
    memberships = session.exec(select(EvalItem, Eval.name).join(Eval, col(Eval.id) == col(EvalItem.eval_id)).where(EvalItem.item_id == item.id).order_by(col(Eval.name))).all()
    return {
        "revisions": [_revision_view(entry) for entry in reversed(history.revisions)],
        "flag": _diffs(held[-1].changes) if held and item.source_changed_at else None,
        "decisions": decisions,
        "explanation": explanation,
        "overrides": overrides,
        "hidden": hidden,
        "exposures": item_exposures(session=session, item=item),
        "memberships": memberships,
        "link": _source_link(item.meta),
    }


def _sealers(session: Session, request: Request, item_id: int, source: str) -> list[str]:
    """The names of the evals that seal the item: where a person opens a sealed view to read it."""
    return sealed_view_covers(session=session, token_id=None, item_id=item_id, source=source, secret_key=secret_key(request))[1]


def _item_page(request: Request, item_id: int, *, error: str = "", status: int = 200, typed: dict[str, str] | None = None) -> HTMLResponse:
    who = need(request, Scope.READ, "Reading an item")
    with Session(request.app.state.engine) as session:
        item, source = _item(session, item_id)
        revealed = revealed_to(session=session, principal=who)
        shown = shape_item(session=session, item=item, source=source, secret_key=secret_key(request), revealed=revealed)
        sealers = _sealers(session, request, item_id, source) if shown.withheld else []
        context = _item_context(session, item, sealed=shown.sealed, shown=not shown.withheld, secret_key=secret_key(request), revealed=revealed)
    _audit(request, who, item_id, sealed=shown.sealed, shown=not shown.withheld)
    editable = item.status not in (ItemStatus.REFERENCE.value, ItemStatus.RETIRED.value) and not shown.withheld
    context |= {"item": shown, "source": source, "sealed": shown.sealed, "shown": not shown.withheld, "sealers": sealers, "editable": editable}
    context |= {"error": error, "typed": typed or {}}
    return page(request, "item.html", context, status=status)


@router.get("/ui/items/{item_id}")
def item_page(request: Request, item_id: int) -> HTMLResponse:
    return _item_page(request, item_id)


def _acted(
    request: Request,
    session: Session,
    item_id: int,
    action: Callable[..., object],
    notice: str,
    typed: dict[str, str],
    *,
    ruling_by: Principal | None = None,
    ruled: tuple[int, ...] = (),
) -> Response:
    """Run `action(session=...)` in the request's unit of work; a refusal shows the item page with
    the error and the values typed (`service.ui.refusals`). A dedup ruling (`ruling_by` the
    curator, on the items `ruled`) is guarded by `service.items.ruling_guard`: never blind on a
    sealed-bound item, never showing one."""
    shows_refusal(request, lambda refusal: _item_page(request, item_id, error=_sentence(refusal.detail), status=refusal.status, typed=typed))
    if ruling_by is None:
        action(session=session)
    else:
        revealed = revealed_to(session=session, principal=ruling_by)
        guarded_ruling(session=session, item_ids=ruled, secret_key=secret_key(request), revealed=revealed, rule=partial(action, session=session))
    return done(f"/ui/items/{item_id}", notice)


@router.post("/ui/items/{item_id}/review")
def review(request: Request, item_id: int, session: WriteSessionDep, decision: Short = "", reason: Short = "") -> Response:
    who = need(request, Scope.CURATE, "Reviewing an item")
    if decision not in {Decision.APPROVE.value, Decision.REJECT.value}:
        raise UiRefused(422, "Unknown decision", "Press Approve or Reject.")
    chosen = Decision(decision)
    unread = unread_by(session=session, principal=who, item_ids=[item_id], secret_key=secret_key(request), through_window=True) if chosen is Decision.APPROVE else set()
    act = partial(decide, item_id=item_id, decision=chosen, reason=reason, actor=who.actor, now=utcnow(), unread=unread)
    return _acted(request, session, item_id, act, f"Item {item_id} {'approved' if chosen is Decision.APPROVE else 'rejected'}", {"reason": reason})


@router.post("/ui/items/{item_id}/not-duplicate")
def not_duplicate(request: Request, item_id: int, session: WriteSessionDep, note: Short = "") -> Response:
    who = need(request, Scope.CURATE, "Ruling on dedup")
    act = partial(rule_not_duplicate, item_id=item_id, note=note, actor=who.actor, now=utcnow())
    notice = f"Item {item_id} ruled not a duplicate: it waits for review"
    return _acted(request, session, item_id, act, notice, {"not_duplicate_note": note}, ruling_by=who, ruled=(item_id,))


@router.post("/ui/items/{item_id}/duplicate-of")
def duplicate_of(request: Request, item_id: int, session: WriteSessionDep, other: Short = "", note: Short = "") -> Response:
    who = need(request, Scope.CURATE, "Ruling on dedup")
    typed = {"other": other, "duplicate_note": note}
    other_id = int(other.strip()) if re.fullmatch(r"[0-9]{1,10}", other.strip()) else 0
    if not 1 <= other_id <= MAX_ROW_ID:
        return _item_page(request, item_id, error="Give the id of the item this one duplicates (a number).", status=422, typed=typed)
    act = partial(rule_duplicate_of, item_id=item_id, other_id=other_id, note=note, actor=who.actor, now=utcnow())
    return _acted(request, session, item_id, act, f"Item {item_id} ruled a duplicate of item {other_id}", typed, ruling_by=who, ruled=(item_id, other_id))


def _editor(request: Request, item_id: int) -> tuple[Principal, ShownItem]:
    """The curator and the item as they may see it; a 403 page for a sealed-bound item without the
    `sealed` scope and an open sealed view."""
    who = need(request, Scope.CURATE, "Editing an item")
    with Session(request.app.state.engine) as session:
        item, source = _item(session, item_id)
        shown = _shown(session, request, who, item, source)
        sealers = _sealers(session, request, item_id, source) if shown.withheld else []
    if shown.withheld:
        where = f" (open it in the review queue of {', '.join(sealers)})" if sealers and Scope.SEALED.value in who.scopes else ""
        needs = f"editing it needs 'curate', the 'sealed' scope and an open sealed view{where}"
        raise UiRefused(403, "Not allowed", f"Item {item_id} is in (or bound for) an eval's sealed slice: {needs}.")
    if shown.status in (ItemStatus.REFERENCE.value, ItemStatus.RETIRED.value):
        why = "belongs to a public reference corpus" if shown.status == ItemStatus.REFERENCE.value else "was retired from its evals, which keep it as released"
        raise UiRefused(409, "Cannot edit", f"Item {item_id} {why}.")
    return who, shown


def _form(request: Request, item: ShownItem, values: dict[str, str], *, error: str = "", status: int = 200, next_path: str | None = None) -> HTMLResponse:
    return page(request, "item_edit.html", {"item": item, "values": values, "error": error, "next": next_path or ""}, status=status)


@router.get("/ui/items/{item_id}/edit")
def edit_form(request: Request, item_id: int, next: str = "") -> HTMLResponse:
    who, item = _editor(request, item_id)
    _audit(request, who, item_id, sealed=item.sealed, shown=True)
    values = {"title": item.title, "input": item.input, "reference": item.reference, "tags": ", ".join(item.tags), "note": "", "revision": str(item.revision)}
    return _form(request, item, values, next_path=_next_path(next))


def _lines(text: str) -> str:
    """A text with the line breaks a browser sends back from a form field (CR LF) made LF."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _changed(given: str, current: str, *, one_line: bool = False) -> str | None:
    """The new value of a field, or None when the person left it as it was (a browser changes line
    breaks in a text area to CR LF, and drops them from a one-line field)."""
    if one_line:
        return None if given == re.sub(r"[\r\n]", "", current) else given
    return None if _lines(given) == _lines(current) else _lines(given)


def _tags(text: str) -> list[str]:
    return [tag.strip() for tag in text.split(",") if tag.strip()]


@router.post("/ui/items/{item_id}/edit")
def edit(
    request: Request,
    item_id: int,
    session: WriteSessionDep,
    title: Text = "",
    input: Text = "",
    reference: Text = "",
    tags: Text = "",
    note: Text = "",
    revision: Short = "",
    next: Short = "",
) -> Response:
    who, item = _editor(request, item_id)
    sealed = item.sealed
    next_path = _next_path(next)
    values = {"title": title, "input": _lines(input), "reference": _lines(reference), "tags": tags, "note": note, "revision": str(item.revision)}

    def refused(message: str, status: int) -> HTMLResponse:
        _audit(request, who, item_id, sealed=sealed, shown=True)
        return _form(request, item, values, error=message, status=status, next_path=next_path)

    if revision != str(item.revision):
        return refused(
            f"Item {item_id} changed since you opened this form (it is now at revision {item.revision}). Your text is kept below: "
            "compare it with the item page, then save again to replace the current text.",
            409,
        )
    tag_list = _tags(tags)
    if len(tag_list) > MAX_TAGS or any(len(tag) > MAX_TAG_LENGTH for tag in tag_list):
        return refused(f"Give at most {MAX_TAGS} tags of at most {MAX_TAG_LENGTH} characters each.", 422)
    if len(note.strip()) > MAX_NOTE:
        return refused(f"The note is {len(note.strip())} characters long; keep it to {MAX_NOTE}.", 422)
    texts = {"title": _changed(title, item.title, one_line=True), "input": _changed(input, item.input), "reference": _changed(reference, item.reference)}
    shows_refusal(request, lambda refusal: refused(_edit_message(refusal), refusal.status))
    tags_given = None if tag_list == item.tags else tag_list
    saved = edit_item(
        session=session, item_id=item_id, title=texts["title"], input=texts["input"], reference=texts["reference"], tags=tags_given, note=note, actor=who.actor, now=utcnow()
    )
    if saved.status == ItemStatus.CANDIDATE.value:
        after_commit(request, request.app.state.curation_trigger.request)
    redecided = saved.status == ItemStatus.CANDIDATE.value and any(value is not None for value in texts.values())
    notice = f"Saved revision {saved.revision}" + (": its text changed, so dedup decides it again before review" if redecided else "")
    return done(next_path or f"/ui/items/{item_id}", notice)


def _edit_message(refusal: Refusal) -> str:
    if refusal.reason == "note_required":
        return "Write a note saying why you changed the item: it is kept with the revision. Nothing was saved; your text is below."
    if refusal.reason == "no_change":
        return "Nothing changed: every field holds what the item already has."
    return "Not saved: " + _sentence(refusal.detail)


def _sentence(text: str) -> str:
    """A refusal's detail as a sentence: capitalised, with its full stop."""
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")
