"""Ingest use cases shared by the CLI and the API: a document or a batch of records into a source."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ingest.mapping import CompiledMapping, Mapping
from ingest.readers import RawRecord
from ingest.store import ItemWriter, UnitsOfWork
from schemas.audit import AuditAction, AuditEvent
from schemas.problem import IngestSummary
from schemas.source import Source


def ingest_records(
    *,
    units: UnitsOfWork,
    source: Source,
    records: Sequence[RawRecord],
    mapping: Mapping,
    actor: str,
    on_progress: Callable[[int], None] | None = None,
    workers: int = 1,
) -> IngestSummary:
    """Map, redact and store `records` into `source`, auditing the run; returns its summary.

    Good records are stored even when others are rejected; a rejected record changes nothing.
    Each chunk of records (`ingest.store.CHUNK_SIZE`) is a unit of work of its own (`units()`,
    e.g. `service.core.db.write_transaction` on the engine), on purpose: a long batch that is
    interrupted keeps every complete chunk, and other writers get their turn between chunks. The
    audit event is written in one more unit at the end. `workers` above 1 prepares a large batch's
    records in that many processes (`ingest.preparing`).
    """
    writer = ItemWriter(source=source, mapping=CompiledMapping(mapping), workers=workers)
    summary = writer.write(records, units=units, on_progress=on_progress)
    with units() as session:
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
    return summary
