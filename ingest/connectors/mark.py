"""The resume point of a connector whose vendor offers no stable "updated since" order (it lists
by creation, or newest first): a time mark. A pull reads every record from the mark on, whole,
and the mark moves only once the last page is read, to the newest time seen, never past an
optional ceiling (the pull's start less a margin for clock skew, so a record edited while the
pull ran is read again by the next). A pull that dies is read again from the old mark; the
store's upsert absorbs the repeats.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from ingest.connectors.base import unreadable_cursor
from ingest.dates import read_time


class TimeMark:
    """The mark a pull started from (`since`, None: the beginning) and the newest time it has seen."""

    def __init__(self, since: datetime | None) -> None:
        self.since = since
        self.newest = since

    @classmethod
    def loads(cls, text: str | None) -> TimeMark:
        """The mark stored as ISO 8601 text (None or empty: the beginning); `MalformedPage` when unreadable."""
        if not text:
            return cls(None)
        since = read_time(text)
        if since is None:
            raise unreadable_cursor(text)
        return cls(since)

    def see(self, times: Iterable[object]) -> None:
        """Note the times (vendor text) of records read; unreadable ones are passed over."""
        for time in times:
            moment = read_time(time)
            if moment is not None and (self.newest is None or moment > self.newest):
                self.newest = moment

    def moved(self, ceiling: datetime | None = None) -> datetime | None:
        """The mark once every page is read: the newest time seen, at most `ceiling`; None when it does not move."""
        if self.newest is None:
            return None
        moved = min(self.newest, ceiling) if ceiling is not None else self.newest
        return moved if self.since is None or moved > self.since else None
