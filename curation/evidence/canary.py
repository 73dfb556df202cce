"""Leak scanning: find evals' canary strings and verbatim or near-verbatim copies of released items
in text dumps (a web crawl, a model's outputs, a repository).

Canaries: every GUID-shaped string in the dump is looked up among the evals' canary GUIDs, and a
canary-prefixed GUID that belongs to no known eval is reported too (another deployment's, or a
deleted eval's).

Copies: each released item's fields (title, input, reference) are cut into word `shingle_words`-
grams; grams shared by more than `max_item_share` fields are boilerplate and dropped, and a field
keeps being watched only with at least `min_shingles` distinctive grams left. The dump's grams are
looked up in one sorted array (numpy, no per-word Python work but a dictionary lookup), hits are
grouped per field where they lie close together, and a group covering at least `min_containment`
of the field's grams is a candidate. A candidate is confirmed by the MinHash Jaccard estimate
(`curation.dedup.fingerprints`) between the dump region and the field, at least `min_similarity`.
`verbatim`: every distinctive gram is there; otherwise `near-verbatim`.

Files are read as bytes in chunks with an overlap larger than four times the longest watched
field, so a copy is never cut by a chunk border; memory stays bounded whatever the file size.
`.gz` files are decompressed on the fly; `.git` folders are skipped.
"""

from __future__ import annotations

import gzip
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, cast

import numpy as np
from numpy.typing import NDArray

from curation.clock import Timer
from curation.dedup.fingerprints import MinHashRecipe, sketch_texts

DEFAULT_CANARY_PREFIX = "GOLDENSET CANARY GUID"
_GUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_GUID_BYTES = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_TOKEN = re.compile(rb"[a-z0-9-]+")
# Words are runs of ASCII letters, digits and hyphens, lower-cased; every other byte separates them
# (so a non-ASCII word is split the same way in the dump and in the item). JSON escapes become
# blanks of the same length: offsets into the prepared bytes are those of the raw bytes.
_ESCAPES = ((b"\\n", b"  "), (b"\\t", b"  "), (b"\\r", b"  "), (b'\\"', b"  "), (b"\\/", b"  "))
_FOLD = bytes(byte + 32 if 65 <= byte <= 90 else byte if 48 <= byte <= 57 or 97 <= byte <= 122 or byte == 45 else 32 for byte in range(256))
_BASE = np.uint64(0x100000001B3)
MIN_OVERLAP_BYTES = 64 * 1024
MIN_CHUNK_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class WatchedItem:
    """A released item to look for: its text fields, the (eval, release) pairs it was released in,
    and whether it is in a sealed split."""

    item_id: int
    fields: Mapping[str, str]
    releases: tuple[tuple[str, int], ...]
    sealed: bool = False


@dataclass(frozen=True)
class ScanConfig:
    shingle_words: int = 3
    min_shingles: int = 6
    max_item_share: int = 3
    min_containment: float = 0.5
    min_similarity: float = 0.4
    canary_prefix: str = DEFAULT_CANARY_PREFIX

    def __post_init__(self) -> None:
        if self.shingle_words < 2 or self.min_shingles < 1 or self.max_item_share < 1:
            raise ValueError("shingle_words must be at least 2, min_shingles and max_item_share at least 1")
        if not 0 < self.min_containment <= 1 or not 0 <= self.min_similarity <= 1:
            raise ValueError("min_containment must be in (0, 1] and min_similarity in [0, 1]")


@dataclass(frozen=True)
class CanaryHit:
    """A canary GUID at byte `offset` of `path`; `eval` is None for a GUID after the canary prefix
    that belongs to no known eval."""

    path: str
    offset: int
    guid: str
    eval: str | None


@dataclass(frozen=True)
class ItemCopy:
    """A copy of a released item's `field` at byte `offset` of `path` (`length` bytes), with the
    share of the field's distinctive grams found (`containment`) and the MinHash Jaccard estimate
    between the region and the field (`similarity`)."""

    path: str
    offset: int
    length: int
    item_id: int
    field: str
    kind: str
    containment: float
    similarity: float
    releases: tuple[tuple[str, int], ...]
    sealed: bool


@dataclass
class ScanReport:
    files: int = 0
    bytes: int = 0
    seconds: float = 0.0
    canaries: list[CanaryHit] = field(default_factory=list)
    copies: list[ItemCopy] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)

    @property
    def found(self) -> bool:
        return bool(self.canaries or self.copies)


def _prepare(data: bytes) -> bytes:
    """`data` folded for matching: same length, lower-case ASCII words and hyphens, blanks elsewhere."""
    for escape, blank in _ESCAPES:
        data = data.replace(escape, blank)
    return data.translate(_FOLD)


def _shingle_hashes(ids: NDArray[np.uint64], size: int) -> tuple[NDArray[np.uint64], NDArray[np.bool_]]:
    """A polynomial hash of every `size`-gram of token ids, and whether it holds no unknown (0) id."""
    count = len(ids) - size + 1
    if count <= 0:
        return np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.bool_)
    hashes = np.zeros(count, dtype=np.uint64)
    for offset in range(size):
        hashes = hashes * _BASE + ids[offset : offset + count]
    unknown = np.concatenate(([0], np.cumsum(ids == 0)))
    return hashes, (unknown[size : size + count] - unknown[:count]) == 0


