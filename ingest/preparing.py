"""Preparing records for storage: each raw record checked, mapped, checked again and redacted,
with the digests the writer compares (the record's and its text's fingerprint). Pure work on one
record at a time, so a large ingest prepares its chunks in worker processes while the writer
stores the ones before (`ParallelPreparer`); the results are the same as preparing in turn
(`RecordPreparer`), in the same order.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ingest.mapping import CompiledMapping, MappedRecord, Mapping, RecordRejected
from ingest.normalisation import content_hash
from ingest.readers import RawRecord
from ingest.redaction.redactor import Redactor
from ingest.sanity import check_structure, check_values

# Chunks prepared ahead of the writer, per worker: enough to keep workers busy, little memory.
AHEAD_PER_WORKER = 2


@dataclass(frozen=True)
class PreparedRecord:
    """One raw record ready to store (`record`, its `digest` and its text's `fingerprint`), or
    why it cannot be (`rejected`). `position` and `locator` say where it was read."""

    position: int
    locator: str
    record: MappedRecord | None = None
    digest: str = ""
    fingerprint: str = ""
    rejected: RecordRejected | None = None

    @property
    def raw(self) -> RawRecord:
        """Where the record was read (its value is not kept)."""
        return RawRecord(self.position, self.locator)


@dataclass
class PreparedChunk:
    """A chunk's records in reading order, and what redaction replaced in them, by kind."""

    records: list[PreparedRecord]
    redacted: dict[str, int] = field(default_factory=dict)


class RecordPreparer:
    """Prepares records in this process with one mapping and redactor."""

    def __init__(self, mapping: CompiledMapping, redactor: Redactor | None = None) -> None:
        self.mapping = mapping
        self.redactor = redactor or Redactor(mapping.mapping.redact)

    def prepare(self, chunk: Iterable[RawRecord], now: datetime) -> PreparedChunk:
        """Each record of `chunk` prepared (mapped at `now`), or rejected with its reason."""
        prepared = PreparedChunk([])
        for raw in chunk:
            try:
                record = self._map(raw, now, prepared.redacted)
            except RecordRejected as exc:
                prepared.records.append(PreparedRecord(raw.position, raw.locator, rejected=exc))
                continue
            fingerprint = content_hash(record.title, record.input, record.reference)
            prepared.records.append(PreparedRecord(raw.position, raw.locator, record, record_digest(record), fingerprint))
        return prepared

    def _map(self, raw: RawRecord, now: datetime, counts: dict[str, int]) -> MappedRecord:
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
        return redact(record, self.redactor, counts)

    def prepare_all(self, chunks: Iterable[list[RawRecord]], now: datetime) -> Iterator[PreparedChunk]:
        """`prepare` of each chunk, in order."""
        for chunk in chunks:
            yield self.prepare(chunk, now)


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


def redact(record: MappedRecord, redactor: Redactor, counts: dict[str, int]) -> MappedRecord:
    """`record` with its texts and metadata redacted; what was replaced is added to `counts`."""
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


# A worker process's preparer, made once by `_start_worker`.
_worker: RecordPreparer | None = None


def _start_worker(mapping: dict[str, Any]) -> None:
    global _worker
    _worker = RecordPreparer(CompiledMapping(Mapping.model_validate(mapping)))


def _prepare_in_worker(chunk: list[RawRecord], now: datetime) -> PreparedChunk:
    assert _worker is not None, "the worker was not started with its mapping"
    return _worker.prepare(chunk, now)


def usable_cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


class ParallelPreparer:
    """Prepares chunks in `workers` processes (started fresh, by a fork server: never a fork of
    this process's threads), a few chunks ahead of the consumer, returned in order. Use as a
    context manager; the processes stop when it closes."""

    def __init__(self, mapping: Mapping, workers: int) -> None:
        if workers < 1:
            raise ValueError(f"workers must be at least 1, got {workers}")
        self.workers = workers
        methods = multiprocessing.get_all_start_methods()
        context = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
        self._pool = ProcessPoolExecutor(workers, mp_context=context, initializer=_start_worker, initargs=(mapping.model_dump(mode="json"),))

    def __enter__(self) -> ParallelPreparer:
        return self

    def __exit__(self, *exc: object) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def prepare_all(self, chunks: Iterable[list[RawRecord]], now: datetime) -> Iterator[PreparedChunk]:
        """`RecordPreparer.prepare` of each chunk, in order, computed ahead in the workers."""
        ahead: deque[Future[PreparedChunk]] = deque()
        iterator = iter(chunks)
        for chunk in iterator:
            ahead.append(self._pool.submit(_prepare_in_worker, chunk, now))
            if len(ahead) >= AHEAD_PER_WORKER * self.workers:
                break
        while ahead:
            prepared = ahead.popleft().result()
            following = next(iterator, None)
            if following is not None:
                ahead.append(self._pool.submit(_prepare_in_worker, following, now))
            yield prepared
