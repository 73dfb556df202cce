"""Loading a dedup index (`curation.dedup.index.SimilarityIndex`) from the database at start.

Every decided, embedded item is read once, in chunks, as plain rows: its id, time, cluster,
status, text keys and stored sketch. A small pool's sketch table is built in memory. A pool of at
least `AnnConfig.min_items` items keeps its table (`curation.dedup.sketch_table`) and its vectors
in a graph (`curation.dedup.ann`), in the files its caller hands in (`curation.dedup.index_files`),
each opened and matched to the database item by item:
an item missing from a file, or changed since it was written (another text, time or identity), is
held beside it; a file whose missing or changed items pass `AnnConfig.rebuild_share` is built
again from the database and saved, under a lock, so one process builds while the others wait.
"""

from __future__ import annotations

import gc
import hashlib
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sqlalchemy import Connection, func
from sqlalchemy import select as sa_select
from sqlmodel import Session, col

from curation.dedup.ann import ApproximateVectors
from curation.dedup.ann_graph import AnnConfig, database_identity, vector_digests
from curation.dedup.fingerprints import values_from_bytes
from curation.dedup.index import TITLE_WEIGHT, IndexedItem, MixedRecipeError, SimilarityIndex, made_differently
from curation.dedup.index_files import IndexFiles
from curation.dedup.sketch_table import TABLE_VERSION, SketchTable, identity_digest, record_digests, text_keys
from schemas.dedup import Embedding, ItemFingerprint
from schemas.item import Item, ItemStatus

LOAD_CHUNK = 20_000


@dataclass
class _Columns:
    """The decided items read at a load, by position (occurrence order)."""

    ids: NDArray[np.int64]
    times: NDArray[np.float64]
    roots: NDArray[np.int64]
    statuses: list[str]
    content: NDArray[np.bytes_]
    identity: NDArray[np.uint64]
    body_keys: NDArray[np.bytes_]
    title_keys: NDArray[np.bytes_]
    digests: NDArray[np.int64]

    def keys_of(self, positions: NDArray[np.int64]) -> list[tuple[str, str]]:
        return [(bytes(self.body_keys[p]).decode(), bytes(self.title_keys[p]).decode()) for p in positions.tolist()]

    def item(self, position: int) -> IndexedItem:
        return IndexedItem(
            int(self.ids[position]),
            float(self.times[position]),
            bytes(self.content[position]).decode(),
            int(self.identity[position]),
            int(self.roots[position]),
            self.statuses[position],
            bytes(self.body_keys[position]).decode() or None,
            bytes(self.title_keys[position]).decode() or None,
        )


@contextmanager
def _collector_paused() -> Iterator[None]:
    # A load makes many objects and no cycles: the cyclic collector, run again and again as they
    # are made, took a third of the time.
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def load_index(index: SimilarityIndex, session: Session, *, ann: AnnConfig | None, files: IndexFiles | None = None) -> SimilarityIndex:
    """Fill the empty `index` with every decided, embedded item in the database (see the module
    docstring); a large pool's table and graph are kept in `files` (built in memory without).
    Raises `MixedRecipeError` when fingerprints were made with another recipe or model, or an
    item's vectors are not stored under the index's model."""
    with _collector_paused():
        _refuse_mixed(session, index)
        connection = session.connection()
        decided = col(Item.status) != ItemStatus.CANDIDATE.value
        embedded = col(ItemFingerprint.body_key).is_not(None)  # never embedded: made before exact duplicates shared vectors
        joined = col(ItemFingerprint.item_id) == col(Item.id)
        count = connection.execute(sa_select(func.count()).select_from(Item).join(ItemFingerprint, joined).where(decided, embedded)).scalar_one()
        if not count:
            return index
        large = ann is not None and count >= ann.min_items
        kept = files if large else None
        expected: dict[str, Any] = {}
        stem = ""
        if kept is not None:
            identity = database_identity(connection) or "empty"
            ranges = [list(pair) for pair in index.lsh.hashranges]
            expected = {"version": TABLE_VERSION, "database": identity, "recipe": index.recipe.key, "ranges": ranges}
            stem = f"{identity}-{hashlib.sha256(index.recipe.key.encode()).hexdigest()[:16]}-b{index.lsh.b}r{index.lsh.r}-sketches"
        with kept.locked(stem) if kept is not None else nullcontext():
            stored = SketchTable.open(kept, stem, expected) if kept is not None else None
            columns, slots, values = _read(connection, index, stored)
            table, slots = _settle_table(index, columns, slots, values, stored, expected, ann)
            if kept is not None and table is not stored:
                table.save(kept, stem)
                reopened = SketchTable.open(kept, stem, expected)
                if reopened is None:
                    raise RuntimeError(f"the sketch table {stem} just written to {kept} cannot be read back")
                table = reopened
        index.table = table
        index.slot_position = np.full(len(table), -1, dtype=np.int64)
        matched = np.flatnonzero(slots >= 0)
        index.slot_position[slots[matched]] = matched
        index.add_positions(columns.ids, columns.times, columns.roots, columns.statuses, slots=slots, loaded=True)
        beside = np.flatnonzero(slots < 0)
        if len(beside):
            index.hold_beside(beside.tolist(), [columns.item(int(position)) for position in beside], values)
        if large and ann is not None:
            _attach_vectors(index, connection, columns, ann, kept)
        else:
            _read_vectors(index, connection, columns)
        return index