class ScanIndex:
    """The canaries and the released items' distinctive grams, ready to scan dumps against."""

    def __init__(self, canaries: Mapping[str, str], items: Iterable[WatchedItem], config: ScanConfig | None = None) -> None:
        """`canaries`: eval name → canary string (its GUID is what is looked for)."""
        self.config = config or ScanConfig()
        self.guids: dict[str, str] = {}
        for eval_name, canary in canaries.items():
            found = _GUID.search(canary)
            if found is None:
                raise ValueError(f"the canary of eval {eval_name!r} holds no GUID: {canary!r}")
            self.guids[found.group().lower()] = eval_name
        self.vocabulary: dict[bytes, int] = {}
        self.fields: list[tuple[WatchedItem, str, str]] = []
        pair_hashes: list[NDArray[np.uint64]] = []
        pair_fields: list[NDArray[np.int64]] = []
        for item in items:
            for name, text in item.fields.items():
                tokens = _prepare(text.encode("utf-8")).split()
                ids = np.array([self.vocabulary.setdefault(token, len(self.vocabulary) + 1) for token in tokens], dtype=np.uint64)
                hashes, _ = _shingle_hashes(ids, self.config.shingle_words)
                unique = np.unique(hashes)
                if unique.size:
                    pair_hashes.append(unique)
                    pair_fields.append(np.full(unique.size, len(self.fields), dtype=np.int64))
                    self.fields.append((item, name, text))
        self._build(pair_hashes, pair_fields)
        self._sketches: dict[int, Any] = {}
        longest = max((len(text.encode("utf-8")) for _, _, text in self.fields), default=0)
        self.overlap_bytes = max(MIN_OVERLAP_BYTES, 4 * longest)
        self.chunk_bytes = max(MIN_CHUNK_BYTES, 4 * self.overlap_bytes)

    def _build(self, pair_hashes: list[NDArray[np.uint64]], pair_fields: list[NDArray[np.int64]]) -> None:
        hashes = np.concatenate(pair_hashes) if pair_hashes else np.zeros(0, dtype=np.uint64)
        owners = np.concatenate(pair_fields) if pair_fields else np.zeros(0, dtype=np.int64)
        _, inverse, shares = np.unique(hashes, return_inverse=True, return_counts=True)
        keep = shares[inverse] <= self.config.max_item_share
        sizes = np.bincount(owners[keep], minlength=len(self.fields))
        keep &= sizes[owners] >= self.config.min_shingles
        hashes, owners = hashes[keep], owners[keep]
        order = np.argsort(hashes, kind="stable")
        self.pair_hashes, self.pair_fields = hashes[order], owners[order]
        self.keys = np.unique(self.pair_hashes)
        self.starts = np.searchsorted(self.pair_hashes, self.keys, side="left")
        self.counts = np.searchsorted(self.pair_hashes, self.keys, side="right") - self.starts
        self.sizes = np.bincount(self.pair_fields, minlength=len(self.fields))

    @property
    def watched_fields(self) -> int:
        return int(np.count_nonzero(self.sizes))

    def field_sketch(self, position: int) -> Any:
        if position not in self._sketches:
            # Sketched as folded, like the dump regions it is compared with.
            folded = _prepare(self.fields[position][2].encode("utf-8")).decode("ascii")
            self._sketches[position] = sketch_texts([folded], MinHashRecipe())[0]
        return self._sketches[position]


