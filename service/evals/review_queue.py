"""The review queue: the items of an eval's sources waiting for review (`unique`), oldest incident
first (on an eval with automatic approval, not those it already took:
`curation.review_backlog.taken_without_review`), each with what a reviewer decides by: its
content, its decision in force from dedup and why (`service.items.reads.explain_decision`),
whether it is bound for a sealed slice, and whether its source changed it after a curator's edit.
`curation.review_backlog.waiting_for_review` counts the same items for the pages that list evals
and for the `goldenset_review_backlog_items` gauge.

Sealed-bound items (`curation.releases.visibility`) stay in the queue, and in its total, but are
shown by metadata only (source, dates, status, dedup decision without the item matched) unless
the reader holds an open sealed review window (`service.evals.sealed_review`) on every eval that
seals them. A text filter never looks at the text of an item the reader may not see: such items
are left out of its matches, so the filter cannot be used to guess at sealed content.

Cost on a large pool: without a text filter, one count and one page query on the item's indexed
columns (on an eval with automatic approval, with a NOT EXISTS on `eval_item`'s (eval, item)
index), one query for the page's decisions in force, and the visibility queries over the page and
the items its decisions name.
With `text` (SQL LIKE, case-insensitive), the ids of the matches are read in one query and their
visibility decided in batches before the page is cut. No query is made per item.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ColumnElement, exists, func, or_
from sqlmodel import Session, col, select

from curation.releases.visibility import sealing_evals
from curation.review_backlog import taken_without_review
from schemas.dedup import DedupDecision
from schemas.evals import Eval, EvalItem
from schemas.item import Item, ItemStatus
from schemas.review import QueueDecision, ReviewQueueEntry, ReviewQueuePage
from schemas.source import Source
from service.evals.definitions import seal_keys
from service.items.reads import explain_decision, named_items
from service.items.shaping import ShownItem, hidden_from_reader, remembered_keys

VISIBILITY_BATCH = 2000
LIKE_ESCAPE = "/"


@dataclass(frozen=True)
class QueueFilters:
    """What narrows the queue: incidents at or after `occurred_after` and before
    `occurred_before`, and `text` found (case-insensitive) in the title or the input."""

    occurred_after: datetime | None = None
    occurred_before: datetime | None = None
    text: str | None = None


def _not_member_of(eval_id: int) -> ColumnElement[bool]:
    return ~exists().where(col(EvalItem.eval_id) == eval_id, col(EvalItem.item_id) == col(Item.id))


def queue_scope(session: Session, evaluation: Eval) -> list[ColumnElement[bool]]:
    """The conditions on `item` that make the eval's review queue without filters: `unique`, of its
    sources, less what it took without review."""
    ids = sorted(source_id for source_id in session.exec(select(Source.id).where(col(Source.name).in_(sorted(set(evaluation.sources))))).all() if source_id is not None)
    conditions: list[ColumnElement[bool]] = [col(Item.status) == ItemStatus.UNIQUE.value, col(Item.source_id).in_(ids)]
    taker = taken_without_review(evaluation)
    if taker is not None:
        conditions.append(_not_member_of(taker))
    return conditions


def review_queue(
    *,
    session: Session,
    evaluation: Eval,
    secret_key: str,
    source: str | None = None,
    occurred_after: datetime | None = None,
    occurred_before: datetime | None = None,
    text: str | None = None,
    limit: int,
    offset: int,
    revealed: Collection[int] = (),
    narrowed: Sequence[ColumnElement[bool]] = (),
) -> ReviewQueuePage:
    """One page of the eval's review queue (`source`: only that source of the eval's; a source it
    does not take gives an empty queue). `revealed`: the ids of the evals on which the reader holds
    an open sealed review window; a sealed-bound item is shown in full only when every eval that
    seals it is among them. `narrowed`: more conditions on `item` (a team view of the queue,
    `service.evals.team_views`). Reads only: the caller audits what it serves (`serve_queue`)."""
    sources = evaluation.sources if source is None else [name for name in evaluation.sources if name == source]
    filters = QueueFilters(occurred_after=occurred_after, occurred_before=occurred_before, text=text)
    return source_queue(
        session=session,
        sources=sources,
        secret_key=secret_key,
        filters=filters,
        limit=limit,
        offset=offset,
        revealed=revealed,
        eval_name=evaluation.name,
        taken_by=taken_without_review(evaluation),
        narrowed=narrowed,
    )


def source_queue(
    *,
    session: Session,
    sources: Collection[str],
    secret_key: str,
    filters: QueueFilters,
    limit: int,
    offset: int,
    revealed: Collection[int] = (),
    eval_name: str | None = None,
    taken_by: int | None = None,
    narrowed: Sequence[ColumnElement[bool]] = (),
) -> ReviewQueuePage:
    """One page of the review queue of `sources` (`review_queue`), numbered from `offset + 1`.
    `taken_by`: the id of an eval whose members wait for no review (`taken_without_review`);
    `narrowed`: more conditions on `item`."""
    names = {source_id: name for source_id, name in session.exec(select(Source.id, Source.name).where(col(Source.name).in_(sorted(set(sources))))).all() if source_id is not None}
    conditions: list[ColumnElement[bool]] = [col(Item.status) == ItemStatus.UNIQUE.value, col(Item.source_id).in_(sorted(names))]
    if taken_by is not None:
        conditions.append(_not_member_of(taken_by))
    conditions.extend(narrowed)
    if filters.occurred_after is not None:
        conditions.append(col(Item.occurred_at) >= filters.occurred_after)
    if filters.occurred_before is not None:
        conditions.append(col(Item.occurred_at) < filters.occurred_before)
    order = (col(Item.occurred_at), col(Item.id))
    seal_key_of = remembered_keys(seal_keys(secret_key=secret_key))
    revealed = set(revealed)
    if filters.text:
        pattern = _like_pattern(filters.text)
        matching = or_(col(Item.title).ilike(pattern, escape=LIKE_ESCAPE), col(Item.input).ilike(pattern, escape=LIKE_ESCAPE))
        matches = session.exec(select(Item.id, Item.source_id).where(*conditions, matching).order_by(*order)).all()
        hidden: set[int] = set()
        for start in range(0, len(matches), VISIBILITY_BATCH):
            batch = {item_id: names[source_id] for item_id, source_id in matches[start : start + VISIBILITY_BATCH] if item_id is not None}
            hidden |= hidden_from_reader(session, batch, seal_key_of, revealed)
        visible = [item_id for item_id, _ in matches if item_id is not None and item_id not in hidden]
        total = len(visible)
        wanted = visible[offset : offset + limit]
        found = {item.id: item for item in session.exec(select(Item).where(col(Item.id).in_(wanted))).all()}
        items = [found[item_id] for item_id in wanted if item_id in found]
    else:
        total = int(session.exec(select(func.count()).select_from(Item).where(*conditions)).one())
        items = list(session.exec(select(Item).where(*conditions).order_by(*order).offset(offset).limit(limit)).all())
    on_page = {item.id: names[item.source_id] for item in items if item.id is not None}
    sealers = sealing_evals(session=session, item_ids=list(on_page), seal_key_of=seal_key_of)
    sealed = set(sealers)
    withheld = hidden_from_reader(session, on_page, seal_key_of, revealed, sealers=sealers)
    decisions = decisions_in_force(session, list(on_page))
    explained = [decision for item_id, decision in decisions.items() if item_id not in withheld]
    named = named_items(explained)
    unseen = hidden_from_reader(session, named, seal_key_of, revealed) if named else set()
    entries = [
        _entry(
            item,
            position=offset + index + 1,
            source=on_page[item.id],
            sealed=item.id in sealed,
            withheld=item.id in withheld,
            decision=decisions.get(item.id),
            unseen=unseen,
        )
        for index, item in enumerate(items)
        if item.id is not None
    ]
    return ReviewQueuePage(eval=eval_name, total=total, offset=offset, limit=limit, withheld=len(withheld), note=_note(len(withheld), filters), entries=entries)


def decisions_in_force(session: Session, item_ids: Sequence[int]) -> dict[int, DedupDecision]:
    """The newest dedup decision of each of `item_ids` that has one, in one query."""
    if not item_ids:
        return {}
    newest = select(func.max(DedupDecision.id)).where(col(DedupDecision.item_id).in_(sorted(set(item_ids)))).group_by(col(DedupDecision.item_id))
    return {decision.item_id: decision for decision in session.exec(select(DedupDecision).where(col(DedupDecision.id).in_(newest))).all()}


def _like_pattern(text: str) -> str:
    """A LIKE pattern finding `text` anywhere, its own `%`, `_` and escape characters taken literally."""
    escaped = text.replace(LIKE_ESCAPE, LIKE_ESCAPE * 2).replace("%", f"{LIKE_ESCAPE}%").replace("_", f"{LIKE_ESCAPE}_")
    return f"%{escaped}%"


def _decision(decision: DedupDecision | None, *, withheld: bool, unseen: Collection[int]) -> QueueDecision | None:
    """The decision as the queue shows it: with its explanation (`service.items.reads.explain_decision`),
    none for an entry shown by metadata only; `unseen`, the items of a sealed slice the reader may
    not see, are not named."""
    if decision is None:
        return None
    details = decision.details or {}
    matched = decision.matched_item_id if decision.matched_item_id is not None else details.get("ruled_apart_from")
    rule, margin = details.get("rule"), details.get("margin")
    return QueueDecision(
        status=decision.status,
        stage=decision.stage,
        rule=rule if isinstance(rule, str) else None,
        score=decision.score,
        margin=float(margin) if isinstance(margin, int | float) else None,
        matched_item_id=None if withheld or not isinstance(matched, int) or matched in unseen else matched,
        decided_at=decision.decided_at,
        explanation=None if withheld else explain_decision(decision, hidden=unseen),
    )


def _entry(item: Item, *, position: int, source: str, sealed: bool, withheld: bool, decision: DedupDecision | None, unseen: Collection[int]) -> ReviewQueueEntry:
    shown = ShownItem.of(item, source, sealed=sealed, withheld=withheld)
    return ReviewQueueEntry.model_validate(
        {
            "position": position,
            "id": shown.id,
            "source": source,
            "occurred_at": shown.occurred_at,
            "ingested_at": shown.ingested_at,
            "status": shown.status,
            "sealed": shown.sealed,
            "withheld": shown.withheld,
            "source_changed_at": shown.source_changed_at,
            "dedup": _decision(decision, withheld=shown.withheld, unseen=unseen),
            **shown.content(),
        }
    )


def _note(withheld: int, filters: QueueFilters) -> str | None:
    parts = []
    if withheld:
        parts.append(
            f"{withheld} sealed-bound item(s) on this page are shown by their metadata only (source, dates, status, dedup decision): their content goes out "
            "only in a sealed review window, which needs the `sealed` scope and takes one unit of the eval's sealed-read budget"
        )
    if filters.text:
        parts.append("the text filter matches only items whose content this reader may see")
    return "; ".join(parts) or None
