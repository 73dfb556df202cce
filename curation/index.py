"""The in-memory similarity index of every decided item: exact hashes, a MinHash LSH over their
sketches, and matrices of their embeddings. Rebuilt from the database at start; curation adds
to it as it decides.

Candidates come from all three (an exact hash, LSH buckets, and the nearest embeddings), because
real duplicate reports often share few words.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from datasketch import LeanMinHash, MinHashLSH
from numpy.typing import NDArray
from sqlalchemy import select as sa_select
from sqlmodel import Session, col, select

from curation.fingerprints import MinHashRecipe, from_bytes
from schemas.dedup import Embedding, ItemFingerprint
from schemas.item import Item, ItemStatus

Vector = NDArray[np.float32]
# Title and body cosines are combined so that a report re-titled but re-telling the same body,
# or re-told under the same title, both rank high.
TITLE_WEIGHT = 0.5


class MixedRecipeError(RuntimeError):
    """Stored fingerprints were made with another recipe or model; they cannot share an index."""


@dataclass
class IndexedItem:
    """What the index knows of a decided item."""

    item_id: int
    occurred_at: float
    content_hash: str
    identity: str | None
    root: int
    status: str
    body_key: str | None = None
    title_key: str | None = None


@dataclass(frozen=True)
class Neighbour:
    item_id: int
    body_cosine: float
    title_cosine: float

    @property
    def score(self) -> float:
        """The embedding score: body and title cosines, weighted, scaled back to [-1, 1]."""
        return (self.body_cosine + TITLE_WEIGHT * self.title_cosine) / (1 + TITLE_WEIGHT)


class _Matrix:
    """A growable float32 row matrix."""

    def __init__(self, dim: int) -> None:
        self.rows = np.zeros((1024, dim), dtype=np.float32)
        self.size = 0

    def append(self, vectors: NDArray[np.float32]) -> None:
        needed = self.size + len(vectors)
        if needed > len(self.rows):
            grown = np.zeros((max(needed, 2 * len(self.rows)), self.rows.shape[1]), dtype=np.float32)
            grown[: self.size] = self.rows[: self.size]
            self.rows = grown
        self.rows[self.size : needed] = vectors
        self.size = needed

    @property
    def view(self) -> NDArray[np.float32]:
        return self.rows[: self.size]


class SimilarityIndex:
    """Exact, near-verbatim and embedding lookups over decided items (not thread-safe: one writer)."""

    def __init__(self, *, recipe: MinHashRecipe, model_id: str, dim: int, lsh_threshold: float) -> None:
        if not 0 < lsh_threshold < 1:
            raise ValueError(f"lsh_threshold must be between 0 and 1, got {lsh_threshold}")
        self.recipe = recipe
        self.model_id = model_id
        self.items: list[IndexedItem] = []
        self.position: dict[int, int] = {}
        self.by_hash: dict[str, list[int]] = {}
        self.sketches: dict[int, LeanMinHash] = {}
        self.lsh = MinHashLSH(threshold=lsh_threshold, num_perm=recipe.num_perm)
        self.body = _Matrix(dim)
        self.title = _Matrix(dim)

    def __len__(self) -> int:
        return len(self.items)

    def __contains__(self, item_id: int) -> bool:
        return item_id in self.position

    def add(self, entries: Sequence[tuple[IndexedItem, LeanMinHash, Vector, Vector]]) -> None:
        """Index decided items (each with its sketch and body and title vectors)."""
        fresh = [entry for entry in entries if entry[0].item_id not in self.position]
        if not fresh:
            return
        with self.lsh.insertion_session() as session:
            for item, sketch, _, _ in fresh:
                session.insert(item.item_id, sketch, check_duplication=False)
        for item, sketch, _, _ in fresh:
            self.position[item.item_id] = len(self.items)
            self.items.append(item)
            self.by_hash.setdefault(item.content_hash, []).append(item.item_id)
            self.sketches[item.item_id] = sketch
        self.body.append(np.vstack([entry[2] for entry in fresh]))
        self.title.append(np.vstack([entry[3] for entry in fresh]))

    def vectors(self, item_id: int) -> tuple[Vector, Vector]:
        """The body and title vectors stored for an indexed item."""
        position = self.position[item_id]
        return self.body.view[position], self.title.view[position]

    def get(self, item_id: int) -> IndexedItem:
        return self.items[self.position[item_id]]

    def set_root(self, item_id: int, root: int, status: str | None = None) -> None:
        item = self.get(item_id)
        item.root = root
        if status is not None:
            item.status = status

    def exact(self, content_hash: str) -> list[int]:
        return list(self.by_hash.get(content_hash, []))

    def near(self, sketch: LeanMinHash) -> list[tuple[int, float]]:
        """Items in the query's LSH buckets with their estimated Jaccard, highest first."""
        found = [(int(item_id), float(sketch.jaccard(self.sketches[int(item_id)]))) for item_id in self.lsh.query(sketch)]
        return sorted(found, key=lambda pair: -pair[1])

    def jaccard(self, sketch: LeanMinHash, item_id: int) -> float | None:
        stored = self.sketches.get(item_id)
        return float(sketch.jaccard(stored)) if stored is not None else None

    def nearest(self, body: Vector, title: Vector, k: int, *, exclude: Iterable[int] = (), before: float | None = None) -> list[Neighbour]:
        """The `k` items with the highest embedding score, optionally only those that occurred before `before`."""
        if not self.items or k <= 0:
            return []
        body_cos = self.body.view @ body
        title_cos = self.title.view @ title
        scores = (body_cos + TITLE_WEIGHT * title_cos) / (1 + TITLE_WEIGHT)
        for item_id in exclude:
            if item_id in self.position:
                scores[self.position[item_id]] = -np.inf
        if before is not None:
            times = np.fromiter((item.occurred_at for item in self.items), dtype=np.float64, count=len(self.items))
            scores[times >= before] = -np.inf
        count = min(k, len(scores))
        top = np.argpartition(-scores, count - 1)[:count]
        top = top[np.argsort(-scores[top])]
        return [Neighbour(self.items[i].item_id, float(body_cos[i]), float(title_cos[i])) for i in top if np.isfinite(scores[i])]

    @classmethod
    def load(cls, session: Session, *, recipe: MinHashRecipe, model_id: str, dim: int, lsh_threshold: float) -> SimilarityIndex:
        """Rebuild from stored fingerprints and embeddings of every decided item.

        Raises `MixedRecipeError` when some fingerprints were made with another recipe or model
        (re-fingerprint them first: `goldenset curate --refingerprint`)."""
        index = cls(recipe=recipe, model_id=model_id, dim=dim, lsh_threshold=lsh_threshold)
        query = (
            sa_select(col(Item.id), col(Item.occurred_at), col(Item.content_hash), col(Item.identity_key), col(Item.duplicate_of), col(Item.status), ItemFingerprint)
            .join(ItemFingerprint, col(ItemFingerprint.item_id) == col(Item.id))
            .where(col(Item.status) != ItemStatus.CANDIDATE.value)
            .order_by(col(Item.occurred_at), col(Item.id))
        )
        rows = session.execute(query).all()
        stale = [row for row in rows if row[6].recipe != recipe.key or (row[6].body_key is not None and row[6].model_id != model_id)]
        if stale:
            recipes = sorted({f"{row[6].recipe} / {row[6].model_id}" for row in stale})
            raise MixedRecipeError(
                f"{len(stale)} fingerprints were made with another recipe or model ({', '.join(recipes[:3])}); "
                f"the current one is {recipe.key} / {model_id}: run `goldenset curate --refingerprint`"
            )
        vectors: dict[str, Vector] = {}
        for text_hash, vector in session.exec(select(Embedding.text_hash, Embedding.vector).where(Embedding.model_id == model_id)):
            vectors[text_hash] = np.frombuffer(vector, dtype=np.float32)
        entries = []
        for item_id, occurred_at, content_hash, identity, duplicate_of, status, fingerprint in rows:
            if fingerprint.body_key is None:
                continue  # never embedded (made before vectors were shared with exact duplicates)
            if fingerprint.body_key not in vectors or fingerprint.title_key not in vectors:
                raise MixedRecipeError(f"item {item_id} has no stored embedding under {model_id}: run `goldenset curate --refingerprint`")
            entries.append(
                (
                    IndexedItem(item_id, occurred_at.timestamp(), content_hash, identity, duplicate_of or item_id, status, fingerprint.body_key, fingerprint.title_key),
                    from_bytes(fingerprint.minhash, recipe),
                    vectors[fingerprint.body_key],
                    vectors[fingerprint.title_key],
                )
            )
        for start in range(0, len(entries), 5000):
            index.add(entries[start : start + 5000])
        return index
