"""Running a pull: pages from a connector stored with the source's cursor, page by page.

Each page's items and the cursor after it are one unit of work (opened by the factory the caller
hands in, `ingest.store.UnitsOfWork`; this module never commits), so the cursor never runs ahead
of what is stored, a process killed at any point resumes from the last stored page, and a page
that fails is not half-stored.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlmodel import Session

from ingest.connectors.base import Connector
from ingest.mapping import CompiledMapping
from ingest.store import ItemWriter, UnitsOfWork
from schemas.common import utcnow
from schemas.problem import IngestSummary
from schemas.source import Source


@dataclass(frozen=True)
class PullProgress:
    pages: int
    records: int
    total: int | None


def run_pull(
    *,
    units: UnitsOfWork,
    source: Source,
    connector: Connector,  # type: ignore[type-arg]
    mapping: CompiledMapping,
    on_page: Callable[[PullProgress], None] | None = None,
) -> IngestSummary:
    """Pull `source` through `connector` from its stored cursor, each page in a unit of work of its
    own (`units()`); returns the summary. `source` itself is only read: each page moves the stored
    row's cursor.

    Connector errors propagate after every page before the failing one has been stored.
    """
    assert source.id is not None
    writer = ItemWriter(source=source, mapping=mapping)
    records = 0
    for pages, page in enumerate(connector.pages(source.cursor), start=1):
        with units() as session:
            stored_before = writer.summary.new + writer.summary.updated
            writer.stage(session, page.records)
            _advance(session, source.id, page.cursor, stored=writer.summary.new + writer.summary.updated - stored_before)
        records += len(page.records)
        if on_page is not None:
            on_page(PullProgress(pages=pages, records=records, total=page.total))
    return writer.summary


def _advance(session: Session, source_id: int, cursor: str, *, stored: int) -> None:
    """Move the stored source's cursor past a page that stored `stored` new or changed items."""
    row = session.get_one(Source, source_id)
    row.cursor = cursor
    row.items_pulled += stored
    row.updated_at = utcnow()
    session.add(row)
