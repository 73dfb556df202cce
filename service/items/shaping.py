"""The one way an item leaves the service: who may see an item's content, and the item as that
reader may see it.

Every route, page and command that answers with or renders an item (reads, writes, undo, edits,
rulings, the review queue, errors) takes it from `shape_items` / `shape_item` (or, where the
visibility of a whole page was decided in bulk, `ShownItem.of`) and serialises what it gets:
nothing else turns an `Item` row into an answer. The rule applied:

- an item in (or bound for) an eval's sealed slice (`curation.releases.visibility`) is *sealed*;
- a sealed item's content is *withheld* unless the reader holds an open sealed review window on
  every eval that seals it (`revealed`, `service.evals.sealed_review`): no external id, title,
  input, reference, metadata, tags, content hash, duplicate link or source-change time, and its
  incident and ingest times only to the day (enough to order a queue, too coarse to find the
  incident at its source).

Sealed content otherwise goes out only through budgeted sealed reads of a release and sealed runs,
which serve frozen release content, never an `Item`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from sqlmodel import Session

from curation.releases.visibility import SealKeyOf, sealed_item_ids, sealing_evals
from schemas.evals import Eval
from schemas.item import Item, ItemRead
from service.evals.definitions import seal_keys


@dataclass(frozen=True)
class ShownItem:
    """An item as one reader may see it. It carries the names the `Item` row has (so a page
    renders either alike), with the content blanked when `withheld`."""

    id: int
    source: str
    status: str
    revision: int
    sealed: bool
    withheld: bool
    external_id: str
    occurred_at: datetime
    ingested_at: datetime
    updated_at: datetime
    title: str
    input: str
    reference: str
    meta: dict[str, Any] = field(default_factory=dict)
    tags: list[str] = field(default_factory=list)
    content_hash: str = ""
    curated_revision: int | None = None
    duplicate_of: int | None = None
    source_changed_at: datetime | None = None

    @classmethod
    def of(cls, item: Item, source: str, *, sealed: bool, withheld: bool) -> ShownItem:
        """`item` of `source` shaped by the module's rule, its visibility already decided
        (`withheld` implies `sealed`)."""
        assert item.id is not None
        full = cls(
            id=item.id,
            source=source,
            status=item.status,
            revision=item.revision,
            sealed=sealed,
            withheld=False,
            external_id=item.external_id,
            occurred_at=item.occurred_at,
            ingested_at=item.ingested_at,
            updated_at=item.updated_at,
            title=item.title,
            input=item.input,
            reference=item.reference,
            meta=dict(item.meta),
            tags=list(item.tags),
            content_hash=item.content_hash,
            curated_revision=item.curated_revision,
            duplicate_of=item.duplicate_of,
            source_changed_at=item.source_changed_at,
        )
        if not (withheld and sealed):
            return full
        day = _day(item.occurred_at)
        return replace(
            full,
            withheld=True,
            occurred_at=day,
            ingested_at=_day(item.ingested_at),
            updated_at=day,
            external_id="",
            title="",
            input="",
            reference="",
            meta={},
            tags=[],
            content_hash="",
            duplicate_of=None,
            source_changed_at=None,
        )

    def content(self) -> dict[str, Any]:
        """The content fields by their API names (empty when withheld)."""
        return {"external_id": self.external_id, "title": self.title, "input": self.input, "reference": self.reference, "metadata": self.meta, "tags": self.tags}

    def read(self) -> ItemRead:
        """The item as the API shows it (`ItemRead`); a withheld item comes with no dates at all
        and `sealed: true`."""
        dates = {"occurred_at": None, "ingested_at": None, "updated_at": None} if self.withheld else {}
        return ItemRead.model_validate(
            {
                "id": self.id,
                "source": self.source,
                "occurred_at": self.occurred_at,
                "ingested_at": self.ingested_at,
                "updated_at": self.updated_at,
                "content_hash": self.content_hash,
                "revision": self.revision,
                "status": self.status,
                "sealed": self.withheld,
                **self.content(),
                **dates,
            }
        )


def _day(moment: datetime) -> datetime:
    """Midnight UTC of `moment`'s day (a naive time is taken as UTC, as the database stores it)."""
    day = (moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)).date()
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def remembered_keys(seal_key_of: SealKeyOf) -> SealKeyOf:
    """`seal_key_of`, decrypting each eval's key once."""
    keys: dict[int | None, bytes] = {}

    def key_of(evaluation: Eval) -> bytes:
        if evaluation.id not in keys:
            keys[evaluation.id] = seal_key_of(evaluation)
        return keys[evaluation.id]

    return key_of


def withheld(*, session: Session, item_ids: Collection[int], secret_key: str) -> set[int]:
    """Which of `item_ids` are sealed or bound for a sealed slice (`curation.releases.visibility`):
    shown without content to a reader holding no sealed review window."""
    return sealed_item_ids(session=session, item_ids=item_ids, seal_key_of=seal_keys(secret_key=secret_key))


def hidden_from_reader(
    session: Session, items: Mapping[int, str] | Collection[int], seal_key_of: SealKeyOf, revealed: Collection[int], *, sealers: Mapping[int, set[int]] | None = None
) -> set[int]:
    """Those of `items` whose content the reader may not see: sealed-bound, and not sealed only
    by evals in `revealed` (the ids of the evals on which the reader holds an open sealed review
    window). `sealers`: the evals sealing each of them (`curation.releases.visibility.sealing_evals`),
    when already known."""
    if sealers is None:
        sealers = sealing_evals(session=session, item_ids=list(items), seal_key_of=seal_key_of)
    shown = set(revealed)
    return {item_id for item_id in items if item_id in sealers and not (shown and sealers[item_id] <= shown)}


def shape_items(*, session: Session, rows: Sequence[tuple[Item, str]], secret_key: str, revealed: Collection[int] = ()) -> list[ShownItem]:
    """`rows` (item, source name) as the reader may see them, in order. `revealed`: the ids of the
    evals on which the reader holds an open sealed review window (none: every sealed item is
    withheld)."""
    sources = {item.id: name for item, name in rows if item.id is not None}
    seal_key_of = remembered_keys(seal_keys(secret_key=secret_key))
    sealers = sealing_evals(session=session, item_ids=list(sources), seal_key_of=seal_key_of)
    hidden = hidden_from_reader(session, sources, seal_key_of, revealed, sealers=sealers)
    return [ShownItem.of(item, name, sealed=item.id in sealers, withheld=item.id in hidden) for item, name in rows if item.id is not None]


def shape_item(*, session: Session, item: Item, source: str, secret_key: str, revealed: Collection[int] = ()) -> ShownItem:
    """One item as the reader may see it (`shape_items`)."""
    return shape_items(session=session, rows=[(item, source)], secret_key=secret_key, revealed=revealed)[0]
