"""What dedup decided, in figures, and the close calls a person should look at.

The decision in force about an item is its newest `DedupDecision`. Both reads work in the session
they are given and write nothing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from sqlalchemy import func
from sqlmodel import Session, col, select

from schemas.common import read_model
from schemas.dedup import ClusterRead, ClusterSize, DecisionCount, DedupDecision, DedupOverride, DedupStats, LowMarginDuplicate
from schemas.item import Item, ItemStatus
from schemas.source import Source

LARGEST_CLUSTERS = 10
LOW_MARGIN = 0.03
"""A duplicate whose score cleared its threshold by less than this is worth a person's look."""
# Rules whose verdict rests on a threshold a score may clear narrowly; `exact`, `machine` and
# `override` verdicts are not close calls.
_THRESHOLD_RULES = ("fresh", "guard")


def decisions_in_force() -> Any:
    """A subquery of the ids of the decisions in force: the newest of each item."""
    return select(func.max(DedupDecision.id)).group_by(col(DedupDecision.item_id))


def _rule() -> Any:
    return col(DedupDecision.details)["rule"].as_string()


def _margin() -> Any:
    return col(DedupDecision.details)["margin"].as_float()


def dedup_stats(session: Session, *, largest: int = LARGEST_CLUSTERS) -> DedupStats:
    """Decisions in force by stage and rule, items by status, the cluster-size distribution with
    the `largest` clusters of two or more items, rulings in force by kind and the share of decided
    items marked duplicate (`schemas.dedup.DedupStats`). Titles are given as stored: the caller
    withholds those of sealed items."""
    by_status = {status.value: 0 for status in ItemStatus}
    by_status.update({status: count for status, count in session.exec(select(Item.status, func.count()).group_by(col(Item.status))).all()})
    rule = _rule()
    decided = session.exec(select(DedupDecision.stage, rule, func.count()).where(col(DedupDecision.id).in_(decisions_in_force())).group_by(col(DedupDecision.stage), rule)).all()
    decisions = sorted((DecisionCount(stage=stage, rule=name, count=count) for stage, name, count in decided), key=lambda row: (-row.count, row.stage, row.rule or ""))
    sizes = _cluster_sizes(session)
    top = sorted(((size, root) for root, size in sizes.items() if size > 1), key=lambda entry: (-entry[0], entry[1]))[:largest]
    shown = {item.id: item for item in session.exec(select(Item).where(col(Item.id).in_([root for _, root in top])))}
    clusters = [ClusterRead(representative=root, status=shown[root].status, title=shown[root].title, size=size) for size, root in top]
    distribution = sorted(Counter(sizes.values()).items())
    newest: dict[frozenset[int], str] = {}
    for item_id, other_id, kind in session.exec(select(DedupOverride.item_id, DedupOverride.other_id, DedupOverride.kind).order_by(col(DedupOverride.id))).all():
        newest[frozenset((item_id, other_id))] = kind
    overrides = Counter(newest.values())
    judged = sum(by_status.values()) - by_status[ItemStatus.CANDIDATE.value] - by_status[ItemStatus.REFERENCE.value]
    return DedupStats(
        items=sum(by_status.values()),
        by_status=by_status,
        decisions=decisions,
        cluster_sizes=[ClusterSize(size=size, clusters=count) for size, count in distribution],
        largest_clusters=clusters,
        overrides={kind: overrides[kind] for kind in ("not_duplicate", "duplicate_of")},
        duplicate_share=round(by_status[ItemStatus.DUPLICATE.value] / judged, 4) if judged else 0.0,
    )


def _cluster_sizes(session: Session) -> dict[int, int]:
    """The size of each cluster by its representative: every item but candidates counts in the
    cluster its `duplicate_of` chain leads to (a chain that loops ends where it loops)."""
    rows = session.exec(select(Item.id, Item.duplicate_of, Item.status)).all()
    parent = {item_id: duplicate_of for item_id, duplicate_of, _ in rows if item_id is not None}
    roots: dict[int, int] = {}

    def root(item_id: int) -> int:
        path: list[int] = []
        current = item_id
        while current not in roots:
            path.append(current)
            following = parent.get(current)
            if following is None or following in path:  # a representative, or a chain that loops
                roots[current] = current
                break
            current = following
        for step in path:
            roots[step] = roots[current]
        return roots[item_id]

    return Counter(root(item_id) for item_id, _, status in rows if item_id is not None and status != ItemStatus.CANDIDATE.value)


def low_margin_duplicates(*, session: Session, sources: Sequence[str] | None = None, margin: float = LOW_MARGIN, limit: int | None = None) -> list[LowMarginDuplicate]:
    """Duplicates of `sources` (None: every source) whose decision in force matched by the `fresh`
    or `guard` rule with a margin over its threshold below `margin`, closest call first."""
    margin_of = _margin()
    query = (
        select(DedupDecision, Item, Source.name)
        .join(Item, col(Item.id) == col(DedupDecision.item_id))
        .join(Source, col(Source.id) == col(Item.source_id))
        .where(
            col(DedupDecision.id).in_(decisions_in_force()),
            col(Item.status).in_([ItemStatus.DUPLICATE.value, ItemStatus.CONTAMINATED.value]),
            col(DedupDecision.matched_item_id).is_not(None),
            _rule().in_(_THRESHOLD_RULES),
            margin_of < margin,
        )
        .order_by(margin_of, col(DedupDecision.id))
    )
    if sources is not None:
        query = query.where(col(Source.name).in_(list(sources)))
    if limit is not None:
        query = query.limit(limit)
    return [
        read_model(
            LowMarginDuplicate,
            decision,
            source=source,
            status=item.status,
            duplicate_of=item.duplicate_of,
            rule=decision.details["rule"],
            margin=decision.details["margin"],
        )
        for decision, item, source in session.exec(query).all()
    ]