def _refuse_mixed(session: Session, index: SimilarityIndex) -> None:
    decided = col(Item.status) != ItemStatus.CANDIDATE.value
    made_with = (col(ItemFingerprint.recipe), col(ItemFingerprint.model_id))
    joined = col(ItemFingerprint.item_id) == col(Item.id)
    query = sa_select(*made_with, func.count()).join(Item, joined).where(decided, made_differently(index.recipe, index.model_id)).group_by(*made_with)
    stale = session.execute(query).all()
    if stale:
        recipes = sorted(f"{made} / {model}" for made, model, _ in stale)
        raise MixedRecipeError(
            f"{sum(count for _, _, count in stale)} fingerprints were made with another recipe or model ({', '.join(recipes[:3])}); "
            f"the current one is {index.recipe.key} / {index.model_id}: run `goldenset curate --refingerprint`"
        )


def _read(connection: Connection, index: SimilarityIndex, stored: SketchTable | None) -> tuple[_Columns, NDArray[np.int64], NDArray[Any]]:
    """Every decided, embedded item, in occurrence order, as columns; for each, its slot in
    `stored` when that holds it unchanged (else -1); and the sketch values of the items `stored`
    does not hold, in position order (the table has the others)."""
    query = (
        sa_select(
            col(Item.id), col(Item.occurred_at), col(Item.content_hash), col(Item.identity_key), col(Item.duplicate_of), col(Item.status),
            col(ItemFingerprint.body_key), col(ItemFingerprint.title_key), col(ItemFingerprint.minhash),
        )
        .join(ItemFingerprint, col(ItemFingerprint.item_id) == col(Item.id))
        .where(col(Item.status) != ItemStatus.CANDIDATE.value, col(ItemFingerprint.body_key).is_not(None))
        .order_by(col(Item.occurred_at), col(Item.id))
    )
    stored_order = np.argsort(stored.item_ids, kind="stable") if stored is not None else None
    stored_ids = np.asarray(stored.item_ids)[stored_order] if stored is not None and stored_order is not None else None
    parts: dict[str, list[Any]] = {name: [] for name in ("ids", "times", "roots", "content", "identity", "body_keys", "title_keys", "digests", "slots", "values")}
    statuses: list[str] = []
    result = connection.execute(query, execution_options={"stream_results": True, "yield_per": LOAD_CHUNK})
    for chunk in result.partitions(LOAD_CHUNK):
        ids = np.fromiter((row[0] for row in chunk), dtype=np.int64, count=len(chunk))
        times = np.fromiter((row[1].timestamp() for row in chunk), dtype=np.float64, count=len(chunk))
        content = text_keys([row[2] for row in chunk])
        identity = np.fromiter((identity_digest(row[3]) for row in chunk), dtype=np.uint64, count=len(chunk))
        body_keys, title_keys = text_keys([row[6] for row in chunk]), text_keys([row[7] for row in chunk])
        digests = record_digests(times, content, identity, body_keys, title_keys)
        slots = np.full(len(chunk), -1, dtype=np.int64)
        if stored is not None and stored_ids is not None and stored_order is not None and len(stored_ids):
            at = np.clip(np.searchsorted(stored_ids, ids), 0, len(stored_ids) - 1)
            candidate = stored_order[at]
            same = (stored_ids[at] == ids) & (np.asarray(stored.digests)[candidate] == digests)
            slots[same] = candidate[same]
        missing = np.flatnonzero(slots < 0)
        try:
            values = values_from_bytes([chunk[int(position)][8] for position in missing], index.recipe)
        except ValueError as error:
            raise MixedRecipeError(f"{error}: run `goldenset curate --refingerprint`") from error
        parts["ids"].append(ids)
        parts["times"].append(times)
        parts["roots"].append(np.fromiter((row[4] or row[0] for row in chunk), dtype=np.int64, count=len(chunk)))
        statuses.extend(row[5] for row in chunk)
        read = {"content": content, "identity": identity, "body_keys": body_keys, "title_keys": title_keys, "digests": digests, "slots": slots, "values": values}
        for name, part in read.items():
            parts[name].append(part)
    joined = {name: np.concatenate(part) for name, part in parts.items()}
    columns = _Columns(
        joined["ids"], joined["times"], joined["roots"], statuses, joined["content"], joined["identity"], joined["body_keys"], joined["title_keys"], joined["digests"]
    )
    return columns, joined["slots"], joined["values"]


