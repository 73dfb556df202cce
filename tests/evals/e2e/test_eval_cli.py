"""`goldenset eval create|list`, `refresh`, `verify`, `export` and `review`, run in-process."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.engine import Engine
from sqlmodel import Session, select
from typer.testing import CliRunner

from schemas.item import Item
from service.cli import app
from tests.eval_support import HashingEncoder, ingest_and_curate
from tests.eval_support import item_ids_by_external_id as _ids
from tests.evals.integration.test_refresh import kev
from tests.support.command_line import REVIEW_MODULES, command_line


@pytest.fixture
def cli(database_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[CliRunner]:
    with command_line(database_url, monkeypatch, encoder=HashingEncoder(), wide=("service.evals.cli", *REVIEW_MODULES)) as runner:
        yield runner


def test_create_refresh_verify_and_export_from_the_command_line(cli: CliRunner, engine: Engine, tmp_path: Path) -> None:
    ingest_and_curate(engine, "kev", [kev(n, f"2024-02-{n:02d}") for n in range(1, 21)])
    settings = tmp_path / "eval.yaml"
    settings.write_text("name: ops\nsources: [kev]\ntarget_size: 15\napproval_policy: auto\nsealed_fraction: 0.3\nsealed_read_budget: 1\n")
    created = cli.invoke(app, ["eval", "create", "--file", str(settings), "--description", "ops incidents"])
    assert created.exit_code == 0, created.output
    assert "GOLDENSET CANARY GUID" in created.output
    assert cli.invoke(app, ["eval", "create", "ops", "--source", "kev"]).exit_code == 2
    bad = cli.invoke(app, ["eval", "create", "x", "--source", "kev", "--quota", "kev"])
    assert bad.exit_code == 2 and "SOURCE=N" in bad.output
    other = cli.invoke(app, ["eval", "create", "weekly", "--source", "kev", "--schedule", "0 9 * * 1", "--quota", "kev=5", "--approval", "manual", "--earliest", "2024-02-10"])
    assert other.exit_code == 0, other.output
    listing = cli.invoke(app, ["eval", "list"])
    assert listing.exit_code == 0 and "ops" in listing.output and "weekly" in listing.output and "0 9 * * 1" in listing.output

    refreshed = cli.invoke(app, ["refresh", "--eval", "ops", "--at", "2024-03-01"])
    assert refreshed.exit_code == 0, refreshed.output
    assert "release 1 of ops written for the period 2024-03-01 03:00" in refreshed.output and "15 added" in refreshed.output
    assert "already written" in cli.invoke(app, ["refresh", "--eval", "ops", "--at", "2024-03-15T12:00:00"]).output
    assert cli.invoke(app, ["refresh", "--eval", "nope"]).exit_code == 2
    assert cli.invoke(app, ["refresh", "--eval", "ops", "--at", "March"]).exit_code == 2

    verified = cli.invoke(app, ["verify", "--eval", "ops", "--release", "1"])
    assert verified.exit_code == 0 and "15 items, digests and Merkle roots verified" in verified.output
    assert "cross-split near pairs: none (by the near links stored now)" in verified.output
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    for path in (first, second):
        assert cli.invoke(app, ["export", "--eval", "ops", "--release", "1", "-o", str(path)]).exit_code == 0
    assert first.read_bytes() == second.read_bytes() and "GOLDENSET CANARY GUID" in first.read_text().splitlines()[0]
    assert cli.invoke(app, ["export", "--eval", "ops", "--split", "sealed", "-o", str(tmp_path / "s.jsonl")]).exit_code == 0
    spent = cli.invoke(app, ["export", "--eval", "ops", "--split", "sealed", "-o", str(tmp_path / "s.jsonl")])
    assert spent.exit_code == 7 and "budget" in spent.output

    with engine.begin() as connection:
        connection.execute(text("UPDATE release_item SET content_digest = :digest WHERE id = (SELECT MIN(id) FROM release_item)"), {"digest": "0" * 64})
    tampered = cli.invoke(app, ["verify", "--eval", "ops", "--release", "1"])
    assert tampered.exit_code == 1 and "mismatch" in tampered.output and "Merkle root" in tampered.output
    assert cli.invoke(app, ["verify", "--eval", "ops", "--release", "9"]).exit_code == 2


def test_review_by_id_and_interactively_with_neighbours(cli: CliRunner, engine: Engine) -> None:
    ingest_and_curate(engine, "kev", [kev(n, f"2024-02-{n:02d}") for n in range(1, 6)])
    ids = _ids(engine)
    # Nothing sealed, so every item of the pass is shown in full, with its neighbours.
    assert cli.invoke(app, ["eval", "create", "ops", "--source", "kev", "--sealed-fraction", "0"]).exit_code == 0
    decided = cli.invoke(app, ["review", "--approve", str(ids["CVE-2024-0001"]), "--reject", str(ids["CVE-2024-0002"]), "--reason", "not gradable"])
    assert decided.exit_code == 0, decided.output
    assert f"approved: {ids['CVE-2024-0001']}" in decided.output and f"rejected: {ids['CVE-2024-0002']}" in decided.output
    refused = cli.invoke(app, ["review", "--approve", str(ids["CVE-2024-0001"])])
    assert refused.exit_code == 3 and "already approved" in refused.output
    assert cli.invoke(app, ["review", "--reject", str(ids["CVE-2024-0003"])]).exit_code == 3  # a rejection needs a reason

    # Pending, oldest first: 3, 4, 5. Approve 3, reject 4 (asked again for an empty reason), quit.
    session = cli.invoke(app, ["review", "--eval", "ops"], input="a\nr\n\nduplicate of OPS-12\nq\n")
    assert session.exit_code == 0, session.output
    assert "3 item(s) to review" in session.output and "nearest" in session.output
    assert "approved 1, rejected 1, skipped 0" in session.output
    with Session(engine) as db:
        statuses = {item.external_id: item.status for item in db.exec(select(Item))}
    assert statuses == {"CVE-2024-0001": "approved", "CVE-2024-0002": "rejected", "CVE-2024-0003": "approved", "CVE-2024-0004": "rejected", "CVE-2024-0005": "unique"}
    assert "1 item(s) to review" in cli.invoke(app, ["review", "--source", "kev", "--no-neighbours"], input="q\n").output
    assert cli.invoke(app, ["review"]).exit_code == 2


def test_a_misspelt_setting_is_refused_naming_the_nearest_key(cli: CliRunner, engine: Engine, tmp_path: Path) -> None:
    settings = tmp_path / "eval.yaml"
    settings.write_text("name: typo\nsources: [kev]\ntarget_sise: 30\napproval: manual\n")
    refused = cli.invoke(app, ["eval", "create", "--file", str(settings)])
    assert refused.exit_code == 2, refused.output
    said = " ".join(refused.output.split())
    assert "unknown key 'target_sise': did you mean 'target_size'?" in said and "unknown key 'approval': did you mean 'approval_policy'?" in said
    assert "typo" not in cli.invoke(app, ["eval", "list"]).output  # nothing was created
