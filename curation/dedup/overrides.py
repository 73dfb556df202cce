"""People overruling dedup: an item ruled not a duplicate of the item it was matched with, or ruled
a duplicate of another item by hand.

A ruling is a `DedupOverride` row, and it also changes the item at once: its status, its
`duplicate_of`, a `DedupDecision` of stage `override` (rule `override`) and an audit event. The
engine reads the rulings on every later run (`curation.dedup.facts.StoredFacts`): a pair ruled
apart is never matched again, and an item ruled a duplicate is decided a duplicate of that item
whenever it is curated again; the newest ruling of a pair is in force. Re-fingerprinting keeps
decisions as they are. Items that name the ruled item as their `duplicate_of` keep naming it.

Every function works in the session it is given and never commits.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import and_, or_, update
from sqlmodel import Session, col, select

from curation.refusals import Refused
from curation.team_rounds import close_rounds
from schemas.common import read_model
from schemas.dedup import DedupDecision, DedupOverride, DedupStage, NearLink, OverrideKind, OverrideRead
from schemas.dedup_questions import DedupQuestion, QuestionState
from schemas.item import Item, ItemStatus
from schemas.lifecycle import ItemAction, move, unmoved

_DUPLICATES = (ItemStatus.DUPLICATE.value, ItemStatus.CONTAMINATED.value)
# Why an item in a status no ruling may change is refused: (reason, what to tell the person).
_UNDECIDABLE = {
    ItemStatus.CANDIDATE.value: ("not_curated", "curation has not decided it yet: curate first (`goldenset curate`), then rule on its verdict"),
    ItemStatus.APPROVED.value: ("reviewed", "it was approved in review, and a reviewed item keeps its review"),
    ItemStatus.REJECTED.value: ("reviewed", "it was rejected in review, and a reviewed item keeps its review"),
    ItemStatus.RETIRED.value: ("retired", "it was retired from its evals, which keep it as it was"),
    ItemStatus.REFERENCE.value: ("reference_item", "it belongs to a public reference corpus, which is matched against and never ruled on; rule the other item a duplicate of it"),
}


class OverrideRefused(Refused):
    """A ruling cannot be taken (`curation.refusals.Refused`)."""


def _note(note: str, item_id: int) -> str:
    note = note.strip()
    if not note:
        raise OverrideRefused("note_required", f"overruling dedup about item {item_id} needs a note saying why, so the ruling can be understood later", 422)
    return note


def _item(session: Session, item_id: int) -> Item:
    item = session.get(Item, item_id)
    if item is None:
        raise OverrideRefused("not_found", f"no item with id {item_id}", 404)
    return item


def _record(
    session: Session,
    item: Item,
    *,
    to: ItemStatus,
    duplicate_of: int | None,
    kind: OverrideKind,
    other_id: int,
    note: str,
    actor: str,
    decision: dict[str, Any],
    now: datetime,
) -> None:
    """Move `item` to `to` naming `duplicate_of` (`schemas.lifecycle`; a ruling that leaves its status
    as it is moves nothing) and record the ruling, the item's new decision and the audit event, all at `now`."""
    assert item.id is not None
    action = ItemAction.DUPLICATE_OF if kind is OverrideKind.DUPLICATE_OF else ItemAction.NOT_DUPLICATE
    facts = {"other_id": other_id, "note": note}
    if to.value != item.status or duplicate_of != item.duplicate_of:
        event = move(item, action, to, actor=actor, details=facts, at=now)
        close_rounds(session, [item.id], now=now, outcome=None)
    else:
        event = unmoved(item, action, actor=actor, details=facts, at=now)
    item.duplicate_of = duplicate_of
    session.add(item)
    session.add(DedupOverride(item_id=item.id, other_id=other_id, kind=kind.value, note=note, actor=actor, at=now))
    details = {"rule": "override", **decision, "note": note, "actor": actor}
    session.add(DedupDecision(item_id=item.id, status=item.status, stage=DedupStage.OVERRIDE.value, matched_item_id=item.duplicate_of, details=details, decided_at=now))
    session.add(event)
    # A ruling on a pair settles the question curation asked about it (`curation.dedup.questions`).
    pair = (item.id, other_id)
    session.exec(
        update(DedupQuestion)
        .where(col(DedupQuestion.item_id).in_(pair), col(DedupQuestion.other_id).in_(pair), col(DedupQuestion.state) == QuestionState.OPEN.value)
        .values(state=QuestionState.WITHDRAWN.value)
    )


def _link(session: Session, item_id: int, other_id: int, now: datetime) -> None:
    """A duplicate ruling links the pair near (`schemas.dedup.NearLink`), unless it already is:
    a release keeps them on one side of its split. A not-duplicate ruling removes no link."""
    stored = session.exec(
        select(NearLink.item_id).where(
            or_(and_(col(NearLink.item_id) == item_id, col(NearLink.other_id) == other_id), and_(col(NearLink.item_id) == other_id, col(NearLink.other_id) == item_id))
        )
    ).first()
    if stored is None:
        session.add(NearLink(item_id=item_id, other_id=other_id, stage=DedupStage.OVERRIDE.value, score=None, recorded_at=now))


