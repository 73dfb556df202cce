"""A per-process copy of what the sealed check reads about a near group's members besides the
group itself: every eval membership (`eval_item`: item, eval, split) and each item's source.

A page's sealed check (`curation.releases.visibility.sealing_evals`) asks, for every member of
the groups it shows, which evals hold it and in which split, and for a group never released, the
sources of its members. On a pool where a third of the items share groups of up to hundreds of
members, those reads were most of a page; from this copy they are dictionary look-ups.

Memberships are only ever added, and a membership's split is fixed at its first release
(`schemas.evals.EvalItem`; retiring one changes other columns), so every committed state of
`eval_item` is told apart by its row count, as `near_link`'s is (`curation.releases.group_cache`).
Every use counts the table's rows in the caller's own session and answers from the copy only when
the counts agree; otherwise the copy catches up from a connection of its own, reading the rows
whose id is above the largest it holds in one snapshot with the table's count, and is rebuilt
from every row when those do not add up (a transaction that took a smaller id committed after
one that took a larger). A caller whose count still differs (its own transaction has added
memberships not committed yet) reads the table itself.

An item's source never changes, so sources are kept per item as they are first asked for, and
only the items not held yet are read (in the caller's session). Source names are read per use:
a source may be renamed.

The copy of memberships costs about 150 bytes per membership (`MAX_MEMBERSHIPS` caps it), the
sources about 100 bytes per item (`MAX_SOURCES`, past which they are forgotten and read again).
It lives per engine URL; `clear()` drops every copy.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.engine import Connection, Engine
from sqlmodel import Session, col

from curation.releases.group_cache import CopiesPerDatabase, CountStampedCopy
from schemas.evals import EvalItem
from schemas.item import Item
from schemas.source import Source

logger = logging.getLogger(__name__)

MAX_MEMBERSHIPS = 2_000_000
"""The most memberships a copy holds (about 300 MB); past it every check reads the table."""

MAX_SOURCES = 2_000_000
"""The most item sources a copy remembers before it forgets them all and starts again."""

_BATCH = 500


@dataclass(frozen=True)
class Memberships:
    """The memberships of one committed state of `eval_item`: its row count, the largest row id,
    and for each item held by any eval, eval id -> split. Never changed once published."""

    count: int
    largest_id: int
    held: dict[int, dict[int, str]]


def _count(connection: Connection | Session) -> int:
    return int(connection.execute(select(func.count()).select_from(EvalItem)).scalar_one())


class MembershipCache(CountStampedCopy[Memberships]):
    """The copy of one database's memberships and item sources, shared by a process's threads."""

    def __init__(self, engine: Engine) -> None:
        super().__init__(engine)
        self._sources: dict[int, int] = {}

    def held(self, session: Session, item_ids: Collection[int]) -> dict[int, dict[int, str]] | None:
        """For each of `item_ids` some eval holds: eval id -> split, as `session` sees it; None when
        the copy cannot tell (the caller then reads the table)."""
        memberships = self.current(_count(session))
        if memberships is None:
            return None
        held = memberships.held
        return {item_id: held[item_id] for item_id in item_ids if item_id in held}

    def source_names(self, session: Session, item_ids: Collection[int]) -> dict[int, str]:
        """The name of each of `item_ids`' source (items that do not exist are left out)."""
        with self._lock:
            missing = sorted(item_id for item_id in set(item_ids) if item_id not in self._sources)
        found: dict[int, int] = {}
        for start in range(0, len(missing), _BATCH):
            query = select(col(Item.id), col(Item.source_id)).where(col(Item.id).in_(missing[start : start + _BATCH]))
            found.update((item_id, source_id) for item_id, source_id in session.execute(query) if item_id is not None)
        with self._lock:
            if len(self._sources) + len(found) > MAX_SOURCES:
                self._sources = {}
            self._sources.update(found)
            source_of = {item_id: self._sources.get(item_id, found.get(item_id)) for item_id in item_ids}
        names: dict[int, str] = {source_id: name for source_id, name in session.execute(select(col(Source.id), col(Source.name)))}
        return {item_id: names[source_id] for item_id, source_id in source_of.items() if source_id in names}

    def _read(self, connection: Connection, memberships: Memberships | None) -> Memberships | None:
        columns = (col(EvalItem.id), col(EvalItem.item_id), col(EvalItem.eval_id), col(EvalItem.split))
        count = _count(connection)
        if count > MAX_MEMBERSHIPS:
            self._too_large_at = count
            self._state = None
            logger.warning("eval_item holds %d memberships, over the %d a membership cache holds: the sealed check reads the table", count, MAX_MEMBERSHIPS)
            return None
        if memberships is not None and count > memberships.count:
            new = connection.execute(select(*columns).where(col(EvalItem.id) > memberships.largest_id)).all()
            if memberships.count + len(new) == count:
                self.catch_ups += 1
                held = dict(memberships.held)
                for _, item_id, eval_id, split in new:
                    held[item_id] = {**held.get(item_id, {}), eval_id: split}
                return Memberships(count=count, largest_id=max(row_id or 0 for row_id, _, _, _ in new), held=held)
        self.rebuilds += 1
        held = {}
        largest = 0
        for row_id, item_id, eval_id, split in connection.execute(select(*columns)):
            held.setdefault(item_id, {})[eval_id] = split
            largest = max(largest, row_id or 0)
        return Memberships(count=count, largest_id=largest, held=held)


_copies = CopiesPerDatabase(MembershipCache)


def cache_for(session: Session) -> MembershipCache | None:
    """The copy for the database `session` reads, or None for one that is not copied."""
    return _copies.for_session(session)


def clear() -> None:
    """Drop every copy (tests, or after restoring a database under a running process)."""
    _copies.clear()
