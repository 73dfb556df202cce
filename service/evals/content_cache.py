"""Released dev content kept serialised in memory, per process.

A release's dev split never changes once written (its content is frozen), so the answer of the
release items route and the export of a dev split are the same bytes for every reader until the
release is withdrawn. Building them costs a query over every released row, a visibility check
against every other eval and JSON for each item, tens of milliseconds for a thousand items; the
cache keeps the finished body and the item ids it served (for the read audit), so a repeated
read costs a lookup.

Keys are the answer's ETag (which names the release, its number, its Merkle roots, the split and
the `occurred_after` filter) plus the service's release generation (`release_generation`): the
count of releases, the newest release id and the count of withdrawn ones. Any release written or
withdrawn anywhere changes the generation, so no entry outlives a change that could alter which
items a dev split may serve (an item sealed by another eval is never served as dev). Sealed
content is never cached: each sealed read is budgeted and built afresh.

Bounded by bytes (least recently used first out); an answer larger than a quarter of the bound
is not kept. Thread-safe.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import func
from sqlmodel import Session, col, select

from schemas.release import Release


@dataclass(frozen=True)
class CachedContent:
    """A finished answer: its body, the ids of the items whose content it carries, the release it
    came from and its headers (ETag, Cache-Control, Content-Disposition)."""

    body: bytes
    item_ids: tuple[int, ...]
    release_number: int
    headers: dict[str, str]


def release_generation(session: Session) -> str:
    """A value that changes whenever a release is written or withdrawn, anywhere in the service."""
    count, newest, withdrawn = session.exec(select(func.count(col(Release.id)), func.max(col(Release.id)), func.count(col(Release.withdrawn_at)))).one()
    return f"{count}:{newest}:{withdrawn}"


class ReleaseContentCache:
    """Least recently used dev release answers, at most `max_bytes` of bodies in all (0: keep none)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[str, CachedContent] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()
        self._building: dict[str, threading.Lock] = {}

    def get(self, key: str) -> CachedContent | None:
        """The entry under `key`, marked recently used, or None."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
            return entry

    def get_or_build(self, key: str, build: Callable[[], CachedContent]) -> CachedContent:
        """The entry under `key`, built by `build` and kept when missing. Concurrent callers of one
        missing key wait for a single build instead of each running their own."""
        if (entry := self.get(key)) is not None:
            return entry
        with self._lock:
            building = self._building.setdefault(key, threading.Lock())
        try:
            with building:
                if (entry := self.get(key)) is None:
                    entry = build()
                    self.put(key, entry)
                return entry
        finally:
            with self._lock:
                if self._building.get(key) is building:
                    del self._building[key]

    def put(self, key: str, entry: CachedContent) -> None:
        """Keep `entry` under `key` unless it is larger than a quarter of the bound, dropping the
        least recently used entries until the bound holds."""
        if self.max_bytes <= 0 or len(entry.body) * 4 > self.max_bytes:
            return
        with self._lock:
            previous = self._entries.pop(key, None)
            if previous is not None:
                self._size -= len(previous.body)
            self._entries[key] = entry
            self._size += len(entry.body)
            while self._size > self.max_bytes:
                _, dropped = self._entries.popitem(last=False)
                self._size -= len(dropped.body)

    @property
    def size(self) -> int:
        """Bytes of bodies held."""
        return self._size
