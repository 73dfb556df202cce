"""Poison records through the shared readers and store, on every backend: the file ingest (JSON
documents and JSON Lines), a database that refuses one record, and a pull page. One bad record
costs that record only; every good record of the batch is stored."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

import ingest.preparing
from ingest.mapping import NATIVE_MAPPING, MappedRecord, parse_mapping
from ingest.readers import iter_records
from schemas.item import Item
from schemas.problem import IngestSummary
from schemas.source import Source, SourceCreate
from service.core.db import write_transaction
from service.sources.definitions import create_source
from service.sources.ingestion import ingest_records
from service.sources.pulls import pull_source
from tests.replay.github import TOKEN, GitHubReplay
from tests.replay.server import Reply
from tests.support.units import units_of

DEEP = 3000
GOOD = '{{"external_id": "{id}", "occurred_at": "2024-05-0{day}T10:00:00Z", "input": "what broke on day {day}?"}}'
POISONED = {
    "nul": '{"external_id": "P-nul", "occurred_at": "2024-05-01", "input": "a\\u0000b"}',
    "surrogate": '{"external_id": "P-sur", "occurred_at": "2024-05-01", "input": "x", "reference": "\\udfff"}',
    "nan": '{"external_id": "P-nan", "occurred_at": "2024-05-01", "input": "x", "metadata": {"score": NaN}}',
    "overflow": '{"external_id": "P-inf", "occurred_at": "2024-05-01", "input": "x", "metadata": {"cpu": [1, 2, 1e999]}}',
    "deep": '{"external_id": "P-deep", "occurred_at": "2024-05-01", "input": "x", "metadata": {"tree": {' + '"k": {' * DEEP + "}" * DEEP + "}}}",
    "tags": '{"external_id": "P-tag", "occurred_at": "2024-05-01", "input": "x", "tags": ["ok", "b\\u0000d"]}',
}
REASONS = {"nul": "nul_character", "surrogate": "lone_surrogate", "nan": "non_finite_number", "overflow": "non_finite_number", "deep": "too_deep", "tags": "nul_character"}


def _source(session: Session, name: str = "files") -> Source:
    source = Source(name=name, kind="file")
    session.add(source)
    session.commit()
    return source


def _good(count: int) -> list[str]:
    return [GOOD.format(id=f"G-{n}", day=1 + n % 9) for n in range(count)]


def _stored(session: Session) -> set[str]:
    return {item.external_id for item in session.exec(select(Item))}


def _interleaved() -> tuple[list[str], dict[int, str]]:
    """Good records with every poisoned one between them; returns the texts and index -> poison."""
    texts = _good(3)
    where: dict[int, str] = {}
    for name, text in POISONED.items():
        where[len(texts)] = name
        texts.append(text)
        texts.append(GOOD.format(id=f"after-{name}", day=5))
    return texts, where


def test_a_json_file_keeps_its_good_records_around_every_poison(session: Session) -> None:
    texts, where = _interleaved()
    document = ('{"feed": {"items": [' + ",\n".join(texts) + "]}}").encode()
    summary = ingest_records(units=units_of(session), source=_source(session), records=list(iter_records(document, "json", "feed.items")), mapping=NATIVE_MAPPING, actor="test")
    assert [(error.position, error.reason) for error in summary.errors] == [(index, REASONS[name]) for index, name in where.items()]
    assert (summary.new, summary.rejected) == (3 + len(POISONED), len(POISONED))
    assert _stored(session) == {f"G-{n}" for n in range(3)} | {f"after-{name}" for name in POISONED}


def test_a_json_lines_file_loses_only_its_bad_lines(session: Session) -> None:
    texts, where = _interleaved()
    data = "\n".join(texts).encode()
    summary = ingest_records(units=units_of(session), source=_source(session), records=list(iter_records(data, "jsonl")), mapping=NATIVE_MAPPING, actor="test")
    assert [(error.locator, error.reason) for error in summary.errors] == [(f"line {index + 1}", REASONS[name]) for index, name in where.items()]
    deep = next(error for error in summary.errors if error.reason == "too_deep")
    assert deep.external_id == "P-deep" and "metadata.tree.k.k" in deep.detail
    assert summary.new == 3 + len(POISONED)


def test_a_bad_value_in_a_field_the_mapping_leaves_out_costs_nothing(session: Session) -> None:
    mapping = parse_mapping({"external_id": "id", "occurred_at": "at", "input": "text"})
    data = b'{"id": "K-1", "at": "2024-05-01", "text": "kept", "unused": NaN, "also_unused": "\\u0000"}'
    summary = ingest_records(units=units_of(session), source=_source(session), records=list(iter_records(data, "jsonl")), mapping=mapping, actor="test")
    assert (summary.new, summary.rejected) == (1, 0)


def test_a_record_the_database_refuses_costs_only_itself(session: Session, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the checks switched off, the database itself refuses what PostgreSQL cannot store (NUL
    in text, NaN in jsonb): the chunk is redone record by record, so the good records all stay."""

    def no_check(record: MappedRecord) -> None:
        return None

    monkeypatch.setattr(ingest.preparing, "check_values", no_check)
    texts = [*_good(4), POISONED["nul"], POISONED["nan"], GOOD.format(id="LAST", day=9)]
    records = list(iter_records(("[" + ",".join(texts) + "]").encode(), "json"))
    summary = ingest_records(units=units_of(session), source=_source(session), records=records, mapping=NATIVE_MAPPING, actor="test")
    assert {f"G-{n}" for n in range(4)} | {"LAST"} <= _stored(session)
    assert summary.new + summary.rejected == 7
    if session.get_bind().dialect.name == "postgresql":
        assert [(error.position, error.reason, error.external_id) for error in summary.errors] == [(4, "store_failed", "P-nul"), (5, "store_failed", "P-nan")]
        assert all("the database refused this record" in error.detail for error in summary.errors)
    else:  # SQLite stores both as given; nothing is lost either way
        assert summary.rejected == 0


