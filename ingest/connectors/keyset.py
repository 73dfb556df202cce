"""The resume point of an "updated since" pull, and the walk that reads from it, shared by
connectors whose vendors filter by an update time: it never skips a record and never needs
offsets that shift under concurrent edits.

Every record updated before `since` is stored, and so are the records updated exactly at `since`
whose ids are in `seen`. A pull asks the vendor for "updated >= since", oldest first, and drops
records already seen; a record edited meanwhile moves to a later time, still ahead of the cursor.
`since` is a string in the vendor's own granularity (e.g. minutes for Jira), ordered as text.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ingest.connectors.base import unreadable_cursor


@dataclass(frozen=True)
class KeysetCursor:
    since: str | None = None
    seen: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def loads(cls, text: str | None) -> KeysetCursor:
        """Parse a stored cursor (None or empty: the beginning)."""
        if not text:
            return cls()
        try:
            data = json.loads(text)
            return cls(since=data["since"], seen=frozenset(str(value) for value in data.get("seen", [])))
        except (ValueError, KeyError, TypeError) as exc:
            raise unreadable_cursor(text) from exc

    def dumps(self) -> str:
        return json.dumps({"since": self.since, "seen": sorted(self.seen)}, separators=(",", ":"))

    def is_seen(self, boundary: str | None, record_id: str) -> bool:
        """Whether a record at `boundary` was stored by an earlier page."""
        if boundary is None or self.since is None:
            return False
        return boundary < self.since or (boundary == self.since and record_id in self.seen)

    def advance(self, records: Iterable[tuple[str | None, str]]) -> KeysetCursor:
        """The cursor after storing `records` (pairs of boundary and id; a None boundary is ignored)."""
        since, seen = self.since, set(self.seen)
        for boundary, record_id in records:
            if boundary is None:
                continue
            if since is None or boundary > since:
                since, seen = boundary, {record_id}
            elif boundary == since:
                seen.add(record_id)
        return KeysetCursor(since=since, seen=frozenset(seen))


@dataclass(frozen=True)
class SearchPage:
    """One answer of an "updated at or after" search: its records in (update time, id) order,
    the total the vendor reports (None when it does not), whether it is the last page of the
    search, and the vendor's token for the next one (None for offset paging)."""

    records: list[Any]
    total: int | None
    is_last: bool
    token: str | None = None
    advanced: int | None = None
    """How far the vendor's offset moved past this page when that is not its length (a vendor that
    applies the page size before leaving out records the caller may not read)."""


@dataclass(frozen=True)
class Batch:
    """Records read and the cursor after them; `start` is the offset of the search page they came from."""

    records: list[Any]
    start: int
    cursor: KeysetCursor
    total: int | None


Search = Callable[[str | None, int, str | None], SearchPage]
"""`search(since, offset, token)`: records updated at or after `since` (None: all), oldest first
and by id within a time, from `offset` (or the vendor's page `token`)."""


def walk(position: KeysetCursor, search: Search, boundary: Callable[[Any], str | None], key: Callable[[Any], str]) -> Iterator[Batch]:
    """Every record updated since `position`, once, in batches with the cursor to store after each.

    Each batch that moves the cursor starts a fresh search from it. Offsets (or page tokens) are
    followed only while the cursor stands still, when more records share its time than fit on a
    page; as a record edited meanwhile moves to the end and slides a later one under the offset,
    such a time is read again (until a reading finds nothing new) before the cursor passes it.
    `boundary` gives a record's update time in the cursor's granularity (None: unreadable; such a
    record is passed on without moving the cursor), `key` its id."""
    recheck: str | None = None  # a time whose records are being read again before the cursor passes it
    while True:
        start = position.since
        offset, token = 0, None
        found = again = False
        while True:
            page = search(start, offset, token)
            token = page.token
            fresh = [record for record in page.records if not position.is_seen(boundary(record), key(record))]
            found = found or any(boundary(record) == start for record in fresh)
            if offset > 0 and start is not None:
                held = [record for record in fresh if (time := boundary(record)) is None or time <= start]
                if len(held) < len(fresh) and (recheck != start or found):
                    if held:
                        position = position.advance((boundary(record), key(record)) for record in held)
                        yield Batch(held, offset, position, page.total)
                    recheck, again = start, True
                    break
            if fresh:
                position = position.advance((boundary(record), key(record)) for record in fresh)
                yield Batch(fresh, offset, position, page.total)
            if page.is_last:
                break
            offset += page.advanced if page.advanced is not None else len(page.records)
            if fresh and position.since != start:
                again = True
                break
        if not again:
            return
