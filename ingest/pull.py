"""Running a pull: pages from a connector stored with the source's cursor, page by page.

Each page's items and the cursor after it are committed in one transaction, so the cursor never
runs ahead of what is stored, a process killed at any point resumes from the last committed
page, and a page that fails is not half-stored.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlmodel import Session

from ingest.connectors.base import Connector
from ingest.mapping import CompiledMapping
from ingest.store import ItemWriter
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
    session: Session,
    source: Source,
    connector: Connector,  # type: ignore[type-arg]
    mapping: CompiledMapping,
    on_page: Callable[[PullProgress], None] | None = None,
) -> IngestSummary:
    """Pull `source` through `connector` from its stored cursor; returns the summary.

    Connector errors propagate after every page before the failing one has been committed.
    """
    writer = ItemWriter(session=session, source=source, mapping=mapping)
    records = 0
    for pages, page in enumerate(connector.pages(source.cursor), start=1):
        stored_before = writer.summary.new + writer.summary.updated
        writer.stage(page.records)
        source.cursor = page.cursor
        source.items_pulled += writer.summary.new + writer.summary.updated - stored_before
        source.updated_at = utcnow()
        session.add(source)
        session.commit()
        records += len(page.records)
        if on_page is not None:
            on_page(PullProgress(pages=pages, records=records, total=page.total))
    return writer.summary
