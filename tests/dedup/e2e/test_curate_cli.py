"""`goldenset ingest` curating afterwards and `goldenset curate`, run in-process (typer's runner)
so that they share the test session's embedding model instead of loading it per process."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import update
from sqlalchemy.engine import Engine
from sqlmodel import Session, select
from typer.testing import CliRunner, Result

from schemas.dedup import ItemFingerprint
from schemas.item import Item
from service.cli import app
from service.core.locks import exclusive
from service.core.settings import get_settings
from service.core.terminal import EXIT_BUSY, EXIT_REFUSED
from tests.dedup_support import HADOOP_MAPPING, hadoop_reports, planted, shared_encoder


@pytest.fixture
def cli(database_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[CliRunner]:
    encoder = shared_encoder()
    monkeypatch.setattr("service.dedup.encoder.get_encoder", lambda _settings, _engine=None: encoder)
    monkeypatch.setenv("GOLDENSET_DATABASE_URL", database_url)
    monkeypatch.delenv("GOLDENSET_CURATE_AFTER_INGEST", raising=False)
    get_settings.cache_clear()
    yield CliRunner()
    get_settings.cache_clear()


def _rows(result: Result) -> dict[str, str]:
    return {line.split("│")[1].strip(): line.split("│")[2].strip() for line in result.output.splitlines() if line.count("│") == 3}


def _write(path: Path, records: list[dict[str, object]]) -> Path:
    path.write_text("\n".join(json.dumps(record) for record in records))
    return path


def test_ingest_curates_afterwards_and_curate_decides_what_is_pending(cli: CliRunner, engine: Engine, tmp_path: Path) -> None:
    reports = hadoop_reports(60)
    plants = planted(reports)
    first = _write(tmp_path / "first.jsonl", [*reports[50:58], plants["exact"]])
    result = cli.invoke(app, ["ingest", str(first), "--source", "hadoop", "--mapping", str(HADOOP_MAPPING)])
    assert result.exit_code == 0, result.output
    rows = _rows(result)
    assert (rows["new"], rows["decided"], rows["unique"], rows["duplicate"], rows["by stage: exact"]) == ("9", "9", "8", "1", "1")
    assert int(rows["encoder calls (texts)"]) <= 16  # the exact copy is never embedded
    assert "nothing to curate" in cli.invoke(app, ["curate"]).output

    second = _write(tmp_path / "second.jsonl", reports[58:60])
    without = cli.invoke(app, ["ingest", str(second), "--source", "hadoop", "--no-curate"])
    assert without.exit_code == 0 and "decided" not in _rows(without)
    with exclusive(engine, "curation"):
        busy = cli.invoke(app, ["curate"])
    assert busy.exit_code == EXIT_BUSY and "another process is curating" in busy.output
    one = cli.invoke(app, ["curate", "--limit", "1"])
    assert one.exit_code == 0 and _rows(one)["decided"] == "1"
    rest = cli.invoke(app, ["curate"])
    assert rest.exit_code == 0 and _rows(rest)["decided"] == "1"
    with Session(engine) as session:
        assert {item.status for item in session.exec(select(Item))} == {"unique", "duplicate"}


def test_curation_after_ingest_can_be_turned_off(cli: CliRunner, engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOLDENSET_CURATE_AFTER_INGEST", "false")
    get_settings.cache_clear()
    path = _write(tmp_path / "few.jsonl", hadoop_reports(2))
    result = cli.invoke(app, ["ingest", str(path), "--source", "hadoop", "--mapping", str(HADOOP_MAPPING)])
    assert result.exit_code == 0 and "decided" not in _rows(result)
    with Session(engine) as session:
        assert {item.status for item in session.exec(select(Item))} == {"candidate"}


def test_curate_refingerprint_after_a_recipe_change(cli: CliRunner, engine: Engine, tmp_path: Path) -> None:
    result = cli.invoke(app, ["ingest", str(_write(tmp_path / "r.jsonl", hadoop_reports(3))), "--source", "hadoop", "--mapping", str(HADOOP_MAPPING)])
    assert result.exit_code == 0, result.output
    with Session(engine) as session:
        session.exec(update(ItemFingerprint).values(recipe="n1;word5;p64;s7;affine32"))
        session.commit()
    refused = cli.invoke(app, ["curate"])
    assert "nothing to curate" in refused.output  # nothing pending: the index is not even loaded
    _write(tmp_path / "more.jsonl", hadoop_reports(4)[3:])
    refused = cli.invoke(app, ["ingest", str(tmp_path / "more.jsonl"), "--source", "hadoop"])
    assert "--refingerprint" in refused.output
    done = cli.invoke(app, ["curate", "--refingerprint"])
    assert done.exit_code == 0, done.output
    assert "re-fingerprinted 3 items (0 texts encoded)" in done.output and _rows(done)["decided"] == "1"
    assert "every fingerprint is up to date" in cli.invoke(app, ["curate", "--refingerprint"]).output


def test_an_embedding_endpoint_the_gate_refuses_leaves_an_ingest_done_and_refuses_curate(cli: CliRunner, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name, value in {"BACKEND": "http", "URL": "http://127.0.0.1:9/v1", "ENDPOINT": "embedder", "REMOTE_MODEL": "minilm", "DIM": "384"}.items():
        monkeypatch.setenv(f"GOLDENSET_EMBEDDING_{name}", value)
    get_settings.cache_clear()
    reports = _write(tmp_path / "reports.jsonl", hadoop_reports(60)[:3])
    ingested = cli.invoke(app, ["ingest", str(reports), "--source", "hadoop", "--mapping", str(HADOOP_MAPPING)])
    assert ingested.exit_code == 0 and _rows(ingested)["new"] == "3", ingested.output
    assert "not curated now: curation refused (endpoint_not_registered)" in " ".join(ingested.output.split())
    refused = cli.invoke(app, ["curate"])
    said = " ".join(refused.output.split())
    assert refused.exit_code == EXIT_REFUSED and "error: refused (endpoint_not_registered): incident texts are embedded only" in said, said
