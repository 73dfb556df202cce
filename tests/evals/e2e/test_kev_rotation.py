"""Acceptance on real data: the CISA KEV catalogue (2021-2025) ingested and curated, an eval of
200 items with a 365-day maximum age and auto-approval refreshed on the 1st of each month from
2023-01 to 2025-08 with `goldenset refresh --at`, then every release downloaded over HTTP."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select
from typer.testing import CliRunner

from curation.releases.groups import near_groups
from schemas.evals import Eval, EvalCreate
from schemas.release import Release, ReleaseItem
from service.cli import app as cli_app
from service.core.db import write_transaction
from service.core.settings import get_settings
from service.evals.definitions import create_eval
from service.evals.options import parse_at
from service.evals.refresh import refresh_eval
from tests.conftest import TEST_SECRET_KEY, LiveServer
from tests.eval_support import ingest_and_curate, kev_records

MONTHS = [f"{year}-{month:02d}-01" for year in (2023, 2024, 2025) for month in range(1, 13) if (year, month) <= (2025, 8)]
# A fixed seal key keeps the sealed shares asserted below reproducible (a fresh eval draws a random one).
SEAL_KEY = bytes.fromhex("5eed" * 16)


@pytest.fixture
def cli(database_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[CliRunner]:
    monkeypatch.setenv("GOLDENSET_DATABASE_URL", database_url)
    monkeypatch.setenv("GOLDENSET_SECRET_KEY", TEST_SECRET_KEY)
    get_settings.cache_clear()
    yield CliRunner()
    get_settings.cache_clear()


def _releases(engine: Engine, name: str) -> list[tuple[Release, dict[int, ReleaseItem]]]:
    with Session(engine) as session:
        from service.evals.definitions import require_eval

        evaluation = require_eval(session=session, name=name)
        releases = session.exec(select(Release).where(Release.eval_id == evaluation.id).order_by(col(Release.number))).all()
        return [(release, {row.item_id: row for row in session.exec(select(ReleaseItem).where(ReleaseItem.release_id == release.id))}) for release in releases]


def test_monthly_releases_of_the_kev_catalogue(live_server: LiveServer, engine: Engine, cli: CliRunner) -> None:
    ingest_and_curate(engine, "cisa-kev", kev_records())
    with write_transaction(engine) as session:
        for name, target in (("kev", 200), ("kev-wide", 5000)):
            data = EvalCreate(name=name, sources=["cisa-kev"], target_size=target, max_age_days=365, approval_policy="auto")
            create_eval(session=session, data=data, secret_key=TEST_SECRET_KEY, actor="test", key=SEAL_KEY)
    for month in MONTHS:
        result = cli.invoke(cli_app, ["refresh", "--eval", "kev", "--at", month])
        assert result.exit_code == 0, result.output
    for month in MONTHS[:12]:  # 2023: the windows hold 500 items and more
        refresh_eval(engine, name="kev-wide", at=parse_at(month), secret_key=TEST_SECRET_KEY, actor="test")
    again = cli.invoke(cli_app, ["refresh", "--eval", "kev", "--at", MONTHS[-1]])
    assert again.exit_code == 0 and "already written" in again.output

    releases = _releases(engine, "kev")
    assert [release.number for release, _ in releases] == list(range(1, len(MONTHS) + 1))
    splits: dict[int, str] = {}
    retired: set[int] = set()
    previous: set[int] = set()
    for release, items in releases:
        assert release.period_start.day == 1 and release.period_start.hour == 3
        window_start = release.period_start - timedelta(days=365)
        assert all(window_start <= row.occurred_at < release.period_start for row in items.values()), release.number
        assert 0 < len(items) <= 200
        assert not set(items) & retired, f"release {release.number} holds an item retired before"
        gone = {entry["item_id"] for entry in release.diff["retired"]}
        assert gone <= previous and not gone & set(items)
        assert set(release.diff["added"]) == set(items) - previous
        retired |= gone
        previous = set(items)
        for item_id, row in items.items():
            assert splits.setdefault(item_id, row.split) == row.split, f"item {item_id} changed split"

    # The sealed share: per release of at least 500 items (the wide eval) and over every item released.
    shares = []
    with Session(engine) as session:
        rows = session.exec(
            select(Release.number, ReleaseItem.item_id, ReleaseItem.split)
            .join(Release, col(Release.id) == col(ReleaseItem.release_id))
            .join(Eval, col(Eval.id) == col(Release.eval_id))
            .where(Eval.name == "kev-wide")
        ).all()
    wide: dict[int, list[str]] = {}
    for number, item_id, split in rows:
        assert splits.setdefault(item_id, split) == split, f"item {item_id} changed split"
        wide.setdefault(number, []).append(split)
    # Near groups are sealed whole (`curation.releases.groups`): the keyed hash makes the share of
    # sealed *groups* the fraction, and a share of items can stray from it by the weight of the
    # largest group (KEV repeats one template across many CVEs, which the tests' bag-of-words
    # encoder links into large groups).
    with Session(engine) as session:
        groups = near_groups(session, list(splits))
    wide_items: dict[int, set[int]] = {}
    for number, item_id, _ in rows:
        wide_items.setdefault(number, set()).add(item_id)
    for number in sorted(wide):
        if len(wide[number]) >= 500:
            largest = max(len(groups[item_id] & wide_items[number]) for item_id in wide_items[number])
            shares.append((wide[number].count("sealed") / len(wide[number]), largest / len(wide[number])))
    assert shares and all(abs(share - 0.20) <= 0.03 + weight for share, weight in shares), shares
    overall = sum(split == "sealed" for split in splits.values()) / len(splits)
    assert len(splits) >= 500 and abs(overall - 0.20) <= 0.03 + max(len(group & set(splits)) for group in groups.values()) / len(splits), overall
    released_groups = {groups[item_id] for item_id in splits}
    sealed_groups = sum(splits[min(group & set(splits))] == "sealed" for group in released_groups) / len(released_groups)
    assert all(len({splits[item_id] for item_id in group & set(splits)}) == 1 for group in released_groups)
    assert abs(sealed_groups - 0.20) <= 0.03, sealed_groups

    # Texts that belong to one item only: KEV repeats names and descriptions across CVEs.
    counts: dict[str, int] = {}
    contents = {item_id: json.loads(row.content) for _, items in releases for item_id, row in items.items()}
    for _, items in releases:
        for item_id, row in items.items():
            for text in {contents[item_id]["title"], contents[item_id]["input"]}:
                counts[text] = counts.get(text, 0) + (1 if row.split == "sealed" else 1000)
    client = live_server.client("read")
    for release, items in releases:
        sealed_ids = {item_id for item_id, row in items.items() if row.split == "sealed"}
        own_texts = {text for item_id in sealed_ids for text in (contents[item_id]["title"], contents[item_id]["input"]) if counts[text] < 1000}
        paths = [f"releases/{release.number}", f"releases/{release.number}/export.jsonl"]
        if release.number % 8 == 0:
            paths.append(f"releases/{release.number}/items?split=dev")
        for path in paths:
            first, second = client.get(f"/v1/evals/kev/{path}"), client.get(f"/v1/evals/kev/{path}")
            assert first.status_code == 200, first.text
            assert first.content == second.content and first.headers["etag"] == second.headers["etag"]
            assert first.headers["cache-control"] == "private, max-age=31536000, immutable"
            leaked = [text for text in own_texts if text in first.text or json.dumps(text)[1:-1] in first.text]
            assert not leaked, (path, leaked[:2])
            if path.endswith("export.jsonl"):
                lines = [json.loads(line) for line in first.text.splitlines()]
                assert {line["metadata"]["canary"] for line in lines} == {release.canary}
                assert {line["id"] for line in lines} == set(items) - sealed_ids
