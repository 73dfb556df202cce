"""Persisting mapped records as items: idempotent by (source, external id), whole records only.

Each record is checked before it is stored (`ingest.sanity`): nesting, NUL characters, lone
surrogates and non-finite numbers are rejected by position with a reason, never sent to the
database. A chunk is written in one savepoint; when the database refuses it for any reason, the
chunk is written again record by record, each in its own savepoint, so a record the database
refuses is rejected alone (`conflict` for a unique key, `store_failed` otherwise) and no other
record is lost. This module never commits: `ItemWriter.write` stores each chunk in a unit of work
of its own, opened by the factory the caller hands it (`UnitsOfWork`), so a long file that is
interrupted keeps every complete chunk and a rerun finds those items unchanged; `ItemWriter.stage`
writes into the caller's unit of work, beside other state (a pull's cursor). A record whose version (see
`ingest.versions`) is older than the stored item's is not applied and counts as `stale`.

A changed record of an item a curator edited (`Item.curated_revision`) never replaces the
curator's title, input, reference or tags: its date, metadata and identity are applied as usual,
and its text, when it differs from what the source last said, is kept beside the item as a
`source_held` revision and flags the item for a person's look (`Item.source_changed_at`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from datetime import datetime
from itertools import islice
from typing import Any

from sqlalchemy import delete, insert
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlmodel import Session, col, select

from ingest.mapping import CompiledMapping, MappedRecord, RecordRejected
from ingest.normalisation import NORMALISATION_VERSION
from ingest.preparing import ParallelPreparer, PreparedChunk, PreparedRecord, RecordPreparer
from ingest.readers import RawRecord
from ingest.redaction.redactor import Redactor
from ingest.sanity import printable
from ingest.versions import is_older
from schemas.common import utcnow
from schemas.dedup import ItemFingerprint
from schemas.item import EDITED_FIELDS, Item, ItemRevision, ItemStatus, RevisionKind, item_snapshot
from schemas.lifecycle import MOVES, ItemAction, move
from schemas.problem import IngestSummary, RecordError
from schemas.source import Source

CHUNK_SIZE = 500
# Fewer records than this are prepared in this process: starting worker processes costs about a second.
PARALLEL_FROM = 5_000
logger = logging.getLogger("goldenset.ingest")
# Statuses a content change sends back to curation (`schemas.lifecycle`); rejected and retired items keep theirs.
_RECURATE_ON_CHANGE = frozenset(status.value for status in MOVES[ItemAction.SOURCE_CHANGE].sources)

ProgressCallback = Callable[[int], None]
UnitsOfWork = Callable[[], AbstractContextManager[Session]]
"""Opens one unit of work: a session whose transaction commits when the block ends and rolls back
when it raises. `ingest` never commits; the service hands it one (`service.core.db.write_transaction`
bound to its engine)."""
_DETAIL_SHOWN = 500


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


def _record(prepared: PreparedRecord) -> MappedRecord:
    assert prepared.record is not None, "a rejected record is never stored"
    return prepared.record


def _chunks(records: Iterable[RawRecord], size: int) -> Iterator[list[RawRecord]]:
    iterator = iter(records)
    while chunk := list(islice(iterator, size)):
        yield chunk


class ItemWriter:
    """Writes records of one source into the database through the sessions it is given; never
    commits (see the module docstring).

    Not thread-safe; one writer per ingest run. The summary accumulates across `write` and `stage` calls.
    """

    def __init__(
        self,
        *,
        source: Source,
        mapping: CompiledMapping,
        redactor: Redactor | None = None,
        now: Callable[[], datetime] = utcnow,
        workers: int = 1,
    ) -> None:
        if source.id is None:
            raise ValueError("the source must be saved before items are written to it")
        self.source_name = source.name
        self._actor = f"source:{source.name}"
        self.source_id: int = source.id
        self.mapping = mapping
        self.preparer = RecordPreparer(mapping, redactor)
        self.now = now
        # Worker processes redact with the mapping's own policy: a redactor given here keeps the work here.
        self.workers = workers if redactor is None else 1
        self.summary = IngestSummary(source=source.name)
        # A public reference corpus is matched against, never curated into an eval.
        self.initial_status = ItemStatus.REFERENCE.value if source.kind == "reference" else ItemStatus.CANDIDATE.value

    def write(self, records: Iterable[RawRecord], *, units: UnitsOfWork, on_progress: ProgressCallback | None = None) -> IngestSummary:
        """Prepare and upsert `records`, every `CHUNK_SIZE` of them in a unit of work of its own
        (`units()`), so each complete chunk stays stored whatever happens to the next; returns the
        running summary.

        With `workers` above 1 and more than `PARALLEL_FROM` records (a sequence), chunks are
        prepared (mapped, redacted, digested) in that many worker processes while earlier ones are
        stored: the same items, in the same order, as preparing them here."""
        sized = records if isinstance(records, Sequence) else None
        parallel = self.workers > 1 and sized is not None and len(sized) >= PARALLEL_FROM
        now = self.now()
        with ParallelPreparer(self.mapping.mapping, self.workers) if parallel else nullcontext() as pool:
            preparer = pool if pool is not None else self.preparer
            for chunk in preparer.prepare_all(_chunks(records, CHUNK_SIZE), now):
                with units() as session:
                    self._write_chunk(session, chunk, now)
                if on_progress is not None:
                    on_progress(len(chunk.records))
        return self.summary

    def stage(self, session: Session, records: Iterable[RawRecord]) -> None:
        """Prepare and upsert `records` in `session`, the caller's unit of work, which stores them
        together with other state (a pull's cursor)."""
        now = self.now()
        for chunk in _chunks(records, CHUNK_SIZE):
            self._write_chunk(session, self.preparer.prepare(chunk, now), now)

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

    def _write_chunk(self, session: Session, chunk: PreparedChunk, now: datetime) -> None:
        for kind, number in chunk.redacted.items():
            self.summary.redacted[kind] = self.summary.redacted.get(kind, 0) + number
        mapped: list[PreparedRecord] = []
        for prepared in chunk.records:
            if prepared.rejected is not None:
                self.reject(prepared.raw, prepared.rejected)
            else:
                mapped.append(prepared)
        if not mapped:
            return
        outcomes: list[str | None]
        try:
            # Fast path: the whole chunk in one savepoint, its new items in one INSERT.
            with session.begin_nested():
                existing = self._existing(session, (_record(prepared).external_id for prepared in mapped))
                pending: dict[str, dict[str, Any]] = {}
                outcomes = [self._upsert(session, prepared, existing, pending, now) for prepared in mapped]
                self._insert(session, pending)
                session.flush()
        except Exception as exc:
            if _connection_lost(exc):
                raise
            # Another writer inserted one of these ids meanwhile, or the database refused one
            # record's values: redo record by record, so each record is still written whole or
            # not at all and only a refused record is lost.
            outcomes = self._write_one_by_one(session, mapped, now)
        for outcome in outcomes:
            if outcome is not None:
                self.summary.read += 1
                setattr(self.summary, outcome, getattr(self.summary, outcome) + 1)

    def _existing(self, session: Session, external_ids: Iterable[str]) -> dict[str, Item]:
        wanted = set(external_ids)
        query = select(Item).where(Item.source_id == self.source_id, col(Item.external_id).in_(wanted))
        return {item.external_id: item for item in session.exec(query)}

    def _write_one_by_one(self, session: Session, mapped: list[PreparedRecord], now: datetime) -> list[str | None]:
        outcomes: list[str | None] = []
        for prepared in mapped:
            record = _record(prepared)
            for attempt in range(2):
                try:
                    with session.begin_nested():
                        pending: dict[str, dict[str, Any]] = {}
                        outcome = self._upsert(session, prepared, self._existing(session, [record.external_id]), pending, now)
                        self._insert(session, pending)
                        session.flush()
                    outcomes.append(outcome)
                    break
                except IntegrityError as exc:
                    # A second try reads the row a concurrent writer just inserted and updates it.
                    if attempt == 1:
                        self.reject(prepared.raw, RecordRejected("conflict", f"the record conflicts with a stored item: {exc.orig}", record.external_id))
                        outcomes.append(None)
                except Exception as exc:
                    if _connection_lost(exc):
                        raise
                    reason = exc.orig if isinstance(exc, DBAPIError) else exc
                    # The first line only: the database's DETAIL and CONTEXT lines quote the values.
                    first_line = next(iter(str(reason).splitlines()), "")
                    # The log names the record but none of its values.
                    logger.warning("source %s: the database refused the record at %s (%s)", self.source_name, prepared.locator, type(reason).__name__)
                    self.reject(prepared.raw, RecordRejected("store_failed", f"the database refused this record: {type(reason).__name__}: {first_line}", record.external_id))
                    outcomes.append(None)
                    break
        return outcomes

    def _insert(self, session: Session, pending: dict[str, dict[str, Any]]) -> None:
        """Insert the new items' rows gathered in `pending` (one statement), and forget them."""
        if pending:
            session.execute(insert(Item), list(pending.values()))
            pending.clear()

    def _upsert(self, session: Session, prepared: PreparedRecord, existing: dict[str, Item], pending: dict[str, dict[str, Any]], now: datetime) -> str:
        """Apply a prepared record: a new item becomes a row in `pending` (inserted by the caller),
        a stored one in `existing` is updated in the session. A second record of an id new in this
        chunk (rare) stores the pending rows first and is applied to the stored item like any other."""
        record, digest, fingerprint = _record(prepared), prepared.digest, prepared.fingerprint
        if record.external_id in pending:
            self._insert(session, pending)
            existing.update(self._existing(session, [record.external_id]))
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
                session.add(item)
            return "unchanged"
        assert item.id is not None
        if item.curated_revision is not None:
            self._hold(session, item, record, digest, now)
            return "updated"
        session.add(ItemRevision(item_id=item.id, revision=item.revision, changed_at=now, previous_digest=item.record_digest, previous=item_snapshot(item)))
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
            session.exec(delete(ItemFingerprint).where(col(ItemFingerprint.item_id) == item.id))
        # Only a change of the text sends an item back to curation; metadata-only changes do not.
        if text_changed and item.status in _RECURATE_ON_CHANGE:
            session.add(move(item, ItemAction.SOURCE_CHANGE, ItemStatus.CANDIDATE, actor=self._actor, details={"revision": item.revision}, at=now))
        session.add(item)
        return "updated"

    def _hold(self, session: Session, item: Item, record: MappedRecord, digest: str, now: datetime) -> None:
        """Apply a changed record to an item a curator edited: it keeps the curator's text. A change
        of the date, metadata or identity is applied as a `source` revision; a text that differs
        from what the source last said is kept as a `source_held` revision, and flags the item for
        a person's look (an approved item goes back to review as `unique`; other statuses stay)."""
        assert item.id is not None
        if (item.occurred_at, item.meta, item.identity_key) != (record.occurred_at, record.metadata, record.identity):
            session.add(ItemRevision(item_id=item.id, revision=item.revision, changed_at=now, previous_digest=item.record_digest, previous=item_snapshot(item)))
            item.revision += 1
        proposed = _proposed(record, item.status)
        if _text(proposed) != _text(self._last_source_text(session, item)):
            session.add(ItemRevision(item_id=item.id, revision=item.revision, changed_at=now, previous_digest=digest, previous=proposed, kind=RevisionKind.SOURCE_HELD.value))
            item.source_changed_at = now
            if item.status == ItemStatus.APPROVED.value:
                session.add(move(item, ItemAction.SOURCE_REOPEN, ItemStatus.UNIQUE, actor=self._actor, details={"revision": item.revision}, at=now))
        item.occurred_at = record.occurred_at
        item.meta = record.metadata
        item.identity_key = record.identity
        item.record_digest = digest
        if record.version is not None:
            item.source_version = record.version
        item.updated_at = now
        session.add(item)

    def _last_source_text(self, session: Session, item: Item) -> dict[str, Any]:
        """What the source last said of an edited item: its newest held change, or else the content
        the curator's first edit replaced."""
        revisions = select(ItemRevision).where(ItemRevision.item_id == item.id)
        held = session.exec(revisions.where(ItemRevision.kind == RevisionKind.SOURCE_HELD.value).order_by(col(ItemRevision.id).desc()).limit(1)).first()
        if held is None:
            held = session.exec(revisions.where(ItemRevision.kind == RevisionKind.CURATOR.value).order_by(col(ItemRevision.id)).limit(1)).first()
        return held.previous if held is not None else item_snapshot(item)


def _connection_lost(exc: Exception) -> bool:
    """Whether `exc` means the connection is gone: no record is to blame, so the run stops."""
    return isinstance(exc, DBAPIError) and exc.connection_invalidated
