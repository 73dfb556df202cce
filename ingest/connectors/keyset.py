"""The resume point of an "updated since" pull, shared by connectors whose vendors filter by an
update time: it never skips a record and never needs offsets that shift under concurrent edits.

Every record updated before `since` is stored, and so are the records updated exactly at `since`
whose ids are in `seen`. A pull asks the vendor for "updated >= since", oldest first, and drops
records already seen; a record edited meanwhile moves to a later time, still ahead of the cursor.
`since` is a string in the vendor's own granularity (e.g. minutes for Jira), ordered as text.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field

from ingest.connectors.base import MalformedPage


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
            raise MalformedPage(f"the stored cursor {text[:80]!r} cannot be read; reset it with PATCH /v1/sources/{{name}} reset_cursor=true") from exc

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
