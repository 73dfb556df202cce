"""Persisting mapped records as items: idempotent by (source, external id), whole records only.

Each record is checked before it is stored (`ingest.sanity`): nesting, NUL characters, lone
surrogates and non-finite numbers are rejected by position with a reason, never sent to the
database. A chunk is written in one savepoint; when the database refuses it for any reason, the
chunk is written again record by record, each in its own savepoint, so a record the database
refuses is rejected alone (`conflict` for a unique key, `store_failed` otherwise) and no other
record is lost. Work is committed chunk by chunk so a long file that is interrupted keeps every
complete chunk, and a rerun finds those items unchanged. A record whose version (see
`ingest.versions`) is older than the stored item's is not applied and counts as `stale`.

A changed record of an item a curator edited (`Item.curated_revision`) never replaces the
curator's title, input, reference or tags: its date, metadata and identity are applied as usual,
and its text, when it differs from what the source last said, is kept beside the item as a
`source_held` revision and flags the item for a person's look (`Item.source_changed_at`).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from itertools import islice
from typing import Any

from sqlalchemy import delete, insert
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlmodel import Session, col, select

from ingest.mapping import CompiledMapping, MappedRecord, RecordRejected
from ingest.normalisation import NORMALISATION_VERSION, content_hash
from ingest.readers import RawRecord
from ingest.redaction.redactor import Redactor
from ingest.sanity import check_structure, check_values, printable
from ingest.versions import is_older
from schemas.common import utcnow
from schemas.dedup import ItemFingerprint
from schemas.item import EDITED_FIELDS, Item, ItemRevision, ItemStatus, RevisionKind, item_snapshot
from schemas.problem import IngestSummary, RecordError
from schemas.source import Source

CHUNK_SIZE = 500
logger = logging.getLogger("goldenset.ingest")
# Statuses a content change sends back to curation; rejected and retired items keep their status.
_RECURATE_ON_CHANGE = {
    ItemStatus.CANDIDATE.value,
    ItemStatus.UNIQUE.value,
    ItemStatus.DUPLICATE.value,
    ItemStatus.CONTAMINATED.value,
    ItemStatus.APPROVED.value,
}

ProgressCallback = Callable[[int], None]
_DETAIL_SHOWN = 500


def record_digest(record: MappedRecord) -> str:
    """sha256 over the canonical JSON of everything an item stores from its record."""
    payload = {
        "external_id": record.external_id,
        "occurred_at": record.occurred_at.isoformat(),
        "title": record.title,
        "input": record.input,
        "reference": record.reference,
        "metadata": record.metadata,
        "tags": record.tags,
        "identity": record.identity,
    }
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _redact(record: MappedRecord, redactor: Redactor, counts: dict[str, int]) -> MappedRecord:
    texts: dict[str, str] = {}
    for name in ("title", "input", "reference"):
        result = redactor.redact(getattr(record, name))
        texts[name] = result.text
        for kind, number in result.counts.items():
            counts[kind] = counts.get(kind, 0) + number
    metadata, metadata_counts = redactor.redact_value(record.metadata)
    for kind, number in metadata_counts.items():
        counts[kind] = counts.get(kind, 0) + number
    assert isinstance(metadata, dict)
    return MappedRecord(
        external_id=record.external_id,
        occurred_at=record.occurred_at,
        title=texts["title"],
        input=texts["input"],
        reference=texts["reference"],
        metadata=metadata,
        tags=record.tags,
        identity=record.identity,
        version=record.version,
    )


def _proposed(record: MappedRecord, status: str) -> dict[str, Any]:
    """A record's content in the shape of `schemas.item.item_snapshot`."""
    return {
        "occurred_at": record.occurred_at.isoformat(),
        "title": record.title,
        "input": record.input,
        "reference": record.reference,
        "metadata": record.metadata,
        "tags": record.tags,
        "status": status,
    }


