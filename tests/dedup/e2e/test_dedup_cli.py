"""`goldenset dedup stats|not-duplicate|duplicate-of` and the low-margin duplicates of `goldenset
review`, run in-process on every backend over real curated Hadoop reports."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select
from typer.testing import CliRunner

from schemas.dedup import DedupDecision, DedupOverride
from schemas.item import Item
from service.cli import app
from service.core.settings import Settings
from tests.dedup_support import curated_pool, hadoop_reports, shared_encoder
from tests.support.command_line import REVIEW_MODULES, command_line


@pytest.fixture
def cli(database_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[CliRunner]:
    with command_line(database_url, monkeypatch, encoder=shared_encoder(), wide=("service.dedup.dedup_cli", *REVIEW_MODULES)) as runner:
        yield runner


@pytest.fixture
def ids(engine: Engine, settings: Settings) -> dict[str, int]:
    return curated_pool(engine, settings, shared_encoder())


def _item(engine: Engine, item_id: int) -> Item:
    with Session(engine) as session:
        item = session.get(Item, item_id)
    assert item is not None
    return item


def _margin(engine: Engine, item_id: int) -> float:
    """The margin of the decision in force about `item_id` over its threshold."""
    with Session(engine) as session:
        decision = session.exec(select(DedupDecision).where(DedupDecision.item_id == item_id).order_by(col(DedupDecision.id).desc())).first()
    assert decision is not None
    margin: float = decision.details["margin"]
    return margin


def test_stats_and_rulings_from_the_command_line(cli: CliRunner, engine: Engine, ids: dict[str, int]) -> None:
    shown = cli.invoke(app, ["dedup", "stats"])
    assert shown.exit_code == 0, shown.output
    assert "64 items; 6.2% of those dedup decided are duplicates" in shown.output
    for heading in ("items by status", "decisions in force", "cluster sizes", "largest clusters", "people's rulings"):
        assert heading in shown.output
    assert "S3A DeleteOperation to parallelize POSTing of bulk deletes" in shown.output
    figures = json.loads(cli.invoke(app, ["dedup", "stats", "--json"]).output)
    assert (figures["items"], figures["by_status"]["duplicate"], figures["overrides"]) == (64, 4, {"not_duplicate": 0, "duplicate_of": 0})

    copy, first, second = ids["PLANT-NEAR"], ids[hadoop_reports(1)[0]["id"]], ids[hadoop_reports(2)[1]["id"]]
    ruled = cli.invoke(app, ["dedup", "not-duplicate", str(copy), "--note", "another bulk-delete change"])
    assert ruled.exit_code == 0 and f"item {copy} is unique now" in ruled.output, ruled.output
    again = cli.invoke(app, ["dedup", "not-duplicate", str(copy), "--note", "again"])
    assert again.exit_code == 3 and "refused (not_a_duplicate)" in again.output
    joined = cli.invoke(app, ["dedup", "duplicate-of", str(first), str(second), "--note", "one outage"])
    assert joined.exit_code == 0 and f"item {first} is duplicate of item {second} now" in joined.output, joined.output
    assert (_item(engine, copy).status, _item(engine, first).status, _item(engine, first).duplicate_of) == ("unique", "duplicate", second)
    with Session(engine) as session:
        rulings = [(row.item_id, row.kind, row.note, row.actor) for row in session.exec(select(DedupOverride).order_by(col(DedupOverride.id)))]
    assert rulings == [(copy, "not_duplicate", "another bulk-delete change", "cli"), (first, "duplicate_of", "one outage", "cli")]
    assert json.loads(cli.invoke(app, ["dedup", "stats", "--json"]).output)["overrides"] == {"not_duplicate": 1, "duplicate_of": 1}

    # Refused as every command's refusals are (`service.core.terminal.refusal_exit`): 2 for what
    # does not exist, 3 for a ruling that cannot be taken.
    refusals = {
        "same_item": (["dedup", "duplicate-of", str(second), str(second), "--note", "x"], 3),
        "not_found": (["dedup", "duplicate-of", "999999", str(second), "--note", "x"], 2),
        "note_required": (["dedup", "not-duplicate", str(ids["PLANT-EXACT"]), "--note", "  "], 3),
        "other_is_duplicate": (["dedup", "duplicate-of", str(second), str(first), "--note", "x"], 3),
    }
    for reason, (arguments, status) in refusals.items():
        refused = cli.invoke(app, arguments)
        assert refused.exit_code == status and f"refused ({reason})" in refused.output, (reason, refused.output)
    for usage in (["dedup", "not-duplicate", str(copy)], ["dedup", "duplicate-of", "abc", "1", "--note", "x"], ["dedup", "duplicate-of", "0", "1", "--note", "x"]):
        assert cli.invoke(app, usage).exit_code == 2, usage


def test_review_shows_low_margin_duplicates_beside_their_match(cli: CliRunner, engine: Engine, ids: dict[str, int]) -> None:
    margins = {name: _margin(engine, ids[name]) for name in ("PLANT-PARAPHRASE", "13392716")}
    closest, next_closest = sorted(margins, key=margins.__getitem__)
    margin = f"{max(margins.values()) + 0.0001:.4f}"
    # Quitting among the pending items ends the review before the duplicates.
    quit_early = cli.invoke(app, ["review", "--source", "hadoop", "--no-neighbours", "--limit", "1", "--margin", margin], input="q\n")
    assert quit_early.exit_code == 0 and "decided with a margin" not in quit_early.output

    # Skip both pending items; rule the closest call apart (asked again for an empty note); keep the next.
    review = ["review", "--source", "hadoop", "--no-neighbours", "--limit", "2", "--margin", margin]
    reviewed = cli.invoke(app, review, input="s\ns\nn\n\nanother deadlock\nk\n")
    assert reviewed.exit_code == 0, reviewed.output
    assert f"2 duplicate(s) decided with a margin under {float(margin)}" in reviewed.output
    assert f"item {ids[closest]} · hadoop" in reviewed.output and "rule fresh" in reviewed.output
    assert "approved 0, rejected 0, skipped 2" in reviewed.output and "kept 1, ruled not a duplicate 1, skipped 0" in reviewed.output
    assert (_item(engine, ids[closest]).status, _item(engine, ids[next_closest]).status) == ("unique", "duplicate")
    with Session(engine) as db:
        assert [(row.item_id, row.note) for row in db.exec(select(DedupOverride))] == [(ids[closest], "another deadlock")]
    # The default margin (0.03) finds no close call in this pool, so only pending items are asked about.
    assert "decided with a margin" not in cli.invoke(app, ["review", "--source", "hadoop", "--no-neighbours", "--limit", "1"], input="q\n").output