def rule_not_duplicate(*, session: Session, item_id: int, note: str, actor: str, now: datetime) -> Item:
    """Rule at `now` that a `duplicate` or `contaminated` item is not a duplicate of the item it names: it
    becomes `unique` (so it goes to review) and that pair is never matched again. Raises
    OverrideRefused: `note_required` (422), `not_found` (404), `not_a_duplicate` (409)."""
    note = _note(note, item_id)
    item = _item(session, item_id)
    if item.status not in _DUPLICATES or item.duplicate_of is None:
        raise OverrideRefused("not_a_duplicate", f"item {item_id} is {item.status}, not a duplicate: only a duplicate or contaminated item can be ruled not a duplicate", 409)
    other = item.duplicate_of
    apart = {"ruled_apart_from": other}
    _record(session, item, to=ItemStatus.UNIQUE, duplicate_of=None, kind=OverrideKind.NOT_DUPLICATE, other_id=other, note=note, actor=actor, decision=apart, now=now)
    return item


def rule_apart(*, session: Session, item_id: int, other_id: int, note: str, actor: str, now: datetime) -> Item:
    """Rule at `now` that `item_id` and `other_id` are not one incident, whatever dedup decided: no curation
    run matches the pair again. A duplicate of `other_id` becomes `unique` (`rule_not_duplicate`);
    any other decided item keeps its status and gets the ruling, a decision of stage `override`
    and an audit event (`item.not_duplicate`). Raises OverrideRefused: `same_item` and
    `note_required` (422), `not_found` (404, either item), `not_curated` and `reference_item` (409)."""
    if item_id == other_id:
        raise OverrideRefused("same_item", f"item {item_id} cannot be ruled apart from itself", 422)
    note = _note(note, item_id)
    item, _other = _item(session, item_id), _item(session, other_id)
    if item.duplicate_of == other_id and item.status in _DUPLICATES:
        return rule_not_duplicate(session=session, item_id=item_id, note=note, actor=actor, now=now)
    if item.status in (ItemStatus.CANDIDATE.value, ItemStatus.REFERENCE.value):
        reason, why = _UNDECIDABLE[item.status]
        raise OverrideRefused(reason, f"item {item_id} is {item.status}: {why}", 409)
    apart = {"ruled_apart_from": other_id}
    kept = ItemStatus(item.status)
    _record(session, item, to=kept, duplicate_of=item.duplicate_of, kind=OverrideKind.NOT_DUPLICATE, other_id=other_id, note=note, actor=actor, decision=apart, now=now)
    return item


def rule_duplicate_of(*, session: Session, item_id: int, other_id: int, note: str, actor: str, now: datetime) -> Item:
    """Rule by hand, at `now`, that an item dedup decided (`unique`, `duplicate` or `contaminated`) is a
    duplicate of `other_id`, a decided item that is no duplicate itself: it becomes `duplicate`
    (`contaminated` when the other is a reference item) naming it, and stays so whenever it is
    curated again. Raises OverrideRefused: `same_item` (422), `note_required` (422), `not_found`
    (404, either item), for the item `not_curated`, `reviewed`, `retired` or `reference_item` (409),
    for the other `other_not_curated` or `other_is_duplicate` (409)."""
    if item_id == other_id:
        raise OverrideRefused("same_item", f"item {item_id} cannot be a duplicate of itself: name the item it duplicates", 422)
    note = _note(note, item_id)
    item, other = _item(session, item_id), _item(session, other_id)
    if item.status in _UNDECIDABLE:
        reason, why = _UNDECIDABLE[item.status]
        raise OverrideRefused(reason, f"item {item_id} is {item.status}: {why}", 409)
    if other.status == ItemStatus.CANDIDATE.value:
        raise OverrideRefused("other_not_curated", f"item {other_id} is a candidate curation has not decided yet: curate first (`goldenset curate`)", 409)
    if other.duplicate_of is not None or other.status in _DUPLICATES:
        raise OverrideRefused(
            "other_is_duplicate", f"item {other_id} is itself a duplicate of item {other.duplicate_of}: rule item {item_id} a duplicate of item {other.duplicate_of} instead", 409
        )
    status = ItemStatus.CONTAMINATED if other.status == ItemStatus.REFERENCE.value else ItemStatus.DUPLICATE
    _link(session, item_id, other_id, now)
    matched = {"matched_item": other_id}
    _record(session, item, to=status, duplicate_of=other_id, kind=OverrideKind.DUPLICATE_OF, other_id=other_id, note=note, actor=actor, decision=matched, now=now)
    return item


def overrides_of(session: Session, item_id: int) -> list[OverrideRead]:
    """Every ruling naming `item_id` on either side, oldest first, each marked `in_force` when it is
    the newest ruling of its pair."""
    query = select(DedupOverride).where(or_(col(DedupOverride.item_id) == item_id, col(DedupOverride.other_id) == item_id)).order_by(col(DedupOverride.id))
    rulings = list(session.exec(query))
    newest = {frozenset((ruling.item_id, ruling.other_id)): ruling.id for ruling in rulings}
    return [read_model(OverrideRead, ruling, in_force=newest[frozenset((ruling.item_id, ruling.other_id))] == ruling.id) for ruling in rulings]
