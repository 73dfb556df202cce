"""Curators editing items: rewriting a raw incident into a gradable question and reference answer,
or correcting a redaction, and the history of every change an item's text went through.

An edit is a new revision by a person: the content before it is kept as an `ItemRevision` of kind
`curator` with the person and their note, and the item records that its text is now the curator's
(`Item.curated_revision`), so a later change at the source is held beside it instead of replacing
it (`ingest.store`). Dedup decides an edited text again: a change of the title, input or reference
sends a decided item back to `candidate` (a tags-only edit keeps its status). Releases are not
touched: they froze the text they hold.

Every function works in the session it is given and never commits.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlmodel import Session, col, select

from curation.refusals import Refused
from curation.team_rounds import close_rounds
from ingest.normalisation import NORMALISATION_VERSION, content_hash
from schemas.item import EDITED_FIELDS, MAX_NOTE, FieldChange, Item, ItemRevision, ItemRevisions, ItemStatus, RevisionKind, RevisionRead, item_snapshot
from schemas.lifecycle import MOVES, ItemAction, move, unmoved

TEXT_FIELDS = ("title", "input", "reference")
# Statuses a change of the text sends back to dedup: the edited text is decided, then reviewed, again.
REDECIDED_ON_EDIT = frozenset(status.value for status in MOVES[ItemAction.EDIT].sources)
_UNSTORABLE = re.compile(r"[\x00\ud800-\udfff]")


class EditRefused(Refused):
    """An edit cannot be made (`curation.refusals.Refused`)."""


def _note(note: str, item_id: int) -> str:
    note = note.strip()
    if not note or len(note) > MAX_NOTE:
        raise EditRefused("note_required", f"editing item {item_id} needs a note of 1 to {MAX_NOTE} characters saying why, kept with the revision", 422)
    return note


def _checked(item_id: int, field: str, value: str) -> str:
    if _UNSTORABLE.search(value):
        raise EditRefused("bad_character", f"the new {field} of item {item_id} holds a NUL character or a lone surrogate, which no database stores: remove it", 422)
    return value


def edit_item(
    *,
    session: Session,
    item_id: int,
    title: str | None = None,
    input: str | None = None,
    reference: str | None = None,
    tags: Sequence[str] | None = None,
    note: str,
    actor: str,
    now: datetime,
) -> Item:
    """Change the given fields of item `item_id` (None: left as it is) as a new revision by `actor`
    at `now`, with `note` saying why, and return the item; never commits.

    Guarantees: the content before the edit is kept (`ItemRevision`, kind `curator`, with the actor
    and the note); the revision number goes up by one and `curated_revision` becomes it; the dedup
    fingerprint (`content_hash`, `hash_recipe`) is recomputed as ingest computes it; a change of the
    title, input or reference sends an item that is unique, duplicate, contaminated, approved or
    rejected back to `candidate`; a held source change stops waiting (`source_changed_at` cleared);
    `item.edit` is audited with the changed fields' names and the note, never the text.

    Raises EditRefused: `note_required` (422, blank or over 2,000 characters), `not_found` (404),
    `reference_item` (409, a public reference corpus's item), `retired` (409), `empty_input` (422,
    the input would hold no text), `bad_character` (422, NUL or a lone surrogate), `no_change`
    (422, every given field already holds that value)."""
    note = _note(note, item_id)
    item = session.get(Item, item_id)
    if item is None:
        raise EditRefused("not_found", f"no item with id {item_id}", 404)
    if item.status == ItemStatus.REFERENCE.value:
        raise EditRefused("reference_item", f"item {item_id} belongs to a public reference corpus, which is matched against as published and never edited", 409)
    if item.status == ItemStatus.RETIRED.value:
        raise EditRefused("retired", f"item {item_id} was retired from its evals, which keep it as it was released", 409)
    if input is not None and not input.strip():
        raise EditRefused("empty_input", f"the input of item {item_id} must keep some text: it is what the model is asked", 422)
    wanted: dict[str, Any] = {name: _checked(item_id, name, value) for name, value in (("title", title), ("input", input), ("reference", reference)) if value is not None}
    if tags is not None:
        wanted["tags"] = [_checked(item_id, "tags", tag) for tag in tags]
    changed = sorted(name for name, value in wanted.items() if getattr(item, name) != value)
    if not changed:
        raise EditRefused("no_change", f"nothing to change: every field given already holds that value in item {item_id}", 422)

    assert item.id is not None
    session.add(
        ItemRevision(
            item_id=item.id,
            revision=item.revision,
            changed_at=now,
            previous_digest=item.record_digest,
            previous=item_snapshot(item),
            kind=RevisionKind.CURATOR.value,
            actor=actor,
            note=note,
        )
    )
    for name in changed:
        setattr(item, name, wanted[name])
    item.content_hash = content_hash(item.title, item.input, item.reference)
    item.hash_recipe = NORMALISATION_VERSION
    item.revision += 1
    item.curated_revision = item.revision
    item.source_changed_at = None
    item.updated_at = now
    details = {"fields": changed, "note": note, "revision": item.revision}
    if any(name in TEXT_FIELDS for name in changed) and item.status in REDECIDED_ON_EDIT:
        event = move(item, ItemAction.EDIT, ItemStatus.CANDIDATE, actor=actor, details=details, at=now)
        close_rounds(session, [item.id], now=now, outcome=None)  # votes were on the old text
    else:  # a tags-only edit, or an item not yet decided: its status stays
        event = unmoved(item, ItemAction.EDIT, actor=actor, details=details, at=now)
    event.at = now
    session.add(item)
    session.add(event)
    return item


def _fields(content: dict[str, Any]) -> dict[str, Any]:
    return {name: content.get(name, [] if name == "tags" else "") for name in EDITED_FIELDS}


def _changes(before: dict[str, Any] | None, after: dict[str, Any]) -> list[FieldChange]:
    """The edited fields whose value differs (from nothing, for the first revision: its non-empty fields)."""
    if before is None:
        return [FieldChange(field=name, before=None, after=after[name]) for name in EDITED_FIELDS if after[name]]
    return [FieldChange(field=name, before=before[name], after=after[name]) for name in EDITED_FIELDS if before[name] != after[name]]


def revision_history(session: Session, item: Item) -> list[RevisionRead]:
    """Every revision of `item`, oldest first: revision 1 as first ingested (its non-empty fields
    changed from null), then one entry per stored change in the order it happened. A `source` or
    `curator` change made the item revision `n + 1` from revision `n` and shows what it changed; a
    `source_held` change shows what the source proposed against the text the item had then (the
    curator's), which the item kept."""
    assert item.id is not None
    rows = list(session.exec(select(ItemRevision).where(ItemRevision.item_id == item.id).order_by(col(ItemRevision.id))))
    applied: dict[int, ItemRevision] = {}
    for row in rows:
        if row.kind != RevisionKind.SOURCE_HELD.value:
            applied.setdefault(row.revision, row)
    # The text at each revision, from the newest back: a change row keeps the text before it.
    text: dict[int, dict[str, Any]] = {item.revision: _fields(item_snapshot(item))}
    for number in range(item.revision - 1, 0, -1):
        text[number] = _fields(applied[number].previous) if number in applied else text[number + 1]
    first = text.get(1, text[item.revision])
    entries = [RevisionRead(revision=1, kind=RevisionKind.SOURCE.value, at=item.ingested_at, actor=None, note=None, changes=_changes(None, first))]
    for row in rows:
        before = text.get(row.revision, text[item.revision])
        if row.kind == RevisionKind.SOURCE_HELD.value:
            number, after = row.revision, _fields(row.previous)
        else:
            number, after = row.revision + 1, text.get(row.revision + 1, text[item.revision])
        entries.append(RevisionRead(revision=number, kind=row.kind, at=row.changed_at, actor=row.actor, note=row.note, changes=_changes(before, after)))
    return entries


def withheld_history(entries: Sequence[RevisionRead]) -> list[RevisionRead]:
    """`entries` as shown for an item of a sealed slice to a reader without the `sealed` scope: the
    revision numbers, kinds, actors and the names of the changed fields; no date, note or value."""
    return [
        entry.model_copy(update={"at": None, "note": None, "changes": [FieldChange(field=change.field, before=None, after=None) for change in entry.changes]})
        for entry in entries
    ]


def item_revisions(session: Session, item: Item, *, sealed: bool, shown: bool) -> ItemRevisions:
    """The history of `item` as `GET /v1/items/{id}/revisions` answers it. `sealed`: the item is in
    (or bound for) a sealed slice; `shown`: the reader may see its content anyway (the `sealed`
    scope). A sealed item not shown comes without dates, notes or values."""
    assert item.id is not None
    history = revision_history(session, item)
    visible = shown or not sealed
    return ItemRevisions(
        item_id=item.id,
        revision=item.revision,
        curated_revision=item.curated_revision,
        source_changed_at=item.source_changed_at if visible else None,
        sealed=sealed,
        revisions=history if visible else withheld_history(history),
    )
