"""Re-deciding items already decided, after a change of rules or thresholds (`goldenset curate
--redecide`).

A change of rules is like a new recipe: decisions made under the old one stand until someone
asks for them to be made again. What people decided stays as it is: items named by an override
(`schemas.dedup.DedupOverride`, either side), reviewed items (approved, rejected, retired) and
items released in an eval are neither reopened nor moved. Everything else that dedup decided
(unique, duplicate, contaminated) goes back to `candidate` and is decided again, oldest incident
first, by an ordinary curation run, against an index that holds only what was kept: the same
decisions a fresh pool would get under the new rules. Fingerprints are kept, so nothing is
encoded again.

`reopen` and `changes` bracket that run; the caller holds the curation lock around all three and
commits `reopen` before the run. A run that stops half-way leaves the rest as candidates, which
the next curation run decides.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from sqlalchemy import func, union, update
from sqlmodel import Session, col, select

from schemas.dedup import DedupOverride
from schemas.evals import EvalItem
from schemas.item import Item, ItemStatus

REOPENED_STATUSES = (ItemStatus.UNIQUE.value, ItemStatus.DUPLICATE.value, ItemStatus.CONTAMINATED.value)


@dataclass(frozen=True)
class Decided:
    """An item's status and the item it duplicates, at one moment."""

    status: str
    duplicate_of: int | None


@dataclass(frozen=True)
class Change:
    item_id: int
    before: Decided
    after: Decided


@dataclass
class RedecideSummary:
    """What a re-decide did: `reopened` items decided again, `kept` decided items left as people
    decided them, and the `changes` (status or matched item) with counts by kind."""

    reopened: int = 0
    kept: int = 0
    changes: list[Change] = field(default_factory=list)

    @property
    def unchanged(self) -> int:
        return self.reopened - len(self.changes)

    @property
    def by_kind(self) -> dict[str, int]:
        """Changes counted by "before -> after" status ("duplicate -> duplicate": another item matched)."""
        return dict(Counter(f"{change.before.status} -> {change.after.status}" for change in self.changes))


def _kept_ids(session: Session) -> set[int]:
    """Items whose decision people made: named by an override, or released in an eval."""
    ruled = union(select(DedupOverride.item_id), select(DedupOverride.other_id), select(EvalItem.item_id))
    return {int(item_id) for (item_id,) in session.execute(ruled).all()}


def reopen(session: Session) -> tuple[dict[int, Decided], int]:
    """Send every decided item that people did not decide back to `candidate` (the caller
    commits). Returns the reopened items' decisions before, and how many decided items were kept."""
    kept_ids = _kept_ids(session)
    rows = session.exec(select(Item.id, Item.status, Item.duplicate_of).where(col(Item.status).in_(REOPENED_STATUSES))).all()
    before = {item_id: Decided(status, duplicate_of) for item_id, status, duplicate_of in rows if item_id is not None and item_id not in kept_ids}
    reviewed = (ItemStatus.APPROVED.value, ItemStatus.REJECTED.value, ItemStatus.RETIRED.value)
    reviewed_count = session.exec(select(func.count()).select_from(Item).where(col(Item.status).in_(reviewed))).one()
    kept = len(rows) - len(before) + int(reviewed_count)
    ids = sorted(before)
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        session.exec(update(Item).where(col(Item.id).in_(chunk)).values(status=ItemStatus.CANDIDATE.value, duplicate_of=None))
    return before, kept


def changes(session: Session, before: dict[int, Decided], kept: int) -> RedecideSummary:
    """Compare the reopened items' decisions now with `before`."""
    summary = RedecideSummary(reopened=len(before), kept=kept)
    ids = sorted(before)
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        for item_id, status, duplicate_of in session.exec(select(Item.id, Item.status, Item.duplicate_of).where(col(Item.id).in_(chunk))).all():
            assert item_id is not None
            after = Decided(status, duplicate_of)
            if after != before[item_id]:
                summary.changes.append(Change(item_id, before[item_id], after))
    return summary
