"""Locks that die with their process: one pull per source at a time, across processes.

PostgreSQL: a session advisory lock on a connection held for the lock's lifetime, opened outside
the engine's pool (a pull or a refresh may hold it for minutes; the pool's connections are the
requests'), so work done under the lock takes at most one pooled connection at a time. That
connection runs in autocommit: it never holds a transaction open while the lock is held, and
taking and releasing the lock are not part of any unit of work. SQLite: an
exclusive `flock` on a file beside the database. Either is released by the operating system or
the server when the holder is killed, so a crashed pull never blocks the next one.
"""

from __future__ import annotations

import fcntl
import hashlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.pool import NullPool


class LockBusy(RuntimeError):
    """Another process holds the lock."""


def _lock_key(name: str) -> int:
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)


_lock_engines: dict[str, Engine] = {}
_lock_engines_guard = threading.Lock()


def _lock_engine(engine: Engine) -> Engine:
    """An engine over `engine`'s database whose connections are opened for each lock and closed
    with it, never taken from `engine`'s pool, and run in autocommit (each statement takes effect
    alone, so no transaction stays open for the minutes a lock is held)."""
    key = engine.url.render_as_string(hide_password=False)
    with _lock_engines_guard:
        found = _lock_engines.get(key)
        if found is None:
            found = _lock_engines[key] = create_engine(engine.url, poolclass=NullPool, hide_parameters=True, isolation_level="AUTOCOMMIT")
        return found


@contextmanager
def exclusive(engine: Engine, name: str) -> Iterator[None]:
    """Hold the lock `name` for the block; raise `LockBusy` at once if another process holds it."""
    url = make_url(str(engine.url))
    if url.get_backend_name() == "postgresql":
        with _lock_engine(engine).connect() as connection:
            acquired = connection.execute(text("SELECT pg_try_advisory_lock(:key)"), {"key": _lock_key(name)}).scalar()
            if not acquired:
                raise LockBusy(name)
            try:
                yield
            finally:
                connection.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": _lock_key(name)})
        return
    database = url.database or ""
    if not database or database == ":memory:":
        yield
        return
    lock_path = Path(f"{database}.{hashlib.sha256(name.encode()).hexdigest()[:16]}.lock")
    with lock_path.open("a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            raise LockBusy(name) from exc
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
