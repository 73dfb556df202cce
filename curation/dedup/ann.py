"""Approximate nearest-neighbour search for a large dedup pool.

An HNSW graph over each item's body and title vectors side by side (`curation.dedup.ann_graph`),
searched with the query's body and weighted title vectors, so the graph's inner product is the
index's combined title/body score. The graph is kept by the caller's `IndexFiles`, one per
database, model and vector kind, opened (memory-mapped) at load, or built from the database and
saved when missing or stale; without files it is built in memory at every load.
Items decided after the file was written, or whose vectors changed since, are held beside it in
float32 and searched exactly.

A query takes a candidate pool larger than `k` from the graph (and every matching item held beside
it), then ranks the pool by the combined score of the stored (decoded) vectors, so the answer is
the exact search's up to quantisation: 8-bit values refined by 4 bits, cosines within about 1e-4
of float32 ones on normalised sentence embeddings (bench/ann_index.py measures it).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Literal

import numpy as np
from numpy.typing import NDArray
from sqlalchemy import Connection

from curation.dedup.ann_graph import FILE_VERSION, AnnConfig, GraphFile, Vector, database_identity, file_stem, load_faiss, stored_vectors
from curation.dedup.index_files import IndexFiles

BUILD_CHUNK = 50_000
MAX_EF = 4096

Origin = Literal["built", "opened", "memory"]


# The body and title text keys of the items at some positions, in that order.
KeysOf = Callable[[NDArray[np.int64]], list[tuple[str, str]]]


class _Rows:
    """Growable float32 rows."""

    def __init__(self, width: int) -> None:
        self.rows: Vector = np.zeros((64, width), dtype=np.float32)
        self.size = 0

    def append(self, rows: Vector) -> None:
        needed = self.size + len(rows)
        if needed > len(self.rows):
            grown = np.zeros((max(needed, 2 * len(self.rows)), self.rows.shape[1]), dtype=np.float32)
            grown[: self.size] = self.rows[: self.size]
            self.rows = grown
        self.rows[self.size : needed] = rows
        self.size = needed

    @property
    def view(self) -> Vector:
        return self.rows[: self.size]


class ApproximateVectors:
    """The body and title vectors of an index's items (by position, as `SimilarityIndex` numbers
    them), searched through a graph, plus items held beside it and searched exactly.

    `origin` says whether the graph was `built` and saved at this load, `opened` from its file, or
    built in `memory` (no files)."""

    def __init__(self, file: GraphFile, slot_position: NDArray[np.int64], times: NDArray[np.float64], *, dim: int, title_weight: float, config: AnnConfig, origin: Origin) -> None:
        self.file = file
        self.graph = file.graph
        self.info = file.info
        self.dim = dim
        self.title_weight = title_weight
        self.config = config
        self.origin: Origin = origin
        self.slot_position = slot_position
        self.slot_valid = slot_position >= 0
        self.valid_count = int(self.slot_valid.sum())
        self.slot_times = np.full(len(slot_position), np.inf)
        self.slot_times[self.slot_valid] = times[slot_position[self.slot_valid]]
        self.position_slot = np.full(len(times), -1, dtype=np.int64)
        self.position_slot[slot_position[self.slot_valid]] = np.flatnonzero(self.slot_valid)
        self._valid_bits = np.packbits(self.slot_valid, bitorder="little") if self.valid_count < len(slot_position) else None
        self.beside_body = _Rows(dim)
        self.beside_title = _Rows(dim)
        self.beside_positions: list[int] = []
        self.beside_row: dict[int, int] = {}

    def __len__(self) -> int:
        return self.valid_count + len(self.beside_positions)

    @property
    def beside(self) -> int:
        """How many items are held beside the graph (decided after its file was written, or changed since)."""
        return len(self.beside_positions)

    def append(self, positions: Sequence[int], body: Vector, title: Vector) -> None:
        """Hold items beside the graph (new positions, in order)."""
        for position in positions:
            self.beside_row[position] = len(self.beside_positions)
            self.beside_positions.append(position)
        self.beside_body.append(np.asarray(body, dtype=np.float32))
        self.beside_title.append(np.asarray(title, dtype=np.float32))

    def vectors(self, position: int) -> tuple[Vector, Vector]:
        """The stored body and title vectors of the item at `position` (decoded from the graph, or held beside it)."""
        row = self.beside_row.get(position)
        if row is not None:
            return self.beside_body.view[row], self.beside_title.view[row]
        decoded = self.file.decode(self.position_slot[position : position + 1])[0]
        return decoded[: self.dim], decoded[self.dim :]

    def nearest(self, body: Vector, title: Vector, k: int, *, exclude: Collection[int], before: float | None, times: NDArray[np.float64]) -> list[tuple[int, float, float]]:
        """The `k` best (position, body cosine, title cosine) by the combined score, best first,
        never a position in `exclude`, only items that occurred before `before` when given
        (`times`: occurrence time by position)."""
        pool = max(self.config.pool, 2 * k) + len(exclude)
        query = np.concatenate([body, self.title_weight * title]).astype(np.float32)
        positions: list[NDArray[np.int64]] = []
        bodies: list[Vector] = []
        titles: list[Vector] = []
        slots = self._graph_candidates(query, pool, before)
        if len(slots):
            decoded = self.file.decode(slots)
            positions.append(self.slot_position[slots])
            bodies.append(decoded[:, : self.dim] @ body)
            titles.append(decoded[:, self.dim :] @ title)
        if self.beside_positions:
            beside = np.asarray(self.beside_positions, dtype=np.int64)
            body_cos = self.beside_body.view @ body
            title_cos = self.beside_title.view @ title
            keep = np.ones(len(beside), dtype=bool) if before is None else times[beside] < before
            if keep.any():
                positions.append(beside[keep])
                bodies.append(body_cos[keep])
                titles.append(title_cos[keep])
        if not positions:
            return []
        found = np.concatenate(positions)
        body_cos = np.concatenate(bodies).astype(np.float32)
        title_cos = np.concatenate(titles).astype(np.float32)
        scores = (body_cos + self.title_weight * title_cos) / (1 + self.title_weight)
        if exclude:
            scores[np.isin(found, np.fromiter(exclude, dtype=np.int64, count=len(exclude)))] = -np.inf
        order = np.argsort(-scores, kind="stable")[:k]
        return [(int(found[i]), float(body_cos[i]), float(title_cos[i])) for i in order if np.isfinite(scores[i])]

    def _graph_candidates(self, query: Vector, pool: int, before: float | None) -> NDArray[np.int64]:
        faiss = load_faiss()
        bits = self._valid_bits
        allowed = self.valid_count
        if before is not None:
            mask = self.slot_times < before
            allowed = int(np.count_nonzero(mask))
            if allowed == 0:
                return np.zeros(0, dtype=np.int64)
            if allowed < self.config.exact_below:
                allowed_slots = np.flatnonzero(mask).astype(np.int64)
                scores = self.file.decode(allowed_slots) @ query
                ranked: NDArray[np.int64] = allowed_slots[np.argsort(-scores)[:pool]]
                return ranked
            bits = np.packbits(mask, bitorder="little")
        if allowed == 0:
            return np.zeros(0, dtype=np.int64)
        # A filter passes a share of the graph: the search widens so as many allowed items reach the pool.
        ef = int(min(MAX_EF, max(self.config.ef_search, pool) * len(self.slot_position) / allowed))
        selector = None if bits is None else faiss.IDSelectorBitmap(len(self.slot_position), faiss.swig_ptr(bits))
        params = faiss.SearchParametersHNSW(efSearch=ef, sel=selector)
        _, found = self.graph.search(query[None, :], min(pool, allowed), params=params)
        slots: NDArray[np.int64] = found[0]
        return slots[slots >= 0]

    @classmethod
    def attach(
        cls,
        connection: Connection,
        *,
        item_ids: NDArray[np.int64],
        digests: NDArray[np.int64],
        times: NDArray[np.float64],
        keys_of: KeysOf,
        model_id: str,
        dim: int,
        title_weight: float,
        config: AnnConfig,
        files: IndexFiles | None,
    ) -> ApproximateVectors:
        """The vectors of the items at positions 0..n-1 (`item_ids`, their `vector_digests`, their
        occurrence `times`, and `keys_of` positions: their body and title keys, whose vectors
        `model_id` stored): the graph file of this database, model and kind opened from `files`
        when it is current enough (items missing from it, or changed since, are read from the
        database and held beside it), else built from the database and saved there (built in
        memory when `files` is None)."""
        identity = database_identity(connection) or "empty"
        kind = config.kind(dim)
        expected = {"version": FILE_VERSION, "model_id": model_id, "kind": kind, "dim": dim, "database": identity}
        count = len(item_ids)

        def build() -> GraphFile:
            def rows(start: int, end: int) -> Vector:
                return _side_by_side(connection, model_id, item_ids[start:end], keys_of(np.arange(start, end, dtype=np.int64)), dim)

            return GraphFile.build(rows, count, dim=dim, config=config, info=expected, item_ids=item_ids, digests=digests)

        def completed(file: GraphFile, origin: Origin, slots: NDArray[np.int64] | None = None) -> ApproximateVectors:
            return cls._completed(
                connection, file, item_ids, digests, times, keys_of, model_id=model_id, dim=dim, title_weight=title_weight, config=config, origin=origin, slots=slots
            )

        if files is None:
            return completed(build(), "memory")
        stem = file_stem(identity, model_id, kind)
        with files.locked(stem):
            opened = GraphFile.open(files, stem, expected)
            if opened is not None:
                slot_position = _match(opened, item_ids, digests)
                valid = int(np.count_nonzero(slot_position >= 0))
                if count - valid <= config.rebuild_share * valid and len(slot_position) - valid <= config.rebuild_share * len(slot_position):
                    return completed(opened, "opened", slot_position)
            build().save(files, stem)
            saved = GraphFile.open(files, stem, expected)
            if saved is None:
                raise RuntimeError(f"the graph file {stem} just written to {files} cannot be read back")
            return completed(saved, "built")

    @classmethod
    def _completed(
        cls,
        connection: Connection,
        file: GraphFile,
        item_ids: NDArray[np.int64],
        digests: NDArray[np.int64],
        times: NDArray[np.float64],
        keys_of: KeysOf,
        *,
        model_id: str,
        dim: int,
        title_weight: float,
        config: AnnConfig,
        origin: Origin,
        slots: NDArray[np.int64] | None = None,
    ) -> ApproximateVectors:
        slot_position = _match(file, item_ids, digests) if slots is None else slots
        # The item lists were only needed to match the file to the database.
        file.item_ids = file.item_ids[:0]
        file.digests = file.digests[:0]
        vectors = cls(file, slot_position, times, dim=dim, title_weight=title_weight, config=config, origin=origin)
        absent = np.flatnonzero(vectors.position_slot < 0)
        for start in range(0, len(absent), BUILD_CHUNK):
            positions = absent[start : start + BUILD_CHUNK]
            rows = _side_by_side(connection, model_id, item_ids[positions], keys_of(positions), dim)
            vectors.append([int(position) for position in positions], rows[:, :dim], rows[:, dim:])
        return vectors


def _side_by_side(connection: Connection, model_id: str, item_ids: NDArray[np.int64], keys: Sequence[tuple[str, str]], dim: int) -> Vector:
    """`[body, title]` rows of items from their stored vectors (LookupError naming an item without them)."""
    vectors = stored_vectors(connection, model_id, [key for pair in keys for key in pair])
    missing = next((int(item_id) for item_id, (body, title) in zip(item_ids, keys, strict=True) if body not in vectors or title not in vectors), None)
    if missing is not None:
        raise LookupError(f"item {missing} has no stored embedding")
    body = np.frombuffer(b"".join(vectors[body] for body, _ in keys), dtype=np.float32).reshape(len(keys), dim)
    title = np.frombuffer(b"".join(vectors[title] for _, title in keys), dtype=np.float32).reshape(len(keys), dim)
    return np.hstack([body, title])


def _match(file: GraphFile, item_ids: NDArray[np.int64], digests: NDArray[np.int64]) -> NDArray[np.int64]:
    """For each slot of `file`, the position of its item among `item_ids` when that item's vector
    digest is still the same, else -1."""
    if not len(item_ids) or not len(file.item_ids):
        return np.full(len(file.item_ids), -1, dtype=np.int64)
    order = np.argsort(item_ids, kind="stable")
    sorted_ids = item_ids[order]
    at = np.clip(np.searchsorted(sorted_ids, file.item_ids), 0, len(sorted_ids) - 1)
    position = order[at]
    current = (sorted_ids[at] == file.item_ids) & (digests[position] == file.digests)
    return np.where(current, position, -1).astype(np.int64)
