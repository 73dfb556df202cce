"""Which items a completion probe sends: an eval release's dev items (never a sealed one) or a
public corpus's items, sampled evenly from both sides of the model's training cutoff, and turned
into `schemas.evidence.ProbeItem`s.

The text probed is the item's `input` (what a model is shown in an eval; its `title` when the
input is empty); answer options, where an item has them, are a list of strings under
`metadata.options`, kept in their original order.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from datetime import date, datetime
from typing import Any, TypeVar

from sqlmodel import Session, select

from curation.releases.visibility import sealed_anywhere
from schemas.evals import Split
from schemas.evidence import ProbeItem, cutoff_instant
from schemas.item import Item
from schemas.release import Release, ReleaseItem
from schemas.source import Source

SAMPLE_SALT = "goldenset-probe-sample-v1"
T = TypeVar("T")


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


def eval_probe_items(*, session: Session, release: Release, cutoff: date, limit: int | None) -> tuple[list[ReleaseItem], list[ProbeItem]]:
    """The release's dev items to probe (sampled around `cutoff`) and their probe items, keyed by
    the goldenset item id. Items any eval holds sealed are left out; each probe item
    also carries its sealed flag, which `curation.evidence.probing.plan_probes` refuses, so a
    sealed item that slipped through would stop the probe before anything is sent."""
    rows = session.exec(select(ReleaseItem).where(ReleaseItem.release_id == release.id, ReleaseItem.split == Split.DEV.value)).all()
    sealed = sealed_anywhere(session, [row.item_id for row in rows])
    eligible = [row for row in rows if row.item_id not in sealed]
    chosen = sample_around_cutoff(eligible, occurred_at=lambda row: row.occurred_at, key=lambda row: str(row.item_id), cutoff=cutoff, limit=limit)
    items: list[ProbeItem] = []
    kept: list[ReleaseItem] = []
    for row in chosen:
        text, options = probe_text(json.loads(row.content))
        if not text:
            continue
        kept.append(row)
        items.append(ProbeItem(item_id=str(row.item_id), occurred_at=row.occurred_at, text=text, options=options, sealed=row.split != Split.DEV.value or row.item_id in sealed))
    return kept, items


def corpus_probe_items(*, session: Session, corpus: Source, cutoff: date, limit: int | None) -> tuple[list[Item], list[ProbeItem]]:
    """The public corpus's items to probe (sampled around `cutoff`), keyed by the corpus's own ids."""
    rows = session.exec(select(Item).where(Item.source_id == corpus.id)).all()
    chosen = sample_around_cutoff(list(rows), occurred_at=lambda item: item.occurred_at, key=lambda item: item.external_id, cutoff=cutoff, limit=limit)
    items: list[ProbeItem] = []
    kept: list[Item] = []
    for item in chosen:
        text, options = probe_text({"input": item.input, "title": item.title, "metadata": item.meta})
        if not text:
            continue
        kept.append(item)
        items.append(ProbeItem(item_id=item.external_id, occurred_at=item.occurred_at, text=text, options=options))
    return kept, items
