"""The rows one decided curation batch writes: new fingerprints, decisions in the order they were
made, and near links, each kind inserted in one statement (building ORM objects for them cost more
than the decisions); the fingerprints stored before are updated in place by the caller."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import insert, or_
from sqlmodel import Session, col, select

from curation.clock import Clock
from curation.dedup.near_links import NearLinkTo
from curation.dedup.rules import Verdict
from schemas.dedup import DedupDecision, ItemFingerprint, NearLink


@dataclass
class BatchWrites:
    """A batch's new rows, inserted together when the batch is decided (building ORM objects for
    them cost more than the decisions), and the fingerprints stored before, updated in place;
    decisions and links are dated by `clock` as they are added."""

    stored_fingerprints: dict[int, ItemFingerprint]
    clock: Clock
    new_fingerprints: dict[int, dict[str, Any]] = field(default_factory=dict)
    decisions: list[dict[str, Any]] = field(default_factory=list)
    links: dict[frozenset[int], dict[str, Any]] = field(default_factory=dict)

    def decide(self, item_id: int, verdict: Verdict, *, status: str | None = None, matched: int | None = None, details: dict[str, Any] | None = None) -> None:
        """Add a decision about `item_id` (the verdict's, unless `status`, `matched` or `details` say otherwise)."""
        self.decisions.append(
            {
                "item_id": item_id,
                "status": status or verdict.status,
                "stage": verdict.stage,
                "score": verdict.score,
                "matched_item_id": matched if matched is not None else verdict.matched,
                "details": details if details is not None else verdict.details,
                "decided_at": self.clock(),
            }
        )

    def link(self, item_id: int, links: Sequence[NearLinkTo]) -> None:
        """Record that `item_id` is near each of `links` (the first link of a pair is kept)."""
        for link in links:
            row = {"item_id": item_id, "other_id": link.other, "stage": link.stage, "score": link.score, "recorded_at": self.clock()}
            self.links.setdefault(frozenset((item_id, link.other)), row)

    def insert(self, session: Session) -> None:
        """Insert the new fingerprints, the decisions, in the order they were made, and the near
        links no earlier run stored (either way round)."""
        if self.new_fingerprints:
            session.execute(insert(ItemFingerprint), list(self.new_fingerprints.values()))
        if self.decisions:
            session.execute(insert(DedupDecision), self.decisions)
        if self.links:
            ids = sorted({row["item_id"] for row in self.links.values()})
            stored = session.exec(select(NearLink.item_id, NearLink.other_id).where(or_(col(NearLink.item_id).in_(ids), col(NearLink.other_id).in_(ids)))).all()
            known = {frozenset(pair) for pair in stored}
            fresh = [row for pair, row in self.links.items() if pair not in known]
            if fresh:
                session.execute(insert(NearLink), fresh)
