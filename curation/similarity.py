"""Ranking the items most like a given one (`/similar`, `/dedup/check`): candidates from the
embedding index and the LSH buckets, re-ranked by a fusion of body and title cosines with
character n-gram TF-IDF similarity computed over the short list.

Fusion measured on ../shared/data/gitbugs_hadoop: recall@5 of the labelled earlier duplicate
0.89, against 0.80 for body cosine alone and 0.48 for MinHash alone (bench/dedup_quality.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sqlmodel import Session, col, select

from curation.embeddings import Vectors
from curation.index import TITLE_WEIGHT, Neighbour, SimilarityIndex
from curation.lexical import lexical_similarity
from ingest.normalisation import dedup_text
from schemas.item import Item

POOL_MIN = 100
LEXICAL_WEIGHT = 1.0


@dataclass(frozen=True)
class Similar:
    """One neighbour: its fused `score`, body and title cosines, estimated Jaccard of word
    3-shingles (None when it has no sketch) and lexical (character TF-IDF) cosine."""

    item_id: int
    score: float
    cosine: float
    title_cosine: float
    jaccard: float | None
    lexical: float


def rank_similar(
    session: Session,
    index: SimilarityIndex,
    *,
    text: str,
    body: Vectors,
    title: Vectors,
    sketch: Any,
    k: int,
    before: float | None = None,
    exclude: Iterable[int] = (),
) -> list[Similar]:
    """The `k` indexed items most similar to a text, best first (only those that occurred before
    `before`, when given)."""
    excluded = set(exclude)
    pool = {n.item_id: n for n in index.nearest(body, title, max(POOL_MIN, 10 * k), exclude=excluded, before=before)}
    for item_id, _ in index.near(sketch):
        if item_id not in pool and item_id not in excluded and (before is None or index.get(item_id).occurred_at < before):
            position = index.position[item_id]
            pool[item_id] = Neighbour(item_id, float(index.body.view[position] @ body), float(index.title.view[position] @ title))
    if not pool:
        return []
    ids = list(pool)
    rows = session.exec(select(Item.id, Item.title, Item.input).where(col(Item.id).in_(ids))).all()
    texts = {item_id: dedup_text(item_title, item_input) for item_id, item_title, item_input in rows}
    lexical = lexical_similarity(text, [texts.get(item_id, "") for item_id in ids])
    ranked = []
    for item_id, lex in zip(ids, lexical, strict=True):
        neighbour = pool[item_id]
        score = neighbour.body_cosine + TITLE_WEIGHT * neighbour.title_cosine + LEXICAL_WEIGHT * float(lex)
        jaccard = _round(index.jaccard(sketch, item_id))
        ranked.append(Similar(item_id, round(score, 4), round(neighbour.body_cosine, 4), round(neighbour.title_cosine, 4), jaccard, round(float(lex), 4)))
    ranked.sort(key=lambda entry: -entry.score)
    return ranked[:k]


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)
