"""What curation has left to do, and what an in-memory index was built from, read cheaply from
the database: the checks that tell a curation run whether to start and a kept index whether it is
stale (another process curated, or ingest sent a decided item back to `candidate`)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import and_, func, or_
from sqlmodel import Session, col, select

from schemas.dedup import DedupDecision, ItemFingerprint
from schemas.item import Item, ItemStatus


@dataclass(frozen=True)
class IndexState:
    """What an in-memory index was built from, cheaply read from the database: when it differs
    from the state an index was last brought to, the index is stale."""

    newest_decision: int
    fingerprints: int
    recandidated: int


def index_state(session: Session) -> IndexState:
    newest = session.exec(select(func.max(DedupDecision.id))).one()
    fingerprints = session.exec(select(func.count()).select_from(ItemFingerprint)).one()
    # Decided items that a changed re-ingest sent back to `candidate`: the index still holds their old text.
    recandidated = session.exec(
        select(func.count()).select_from(Item).join(ItemFingerprint, col(ItemFingerprint.item_id) == col(Item.id)).where(Item.status == ItemStatus.CANDIDATE.value)
    ).one()
    return IndexState(int(newest or 0), int(fingerprints), int(recandidated))


def pending_count(session: Session) -> int:
    """How many items a curation run would decide now: candidates, and reference items not yet indexed."""
    fingerprinted = select(ItemFingerprint.item_id)
    query = (
        select(func.count())
        .select_from(Item)
        .where(
            or_(
                col(Item.status) == ItemStatus.CANDIDATE.value,
                and_(col(Item.status) == ItemStatus.REFERENCE.value, col(Item.id).not_in(fingerprinted)),
            )
        )
    )
    return int(session.exec(query).one())
