"""Units of work on a test's own session, for code that takes a factory of them
(`ingest.store.UnitsOfWork`, which the service fills with `service.core.db.write_transaction`): each
unit commits that session when it ends and rolls it back when it raises, so the test reads what was
written through the session it holds."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial

from sqlmodel import Session

from ingest.store import UnitsOfWork


@contextmanager
def _unit(session: Session) -> Iterator[Session]:
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise


def units_of(session: Session) -> UnitsOfWork:
    """A factory of units of work on `session`."""
    return partial(_unit, session)
