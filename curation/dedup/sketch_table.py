"""The items a dedup index loads at start, in columns: who each item is (id, content hash,
identity, vector keys, a digest of those), its MinHash values, and MinHash LSH band tables over
the values, sorted for binary search.

The bands are datasketch's: `MinHashLSH(threshold, num_perm)` chooses how many bands of how many
rows, and two sketches share a bucket exactly when one of their bands holds the same values, so
`matching` answers as `MinHashLSH.query` does for the same sketches (a band's values are hashed
to sort them; equal hashes are checked value by value, so a hash collision never adds an item).

A table is built in memory from the database (a small pool), or kept, per database, recipe and
band layout, by the `IndexFiles` that keep the approximate index's graph (`curation.dedup.index_files`):
written once, atomically, under the same lock, and memory-mapped by every process that opens it,
so a restart opens instead of rebuilding, API replicas on one host share its pages, and pages
nobody reads (the sketches of items no query comes near) are never loaded.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from curation.dedup.index_files import IndexFiles

TABLE_VERSION = 1
# Every text key is at most 64 characters (schemas: content_hash, body_key, title_key).
KEY_DTYPE = np.dtype("S64")
_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)
_COLUMNS = ("item_ids", "digests", "content", "identity", "body_keys", "title_keys", "values", "band_keys", "band_slots", "content_keys", "content_slots")

IntArray = NDArray[np.int64]


def identity_digest(identity: str | None) -> int:
    """A nonzero 63-bit digest of a `distinct_by` identity; 0 for none. Two items with different
    identities are never duplicates: the index compares digests."""
    if identity is None:
        return 0
    return (int.from_bytes(hashlib.blake2b(identity.encode("utf-8"), digest_size=8).digest(), "big") >> 1) or 1


def text_keys(values: Sequence[str | None]) -> NDArray[np.bytes_]:
    """Text keys (content hashes, embedding keys) as fixed-width bytes; None as empty."""
    return np.array([(value or "").encode("utf-8") for value in values], dtype=KEY_DTYPE)


def mix(columns: list[NDArray[Any]], count: int) -> NDArray[np.uint64]:
    """A 64-bit FNV-1a-style hash per row of `columns` (each `count` rows of unsigned words, or
    fixed-width bytes read as words): for sorting and for telling a changed row."""
    hashed = np.full(count, _FNV_OFFSET, dtype=np.uint64)
    for column in columns:
        words = _as_words(column, count)
        for j in range(words.shape[1]):
            hashed ^= words[:, j]
            hashed *= _FNV_PRIME
    return hashed


def _as_words(column: NDArray[Any], count: int) -> NDArray[np.uint64]:
    if column.dtype.kind == "S":
        width = column.dtype.itemsize
        raw = np.zeros((count, -(-width // 8) * 8), dtype=np.uint8)
        raw[:, :width] = np.frombuffer(np.ascontiguousarray(column).tobytes(), dtype=np.uint8).reshape(count, width)
        return raw.view(np.uint64)
    return np.ascontiguousarray(column.reshape(count, -1)).astype(np.uint64, copy=False)


def record_digests(
    times: NDArray[np.float64], content: NDArray[np.bytes_], identity: NDArray[np.uint64], body_keys: NDArray[np.bytes_], title_keys: NDArray[np.bytes_]
) -> IntArray:
    """A 63-bit digest per item of what its table entry was made from (occurrence time, content
    hash, identity, vector keys): an entry whose digest differs from the database's is out of date.
    Status and cluster are not in it: they change without a new sketch and are read at every load."""
    count = len(times)
    digests: IntArray = (mix([times.view(np.uint64), content, identity, body_keys, title_keys], count) >> np.uint64(1)).astype(np.int64)
    return digests


@dataclass
class SketchTable:
    """Items in slot order: `item_ids`, `digests` (`record_digests`), `content` hashes, `identity`
    digests (0: none), `body_keys` / `title_keys` of their vectors, MinHash `values` (one row per
    item, the recipe's dtype), and for each LSH band, the band hashes sorted (`band_keys`) with the
    slot of each (`band_slots`); `content_keys` / `content_slots`: content hashes' hashes sorted,
    for exact lookups. `ranges`: the (start, end) of each band in a row of values."""

    item_ids: IntArray
    digests: IntArray
    content: NDArray[np.bytes_]
    identity: NDArray[np.uint64]
    body_keys: NDArray[np.bytes_]
    title_keys: NDArray[np.bytes_]
    values: NDArray[np.unsignedinteger[Any]]
    band_keys: NDArray[np.uint64]
    band_slots: NDArray[np.int32]
    content_keys: NDArray[np.uint64]
    content_slots: NDArray[np.int32]
    ranges: list[tuple[int, int]]
    info: dict[str, Any]

    def __len__(self) -> int:
        return len(self.item_ids)

    @classmethod
    def build(
        cls,
        *,
        item_ids: IntArray,
        digests: IntArray,
        content: NDArray[np.bytes_],
        identity: NDArray[np.uint64],
        body_keys: NDArray[np.bytes_],
        title_keys: NDArray[np.bytes_],
        values: NDArray[np.unsignedinteger[Any]],
        ranges: list[tuple[int, int]],
        info: dict[str, Any],
    ) -> SketchTable:
        """A table of the given items (all arrays in the same slot order) and bands `ranges`."""
        count = len(item_ids)
        if count >= 2**31:
            raise ValueError(f"a sketch table holds fewer than 2**31 items, got {count}")
        band_keys = np.empty((len(ranges), count), dtype=np.uint64)
        band_slots = np.empty((len(ranges), count), dtype=np.int32)
        for band, (start, end) in enumerate(ranges):
            hashed = mix([values[:, start:end]], count)
            order = np.argsort(hashed, kind="stable")
            band_keys[band], band_slots[band] = hashed[order], order
        content_hashed = mix([content], count)
        content_order = np.argsort(content_hashed, kind="stable")
        return cls(
            item_ids,
            digests,
            content,
            identity,
            body_keys,
            title_keys,
            values,
            band_keys,
            band_slots,
            content_hashed[content_order],
            content_order.astype(np.int32),
            list(ranges),
            {**info, "count": count, "ranges": [list(pair) for pair in ranges]},
        )

    def matching(self, row: NDArray[np.unsignedinteger[Any]]) -> NDArray[np.int32]:
        """Slots sharing at least one band with the MinHash values `row` (each once, unordered)."""
        found: list[NDArray[np.int32]] = []
        for band, (start, end) in enumerate(self.ranges):
            part = row[start:end]
            key = mix([part[None, :]], 1)[0]
            keys = self.band_keys[band]
            low = int(np.searchsorted(keys, key, side="left"))
            high = int(np.searchsorted(keys, key, side="right"))
            if high > low:
                slots = np.asarray(self.band_slots[band, low:high])
                same = (np.asarray(self.values[slots, start:end]) == part).all(axis=1)
                found.append(slots[same])
        if not found:
            return np.zeros(0, dtype=np.int32)
        return np.unique(np.concatenate(found))

    def with_content(self, content_hash: str) -> NDArray[np.int32]:
        """Slots whose content hash is `content_hash`."""
        wanted = text_keys([content_hash])
        key = mix([wanted], 1)[0]
        low = int(np.searchsorted(self.content_keys, key, side="left"))
        high = int(np.searchsorted(self.content_keys, key, side="right"))
        slots: NDArray[np.int32] = np.asarray(self.content_slots[low:high])
        same: NDArray[np.bool_] = np.asarray(self.content[slots]) == wanted[0]
        return slots[same]

    def save(self, files: IndexFiles, stem: str) -> None:
        """Write the table through `files` as `stem` (its arrays and a record naming them),
        replacing any earlier one atomically: a process that has the earlier one open keeps reading it."""
        files.save_table(stem, {column: getattr(self, column) for column in _COLUMNS}, self.info)

    @classmethod
    def open(cls, files: IndexFiles, stem: str, expected: dict[str, Any]) -> SketchTable | None:
        """The table saved as `stem`, its arrays memory-mapped, when its record matches `expected`
        (version, database, recipe, bands); None when missing, of another kind or unreadable."""
        stored = files.open_table(stem, _COLUMNS, expected)
        if stored is None:
            return None
        arrays, info = stored
        count = int(info.get("count", -1))
        ranges = [(int(start), int(end)) for start, end in info["ranges"]]
        shapes_fit = (
            all(len(arrays[column]) == count for column in ("item_ids", "digests", "content", "identity", "body_keys", "title_keys", "values", "content_keys", "content_slots"))
            and arrays["band_keys"].shape == (len(ranges), count)
            and arrays["band_slots"].shape == (len(ranges), count)
        )
        if not shapes_fit:
            return None
        return cls(**arrays, ranges=ranges, info=info)