def _settle_table(
    index: SimilarityIndex,
    columns: _Columns,
    slots: NDArray[np.int64],
    values: NDArray[Any],
    stored: SketchTable | None,
    expected: dict[str, Any],
    ann: AnnConfig | None,
) -> tuple[SketchTable, NDArray[np.int64]]:
    """The table to use and each position's slot in it: `stored` when it is current enough (its
    missing and changed items within `ann.rebuild_share`), else a new one of every item (`values`:
    the sketch values of the items `stored` does not hold, in position order; the others' are
    taken from it)."""
    if stored is not None and ann is not None:
        valid = int(np.count_nonzero(slots >= 0))
        if len(slots) - valid <= ann.rebuild_share * valid and len(stored) - valid <= ann.rebuild_share * len(stored):
            return stored, slots
    every = np.zeros((len(slots), values.shape[1]), dtype=values.dtype)
    every[slots < 0] = values
    held = np.flatnonzero(slots >= 0)
    if stored is not None and len(held):
        every[held] = np.asarray(stored.values)[slots[held]]
    table = SketchTable.build(
        item_ids=columns.ids,
        digests=columns.digests,
        content=columns.content,
        identity=columns.identity,
        body_keys=columns.body_keys,
        title_keys=columns.title_keys,
        values=every,
        ranges=list(index.lsh.hashranges),
        info=expected,
    )
    return table, np.arange(len(columns.ids), dtype=np.int64)


def _read_vectors(index: SimilarityIndex, connection: Connection, columns: _Columns) -> None:
    """A small pool's vectors, in float32 matrices searched exactly."""
    vectors: dict[str, bytes] = dict(connection.execute(sa_select(col(Embedding.text_hash), col(Embedding.vector)).where(col(Embedding.model_id) == index.model_id)).all())
    keys = columns.keys_of(np.arange(len(columns.ids), dtype=np.int64))
    missing = next((int(item_id) for item_id, (body, title) in zip(columns.ids, keys, strict=True) if body not in vectors or title not in vectors), None)
    if missing is not None:
        raise MixedRecipeError(f"item {missing} has no stored embedding under {index.model_id}: run `goldenset curate --refingerprint`")
    body = np.frombuffer(b"".join(vectors[body] for body, _ in keys), dtype=np.float32).reshape(len(keys), index.dim)
    title = np.frombuffer(b"".join(vectors[title] for _, title in keys), dtype=np.float32).reshape(len(keys), index.dim)
    index.add_vectors(range(len(keys)), body, title)


def _attach_vectors(index: SimilarityIndex, connection: Connection, columns: _Columns, ann: AnnConfig, files: IndexFiles | None) -> None:
    """A large pool's vectors, searched through its graph (`ApproximateVectors.attach`)."""
    try:
        index.ann = ApproximateVectors.attach(
            connection,
            item_ids=columns.ids,
            digests=vector_digests(columns.body_keys, columns.title_keys),
            times=columns.times,
            keys_of=columns.keys_of,
            model_id=index.model_id,
            dim=index.dim,
            title_weight=TITLE_WEIGHT,
            config=ann,
            files=files,
        )
    except LookupError as error:
        raise MixedRecipeError(f"{error} under {index.model_id}: run `goldenset curate --refingerprint`") from error
