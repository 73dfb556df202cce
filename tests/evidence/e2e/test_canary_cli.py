"""Acceptance: `goldenset canary scan` finds a planted canary and a planted, lightly edited
released item in a 50 MB text dump, names the eval, release and item, exits 1; and finds
nothing, exiting 0, in the same dump without them. Prints the throughput measured."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, select
from typer.testing import CliRunner

from schemas.evals import Eval
from schemas.release import ReleaseItem
from service.cli import app
from service.core.settings import get_settings
from tests.conftest import TEST_SECRET_KEY
from tests.run_support import released_eval

DUMP_BYTES = 50 * 1024 * 1024


@pytest.fixture
def cli(database_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[CliRunner]:
    monkeypatch.setenv("GOLDENSET_DATABASE_URL", database_url)
    monkeypatch.setenv("GOLDENSET_SECRET_KEY", TEST_SECRET_KEY)
    get_settings.cache_clear()
    yield CliRunner()
    get_settings.cache_clear()


def _background(shared_data: Path) -> str:
    """Incident-like text that holds none of the released items: bug reports, logs, headlines."""
    parts = [(shared_data / "gitbugs_hadoop" / "reports.jsonl").read_text(encoding="utf-8")]
    parts += [path.read_text(encoding="utf-8", errors="replace") for path in sorted((shared_data / "loghub_2k").rglob("*.csv"))[:6]]
    parts.append((shared_data / "sts_headlines" / "pairs.jsonl").read_text(encoding="utf-8"))
    return "\n".join(parts)


def _write_dump(path: Path, background: str, plants: list[str]) -> list[int]:
    """About DUMP_BYTES of `background` repeated, with `plants` spread between the repeats;
    returns the byte offset of each plant."""
    block = background.encode("utf-8")
    written, offsets = 0, list[int]()
    every = max(1, DUMP_BYTES // len(block) // (len(plants) + 1))
    with path.open("wb") as handle:
        for repeat in range(DUMP_BYTES // len(block) + 1):
            if repeat and repeat % every == 0 and len(offsets) < len(plants):
                offsets.append(written)
                written += handle.write(plants[len(offsets) - 1].encode("utf-8"))
            written += handle.write(block)
    assert len(offsets) == len(plants)
    return offsets


def _edited(text: str) -> str:
    """A light edit: two words changed, one dropped, case and spacing changed."""
    words = text.split()
    words[2], words[len(words) // 2] = "really", "certain"
    del words[-3]
    return "  ".join(words).lower()


def test_canary_scan_finds_planted_leaks_in_a_50_mb_dump_and_nothing_in_a_clean_one(cli: CliRunner, engine: Engine, shared_data: Path, tmp_path: Path) -> None:
    released = released_eval(engine, count=40)
    with Session(engine) as session:
        canary = session.exec(select(Eval.canary)).one()
        longest = max(
            session.exec(select(ReleaseItem).where(ReleaseItem.release_id == released.release.id)).all(), key=lambda row: len(json.loads(row.content)["input"])
        )
    leaked = json.loads(longest.content)
    background = _background(shared_data)
    clean, dirty = tmp_path / "clean", tmp_path / "dirty"
    clean.mkdir()
    dirty.mkdir()
    _write_dump(clean / "crawl.txt", background, [])
    plants = [f"\nSome page quoting an eval: {canary}\n", "\n" + json.dumps({"completion": f"Sure! Here is the incident: {_edited(leaked['input'])}"}) + "\n"]
    offsets = _write_dump(dirty / "crawl.txt", background, plants)
    size_mb = (dirty / "crawl.txt").stat().st_size / 1e6
    assert size_mb >= 50

    started = time.perf_counter()
    result = cli.invoke(app, ["canary", "scan", str(clean), "--json"])
    clean_seconds = time.perf_counter() - started
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["canaries"] == [] and json.loads(result.stdout)["copies"] == []

    started = time.perf_counter()
    result = cli.invoke(app, ["canary", "scan", str(dirty), "--json"])
    dirty_seconds = time.perf_counter() - started
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    assert [(hit["eval"], hit["guid"]) for hit in report["canaries"]] == [("ops", canary.rsplit(" ", 1)[1])]
    assert offsets[0] < report["canaries"][0]["offset"] < offsets[0] + len(plants[0])
    copies = report["copies"]
    assert [(copy["item_id"], copy["field"], copy["kind"], copy["releases"]) for copy in copies] == [(longest.item_id, "input", "near-verbatim", [["ops", 1]])]
    assert copies[0]["sealed"] == (longest.split == "sealed") and copies[0]["containment"] >= 0.5
    assert offsets[1] < copies[0]["offset"] < offsets[1] + len(plants[1])

    table = cli.invoke(app, ["canary", "scan", str(dirty / "crawl.txt")])
    assert table.exit_code == 1 and f"leaked: item {longest.item_id} ({longest.split}) of ops release 1: 1 copy(ies)" in table.output
    rate = size_mb / dirty_seconds
    print(f"\ncanary scan: {size_mb:.1f} MB clean in {clean_seconds:.1f} s, with leaks in {dirty_seconds:.1f} s ({rate:.1f} MB/s)")
    assert dirty_seconds < 60
