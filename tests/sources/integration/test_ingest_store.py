"""Ingest into a real database (every backend): idempotence, change tracking, partial batches."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import func
from sqlmodel import Session, select

from ingest import store
from ingest.mapping import NATIVE_MAPPING, load_mapping
from ingest.readers import iter_jsonl, iter_records
from schemas.audit import AuditEvent
from schemas.item import Item, ItemRevision, ItemStatus
from schemas.source import Source
from service.sources.ingestion import ingest_records
from tests.support.units import units_of

ROOT = Path(__file__).resolve().parents[3]


def _source(session: Session, name: str = "ops") -> Source:
    source = Source(name=name)
    session.add(source)
    session.commit()
    return source


def _jsonl(records: Sequence[Mapping[str, object]]) -> bytes:
    return "\n".join(json.dumps(record) for record in records).encode()


def _count(session: Session) -> int:
    return session.exec(select(func.count()).select_from(Item)).one()


def test_hadoop_reports_keep_their_created_dates_and_reingest_adds_nothing(session: Session, shared_data: Path) -> None:
    data = (shared_data / "gitbugs_hadoop" / "reports.jsonl").read_bytes()
    mapping = load_mapping(ROOT / "examples/mappings/hadoop_jira.yaml")
    source = _source(session, "hadoop")
    first = ingest_records(units=units_of(session), source=source, records=list(iter_records(data, "jsonl")), mapping=mapping, actor="test")
    assert (first.read, first.new, first.rejected) == (2503, 2503, 0)
    created = {
        str(row["id"]): datetime.fromisoformat(str(row["created"])).replace(tzinfo=UTC)
        for row in map(json.loads, data.decode().splitlines())
    }
    stored = {item.external_id: item.occurred_at for item in session.exec(select(Item))}
    assert stored == created
    assert all(at.tzinfo is not None for at in stored.values())
    second = ingest_records(units=units_of(session), source=source, records=list(iter_records(data, "jsonl")), mapping=mapping, actor="test")
    assert (second.new, second.updated, second.unchanged) == (0, 0, 2503)
    assert _count(session) == 2503


def test_changed_content_updates_the_candidate_and_records_the_change(session: Session) -> None:
    source = _source(session)
    record = {"external_id": "INC-1", "occurred_at": "2024-03-01T10:00:00Z", "title": "db down", "input": "primary db unreachable", "tags": ["db"]}
    ingest_records(units=units_of(session), source=source, records=list(iter_jsonl(_jsonl([record]))), mapping=NATIVE_MAPPING, actor="test")
    item = session.exec(select(Item)).one()
    item.status = ItemStatus.APPROVED.value
    session.add(item)
    session.commit()
    changed = dict(record, input="primary db unreachable after failover")
    summary = ingest_records(units=units_of(session), source=source, records=list(iter_jsonl(_jsonl([changed]))), mapping=NATIVE_MAPPING, actor="test")
    assert (summary.new, summary.updated) == (0, 1)
    session.refresh(item)
    assert item.input == "primary db unreachable after failover"
    assert item.revision == 2
    assert item.status == ItemStatus.CANDIDATE.value  # changed content must be curated and reviewed again
    revision = session.exec(select(ItemRevision)).one()
    assert revision.previous["input"] == "primary db unreachable"
    assert revision.previous["status"] == ItemStatus.APPROVED.value


def test_same_external_id_twice_in_one_batch_is_one_item(session: Session) -> None:
    source = _source(session)
    records = [
        {"external_id": "A", "occurred_at": "2024-01-01", "input": "first"},
        {"external_id": "A", "occurred_at": "2024-01-01", "input": "second"},
    ]
    summary = ingest_records(units=units_of(session), source=source, records=list(iter_jsonl(_jsonl(records))), mapping=NATIVE_MAPPING, actor="test")
    assert (summary.new, summary.updated) == (1, 1)
    assert session.exec(select(Item.input)).one() == "second"
    # The change within the batch is a revision like any other, and a repeat changes nothing.
    assert [revision.previous["input"] for revision in session.exec(select(ItemRevision))] == ["first"]
    again = [{"external_id": "B", "occurred_at": "2024-01-02", "input": "same"}] * 2
    repeated = ingest_records(units=units_of(session), source=source, records=list(iter_jsonl(_jsonl(again))), mapping=NATIVE_MAPPING, actor="test")
    assert (repeated.new, repeated.unchanged, repeated.updated) == (1, 1, 0)
    stored = session.exec(select(Item).where(Item.external_id == "B")).one()
    assert (stored.revision, stored.status, stored.occurred_at.tzinfo is not None) == (1, ItemStatus.CANDIDATE.value, True)


def test_one_hundred_records_with_three_broken_stores_97(session: Session) -> None:
    records = [{"external_id": f"INC-{n}", "occurred_at": f"2024-01-{1 + n % 28:02d}T00:00:00Z", "input": f"incident {n}"} for n in range(100)]
    lines = [json.dumps(record).encode() for record in records]
    lines[9] = b'{"external_id": "INC-9", "occurred_at": '  # malformed JSON
    lines[49] = json.dumps({"external_id": "INC-49", "input": "no date"}).encode()  # missing field
    lines[89] = json.dumps({"external_id": "INC-89", "occurred_at": "someday", "input": "x"}).encode()  # bad date
    source = _source(session)
    summary = ingest_records(units=units_of(session), source=source, records=list(iter_jsonl(b"\n".join(lines))), mapping=NATIVE_MAPPING, actor="test")
    assert (summary.read, summary.new, summary.rejected) == (100, 97, 3)
    assert [(error.position, error.reason) for error in summary.errors] == [(10, "malformed_json"), (50, "missing_field"), (90, "bad_date")]
    assert _count(session) == 97
    audit = session.exec(select(AuditEvent).where(AuditEvent.action == "items.ingest")).one()
    assert audit.count == 97 and audit.object_id == "ops"


def test_secrets_and_personal_data_are_redacted_before_storage(session: Session) -> None:
    source = _source(session)
    record = {
        "external_id": "INC-7",
        "occurred_at": "2024-05-05",
        "title": "login failures for alice@example.com",
        "input": "client 10.1.2.3 used key AKIAIOSFODNN7EXAMPLE against postgres://app:hunter2@db:5432/x",
        "metadata": {"reporter": "bob@example.org"},
    }
    summary = ingest_records(units=units_of(session), source=source, records=list(iter_jsonl(_jsonl([record]))), mapping=NATIVE_MAPPING, actor="test")
    item = session.exec(select(Item)).one()
    stored = json.dumps([item.title, item.input, item.reference, item.meta])
    for secret in ("alice@example.com", "10.1.2.3", "AKIAIOSFODNN7EXAMPLE", "hunter2", "bob@example.org"):
        assert secret not in stored
    assert "<EMAIL>" in item.title and "<IPV4>" in item.input and "<SECRET:aws-access-key>" in item.input
    assert summary.redacted["EMAIL"] == 2


def test_redaction_is_configurable_per_source(session: Session) -> None:
    source = _source(session)
    mapping = NATIVE_MAPPING.model_copy(update={"redact": NATIVE_MAPPING.redact.model_copy(update={"ip_addresses": False})})
    record = {"external_id": "1", "occurred_at": "2024-05-05", "input": "host 10.1.2.3 mail ops@example.com"}
    ingest_records(units=units_of(session), source=source, records=list(iter_jsonl(_jsonl([record]))), mapping=mapping, actor="test")
    assert session.exec(select(Item.input)).one() == "host 10.1.2.3 mail <EMAIL>"


def test_cisa_kev_document_with_records_path(session: Session, shared_data: Path) -> None:
    data = (shared_data / "cisa_kev" / "known_exploited_vulnerabilities.json").read_bytes()
    mapping = load_mapping(ROOT / "examples/mappings/cisa_kev.yaml")
    source = _source(session, "kev")
    summary = ingest_records(units=units_of(session), source=source, records=list(iter_records(data, "json", mapping.records)), mapping=mapping, actor="test")
    assert (summary.read, summary.new, summary.rejected) == (1404, 1404, 0)
    earliest, latest = session.exec(select(func.min(Item.occurred_at), func.max(Item.occurred_at))).one()
    assert earliest == datetime(2021, 11, 3, tzinfo=UTC) and latest == datetime(2025, 8, 25, tzinfo=UTC)


def test_metadata_only_changes_keep_the_review_status(session: Session) -> None:
    source = _source(session)
    record = {"external_id": "INC-2", "occurred_at": "2024-03-01", "input": "queue backlog", "metadata": {"assignee": "a"}}
    ingest_records(units=units_of(session), source=source, records=list(iter_jsonl(_jsonl([record]))), mapping=NATIVE_MAPPING, actor="test")
    item = session.exec(select(Item)).one()
    item.status = ItemStatus.APPROVED.value
    session.add(item)
    session.commit()
    changed = [dict(record, metadata={"assignee": "b"})]
    summary = ingest_records(units=units_of(session), source=source, records=list(iter_jsonl(_jsonl(changed))), mapping=NATIVE_MAPPING, actor="test")
    assert summary.updated == 1
    session.refresh(item)
    assert (item.status, item.revision, item.meta) == (ItemStatus.APPROVED.value, 2, {"assignee": "b"})


def _stored(session: Session, source: Source) -> list[tuple[object, ...]]:
    items = session.exec(select(Item).where(Item.source_id == source.id).order_by(Item.external_id)).all()
    return [(i.external_id, i.occurred_at, i.title, i.input, i.reference, i.meta, i.tags, i.content_hash, i.identity_key, i.record_digest, i.status) for i in items]


def test_records_prepared_in_worker_processes_are_stored_as_prepared_here(session: Session, shared_data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store, "PARALLEL_FROM", 1000)
    lines = (shared_data / "gitbugs_hadoop" / "reports.jsonl").read_bytes().splitlines()[:1200]
    lines[99] = b'{"id": "broken", "created": '  # malformed JSON, read as an error
    lines[499] = json.dumps({"id": "no-date", "title": "a report without its date"}).encode()
    report = json.loads(lines[700])
    report["description"] = f"{report['description']}\naws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY and mail ops@example.com"
    lines[700] = json.dumps(report).encode()
    lines[900] = json.dumps({**json.loads(lines[900]), "description": "nul \u0000 inside"}).encode()
    mapping = load_mapping(ROOT / "examples/mappings/hadoop_jira.yaml")
    summaries = {}
    for workers in (1, 2):
        source = _source(session, f"hadoop-{workers}")
        summaries[workers] = ingest_records(units=units_of(session), source=source, records=list(iter_jsonl(b"\n".join(lines))), mapping=mapping, actor="test", workers=workers)
    serial, parallel = summaries[1], summaries[2]
    assert (parallel.read, parallel.new, parallel.rejected) == (serial.read, serial.new, serial.rejected) == (1200, 1197, 3)
    assert [(e.position, e.reason, e.external_id, e.detail) for e in parallel.errors] == [(e.position, e.reason, e.external_id, e.detail) for e in serial.errors]
    assert parallel.redacted == serial.redacted and sum(serial.redacted.values()) >= 2
    assert _stored(session, session.exec(select(Source).where(Source.name == "hadoop-2")).one()) == _stored(
        session, session.exec(select(Source).where(Source.name == "hadoop-1")).one()
    )