def _text(content: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(content.get(name) for name in EDITED_FIELDS)


def _chunks(records: Iterable[RawRecord], size: int) -> Iterator[list[RawRecord]]:
    iterator = iter(records)
    while chunk := list(islice(iterator, size)):
        yield chunk


class ItemWriter:
    """Writes records of one source into the database through a session it is given.

    Not thread-safe; one writer per ingest run. The summary accumulates across `write` calls.
    """

    def __init__(
        self,
        *,
        session: Session,
        source: Source,
        mapping: CompiledMapping,
        redactor: Redactor | None = None,
        now: Callable[[], datetime] = utcnow,
    ) -> None:
        if source.id is None:
            raise ValueError("the source must be saved before items are written to it")
        self.session = session
        self.source = source
        self.source_id: int = source.id
        self.mapping = mapping
        self.redactor = redactor or Redactor(mapping.mapping.redact)
        self.now = now
        self.summary = IngestSummary(source=source.name)
        # A public reference corpus is matched against, never curated into an eval.
        self.initial_status = ItemStatus.REFERENCE.value if source.kind == "reference" else ItemStatus.CANDIDATE.value

    def write(self, records: Iterable[RawRecord], *, on_progress: ProgressCallback | None = None) -> IngestSummary:
        """Map, redact and upsert `records`, committing every `CHUNK_SIZE`; returns the running summary."""
        for chunk in _chunks(records, CHUNK_SIZE):
            self.stage(chunk)
            self.session.commit()
            if on_progress is not None:
                on_progress(len(chunk))
        return self.summary

    def stage(self, records: Iterable[RawRecord]) -> None:
        """Map, redact and upsert `records` in the session without committing, so the caller can
        commit them together with other state (a pull's cursor)."""
        for chunk in _chunks(records, CHUNK_SIZE):
            self._write_chunk(chunk)

    def reject(self, raw: RawRecord, error: RecordRejected) -> None:
        """Count `raw` as rejected for `error` (its detail and id made safe to show and encode)."""
        self.summary.read += 1
        self.summary.rejected += 1
        self.summary.rejected_by_reason[error.reason] = self.summary.rejected_by_reason.get(error.reason, 0) + 1
        detail = printable(error.detail)
        self.summary.errors.append(
            RecordError(
                position=raw.position,
                locator=raw.locator,
                reason=error.reason,
                detail=detail if len(detail) <= _DETAIL_SHOWN else f"{detail[:_DETAIL_SHOWN]}…",
                external_id=printable(error.external_id) if error.external_id is not None else None,
            )
        )

    def _map(self, raw: RawRecord, now: datetime) -> MappedRecord:
        """`raw` checked, mapped, checked again and redacted; raises `RecordRejected`."""
        if raw.error is not None:
            raise raw.error
        # The raw record first: a mapping walks it and its templates render it, which a record
        # nested thousands deep would turn into a RecursionError.
        try:
            check_structure(raw.value)
        except RecordRejected as exc:
            exc.external_id = self.mapping.external_id_of(raw.value)
            raise
        record = self.mapping.apply(raw.value, now=now)
        # What is stored, not the raw record: a bad value in a field the mapping leaves out costs nothing.
        check_values(record)
        return _redact(record, self.redactor, self.summary.redacted)

    def _write_chunk(self, chunk: list[RawRecord]) -> None:
        now = self.now()
        mapped: list[tuple[RawRecord, MappedRecord]] = []
        for raw in chunk:
            try:
                mapped.append((raw, self._map(raw, now)))
            except RecordRejected as exc:
                self.reject(raw, exc)
        if not mapped:
            return
        outcomes: list[str | None]
        try:
            # Fast path: the whole chunk in one savepoint, its new items in one INSERT.
            with self.session.begin_nested():
                existing = self._existing(record.external_id for _, record in mapped)
                pending: dict[str, dict[str, Any]] = {}
                outcomes = [self._upsert(record, existing, pending, now) for _, record in mapped]
                self._insert(pending)
                self.session.flush()
        except Exception as exc:
            if _connection_lost(exc):
                raise
            # Another writer inserted one of these ids meanwhile, or the database refused one
            # record's values: redo record by record, so each record is still written whole or
            # not at all and only a refused record is lost.
            outcomes = self._write_one_by_one(mapped, now)
        for outcome in outcomes:
            if outcome is not None:
                self.summary.read += 1
                setattr(self.summary, outcome, getattr(self.summary, outcome) + 1)

    def _existing(self, external_ids: Iterable[str]) -> dict[str, Item]:
        wanted = set(external_ids)
        query = select(Item).where(Item.source_id == self.source_id, col(Item.external_id).in_(wanted))
        return {item.external_id: item for item in self.session.exec(query)}

    def _write_one_by_one(self, mapped: list[tuple[RawRecord, MappedRecord]], now: datetime) -> list[str | None]:
        outcomes: list[str | None] = []
        for raw, record in mapped:
            for attempt in range(2):
                try:
                    with self.session.begin_nested():
                        pending: dict[str, dict[str, Any]] = {}
                        outcome = self._upsert(record, self._existing([record.external_id]), pending, now)
                        self._insert(pending)
                        self.session.flush()
                    outcomes.append(outcome)
                    break
                except IntegrityError as exc:
                    # A second try reads the row a concurrent writer just inserted and updates it.
                    if attempt == 1:
                        self.reject(raw, RecordRejected("conflict", f"the record conflicts with a stored item: {exc.orig}", record.external_id))
                        outcomes.append(None)
                except Exception as exc:
                    if _connection_lost(exc):
                        raise
                    reason = exc.orig if isinstance(exc, DBAPIError) else exc
                    # The first line only: the database's DETAIL and CONTEXT lines quote the values.
                    first_line = next(iter(str(reason).splitlines()), "")
                    # The log names the record but none of its values.
                    logger.warning("source %s: the database refused the record at %s (%s)", self.source.name, raw.locator, type(reason).__name__)
                    self.reject(raw, RecordRejected("store_failed", f"the database refused this record: {type(reason).__name__}: {first_line}", record.external_id))
                    outcomes.append(None)
                    break
        return outcomes

    def _insert(self, pending: dict[str, dict[str, Any]]) -> None:
        """Insert the new items' rows gathered in `pending` (one statement), and forget them."""
        if pending:
            self.session.execute(insert(Item), list(pending.values()))
            pending.clear()

    def _upsert(self, record: MappedRecord, existing: dict[str, Item], pending: dict[str, dict[str, Any]], now: datetime) -> str:
        """Apply `record`: a new item becomes a row in `pending` (inserted by the caller), a stored
        one in `existing` is updated in the session. A second record of an id new in this chunk
        (rare) stores the pending rows first and is applied to the stored item like any other."""
        digest = record_digest(record)
        fingerprint = content_hash(record.title, record.input, record.reference)
        if record.external_id in pending:
            self._insert(pending)
            existing.update(self._existing([record.external_id]))
        item = existing.get(record.external_id)
        if item is not None and is_older(record.version, item.source_version):
            return "stale"
        if item is None:
            # A plain row, not an ORM object: building and flushing thousands of those was a third
            # of ingest's time.
            pending[record.external_id] = {
                "source_id": self.source_id,
                "external_id": record.external_id,
                "occurred_at": record.occurred_at,
                "title": record.title,
                "input": record.input,
                "reference": record.reference,
                "meta": record.metadata,
                "tags": record.tags,
                "status": self.initial_status,
                "content_hash": fingerprint,
                "hash_recipe": NORMALISATION_VERSION,
                "identity_key": record.identity,
                "record_digest": digest,
                "source_version": record.version,
                "ingested_at": now,
                "updated_at": now,
            }
            return "new"
        if item.record_digest == digest:
            # The version is outside the digest, so an event that changes nothing still moves the
            # version on: an event older than it must not apply later.
            if record.version is not None and item.source_version != record.version:
                item.source_version = record.version
                self.session.add(item)
            return "unchanged"
        assert item.id is not None
        if item.curated_revision is not None:
            self._hold(item, record, digest, now)
            return "updated"
        self.session.add(ItemRevision(item_id=item.id, revision=item.revision, changed_at=now, previous_digest=item.record_digest, previous=item_snapshot(item)))
        text_changed = item.content_hash != fingerprint
        item.occurred_at = record.occurred_at
        item.title = record.title
        item.input = record.input
        item.reference = record.reference
        item.meta = record.metadata
        item.tags = record.tags
        item.content_hash = fingerprint
        item.hash_recipe = NORMALISATION_VERSION
        item.identity_key = record.identity
        item.record_digest = digest
        # A record without a version keeps the stored one: events older than it stay stale.
        if record.version is not None:
            item.source_version = record.version
        item.revision += 1
        item.updated_at = now
        if text_changed and item.status == ItemStatus.REFERENCE.value:
            # A reference item is re-fingerprinted by the next curation run.
            self.session.exec(delete(ItemFingerprint).where(col(ItemFingerprint.item_id) == item.id))
        # Only a change of the text sends an item back to curation; metadata-only changes do not.
        if text_changed and item.status in _RECURATE_ON_CHANGE:
            item.status = ItemStatus.CANDIDATE.value
        self.session.add(item)
        return "updated"

    def _hold(self, item: Item, record: MappedRecord, digest: str, now: datetime) -> None:
        """Apply a changed record to an item a curator edited: it keeps the curator's text. A change
        of the date, metadata or identity is applied as a `source` revision; a text that differs
        from what the source last said is kept as a `source_held` revision, and flags the item for
        a person's look (an approved item goes back to review as `unique`; other statuses stay)."""
        assert item.id is not None
        if (item.occurred_at, item.meta, item.identity_key) != (record.occurred_at, record.metadata, record.identity):
            self.session.add(ItemRevision(item_id=item.id, revision=item.revision, changed_at=now, previous_digest=item.record_digest, previous=item_snapshot(item)))
            item.revision += 1
        proposed = _proposed(record, item.status)
        if _text(proposed) != _text(self._last_source_text(item)):
            self.session.add(ItemRevision(item_id=item.id, revision=item.revision, changed_at=now, previous_digest=digest, previous=proposed, kind=RevisionKind.SOURCE_HELD.value))
            item.source_changed_at = now
            if item.status == ItemStatus.APPROVED.value:
                item.status = ItemStatus.UNIQUE.value
        item.occurred_at = record.occurred_at
        item.meta = record.metadata
        item.identity_key = record.identity
        item.record_digest = digest
        if record.version is not None:
            item.source_version = record.version
        item.updated_at = now
        self.session.add(item)

    def _last_source_text(self, item: Item) -> dict[str, Any]:
        """What the source last said of an edited item: its newest held change, or else the content
        the curator's first edit replaced."""
        revisions = select(ItemRevision).where(ItemRevision.item_id == item.id)
        held = self.session.exec(revisions.where(ItemRevision.kind == RevisionKind.SOURCE_HELD.value).order_by(col(ItemRevision.id).desc()).limit(1)).first()
        if held is None:
            held = self.session.exec(revisions.where(ItemRevision.kind == RevisionKind.CURATOR.value).order_by(col(ItemRevision.id)).limit(1)).first()
        return held.previous if held is not None else item_snapshot(item)


def _connection_lost(exc: Exception) -> bool:
    """Whether `exc` means the connection is gone: no record is to blame, so the run stops."""
    return isinstance(exc, DBAPIError) and exc.connection_invalidated
