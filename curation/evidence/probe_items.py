"""Which items a completion probe sends: an eval release's dev items (never a sealed one) or a
public corpus's items, sampled evenly from both sides of the model's training cutoff, and turned
into `schemas.evidence.ProbeItem`s. Before sampling, items dated after the cutoff that are near
copies of items dated before it leave the control band (`curation.evidence.clean_band`).

The text probed is the item's `input` (what a model is shown in an eval; its `title` when the
input is empty); answer options, where an item has them, are a list of strings under
`metadata.options`, kept in their original order.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Collection, Sequence
from datetime import date, datetime
from typing import Any, TypeVar

from sqlalchemy import or_
from sqlmodel import Session, col, select

from curation.evidence.clean_band import DatedText, NearTo, RecordedLink, near_pre_cutoff
from curation.releases.groups import links_touching
from curation.releases.visibility import sealed_anywhere
from schemas.evals import Eval, Split
from schemas.evidence import ProbeItem, cutoff_instant
from schemas.item import Item
from schemas.release import Release, ReleaseItem
from schemas.source import Source

SAMPLE_SALT = "goldenset-probe-sample-v1"
T = TypeVar("T")
_BATCH = 500
"""Ids per IN list: well under SQLite's and PostgreSQL's limits on bound parameters."""


def probe_text(content: dict[str, Any]) -> tuple[str, tuple[str, ...]]:
    """The text to probe and the answer options of an item's content (as released or stored)."""
    text = str(content.get("input") or "").strip() or str(content.get("title") or "").strip()
    metadata = content.get("metadata") or {}
    options = metadata.get("options") if isinstance(metadata, dict) else None
    if isinstance(options, list) and options and all(isinstance(option, str) for option in options):
        return text, tuple(options)
    return text, ()


def _order(key: str) -> str:
    return hashlib.sha256(f"{SAMPLE_SALT}:{key}".encode()).hexdigest()


