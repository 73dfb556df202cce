"""Items as readers see them: lookups, pages, read models with sealed content withheld, how dedup
judged an item, and the items dedup finds most like one.

An item in (or bound for) a sealed slice (`curation.releases.visibility`) is shown without its
content (`sealed: true`; external id, text fields, metadata and tags empty): sealed content is
served only by budgeted sealed reads and sealed runs.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import asdict
from datetime import datetime

from sqlalchemy import and_, or_
from sqlmodel import Session, col, select

from curation.dedup.similarity import Similar
from curation.releases.visibility import sealed_item_ids
from schemas.common import read_model
from schemas.dedup import DedupDecision, DedupRead, SimilarRead
from schemas.item import Item, ItemRead, ItemStatus
from schemas.source import Source
from service.core.cursors import decode_time_id_cursor, encode_cursor
from service.core.problems import ProblemError
from service.evals.definitions import seal_keys

CURSOR_KIND = "items"
WITHHELD: dict[str, object] = {
    "external_id": "",
    "occurred_at": None,
    "ingested_at": None,
    "updated_at": None,
    "title": "",
    "input": "",
    "reference": "",
    "metadata": {},
    "tags": [],
    "content_hash": "",
    "sealed": True,
}


def item_read(item: Item, source_name: str, *, sealed: bool = False) -> ItemRead:
    """The item as the API shows it; `sealed` withholds its content, its dates and its content
    hash, keeping only its id, source, status and revision."""
    return read_model(ItemRead, item, **{"source": source_name, "metadata": item.meta, **(WITHHELD if sealed else {})})


def withheld(*, session: Session, item_ids: Collection[int], secret_key: str) -> set[int]:
    """Which of `item_ids` must be shown without content (`curation.releases.visibility`)."""
    return sealed_item_ids(session=session, item_ids=item_ids, seal_key_of=seal_keys(secret_key=secret_key))


def require_item(session: Session, item_id: int) -> tuple[Item, str]:
    """The item and its source's name, or a 404 problem."""
    row = session.exec(select(Item, Source.name).join(Source, col(Source.id) == col(Item.source_id)).where(Item.id == item_id)).first()
    if row is None:
        raise ProblemError(404, "Not Found", f"no item with id {item_id}")
    return row[0], row[1]


def item_page(
    *,
    session: Session,
    secret_key: str,
    source: str | None = None,
    status: ItemStatus | None = None,
    occurred_after: datetime | None = None,
    occurred_before: datetime | None = None,
    limit: int,
    cursor: str | None = None,
) -> tuple[list[tuple[Item, str]], str | None]:
    """One page of items with their source names, newest incident first (ties: higher id first),
    and the cursor of the next page (None on the last). Items in (or bound for) a sealed slice are
    left out, so neither a page, nor its filters, nor its cursor tells anything of them; a page can
    therefore hold fewer than `limit` items before the last one."""
    query = select(Item, Source.name).join(Source, col(Source.id) == col(Item.source_id))
    if source is not None:
        query = query.where(Source.name == source)
    if status is not None:
        query = query.where(Item.status == status.value)
    if occurred_after is not None:
        query = query.where(col(Item.occurred_at) >= occurred_after)
    if occurred_before is not None:
        query = query.where(col(Item.occurred_at) < occurred_before)
    if cursor:
        at, item_id = decode_time_id_cursor(cursor, CURSOR_KIND, secret_key=secret_key)
        query = query.where(or_(col(Item.occurred_at) < at, and_(col(Item.occurred_at) == at, col(Item.id) < item_id)))
    rows = session.exec(query.order_by(col(Item.occurred_at).desc(), col(Item.id).desc()).limit(limit + 1)).all()
    page = [(item, name) for item, name in rows[:limit]]
    last = page[-1][0] if len(rows) > limit else None
    next_cursor = encode_cursor(CURSOR_KIND, last.occurred_at.isoformat(), last.id, secret_key=secret_key) if last is not None and last.id is not None else None
    hidden = withheld(session=session, item_ids=[item.id for item, _ in page if item.id is not None], secret_key=secret_key)
    return [(item, name) for item, name in page if item.id not in hidden], next_cursor


def dedup_read(session: Session, item: Item, *, sealed: bool = False) -> DedupRead:
    """How dedup judged `item`: its newest decision, with the cluster root it points at now (an
    earlier incident arriving later can move it); just the status while it is a candidate, has
    never been judged (a reference item), or is sealed (its matches would name what it is like)."""
    if sealed or item.status == ItemStatus.CANDIDATE.value:
        return DedupRead(status=item.status)
    decision = session.exec(select(DedupDecision).where(DedupDecision.item_id == item.id).order_by(col(DedupDecision.id).desc()).limit(1)).first()
    if decision is None:
        return DedupRead(status=item.status, duplicate_of=item.duplicate_of)
    return DedupRead(status=decision.status, duplicate_of=item.duplicate_of, stage=decision.stage, score=decision.score, decided_at=decision.decided_at)


def similar_reads(*, session: Session, ranked: Sequence[Similar], secret_key: str) -> list[SimilarRead]:
    """The ranked items as the API shows them, best first. Items in (or bound for) a sealed slice
    are left out (their ids and scores would confirm a guess at their text), as are items deleted
    since the index was built."""
    ids = [entry.item_id for entry in ranked]
    hidden = withheld(session=session, item_ids=ids, secret_key=secret_key)
    rows = session.exec(select(Item, Source.name).join(Source, col(Source.id) == col(Item.source_id)).where(col(Item.id).in_(ids))).all()
    found = {item.id: (item, name) for item, name in rows}
    return [
        read_model(SimilarRead, found[entry.item_id][0], **asdict(entry), id=entry.item_id, source=found[entry.item_id][1])
        for entry in ranked
        if entry.item_id in found and entry.item_id not in hidden
    ]