class Scanner:
    """Scans files against a `ScanIndex`; `timer` (seconds, e.g. `time.perf_counter`) times a scan."""

    def __init__(self, index: ScanIndex, *, timer: Timer) -> None:
        self.index = index
        self.config = index.config
        self.timer = timer

    def scan_paths(self, paths: Iterable[Path], progress: Callable[[int], None] | None = None) -> ScanReport:
        """Scan every file under `paths` (files, or folders walked recursively, `.git` skipped).
        `progress` is called with each chunk's new byte count."""
        report = ScanReport()
        started = self.timer()
        for path in iter_files(paths):
            try:
                with _open(path) as handle:
                    self._scan_stream(handle, str(path), report, progress)
                report.files += 1
            except OSError as exc:
                report.unreadable.append(f"{path}: {exc}")
        report.seconds = self.timer() - started
        return report

    def _scan_stream(self, handle: IO[bytes], path: str, report: ScanReport, progress: Callable[[int], None] | None) -> None:
        seen: set[tuple[object, ...]] = set()
        tail = b""
        start = 0  # byte offset of `tail` in the file
        while True:
            block = handle.read(self.index.chunk_bytes)
            if not block and not tail:
                return
            chunk = tail + block
            report.bytes += len(block)
            if progress is not None:
                progress(len(block))
            self._scan_chunk(chunk, start, path, report, seen)
            if not block:
                return
            keep = min(len(chunk), self.index.overlap_bytes)
            tail = chunk[len(chunk) - keep :]
            start += len(chunk) - keep

    def _scan_chunk(self, raw: bytes, start: int, path: str, report: ScanReport, seen: set[tuple[object, ...]]) -> None:
        folded = _prepare(raw)
        for guid, eval_name in self.index.guids.items():
            needle = guid.encode("ascii")
            at = folded.find(needle)
            while at >= 0:
                if ("canary", guid, start + at) not in seen:
                    seen.add(("canary", guid, start + at))
                    report.canaries.append(CanaryHit(path, start + at, guid, eval_name))
                at = folded.find(needle, at + 1)
        prefix = self.config.canary_prefix.encode("utf-8").translate(_FOLD)
        at = folded.find(prefix)
        while at >= 0:
            after = at + len(prefix)
            while after < len(folded) and folded[after] == 32 and after - at < len(prefix) + 8:
                after += 1
            found = _GUID_BYTES.match(folded, after)
            if found is not None:
                guid = found.group().decode("ascii")
                if guid not in self.index.guids and ("canary", guid, start + found.start()) not in seen:
                    seen.add(("canary", guid, start + found.start()))
                    report.canaries.append(CanaryHit(path, start + found.start(), guid, None))
            at = folded.find(prefix, at + 1)
        if self.index.keys.size:
            self._find_copies(folded, start, path, report, seen)

    def _find_copies(self, folded: bytes, start: int, path: str, report: ScanReport, seen: set[tuple[object, ...]]) -> None:
        index, size = self.index, self.config.shingle_words
        lookup = index.vocabulary.get
        tokens = folded.split()
        ids = np.array([lookup(token, 0) for token in tokens], dtype=np.uint64)
        hashes, valid = _shingle_hashes(ids, size)
        positions = np.flatnonzero(valid)
        slots = np.minimum(np.searchsorted(index.keys, hashes[positions]), index.keys.size - 1)
        hit = index.keys[slots] == hashes[positions]
        positions, slots = positions[hit], slots[hit]
        if not positions.size:
            return
        # One row per (hit, field holding that gram).
        repeats = index.counts[slots]
        firsts = np.repeat(index.starts[slots] - np.cumsum(repeats) + repeats, repeats) + np.arange(int(repeats.sum()))
        owners = index.pair_fields[firsts]
        positions, slots = np.repeat(positions, repeats), np.repeat(slots, repeats)
        order = np.lexsort((positions, owners))
        owners, positions, slots = owners[order], positions[order], slots[order]
        gap = np.maximum(index.sizes[owners] + size, 4 * size)
        breaks = np.ones(owners.size, dtype=np.bool_)
        breaks[1:] = (owners[1:] != owners[:-1]) | (positions[1:] - positions[:-1] > gap[1:])
        groups = np.cumsum(breaks) - 1
        # Distinct grams per group: a gram repeated inside a copy counts once.
        distinct = np.unique(groups.astype(np.int64) * index.keys.size + slots) // index.keys.size
        found = np.bincount(distinct, minlength=int(groups[-1]) + 1)
        group_firsts = np.flatnonzero(breaks)
        group_lasts = np.append(group_firsts[1:], owners.size) - 1
        containment = found / index.sizes[owners[group_firsts]]
        candidates = np.flatnonzero(containment >= self.config.min_containment)
        if not candidates.size:
            return
        spans = [match.span() for match in _TOKEN.finditer(folded)]
        for group in candidates:
            owner = int(owners[group_firsts[group]])
            first, last = int(positions[group_firsts[group]]), int(positions[group_lasts[group]]) + size - 1
            begin, end = spans[first][0], spans[last][1]
            region = folded[begin:end].decode("ascii")
            similarity = float(sketch_texts([region], MinHashRecipe())[0].jaccard(index.field_sketch(owner)))
            if similarity < self.config.min_similarity:
                continue
            item, field_name, _ = index.fields[owner]
            if ("copy", item.item_id, field_name, start + begin) in seen:
                continue
            seen.add(("copy", item.item_id, field_name, start + begin))
            share = float(containment[group])
            report.copies.append(
                ItemCopy(
                    path=path,
                    offset=start + begin,
                    length=end - begin,
                    item_id=item.item_id,
                    field=field_name,
                    kind="verbatim" if share >= 1.0 else "near-verbatim",
                    containment=round(share, 4),
                    similarity=round(similarity, 4),
                    releases=item.releases,
                    sealed=item.sealed,
                )
            )


def iter_files(paths: Iterable[Path]) -> Iterator[Path]:
    """The files named, and every file under the folders named (sorted; `.git` skipped)."""
    for path in paths:
        if path.is_dir():
            for child in sorted(path.rglob("*")):
                if child.is_file() and ".git" not in child.relative_to(path).parts:
                    yield child
        else:
            yield path


def _open(path: Path) -> IO[bytes]:
    if path.suffix == ".gz":
        return cast(IO[bytes], gzip.open(path, "rb"))
    return path.open("rb")
