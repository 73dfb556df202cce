"""The in-memory similarity index of every decided item: exact hashes, a MinHash LSH over their
sketches, and their embeddings. Loaded from the database at start (`curation.dedup.index_load`);
curation adds to it as it decides.

Candidates come from all three (an exact hash, LSH buckets, and the nearest embeddings), because
real duplicate reports often share few words.

Items are numbered by position in the order they were loaded or added. What each item is lives
in columns: the items loaded at start in a `SketchTable` (built in memory, or for a large pool
opened from its memory-mapped files) and the rest beside it (items added since, or changed since
the table was written), whose sketches a datasketch `MinHashLSH` holds. What changes while the
index lives (an item's cluster and status) is kept per position.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from datasketch import LeanMinHash, MinHashLSH
from numpy.typing import NDArray
from sqlalchemy import ColumnElement, and_, or_
from sqlmodel import Session, col

from curation.dedup.ann import ApproximateVectors
from curation.dedup.ann_graph import AnnConfig
from curation.dedup.fingerprints import MinHashRecipe, sketch_from_values, values_dtype
from curation.dedup.index_files import IndexFiles
from curation.dedup.sketch_table import SketchTable
from schemas.dedup import ItemFingerprint

Vector = NDArray[np.float32]
# Title and body cosines are combined so that a report re-titled but re-telling the same body,
# or re-told under the same title, both rank high.
TITLE_WEIGHT = 0.5


class MixedRecipeError(RuntimeError):
    """Stored fingerprints were made with another recipe or model; they cannot share an index."""


@dataclass
class IndexedItem:
    """What the index knows of a decided item. `identity`: the digest of its `distinct_by`
    identity (`sketch_table.identity_digest`), 0 when it has none."""

    item_id: int
    occurred_at: float
    content_hash: str
    identity: int
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
    """A growable array of rows (float32 vectors, MinHash values, or one value a row)."""

    def __init__(self, width: int | None, dtype: type[np.generic] | np.dtype[Any] = np.float32) -> None:
        self.rows: NDArray[Any] = np.zeros((64,) if width is None else (64, width), dtype=dtype)
        self.size = 0

    def append(self, rows: NDArray[Any]) -> None:
        if self.size == 0 and len(rows) > len(self.rows) and rows.dtype == self.rows.dtype:
            # A load: keep the rows as given, without copying (possibly a read-only buffer: a
            # full array is never written into, the next append grows it into a new array).
            self.rows = rows
            self.size = len(rows)
            return
        needed = self.size + len(rows)
        if needed > len(self.rows):
            grown = np.zeros((max(needed, 2 * len(self.rows)), *self.rows.shape[1:]), dtype=self.rows.dtype)
            grown[: self.size] = self.rows[: self.size]
            self.rows = grown
        self.rows[self.size : needed] = rows
        self.size = needed

    @property
    def view(self) -> NDArray[Any]:
        return self.rows[: self.size]


@dataclass(frozen=True)
class _Beside:
    """An item held beside the table: its text keys, and its row among the beside sketches."""

    content_hash: str
    identity: int
    body_key: str | None
    title_key: str | None
    row: int


class KnownHashes:
    """The content hashes an index held when this was taken, plus any added to this copy: the
    index may change meanwhile (a thread preparing the next batch reads this one)."""

    def __init__(self, index: SimilarityIndex) -> None:
        self._index_table = index.table
        self._slot_position = index.slot_position
        self._added: set[str] = set(index.beside_by_hash)

    def __contains__(self, content_hash: object) -> bool:
        if not isinstance(content_hash, str):
            return False
        if content_hash in self._added:
            return True
        table = self._index_table
        return table is not None and bool((self._slot_position[table.with_content(content_hash)] >= 0).any())

    def add(self, content_hash: str) -> None:
        self._added.add(content_hash)

    def update(self, content_hashes: Iterable[str]) -> None:
        self._added.update(content_hashes)


def made_differently(recipe: MinHashRecipe, model_id: str) -> ColumnElement[bool]:
    """Fingerprints that cannot share an index built with `recipe` and `model_id`: another
    recipe, or vectors of another model."""
    return or_(col(ItemFingerprint.recipe) != recipe.key, and_(col(ItemFingerprint.body_key).is_not(None), col(ItemFingerprint.model_id) != model_id))


class SimilarityIndex:
    """Exact, near-verbatim and embedding lookups over decided items (not thread-safe: one writer).

    Embedding lookups search float32 matrices exactly, or, for a pool loaded with at least
    `AnnConfig.min_items` items, `ann` (`curation.dedup.ann`): a graph over quantised vectors plus
    the items added since, which answers as exact search does up to quantisation. LSH lookups
    answer as datasketch's `MinHashLSH.query` would over all the items' sketches."""

    def __init__(self, *, recipe: MinHashRecipe, model_id: str, dim: int, lsh_threshold: float) -> None:
        if not 0 < lsh_threshold < 1:
            raise ValueError(f"lsh_threshold must be between 0 and 1, got {lsh_threshold}")
        self.recipe = recipe
        self.model_id = model_id
        self.dim = dim
        self.lsh = MinHashLSH(threshold=lsh_threshold, num_perm=recipe.num_perm)
        # The table of items loaded at start, and for each of its slots the item's position (-1:
        # not in this index, gone or changed since the table was written).
        self.table: SketchTable | None = None
        self.slot_position: NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        # By position.
        self.item_ids = _Matrix(None, np.int64)
        self.times = _Matrix(None, np.float64)  # occurred_at (epoch seconds), for `before=`
        self.roots = _Matrix(None, np.int64)
        self.status_codes = _Matrix(None, np.uint8)
        self.slots = _Matrix(None, np.int64)  # the table slot, or -1 for an item held beside it
        self.statuses: list[str] = []
        self._status_code: dict[str, int] = {}
        # Finding a position: the loaded items' ids sorted, then a dict for those added since.
        self._sorted_ids: NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self._sorted_positions: NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self._added: dict[int, int] = {}
        # Items held beside the table, by position, and their sketches' values by row.
        self.beside: dict[int, _Beside] = {}
        self.beside_by_hash: dict[str, list[int]] = {}
        self.beside_values = _Matrix(recipe.num_perm, values_dtype(recipe))
        self.body = _Matrix(dim)
        self.title = _Matrix(dim)
        self.ann: ApproximateVectors | None = None

    def __len__(self) -> int:
        return self.item_ids.size

    def __contains__(self, item_id: int) -> bool:
        return self._position(item_id) is not None

    def _position(self, item_id: int) -> int | None:
        position = self._added.get(item_id)
        if position is not None:
            return position
        at = int(np.searchsorted(self._sorted_ids, item_id))
        if at < len(self._sorted_ids) and self._sorted_ids[at] == item_id:
            return int(self._sorted_positions[at])
        return None

    def _code(self, status: str) -> int:
        code = self._status_code.get(status)
        if code is None:
            code = self._status_code[status] = len(self.statuses)
            self.statuses.append(status)
        return code

    def known_hashes(self) -> KnownHashes:
        """The content hashes indexed now, as a copy that later additions to the index do not change."""
        return KnownHashes(self)

    def has_hash(self, content_hash: str) -> bool:
        """Whether an indexed item has this content hash."""
        return bool(self.exact(content_hash))

    def add(self, entries: Sequence[tuple[IndexedItem, LeanMinHash, Vector, Vector]]) -> None:
        """Index decided items (each with its sketch and body and title vectors)."""
        fresh = [entry for entry in entries if entry[0].item_id not in self]
        if not fresh:
            return
        start = len(self)
        items = [entry[0] for entry in fresh]
        self.add_positions(
            np.array([item.item_id for item in items], dtype=np.int64),
            np.array([item.occurred_at for item in items], dtype=np.float64),
            np.array([item.root for item in items], dtype=np.int64),
            [item.status for item in items],
        )
        self.hold_beside(range(start, len(self)), items, np.vstack([entry[1].hashvalues for entry in fresh]))
        self.add_vectors(range(start, len(self)), np.vstack([entry[2] for entry in fresh]), np.vstack([entry[3] for entry in fresh]))

    def add_positions(
        self, ids: NDArray[np.int64], times: NDArray[np.float64], roots: NDArray[np.int64], statuses: Sequence[str], *, slots: NDArray[np.int64] | None = None, loaded: bool = False
    ) -> None:
        """Number items from the next position on: their ids, occurrence times, cluster roots,
        statuses and table `slots` (None: held beside the table). `loaded`: all the items of a
        load at once (then found through a sorted id list instead of a dict)."""
        start = len(self)
        self.item_ids.append(ids)
        self.times.append(times)
        self.roots.append(roots)
        self.status_codes.append(np.fromiter((self._code(status) for status in statuses), dtype=np.uint8, count=len(ids)))
        self.slots.append(np.full(len(ids), -1, dtype=np.int64) if slots is None else slots)
        if loaded:
            order = np.argsort(self.item_ids.view, kind="stable")
            self._sorted_ids, self._sorted_positions = self.item_ids.view[order], order
        else:
            for offset, item_id in enumerate(ids.tolist()):
                self._added[item_id] = start + offset

    def hold_beside(self, positions: Sequence[int], items: Sequence[IndexedItem], values: NDArray[np.unsignedinteger[Any]]) -> None:
        """Hold items beside the table: their text keys, and their sketches' `values` in the LSH."""
        first_row = self.beside_values.size
        self.beside_values.append(np.asarray(values, dtype=self.beside_values.rows.dtype))
        with self.lsh.insertion_session() as session:
            for row, (position, item, hashvalues) in enumerate(zip(positions, items, values, strict=True), start=first_row):
                self.beside[position] = _Beside(item.content_hash, item.identity, item.body_key, item.title_key, row)
                self.beside_by_hash.setdefault(item.content_hash, []).append(item.item_id)
                session.insert(item.item_id, sketch_from_values(hashvalues, self.recipe), check_duplication=False)

    def add_vectors(self, positions: range, body: Vector, title: Vector) -> None:
        """The body and title vectors of new positions, in order."""
        if self.ann is not None:
            self.ann.append(positions, body, title)
        else:
            self.body.append(body)
            self.title.append(title)

    def vectors(self, item_id: int) -> tuple[Vector, Vector]:
        """The body and title vectors stored for an indexed item."""
        position = self._position(item_id)
        if position is None:
            raise KeyError(item_id)
        if self.ann is not None:
            return self.ann.vectors(position)
        return self.body.view[position], self.title.view[position]

    def get(self, item_id: int) -> IndexedItem:
        """What the index knows of an indexed item (KeyError when it is not indexed)."""
        position = self._position(item_id)
        if position is None:
            raise KeyError(item_id)
        status = self.statuses[int(self.status_codes.view[position])]
        occurred_at, root = float(self.times.view[position]), int(self.roots.view[position])
        slot = int(self.slots.view[position])
        if slot < 0:
            held = self.beside[position]
            return IndexedItem(item_id, occurred_at, held.content_hash, held.identity, root, status, held.body_key, held.title_key)
        table = self.table
        assert table is not None
        return IndexedItem(
            item_id,
            occurred_at,
            bytes(table.content[slot]).decode(),
            int(table.identity[slot]),
            root,
            status,
            bytes(table.body_keys[slot]).decode() or None,
            bytes(table.title_keys[slot]).decode() or None,
        )

    def entries(self) -> Iterator[IndexedItem]:
        """Every indexed item, in position order."""
        for item_id in self.item_ids.view.tolist():
            yield self.get(item_id)

    def set_root(self, item_id: int, root: int, status: str | None = None) -> None:
        position = self._position(item_id)
        if position is None:
            raise KeyError(item_id)
        self.roots.view[position] = root
        if status is not None:
            self.status_codes.view[position] = self._code(status)

    def exact(self, content_hash: str) -> list[int]:
        """Indexed items whose content hash is `content_hash`, in the order they were indexed."""
        found: list[int] = []
        if self.table is not None:
            positions = self.slot_position[self.table.with_content(content_hash)]
            found = [int(self.item_ids.view[position]) for position in sorted(positions[positions >= 0].tolist())]
        return found + list(self.beside_by_hash.get(content_hash, []))

    def _values(self, position: int) -> NDArray[np.unsignedinteger[Any]]:
        slot = int(self.slots.view[position])
        if slot >= 0:
            assert self.table is not None
            row: NDArray[np.unsignedinteger[Any]] = np.asarray(self.table.values[slot])
            return row
        held: NDArray[np.unsignedinteger[Any]] = self.beside_values.view[self.beside[position].row]
        return held

    def near(self, sketch: LeanMinHash) -> list[tuple[int, float]]:
        """Items in the query's LSH buckets with their estimated Jaccard, highest first."""
        ids: list[int] = []
        scores: list[float] = []
        if self.table is not None:
            slots = self.table.matching(sketch.hashvalues)
            positions = self.slot_position[slots]
            valid = positions >= 0
            if valid.any():
                rows = np.asarray(self.table.values[slots[valid]])
                ids.extend(int(item_id) for item_id in self.item_ids.view[positions[valid]])
                scores.extend(float(score) for score in (rows == sketch.hashvalues).mean(axis=1))
        beside = [int(item_id) for item_id in self.lsh.query(sketch)]
        if beside:
            rows = self.beside_values.view[[self.beside[position].row for position in (self._position(item_id) for item_id in beside) if position is not None]]
            ids.extend(beside)
            scores.extend(float(score) for score in (rows == sketch.hashvalues).mean(axis=1))
        return sorted(zip(ids, scores, strict=True), key=lambda pair: -pair[1])

    def jaccard(self, sketch: LeanMinHash, item_id: int) -> float | None:
        """Estimated Jaccard of `sketch` and an indexed item's stored sketch (None if not indexed)."""
        position = self._position(item_id)
        if position is None:
            return None
        return float((self._values(position) == sketch.hashvalues).mean())

    def nearest(self, body: Vector, title: Vector, k: int, *, exclude: Iterable[int] = (), before: float | None = None) -> list[Neighbour]:
        """The `k` items with the highest embedding score, optionally only those that occurred before `before`."""
        if not len(self) or k <= 0:
            return []
        ids = self.item_ids.view
        if self.ann is not None:
            excluded = {position for position in (self._position(item_id) for item_id in exclude) if position is not None}
            found = self.ann.nearest(body, title, k, exclude=excluded, before=before, times=self.times.view)
            return [Neighbour(int(ids[position]), body_cosine, title_cosine) for position, body_cosine, title_cosine in found]
        body_cos = self.body.view @ body
        title_cos = self.title.view @ title
        scores = (body_cos + TITLE_WEIGHT * title_cos) / (1 + TITLE_WEIGHT)
        for item_id in exclude:
            position = self._position(item_id)
            if position is not None:
                scores[position] = -np.inf
        if before is not None:
            scores[self.times.view >= before] = -np.inf
        count = min(k, len(scores))
        top = np.argpartition(-scores, count - 1)[:count]
        top = top[np.argsort(-scores[top])]
        return [Neighbour(int(ids[i]), float(body_cos[i]), float(title_cos[i])) for i in top if np.isfinite(scores[i])]

    @classmethod
    def load(
        cls, session: Session, *, recipe: MinHashRecipe, model_id: str, dim: int, lsh_threshold: float, ann: AnnConfig | None = None, files: IndexFiles | None = None
    ) -> SimilarityIndex:
        """Load every decided item from the database (`curation.dedup.index_load.load_index`). With
        `ann`, a pool of at least `ann.min_items` embedded items is searched approximately, through
        its graph, and with `files` its graph and its sketch table are kept there (each opened, or
        built and saved); without, both are built in memory.

        Raises `MixedRecipeError` when some fingerprints were made with another recipe or model
        (re-fingerprint them first: `goldenset curate --refingerprint`)."""
        from curation.dedup.index_load import load_index

        return load_index(cls(recipe=recipe, model_id=model_id, dim=dim, lsh_threshold=lsh_threshold), session, ann=ann, files=files)