@pytest.fixture
def replay(shared_data: Path) -> GitHubReplay:
    start = datetime(2026, 1, 15, 9, 30, tzinfo=UTC).timestamp()
    return GitHubReplay.from_hadoop(shared_data / "gitbugs_hadoop" / "reports.jsonl", limit=12, pull_request_every=0, clock=lambda: start)


def _pull(engine: Engine, url: str) -> IngestSummary:
    connector = {"owner": "apache", "repo": "hadoop", "token": TOKEN, "base_url": url}
    with write_transaction(engine) as session:
        create_source(session=session, data=SourceCreate(name="gh", kind="github", connector=connector), secret_key="k" * 32, actor="test")
    with httpx.Client(timeout=5) as client:
        return pull_source(engine=engine, name="gh", secret_key="k" * 32, actor="test", client=client, sleep=lambda _: None)


def _page(replay: GitHubReplay, host: str) -> Iterator[str]:
    """The issues of one page as JSON text, every third one poisoned in another way."""
    poisons = [
        ("body", '"\\u0000"', "nul_character"),
        ("title", '"\\ud83d alone"', "lone_surrogate"),
        ("comments", "NaN", "non_finite_number"),
        ("reactions", "[" * DEEP + "]" * DEEP, "too_deep"),
    ]
    for index, issue in enumerate(replay.ordered()):
        rendered = replay.render(issue, host)
        if index % 3 == 1 and poisons:
            field, value, _ = poisons.pop(0)
            rendered.pop(field, None)
            yield json.dumps(rendered)[:-1] + f', "{field}": {value}' + "}"
        else:
            yield json.dumps(rendered)


def test_a_pull_page_with_poisoned_issues_stores_the_rest_and_moves_on(engine: Engine, replay: GitHubReplay) -> None:
    with replay.serve() as server:
        body = ("[" + ",".join(_page(replay, server.url.removeprefix("http://"))) + "]").encode()
        server.faults[1] = Reply(200, body=body, headers=replay.rate_limit_headers())
        summary = _pull(engine, server.url)
    assert [error.reason for error in summary.errors] == ["nul_character", "lone_surrogate", "non_finite_number", "too_deep"]
    assert (summary.new, summary.rejected) == (8, 4)
    with Session(engine) as session:
        source = session.exec(select(Source).where(Source.name == "gh")).one()
        assert (source.status, source.items_pulled) == ("ok", 8)
