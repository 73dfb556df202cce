"""The in-memory similarity index of every decided item: exact hashes, a MinHash LSH over their
sketches, and matrices of their embeddings. Rebuilt from the database at start; curation adds
to it as it decides.

Candidates come from all three (an exact hash, LSH buckets, and the nearest embeddings), because
real duplicate reports often share few words.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
from datasketch import LeanMinHash, MinHashLSH
from numpy.typing import NDArray
from sqlalchemy import ColumnElement, Connection, and_, func, or_
from sqlalchemy import select as sa_select
from sqlmodel import Session, col

from curation.dedup.ann import ApproximateVectors
from curation.dedup.ann_file import AnnConfig
from curation.dedup.fingerprints import MinHashRecipe, sketch_from_values, values_dtype, values_from_bytes
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
    """A growable row matrix (float32 vectors or uint64 MinHash values)."""

    def __init__(self, width: int, dtype: type[np.generic] = np.float32) -> None:
        self.rows: NDArray[Any] = np.zeros((1024, width), dtype=dtype)
        self.size = 0

    def append(self, rows: NDArray[Any]) -> None:
        if self.size == 0 and len(rows) > len(self.rows) and rows.dtype == self.rows.dtype:
            # A rebuild: keep the rows as given, without copying (possibly a read-only buffer: a
            # full matrix is never written into, the next append grows it into a new array).
            self.rows = rows
            self.size = len(rows)
            return
        needed = self.size + len(rows)
        if needed > len(self.rows):
            grown = np.zeros((max(needed, 2 * len(self.rows)), self.rows.shape[1]), dtype=self.rows.dtype)
            grown[: self.size] = self.rows[: self.size]
            self.rows = grown
        self.rows[self.size : needed] = rows
        self.size = needed

    @property
    def view(self) -> NDArray[Any]:
        return self.rows[: self.size]


def _insert_bands(lsh: MinHashLSH, keys: Sequence[int], hashvalues: NDArray[np.unsignedinteger[Any]], recipe: MinHashRecipe) -> bool:
    """Insert many sketches into an empty in-memory `lsh` at once, computing every band key with
    numpy instead of one sketch at a time (a cold rebuild of 100k items spent most of its time in
    datasketch's per-sketch loop).

    The band keys are the bytes datasketch itself derives from a sketch (`MinHashLSH._H`: the
    band's hash values, big-endian), filled into its in-memory dict storages. This leans on
    datasketch's layout, so it is checked first: the storages must be the dict-backed ones and the
    first sketch's band keys must equal datasketch's own. Otherwise nothing is inserted and the
    caller falls back to `insertion_session`. Returns whether the sketches were inserted."""
    if lsh.prepickle or getattr(lsh, "hashfunc", None) is not None or not keys:
        return False
    tables = [getattr(table, "_dict", None) if type(table).__name__ == "DictSetStorage" else None for table in lsh.hashtables]
    key_lists = getattr(lsh.keys, "_dict", None) if type(lsh.keys).__name__ == "DictListStorage" else None
    if not isinstance(key_lists, dict) or key_lists or not all(isinstance(table, dict) for table in tables):
        return False
    bands: list[list[bytes]] = []
    for start, end in lsh.hashranges:
        width = (end - start) * hashvalues.dtype.itemsize
        raw = np.ascontiguousarray(hashvalues[:, start:end], dtype=hashvalues.dtype.newbyteorder(">")).tobytes()
        bands.append([raw[offset : offset + width] for offset in range(0, len(raw), width)])
    first = sketch_from_values(hashvalues[0], recipe).hashvalues
    if any(band[0] != lsh._H(first[start:end]) for band, (start, end) in zip(bands, lsh.hashranges, strict=True)):
        return False
    for band, table in zip(bands, tables, strict=True):
        assert table is not None
        for band_key, key in zip(band, keys, strict=True):
            table[band_key].add(key)
    for key, band_keys in zip(keys, zip(*bands, strict=True), strict=True):
        key_lists[key] = list(band_keys)
    return True


def made_differently(recipe: MinHashRecipe, model_id: str) -> ColumnElement[bool]:
    """Fingerprints that cannot share an index built with `recipe` and `model_id`: another
    recipe, or vectors of another model."""
    return or_(col(ItemFingerprint.recipe) != recipe.key, and_(col(ItemFingerprint.body_key).is_not(None), col(ItemFingerprint.model_id) != model_id))


@contextmanager
def _collector_paused() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class SimilarityIndex:
    """Exact, near-verbatim and embedding lookups over decided items (not thread-safe: one writer).

    Embedding lookups search float32 matrices exactly, or, for a pool loaded with at least
    `AnnConfig.min_items` items, `ann` (`curation.dedup.ann`): a graph over quantised vectors plus
    the items added since, which answers as exact search does up to quantisation."""

    def __init__(self, *, recipe: MinHashRecipe, model_id: str, dim: int, lsh_threshold: float) -> None:
        if not 0 < lsh_threshold < 1:
            raise ValueError(f"lsh_threshold must be between 0 and 1, got {lsh_threshold}")
        self.recipe = recipe
        self.model_id = model_id
        self.items: list[IndexedItem] = []
        self.position: dict[int, int] = {}
        self.by_hash: dict[str, list[int]] = {}
        self.lsh = MinHashLSH(threshold=lsh_threshold, num_perm=recipe.num_perm)
        self.hashvalues = _Matrix(recipe.num_perm, values_dtype(recipe).type)
        self.body = _Matrix(dim)
        self.title = _Matrix(dim)
        self.times = _Matrix(1, np.float64)  # occurred_at (epoch seconds) by position, for `before=`
        self.ann: ApproximateVectors | None = None

    def __len__(self) -> int:
        return len(self.items)

    def __contains__(self, item_id: int) -> bool:
        return item_id in self.position

    def add(self, entries: Sequence[tuple[IndexedItem, LeanMinHash, Vector, Vector]]) -> None:
        """Index decided items (each with its sketch and body and title vectors)."""
        fresh = [entry for entry in entries if entry[0].item_id not in self.position]
        if not fresh:
            return
        self._add_rows(
            [entry[0] for entry in fresh],
            np.vstack([entry[1].hashvalues for entry in fresh]).astype(self.hashvalues.rows.dtype),
            np.vstack([entry[2] for entry in fresh]),
            np.vstack([entry[3] for entry in fresh]),
        )

    def _add_rows(self, items: Sequence[IndexedItem], hashvalues: NDArray[np.unsignedinteger[Any]], body: Vector, title: Vector) -> None:
        ids = [item.item_id for item in items]
        if len(self.items) > 0 or not _insert_bands(self.lsh, ids, hashvalues, self.recipe):
            with self.lsh.insertion_session() as session:
                for item_id, row in zip(ids, hashvalues, strict=True):
                    session.insert(item_id, sketch_from_values(row, self.recipe), check_duplication=False)
        for item in items:
            self.position[item.item_id] = len(self.items)
            self.items.append(item)
            self.by_hash.setdefault(item.content_hash, []).append(item.item_id)
        self.hashvalues.append(hashvalues)
        if self.ann is not None:
            self.ann.append(range(len(self.items) - len(items), len(self.items)), body, title)
        else:
            self.body.append(body)
            self.title.append(title)
        self.times.append(np.array([[item.occurred_at] for item in items], dtype=np.float64))

    def vectors(self, item_id: int) -> tuple[Vector, Vector]:
        """The body and title vectors stored for an indexed item."""
        position = self.position[item_id]
        if self.ann is not None:
            return self.ann.vectors(position)
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
        ids = [int(item_id) for item_id in self.lsh.query(sketch)]
        if not ids:
            return []
        rows = self.hashvalues.view[[self.position[item_id] for item_id in ids]]
        scores = (rows == sketch.hashvalues).mean(axis=1)
        return sorted(zip(ids, (float(score) for score in scores), strict=True), key=lambda pair: -pair[1])

    def jaccard(self, sketch: LeanMinHash, item_id: int) -> float | None:
        """Estimated Jaccard of `sketch` and an indexed item's stored sketch (None if not indexed)."""
        position = self.position.get(item_id)
        if position is None:
            return None
        return float((self.hashvalues.view[position] == sketch.hashvalues).mean())

    def nearest(self, body: Vector, title: Vector, k: int, *, exclude: Iterable[int] = (), before: float | None = None) -> list[Neighbour]:
        """The `k` items with the highest embedding score, optionally only those that occurred before `before`."""
        if not self.items or k <= 0:
            return []
        if self.ann is not None:
            excluded = {self.position[item_id] for item_id in exclude if item_id in self.position}
            found = self.ann.nearest(body, title, k, exclude=excluded, before=before, times=self.times.view[:, 0])
            return [Neighbour(self.items[position].item_id, body_cosine, title_cosine) for position, body_cosine, title_cosine in found]
        body_cos = self.body.view @ body
        title_cos = self.title.view @ title
        scores = (body_cos + TITLE_WEIGHT * title_cos) / (1 + TITLE_WEIGHT)
        for item_id in exclude:
            if item_id in self.position:
                scores[self.position[item_id]] = -np.inf
        if before is not None:
            scores[self.times.view[:, 0] >= before] = -np.inf
        count = min(k, len(scores))
        top = np.argpartition(-scores, count - 1)[:count]
        top = top[np.argsort(-scores[top])]
        return [Neighbour(self.items[i].item_id, float(body_cos[i]), float(title_cos[i])) for i in top if np.isfinite(scores[i])]

    @classmethod
    def load(cls, session: Session, *, recipe: MinHashRecipe, model_id: str, dim: int, lsh_threshold: float, ann: AnnConfig | None = None) -> SimilarityIndex:
        """Rebuild from stored fingerprints and embeddings of every decided item. With `ann`, a
        pool of at least `ann.min_items` embedded items is searched approximately, through its
        graph file (opened, or built and saved: `ApproximateVectors.attach`).

        Raises `MixedRecipeError` when some fingerprints were made with another recipe or model
        (re-fingerprint them first: `goldenset curate --refingerprint`)."""
        # The build makes millions of small objects (LSH buckets) and no cycles: the cyclic
        # garbage collector, run again and again as they are made, took a third of the time.
        with _collector_paused():
            return cls._load(session, recipe=recipe, model_id=model_id, dim=dim, lsh_threshold=lsh_threshold, ann=ann)

    @classmethod
    def _load(cls, session: Session, *, recipe: MinHashRecipe, model_id: str, dim: int, lsh_threshold: float, ann: AnnConfig | None) -> SimilarityIndex:
        index = cls(recipe=recipe, model_id=model_id, dim=dim, lsh_threshold=lsh_threshold)
        decided = col(Item.status) != ItemStatus.CANDIDATE.value
        joined = col(ItemFingerprint.item_id) == col(Item.id)
        stale_where = made_differently(recipe, model_id)
        made_with = (col(ItemFingerprint.recipe), col(ItemFingerprint.model_id))
        stale = session.execute(sa_select(*made_with, func.count()).join(Item, joined).where(decided, stale_where).group_by(*made_with)).all()
        if stale:
            recipes = sorted(f"{made} / {model}" for made, model, _ in stale)
            raise MixedRecipeError(
                f"{sum(count for _, _, count in stale)} fingerprints were made with another recipe or model ({', '.join(recipes[:3])}); "
                f"the current one is {recipe.key} / {model_id}: run `goldenset curate --refingerprint`"
            )
        query = (
            sa_select(
                col(Item.id), col(Item.occurred_at), col(Item.content_hash), col(Item.identity_key), col(Item.duplicate_of), col(Item.status),
                col(ItemFingerprint.minhash), col(ItemFingerprint.body_key), col(ItemFingerprint.title_key),
            )
            .join(ItemFingerprint, joined)
            .where(decided, col(ItemFingerprint.body_key).is_not(None))  # never embedded: made before exact duplicates shared vectors
            .order_by(col(Item.occurred_at), col(Item.id))
        )
        # Plain rows through the connection: ORM row processing was a third of a 100k-item rebuild.
        connection = session.connection()
        rows: Sequence[Any] = connection.execute(query).all()
        if not rows:
            return index
        if ann is not None and len(rows) >= ann.min_items:
            return index._attach(connection, rows, ann)
        vectors: dict[str, bytes] = dict(connection.execute(sa_select(col(Embedding.text_hash), col(Embedding.vector)).where(col(Embedding.model_id) == model_id)).all())
        missing = next((row[0] for row in rows if row[7] not in vectors or row[8] not in vectors), None)
        if missing is not None:
            raise MixedRecipeError(f"item {missing} has no stored embedding under {model_id}: run `goldenset curate --refingerprint`")
        items = [
            IndexedItem(item_id, occurred_at.timestamp(), content_hash, identity, duplicate_of or item_id, status, body_key, title_key)
            for item_id, occurred_at, content_hash, identity, duplicate_of, status, _, body_key, title_key in rows
        ]
        body = np.frombuffer(b"".join(vectors[item.body_key or ""] for item in items), dtype=np.float32).reshape(len(rows), dim)
        title = np.frombuffer(b"".join(vectors[item.title_key or ""] for item in items), dtype=np.float32).reshape(len(rows), dim)
        index._add_rows(items, values_from_bytes([row[6] for row in rows], recipe), body, title)
        return index

    def _attach(self, connection: Connection, rows: Sequence[Any], ann: AnnConfig) -> SimilarityIndex:
        """Index `rows` (as `_load` reads them) with their vectors searched approximately."""
        items = [
            IndexedItem(item_id, occurred_at.timestamp(), content_hash, identity, duplicate_of or item_id, status, body_key, title_key)
            for item_id, occurred_at, content_hash, identity, duplicate_of, status, _, body_key, title_key in rows
        ]
        dim = self.body.rows.shape[1]
        empty = np.zeros((0, dim), dtype=np.float32)
        self._add_rows(items, values_from_bytes([row[6] for row in rows], self.recipe), empty, empty)
        try:
            self.ann = ApproximateVectors.attach(connection, items, model_id=self.model_id, dim=dim, title_weight=TITLE_WEIGHT, config=ann)
        except LookupError as error:
            raise MixedRecipeError(f"{error} under {self.model_id}: run `goldenset curate --refingerprint`") from error
        return self
