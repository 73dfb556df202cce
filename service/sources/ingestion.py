"""Ingest use cases shared by the CLI and the API: a document or a batch of records into a source."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sqlmodel import Session

from ingest.mapping import CompiledMapping, Mapping
from ingest.readers import RawRecord
from ingest.store import ItemWriter
from schemas.audit import AuditAction, AuditEvent
from schemas.problem import IngestSummary
from schemas.source import Source


def ingest_records(
    *,
    session: Session,
    source: Source,
    records: Sequence[RawRecord],
    mapping: Mapping,
    actor: str,
    on_progress: Callable[[int], None] | None = None,
    workers: int = 1,
) -> IngestSummary:
    """Map, redact and store `records` into `source`, auditing the run; returns its summary.

    Good records are committed even when others are rejected; a rejected record changes nothing.
    `workers` above 1 prepares a large batch's records in that many processes (`ingest.preparing`).
    """
    writer = ItemWriter(session=session, source=source, mapping=CompiledMapping(mapping), workers=workers)
    summary = writer.write(records, on_progress=on_progress)
    session.add(
        AuditEvent(
            actor=actor,
            action=AuditAction.ITEMS_INGEST,
            object_type="source",
            object_id=source.name,
            count=summary.new + summary.updated,
            details=summary.counts(),
        )
    )
    session.commit()
    return summary