def sample_around_cutoff(entries: Sequence[T], *, occurred_at: Callable[[T], datetime], key: Callable[[T], str], cutoff: date, limit: int | None) -> list[T]:
    """Up to `limit` entries (all when None), half dated before `cutoff` and half on or after it
    where both sides have enough (the other side fills in where one is short). The draw is a
    fixed pseudo-random order by key, so the same entries and limit give the same sample; the
    result is oldest first."""
    if limit is None or limit >= len(entries):
        chosen = list(entries)
    else:
        instant = cutoff_instant(cutoff)
        before = sorted((entry for entry in entries if occurred_at(entry) < instant), key=lambda entry: _order(key(entry)))
        after = sorted((entry for entry in entries if occurred_at(entry) >= instant), key=lambda entry: _order(key(entry)))
        take_before = min(len(before), max(limit // 2, limit - len(after)))
        chosen = before[:take_before] + after[: limit - take_before]
    return sorted(chosen, key=lambda entry: (occurred_at(entry), key(entry)))


def recorded_links(session: Session, item_ids: Collection[int]) -> list[RecordedLink]:
    """What curation recorded about `item_ids`, by item ids: every stored near link with an end
    among them (`curation.releases.groups.links_touching`), and every duplicate decision naming
    one of them either way (`Item.duplicate_of`)."""
    links = [RecordedLink(str(link.a), str(link.b), link.stage, link.score) for link in links_touching(session, item_ids)]
    ids = sorted(set(item_ids))
    for start in range(0, len(ids), _BATCH):
        chunk = ids[start : start + _BATCH]
        either = or_(col(Item.id).in_(chunk), col(Item.duplicate_of).in_(chunk))
        for item_id, other in session.exec(select(Item.id, Item.duplicate_of).where(either, col(Item.duplicate_of).is_not(None))).all():
            links.append(RecordedLink(str(item_id), str(other), "duplicate"))
    return links


def _linked_before(session: Session, links: Sequence[RecordedLink], *, known: Collection[str], source_ids: Collection[int], cutoff: date) -> list[DatedText]:
    """The items at the other end of `links` (not among `known`) that belong to one of
    `source_ids` and are dated before `cutoff`, as references joined by those links only."""
    others = sorted({int(end) for link in links for end in (link.a, link.b) if end not in known})
    found: list[DatedText] = []
    for start in range(0, len(others), _BATCH):
        chunk = others[start : start + _BATCH]
        query = select(Item.id, Item.occurred_at).where(col(Item.id).in_(chunk), col(Item.source_id).in_(list(source_ids)), col(Item.occurred_at) < cutoff_instant(cutoff))
        found += [DatedText(str(item_id), "", occurred_at) for item_id, occurred_at in session.exec(query).all()]
    return found


def eval_probe_items(*, session: Session, release: Release, cutoff: date, limit: int | None) -> tuple[list[ReleaseItem], list[ProbeItem], dict[str, NearTo]]:
    """The release's dev items to probe (sampled around `cutoff`), their probe items keyed by the
    goldenset item id, and the items left out of the control band before sampling as near copies
    of items dated before `cutoff` (`curation.evidence.clean_band.near_pre_cutoff`: the release's
    own dev items compared by text, and the items of the eval's sources joined to them by what
    curation recorded). Items any eval holds sealed are left out; each probe item also carries its
    sealed flag, which `curation.evidence.probing.plan_probes` refuses, so a sealed item that
    slipped through would stop the probe before anything is sent."""
    rows = session.exec(select(ReleaseItem).where(ReleaseItem.release_id == release.id, ReleaseItem.split == Split.DEV.value)).all()
    sealed = sealed_anywhere(session, [row.item_id for row in rows])
    texts = {row.item_id: probe_text(json.loads(row.content)) for row in rows if row.item_id not in sealed}
    eligible = [row for row in rows if row.item_id in texts and texts[row.item_id][0]]
    dated = [DatedText(str(row.item_id), texts[row.item_id][0], row.occurred_at) for row in eligible]
    control = [row.item_id for row in eligible if row.occurred_at >= cutoff_instant(cutoff)]
    links = recorded_links(session, control)
    evaluation = session.get(Eval, release.eval_id)
    names = evaluation.sources if evaluation is not None else []
    source_ids = [source_id for source_id in session.exec(select(Source.id).where(col(Source.name).in_(names))).all() if source_id is not None]
    pool = _linked_before(session, links, known={item.item_id for item in dated}, source_ids=source_ids, cutoff=cutoff)
    near = near_pre_cutoff(dated, cutoff=cutoff, pool=pool, links=links)
    clean = [row for row in eligible if str(row.item_id) not in near]
    chosen = sample_around_cutoff(clean, occurred_at=lambda row: row.occurred_at, key=lambda row: str(row.item_id), cutoff=cutoff, limit=limit)
    items = [
        ProbeItem(
            item_id=str(row.item_id), occurred_at=row.occurred_at, text=texts[row.item_id][0], options=texts[row.item_id][1],
            sealed=row.split != Split.DEV.value or row.item_id in sealed,
        )
        for row in chosen
    ]
    return chosen, items, near


def corpus_probe_items(*, session: Session, corpus: Source, cutoff: date, limit: int | None) -> tuple[list[Item], list[ProbeItem], dict[str, NearTo]]:
    """The public corpus's items to probe (sampled around `cutoff`), keyed by the corpus's own ids,
    and the items left out of the control band before sampling as near copies of the corpus's items
    dated before `cutoff` (`curation.evidence.clean_band.near_pre_cutoff`: every item compared by
    text, and joined by what curation recorded, where it curated them)."""
    rows = session.exec(select(Item).where(Item.source_id == corpus.id)).all()
    texts = {item.external_id: probe_text({"input": item.input, "title": item.title, "metadata": item.meta}) for item in rows}
    eligible = [item for item in rows if texts[item.external_id][0]]
    external = {str(item.id): item.external_id for item in eligible}
    links = [
        RecordedLink(external[link.a], external[link.b], link.stage, link.score)
        for link in recorded_links(session, [item.id for item in eligible if item.id is not None])
        if link.a in external and link.b in external
    ]
    dated = [DatedText(item.external_id, texts[item.external_id][0], item.occurred_at) for item in eligible]
    near = near_pre_cutoff(dated, cutoff=cutoff, links=links)
    clean = [item for item in eligible if item.external_id not in near]
    chosen = sample_around_cutoff(clean, occurred_at=lambda item: item.occurred_at, key=lambda item: item.external_id, cutoff=cutoff, limit=limit)
    items = [ProbeItem(item_id=item.external_id, occurred_at=item.occurred_at, text=texts[item.external_id][0], options=texts[item.external_id][1]) for item in chosen]
    return chosen, items, near
