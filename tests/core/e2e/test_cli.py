"""The `goldenset` command as a user runs it: a real process against a real database."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from sqlalchemy import func
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from schemas.item import Item
from schemas.source import Source
from schemas.token import ApiToken
from service.core.crypto import sha256_hex

ROOT = Path(__file__).resolve().parents[3]
GOLDENSET = [sys.executable, "-m", "service.cli"]
NO_CURATION = {"GOLDENSET_CURATE_AFTER_INGEST": "false"}


def run(database_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    # Curation after ingest (which loads the embedding model) is tested in tests/dedup/e2e/test_curate_cli.py.
    env = {**os.environ, **NO_CURATION, "GOLDENSET_DATABASE_URL": database_url, "COLUMNS": "200", "GOLDENSET_SECRET_KEY": "cli-test-secret-key-0123456789abcdef"}
    return subprocess.run([*GOLDENSET, *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300, check=False)


def _items(engine: Engine) -> int:
    with Session(engine) as session:
        return session.exec(select(func.count()).select_from(Item)).one()


def test_ingest_hadoop_reports_then_again_adds_nothing(database_url: str, engine: Engine, shared_data: Path) -> None:
    reports = shared_data / "gitbugs_hadoop" / "reports.jsonl"
    mapping = ROOT / "examples/mappings/hadoop_jira.yaml"
    first = run(database_url, "ingest", str(reports), "--source", "hadoop", "--mapping", str(mapping))
    assert first.returncode == 0, first.stderr
    assert "│ new       │ 2503 │" in first.stdout.replace("  ", " ") or "2503" in first.stdout
    assert _items(engine) == 2503
    second = run(database_url, "ingest", str(reports), "--source", "hadoop")  # the stored mapping is reused
    assert second.returncode == 0, second.stderr
    assert _items(engine) == 2503
    lines = {line.split("│")[1].strip(): line.split("│")[2].strip() for line in second.stdout.splitlines() if line.count("│") == 3}
    assert (lines["new"], lines["unchanged"]) == ("0", "2503")


def test_ingest_names_broken_lines_and_keeps_the_rest(database_url: str, engine: Engine, tmp_path: Path) -> None:
    lines = [json.dumps({"external_id": f"E{n}", "occurred_at": "2024-02-02T02:02:02Z", "input": f"event {n}"}) for n in range(100)]
    lines[0] = "{not json"
    lines[33] = json.dumps({"external_id": "E33", "occurred_at": "2024-02-02"})
    lines[66] = json.dumps({"external_id": "E66", "occurred_at": "02/02/2024", "input": "x"})
    path = tmp_path / "events.jsonl"
    path.write_text("\n".join(lines))
    result = run(database_url, "ingest", str(path), "--source", "events")
    assert result.returncode == 3
    assert "line 1: malformed_json" in result.stdout
    assert "line 34: empty_input" in result.stdout
    assert "line 67: bad_date" in result.stdout
    assert _items(engine) == 97


def test_unreadable_inputs_exit_2_and_store_nothing(database_url: str, engine: Engine, tmp_path: Path) -> None:
    broken = tmp_path / "doc.json"
    broken.write_text('{"vulnerabilities": [')
    result = run(database_url, "ingest", str(broken), "--source", "kev", "--mapping", str(ROOT / "examples/mappings/cisa_kev.yaml"))
    assert result.returncode == 2 and "not valid JSON" in result.stderr and "nothing was ingested" in result.stderr
    bad_mapping = tmp_path / "m.yaml"
    bad_mapping.write_text("input: '{{ x'\n")
    result = run(database_url, "ingest", str(broken), "--source", "kev2", "--mapping", str(bad_mapping))
    assert result.returncode == 2 and "template does not compile" in result.stderr
    result = run(database_url, "ingest", str(tmp_path / "absent.jsonl"), "--source", "kev3")
    assert result.returncode == 2 and "cannot read" in result.stderr
    result = run(database_url, "ingest", str(broken), "--source", "Bad Name")
    assert result.returncode == 2 and "invalid source name" in result.stderr
    assert _items(engine) == 0


def test_token_create_prints_it_once_and_stores_only_its_hash(database_url: str, engine: Engine) -> None:
    result = run(database_url, "token", "create", "--name", "pipeline", "--scopes", "read,ingest")
    assert result.returncode == 0, result.stderr
    token = result.stdout.strip()
    assert token.startswith("gs_") and len(token) > 40
    with Session(engine) as session:
        row = session.exec(select(ApiToken)).one()
    assert row.token_hash == sha256_hex(token) and row.scopes == ["ingest", "read"]
    assert token not in json.dumps(row.model_dump(mode="json"))
    refused = run(database_url, "token", "create", "--name", "x", "--scopes", "read,root")
    assert refused.returncode == 2 and "unknown scope(s) root" in refused.stderr
    assert run(database_url, "token", "revoke", str(row.id)).returncode == 0
    listing = run(database_url, "token", "list")
    assert "pipeline" in listing.stdout and token not in listing.stdout and "yes" in listing.stdout


def test_source_create_prints_the_webhook_secret_once_and_stores_it_encrypted(database_url: str, engine: Engine) -> None:
    result = run(database_url, "source", "create", "alerts", "--mapping", str(ROOT / "examples/mappings/cisa_kev.yaml"))
    assert result.returncode == 0, result.stderr
    secret = result.stdout.strip()
    assert secret.startswith("whsec_")
    with Session(engine) as session:
        source = session.exec(select(Source)).one()
    assert source.webhook_secret and secret not in source.webhook_secret
    assert source.mapping is not None and source.mapping["records"] == "vulnerabilities"
    assert run(database_url, "source", "create", "alerts").returncode == 2
    assert "alerts" in run(database_url, "source", "list").stdout


def test_a_pull_that_cannot_start_is_refused_with_its_reason(database_url: str) -> None:
    missing = run(database_url, "pull", "--source", "nowhere")
    assert missing.returncode == 2 and "refused (not_found): source 'nowhere' does not exist" in missing.stderr, missing.stderr
    assert run(database_url, "source", "create", "alerts").returncode == 0
    plain = run(database_url, "pull", "--source", "alerts")
    assert plain.returncode == 3 and "refused (not_a_connector)" in plain.stderr, plain.stderr


def test_two_ingests_at_once_into_one_database_both_succeed(database_url: str, engine: Engine, tmp_path: Path) -> None:
    env = {**os.environ, **NO_CURATION, "GOLDENSET_DATABASE_URL": database_url}
    processes = []
    for name in ("alpha", "beta"):
        path = tmp_path / f"{name}.jsonl"
        path.write_text("\n".join(json.dumps({"external_id": f"{name}-{n}", "occurred_at": "2024-01-01", "input": f"{name} event {n}"}) for n in range(1500)))
        processes.append(subprocess.Popen([*GOLDENSET, "ingest", str(path), "--source", name], env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outputs = [process.communicate(timeout=300) for process in processes]
    assert [process.returncode for process in processes] == [0, 0], outputs
    assert _items(engine) == 3000
