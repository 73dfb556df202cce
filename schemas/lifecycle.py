"""An item's lifecycle: every status an item moves through, every move allowed, and the trail each
move leaves. One table, used by every layer that moves an item (ingest, review, edits, dedup
rulings), so a status never changes without its audit event and never changes in a way the table
does not allow.

Moves by a person or a source (`ItemAction`) are made with `move`, which checks the move against
`MOVES`, sets the status and returns the one audit event to add with it. Curation's own decisions
(a candidate judged `unique`, `duplicate` or `contaminated`; a unique item that turns out to be
the later telling of a newer match; a decided item sent back to `candidate` to be decided again)
are recorded as dedup decisions (`schemas.dedup.DedupDecision`), one row per item decided, in
`CURATION_MOVES`. Nothing else changes an item's status.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from schemas.audit import AuditEvent
from schemas.common import utcnow
from schemas.item import Item, ItemStatus


class ItemAction(StrEnum):
    """The audit actions that move an item (and only those)."""

    APPROVE = "item.approve"
    REJECT = "item.reject"
    REVIEW_UNDONE = "item.review_undone"
    EDIT = "item.edit"
    NOT_DUPLICATE = "item.not_duplicate"
    DUPLICATE_OF = "item.duplicate_of"
    SOURCE_CHANGE = "item.source_change"
    SOURCE_REOPEN = "item.source_reopen"


S = ItemStatus
_DECIDED = frozenset({S.UNIQUE, S.DUPLICATE, S.CONTAMINATED, S.APPROVED})


@dataclass(frozen=True)
class Move:
    """From which statuses an action moves an item, and to which."""

    sources: frozenset[ItemStatus]
    targets: frozenset[ItemStatus]
    meaning: str


MOVES: Mapping[ItemAction, Move] = {
    ItemAction.APPROVE: Move(frozenset({S.UNIQUE}), frozenset({S.APPROVED}), "a curator approves an item dedup kept"),
    ItemAction.REJECT: Move(frozenset({S.UNIQUE}), frozenset({S.REJECTED}), "a curator rejects it, with a reason"),
    ItemAction.REVIEW_UNDONE: Move(frozenset({S.APPROVED, S.REJECTED}), frozenset({S.UNIQUE}), "the curator who decided takes it back"),
    ItemAction.EDIT: Move(_DECIDED | {S.REJECTED}, frozenset({S.CANDIDATE}), "a curator changes the text: dedup decides it again"),
    ItemAction.NOT_DUPLICATE: Move(frozenset({S.DUPLICATE, S.CONTAMINATED}), frozenset({S.UNIQUE}), "a ruling: not a duplicate"),
    ItemAction.DUPLICATE_OF: Move(frozenset({S.UNIQUE, S.DUPLICATE, S.CONTAMINATED}), frozenset({S.DUPLICATE, S.CONTAMINATED}), "a ruling: a duplicate of a named item"),
    ItemAction.SOURCE_CHANGE: Move(_DECIDED, frozenset({S.CANDIDATE}), "the source changed the text: dedup decides it again"),
    ItemAction.SOURCE_REOPEN: Move(frozenset({S.APPROVED}), frozenset({S.UNIQUE}), "the source changed an edited, approved item: a person looks again"),
}
"""Every move by a person or a source."""

CURATION_MOVES: Mapping[ItemStatus, frozenset[ItemStatus]] = {
    S.CANDIDATE: frozenset({S.UNIQUE, S.DUPLICATE, S.CONTAMINATED}),
    S.UNIQUE: frozenset({S.DUPLICATE, S.CANDIDATE}),
    S.DUPLICATE: frozenset({S.CANDIDATE}),
    S.CONTAMINATED: frozenset({S.CANDIDATE}),
}
"""Every move curation makes, each recorded as a dedup decision."""


class IllegalMove(ValueError):
    """A move the lifecycle does not allow (a bug in the caller: refusals are checked before)."""


def move(item: Item, action: ItemAction, to: ItemStatus, *, actor: str, details: Mapping[str, Any] | None = None, at: datetime | None = None) -> AuditEvent:
    """Move `item` to status `to` by `action`, taken by `actor` at `at` (default: now): set its
    status and `updated_at` and return the audit event, dated `at` too, to add in the same
    transaction (details: `status_before`, `status` and `details`). Raises IllegalMove when
    `MOVES` does not allow it."""
    allowed = MOVES[action]
    before = ItemStatus(item.status)
    if before not in allowed.sources or to not in allowed.targets:
        raise IllegalMove(f"{action.value} cannot move item {item.id} from {before.value} to {to.value}")
    item.status = to.value
    item.updated_at = when = at or utcnow()
    moved = {"status_before": before.value, "status": to.value}
    return AuditEvent(actor=actor, action=action.value, object_type="item", object_id=str(item.id), details={**(details or {}), **moved}, at=when)


def unmoved(item: Item, action: ItemAction, *, actor: str, details: Mapping[str, Any] | None = None, at: datetime | None = None) -> AuditEvent:
    """The audit event of `action` taken on `item` without moving it (an edit of its tags, a ruling
    apart that keeps its status), at `at` (default: now): its status stays, named as both
    `status_before` and `status`."""
    item.updated_at = when = at or utcnow()
    stays = {"status_before": item.status, "status": item.status}
    return AuditEvent(actor=actor, action=action.value, object_type="item", object_id=str(item.id), details={**(details or {}), **stays}, at=when)


def is_move(event: AuditEvent) -> bool:
    """Whether audit event `event` moved its item: not one written by `unmoved` (events older than
    this table, without `status_before`, count as moves)."""
    return bool(event.details.get("status_before", object()) != event.details.get("status"))
