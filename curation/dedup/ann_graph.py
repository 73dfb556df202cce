"""The approximate dedup index's graph: a faiss `IndexHNSWSQ` (HNSW over 8-bit scalar-quantised
vectors, inner product) over each item's body and title vectors side by side, a 4-bit refinement
of those vectors, and the list of the items it holds with a digest of the texts their vectors were
made from.

A graph is kept by the `IndexFiles` the caller hands in (`curation.dedup.index_files`), named by
the database, the model and the vector kind it was made for, and records them: one made for
another database, model or kind is never opened. It is written once, under the files' lock that
makes other processes wait for it rather than build it too, and memory-mapped by each process
that opens it (API replicas on one host share its pages).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sqlalchemy import Connection
from sqlalchemy import select as sa_select
from sqlmodel import col

from curation.dedup.index_files import IndexFiles
from curation.dedup.sketch_table import mix
from schemas.dedup import Embedding
from schemas.item import Item

# 2: vector digests hashed from the keys' bytes in bulk (`vector_digests`).
FILE_VERSION = 2
FETCH_CHUNK = 500
BUILD_CHUNK = 50_000
TRAIN_SAMPLE = 100_000
TRAIN_BLOCK = 1_000

Vector = NDArray[np.float32]


@dataclass(frozen=True)
class AnnConfig:
    """When and how the dedup index searches approximately.

    `min_items`: a pool of at least this many embedded items is searched through the graph, a
    smaller one exactly; its graph is kept by the `IndexFiles` the caller hands in (none: built in
    memory at every load, never saved). `connectivity` (HNSW's M), `ef_construction` and
    `ef_search`: the graph's build and search breadth. `pool`: the least number of candidates a
    query ranks exactly (at least twice `k`).
    `exact_below`: a `before=` query that leaves fewer items of the graph than this ranks them all
    exactly (a narrow filter starves a graph search). `rebuild_share`: a file whose items changed or missing from it exceed this share of it is
    rebuilt at load instead of being completed.
    """

    min_items: int = 50_000
    connectivity: int = 24
    ef_construction: int = 80
    ef_search: int = 800
    pool: int = 400
    exact_below: int = 20_000
    rebuild_share: float = 0.1

    def __post_init__(self) -> None:
        if self.min_items < 1:
            raise ValueError(f"min_items must be at least 1, got {self.min_items}")
        if not 4 <= self.connectivity <= 128 or self.ef_construction < self.connectivity or self.ef_search < 1 or self.pool < 1:
            raise ValueError("connectivity must be in [4, 128], ef_construction at least connectivity, ef_search and pool at least 1")
        if self.exact_below < 0:
            raise ValueError(f"exact_below must be at least 0, got {self.exact_below}")
        if not 0 < self.rebuild_share <= 1:
            raise ValueError(f"rebuild_share must be in (0, 1], got {self.rebuild_share}")

    def kind(self, dim: int) -> str:
        """The vector kind a graph file is made with (part of its name): a file of another kind is never opened."""
        return f"hnsw{self.connectivity}-sq8r4-ip-d{dim}-v{FILE_VERSION}"


def vector_digests(body_keys: NDArray[np.bytes_], title_keys: NDArray[np.bytes_]) -> NDArray[np.int64]:
    """A 63-bit digest per item of the texts its vectors were made from (their keys, as
    `sketch_table.text_keys` holds them): a file entry whose digest differs from the database's is
    out of date."""
    digests: NDArray[np.int64] = (mix([body_keys, title_keys], len(body_keys)) >> np.uint64(1)).astype(np.int64)
    return digests


def database_identity(connection: Connection) -> str | None:
    """A digest naming the database: its dialect and its first stored item (id, ingest time and
    record digest), so a recreated or another database at the same address gets another name.
    None when no item is stored."""
    row = connection.execute(sa_select(col(Item.id), col(Item.ingested_at), col(Item.record_digest)).order_by(col(Item.id)).limit(1)).first()
    if row is None:
        return None
    text = f"{connection.dialect.name}|{row[0]}|{row[1].isoformat() if row[1] is not None else ''}|{row[2]}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def file_stem(identity: str, model_id: str, kind: str) -> str:
    """The name (without extension) of the graph file of a database, model and vector kind."""
    return f"{identity}-{hashlib.sha256(model_id.encode()).hexdigest()[:16]}-{kind}"


def stored_vectors(connection: Connection, model_id: str, keys: Collection[str]) -> dict[str, bytes]:
    """The stored float32 vectors (bytes) of `model_id` for text hashes `keys`, by key."""
    found: dict[str, bytes] = {}
    unique = list(set(keys))
    for start in range(0, len(unique), FETCH_CHUNK):
        chunk = unique[start : start + FETCH_CHUNK]
        query = sa_select(col(Embedding.text_hash), col(Embedding.vector)).where(col(Embedding.model_id) == model_id, col(Embedding.text_hash).in_(chunk))
        found.update((key, vector) for key, vector in connection.execute(query).all())
    return found


def load_faiss() -> Any:
    import faiss  # imported on first use: small pools never need it

    return faiss


def refinement(rows: Vector, decoded: Vector, steps: Vector) -> NDArray[np.uint8]:
    """4-bit codes of what 8-bit quantisation left out of `rows` (`decoded`: their 8-bit values,
    `steps`: the quantiser's step per dimension), two to a byte."""
    left = np.divide(rows - decoded, steps, out=np.zeros(rows.shape, dtype=np.float32), where=steps > 0)
    levels = np.clip(np.rint(left * 15 + 7.5), 0, 15).astype(np.uint8)
    packed: NDArray[np.uint8] = levels[:, 0::2] | (levels[:, 1::2] << 4)
    return packed


def refined(decoded: Vector, codes: NDArray[np.uint8], steps: Vector) -> Vector:
    """8-bit values with their 4-bit refinement added: within a thirtieth of a step of the float32 ones."""
    levels = np.empty(decoded.shape, dtype=np.float32)
    levels[:, 0::2] = codes & 15
    levels[:, 1::2] = codes >> 4
    result: Vector = (decoded + (levels / 15 - 0.5) * steps).astype(np.float32)
    return result


@dataclass
class GraphFile:
    """A graph file's contents: the graph (slot `s` holds the item `item_ids[s]`, whose vectors were
    made from texts with digest `digests[s]`), the 4-bit refinement of its 8-bit vectors by slot
    (`refine`, with the 8-bit quantiser's `steps`), and what it was made for.

    The graph ranks candidates; `decode` gives their vectors to rank exactly, 8-bit plus refinement
    (a thirtieth of the 8-bit error, in 12 bits a dimension)."""

    graph: Any
    item_ids: NDArray[np.int64]
    digests: NDArray[np.int64]
    info: dict[str, Any]
    refine: NDArray[np.uint8]
    steps: Vector

    def decode(self, slots: NDArray[np.int64]) -> Vector:
        """The stored `[body, title]` vectors of `slots`."""
        return refined(self.graph.reconstruct_batch(slots), np.asarray(self.refine[slots]), self.steps)

    @classmethod
    def build(
        cls, rows: Callable[[int, int], Vector], count: int, *, dim: int, config: AnnConfig, info: dict[str, Any], item_ids: NDArray[np.int64], digests: NDArray[np.int64]
    ) -> GraphFile:
        """Build a graph over `count` items whose `[body, title]` rows `rows(start, end)` gives (as
        float32, 2 * `dim` wide), in slot order."""
        faiss = load_faiss()
        graph = faiss.IndexHNSWSQ(2 * dim, faiss.ScalarQuantizer.QT_8bit, config.connectivity, faiss.METRIC_INNER_PRODUCT)
        graph.hnsw.efConstruction = config.ef_construction
        # The quantiser's ranges come from blocks spread over the whole pool (all of a small one).
        if count <= TRAIN_SAMPLE:
            sample = rows(0, count)
        else:
            starts = np.linspace(0, count - TRAIN_BLOCK, TRAIN_SAMPLE // TRAIN_BLOCK).astype(np.int64)
            sample = np.vstack([rows(int(start), int(start) + TRAIN_BLOCK) for start in starts])
        graph.train(sample)
        trained = faiss.vector_to_array(faiss.downcast_index(graph.storage).sq.trained)
        steps = (trained[2 * dim :] / 255).astype(np.float32)
        refine = np.zeros((count, dim), dtype=np.uint8)
        for start in range(0, count, BUILD_CHUNK):
            end = min(start + BUILD_CHUNK, count)
            chunk = rows(start, end)
            graph.add(chunk)
            refine[start:end] = refinement(chunk, graph.reconstruct_batch(np.arange(start, end, dtype=np.int64)), steps)
        return cls(graph, item_ids, digests, {**info, "count": count}, refine, steps)

    def save(self, files: IndexFiles, stem: str) -> None:
        """Write the graph, its refinement and its item list through `files` as `stem`, replacing
        any earlier one atomically (a process that has the earlier one open keeps reading it)."""
        files.save_graph(stem, self.graph, self.refine, {"item_ids": self.item_ids, "digests": self.digests, "steps": self.steps}, self.info)

    @classmethod
    def open(cls, files: IndexFiles, stem: str, expected: dict[str, Any]) -> GraphFile | None:
        """The graph saved as `stem`, its vectors and refinement memory-mapped, when its recorded
        facts equal `expected` (model id, kind, dimension, database identity); None when it is
        missing, of another kind, or unreadable."""
        stored = files.open_graph(stem, expected)
        if stored is None:
            return None
        graph, refine, arrays, info = stored
        try:
            item_ids, digests = arrays["item_ids"].astype(np.int64), arrays["digests"].astype(np.int64)
            steps = arrays["steps"].astype(np.float32)
        except KeyError:
            return None
        dim = int(info["dim"])
        if len(item_ids) != info.get("count") or graph.ntotal != len(item_ids) or graph.d != 2 * dim or refine.shape != (len(item_ids), dim) or steps.shape != (2 * dim,):
            return None
        return cls(graph, item_ids, digests, info, refine, steps)
