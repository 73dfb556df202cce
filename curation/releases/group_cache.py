"""A per-process copy of the near groups (`curation.releases.groups`), so a page's sealed check
reads the groups it shows without following links step by step.

Links are only ever added (`schemas.dedup.NearLink`), so every committed state of the `near_link`
table is told apart by its row count: the *stamp*. The copy holds the groups of one committed
state and its count; every use counts the table's rows in the caller's own session and answers
from the copy only when the counts agree, so an answer is the one the caller's session would
find by following links. A caller that sees another state (links another process committed
since, a SQLite reader on an older snapshot, links its own transaction has not committed yet)
makes the copy catch up from a connection of its own, which reads only committed links; the copy
is never built from a state that may be rolled back. A caller whose count still differs then
follows links as before (`groups.traced_groups`).

Catching up reads only the links recorded since the newest one the copy holds, less
`CATCH_UP_MARGIN` (a link's `recorded_at` is taken when dedup decides, and its transaction may
commit later), in one snapshot with the table's count; when the links read and those held do
not add up to that count, the copy is rebuilt from every link. A table that shrank (a database
restored from a backup) is rebuilt too.

The copy costs about 200 to 240 bytes per link (`MAX_LINKS` caps it: a larger table is not copied and
every lookup follows links). It lives per engine URL; `clear()` drops every copy.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Generic, Protocol, TypeVar

from scipy.cluster.hierarchy import DisjointSet
from sqlalchemy import func, select
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.engine.base import OptionEngine
from sqlmodel import Session, col

from schemas.dedup import NearLink

logger = logging.getLogger(__name__)

MAX_LINKS = 500_000
"""The most links a copy holds (about 120 MB at 240 bytes a link); past it every lookup follows links."""

CATCH_UP_MARGIN = timedelta(hours=1)
"""How far before the newest link a copy holds catching up reads again."""


def _pair(item_id: int, other_id: int) -> int:
    return (item_id << 32) | other_id


@dataclass(frozen=True)
class Groups:
    """The near groups of one committed state of `near_link`: its row count, the newest
    `recorded_at`, and each linked item's group (in `base`, or in `overlay` for items whose group
    changed since `base` was made). Never changed once published: catching up makes a new one,
    copying only the overlay (folded into a new base once it outgrows an eighth of it)."""

    count: int
    newest: datetime | None
    base: dict[int, frozenset[int]]
    overlay: dict[int, frozenset[int]]

    def group(self, item_id: int) -> frozenset[int] | None:
        return self.overlay.get(item_id) or self.base.get(item_id)

    def lookup(self, item_ids: Iterable[int]) -> dict[int, frozenset[int]]:
        """As `groups.traced_groups`: the group of each of `item_ids` and of every member."""
        found: dict[int, frozenset[int]] = {}
        for item_id in item_ids:
            if item_id in found:
                continue
            group = self.group(item_id)
            if group is None:
                found[item_id] = frozenset((item_id,))
            else:
                found.update(dict.fromkeys(group, group))
        return found


def _newest(rows: Collection[tuple[int, int, datetime]], newest: datetime | None) -> datetime | None:
    latest = max((recorded_at for _, _, recorded_at in rows), default=None)
    return latest if newest is None or (latest is not None and latest > newest) else newest


def components(pairs: Iterable[tuple[int, int]], items: Iterable[int] = ()) -> dict[int, frozenset[int]]:
    """Each item of `pairs` and of `items` with its connected component: the items joined to it by
    any chain of pairs (itself included)."""
    disjoint = DisjointSet(items)
    for first, second in pairs:
        disjoint.add(first)
        disjoint.add(second)
        disjoint.merge(first, second)
    found: dict[int, frozenset[int]] = {}
    for subset in disjoint.subsets():
        frozen = frozenset(subset)
        found.update(dict.fromkeys(frozen, frozen))
    return found


def _built(rows: Collection[tuple[int, int, datetime]]) -> Groups:
    """Groups of every link in `rows`."""
    base = components((item_id, other_id) for item_id, other_id, _ in rows)
    return Groups(count=len(rows), newest=_newest(rows, None), base=base, overlay={})


def _extended(groups: Groups, rows: Collection[tuple[int, int, datetime]]) -> Groups:
    """`groups` with the links of `rows` (none of them held yet) added."""
    overlay = dict(groups.overlay)
    for item_id, other_id, _ in rows:
        first = overlay.get(item_id) or groups.base.get(item_id) or frozenset((item_id,))
        second = overlay.get(other_id) or groups.base.get(other_id) or frozenset((other_id,))
        if first is not second:
            merged = first | second
            overlay.update(dict.fromkeys(merged, merged))
    base = groups.base
    if len(overlay) > max(1024, len(base) // 8):
        base, overlay = {**base, **overlay}, {}
    return Groups(count=groups.count + len(rows), newest=_newest(rows, groups.newest), base=base, overlay=overlay)


def _count(connection: Connection | Session) -> int:
    return int(connection.execute(select(func.count()).select_from(NearLink)).scalar_one())


class Stamped(Protocol):
    """A copy's state: the row count of the table it was read from."""

    @property
    def count(self) -> int: ...


StateT = TypeVar("StateT", bound=Stamped)


