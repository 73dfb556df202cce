"""Dedup's figures and close calls as readers see them: nothing of an item in (or bound for) a
sealed slice beyond its id (`service.items.reads.withheld`)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlmodel import Session

from curation.dedup.stats import dedup_stats, low_margin_duplicates
from schemas.dedup import DedupStats, LowMarginDuplicate
from service.items.shaping import withheld


def stats_for_readers(*, session: Session, secret_key: str) -> DedupStats:
    """`curation.dedup.stats.dedup_stats`, with the title of each sealed representative withheld
    (`""`, `sealed: true`)."""
    stats = dedup_stats(session)
    hidden = withheld(session=session, item_ids=[cluster.representative for cluster in stats.largest_clusters], secret_key=secret_key)
    stats.largest_clusters = [cluster.model_copy(update={"title": "", "sealed": True}) if cluster.representative in hidden else cluster for cluster in stats.largest_clusters]
    return stats


def low_margin_for_readers(*, session: Session, secret_key: str, sources: Sequence[str] | None, margin: float, limit: int) -> list[LowMarginDuplicate]:
    """`curation.dedup.stats.low_margin_duplicates`, leaving out each pair with a sealed item (its id
    and score beside the other's would confirm a guess at its text), so fewer than `limit` may come."""
    close = low_margin_duplicates(session=session, sources=sources, margin=margin, limit=limit)
    hidden = withheld(session=session, item_ids=[entry.item_id for entry in close] + [entry.matched_item_id for entry in close], secret_key=secret_key)
    return [entry for entry in close if entry.item_id not in hidden and entry.matched_item_id not in hidden]