class CountStampedCopy(Generic[StateT]):
    """A per-process copy of a table that only grows, told apart by its row count: `current`
    answers the state of `wanted` rows, catching up (`_read`, in one snapshot of a connection of
    its own) when the copy holds another count. Shared by a process's threads."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._state: StateT | None = None
        self._too_large_at: int | None = None
        self._lock = threading.Lock()
        self.rebuilds = 0
        self.catch_ups = 0

    def current(self, wanted: int) -> StateT | None:
        """The copy's state of `wanted` rows, caught up when it holds another; None when the table
        is too large to copy or the committed state still differs."""
        state = self._state
        if state is not None and state.count == wanted:
            return state
        with self._lock:
            state = self._state
            if state is not None and state.count == wanted:
                return state
            if self._too_large_at is not None and wanted >= self._too_large_at:
                return None
            with self._engine.connect() as connection:
                if connection.dialect.name == "postgresql":
                    connection = connection.execution_options(isolation_level="REPEATABLE READ")
                with connection.begin():  # one snapshot: the rows read and their count agree
                    fresh = self._read(connection, state)
            if fresh is not None:
                self._state = fresh
            return fresh if fresh is not None and fresh.count == wanted else None

    def _read(self, connection: Connection, state: StateT | None) -> StateT | None:
        """The state committed now, from `state` when it can be caught up; None (and
        `_too_large_at` set) when the table is too large to copy."""
        raise NotImplementedError


class GroupCache(CountStampedCopy[Groups]):
    """The copy of one database's near groups, shared by the threads of a process."""

    def __init__(self, engine: Engine) -> None:
        super().__init__(engine)
        self._pairs: set[int] = set()  # the links of the state (item_id << 32 | other_id), read and grown under the lock

    @property
    def groups(self) -> Groups | None:
        return self._state

    def lookup(self, session: Session, item_ids: Collection[int]) -> dict[int, frozenset[int]] | None:
        """The groups of `item_ids` as `session` sees them, or None when the copy cannot tell
        (the caller then follows links)."""
        groups = self.current(_count(session))
        return None if groups is None else groups.lookup(item_ids)

    def _read(self, connection: Connection, groups: Groups | None) -> Groups | None:
        columns = (col(NearLink.item_id), col(NearLink.other_id), col(NearLink.recorded_at))
        if groups is not None:
            query = select(*columns)
            if groups.newest is not None:
                query = query.where(col(NearLink.recorded_at) >= groups.newest - CATCH_UP_MARGIN)
            new = [(a, b, at) for a, b, at in connection.execute(query) if _pair(a, b) not in self._pairs]
            count = _count(connection)
            if count == groups.count + len(new) and count <= MAX_LINKS:
                self.catch_ups += 1
                self._pairs.update(_pair(a, b) for a, b, _ in new)
                return _extended(groups, new) if new else groups
        count = _count(connection)
        if count > MAX_LINKS:
            self._too_large_at = count
            self._state, self._pairs = None, set()
            logger.warning("near_link holds %d links, over the %d a group cache holds: near groups are followed link by link", count, MAX_LINKS)
            return None
        self.rebuilds += 1
        rows = [(a, b, at) for a, b, at in connection.execute(select(*columns))]
        self._pairs = {_pair(a, b) for a, b, _ in rows}
        return _built(rows)


def is_cacheable(engine: Engine) -> bool:
    """Whether a per-process copy of `engine`'s tables can be kept: not for a memory database."""
    if engine.dialect.name == "postgresql":
        return True
    database = engine.url.database or ""
    # A memory database is one per connection: the copy's own connection would see another.
    return engine.dialect.name == "sqlite" and database not in ("", ":memory:") and "mode=memory" not in database


def engine_of(session: Session) -> Engine:
    """The plain engine `session` reads (without a write session's options, so a copy's own
    reads begin no write transaction)."""
    bind = session.get_bind()
    engine = bind.engine if isinstance(bind, Connection) else bind
    while isinstance(engine, OptionEngine):
        engine = engine._proxied
    return engine


CopyT = TypeVar("CopyT", bound=CountStampedCopy[Any])


class CopiesPerDatabase(Generic[CopyT]):
    """One copy (`make(engine)`) per database a process reads, by engine URL; none for a memory
    database (`is_cacheable`)."""

    def __init__(self, make: Callable[[Engine], CopyT]) -> None:
        self._make = make
        self._copies: dict[str, CopyT] = {}
        self._lock = threading.Lock()

    def for_session(self, session: Session) -> CopyT | None:
        """The copy for the database `session` reads, or None for one that is not copied."""
        engine = engine_of(session)
        if not is_cacheable(engine):
            return None
        key = engine.url.render_as_string(hide_password=True)
        with self._lock:
            copy = self._copies.get(key)
            if copy is None:
                copy = self._copies[key] = self._make(engine)
            return copy

    def clear(self) -> None:
        """Drop every copy (tests, or after restoring a database under a running process)."""
        with self._lock:
            self._copies.clear()


_copies = CopiesPerDatabase(GroupCache)


def cache_for(session: Session) -> GroupCache | None:
    """The copy for the database `session` reads, or None for one that is not copied."""
    return _copies.for_session(session)


def cached_groups(session: Session, item_ids: Collection[int]) -> dict[int, frozenset[int]] | None:
    """The groups of `item_ids` from the copy, or None when the caller must follow links."""
    cache = cache_for(session)
    return None if cache is None else cache.lookup(session, item_ids)


def clear() -> None:
    """Drop every copy (tests, or after restoring a database under a running process)."""
    _copies.clear()
