"""Why dedup decided as it did, on every backend: `GET /v1/items/{id}` and the review queue carry
the explanation of a duplicate (rule, threshold, margin, the item matched) and of a unique item
whose matches were refused (which, and why); `goldenset item show` and `goldenset review` print it."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from fastapi import FastAPI
from sqlalchemy.engine import Engine
from typer.testing import CliRunner

from schemas.evals import EvalCreate
from service.app import create_app
from service.cli import app as cli_app
from service.core.db import write_session
from service.core.settings import Settings
from service.dedup.runner import run_curation
from service.evals.definitions import create_eval
from tests.conftest import TEST_SECRET_KEY, LiveServer
from tests.dedup_support import ingest
from tests.eval_support import HashingEncoder, item_ids_by_external_id
from tests.support.command_line import REVIEW_MODULES, command_line

UPGRADE = "Jetty {version} fixes CVE-2021-28165 and CVE-2021-34428; update the dependency in hadoop-project."
CRASH = (
    "The NameNode crashes with a NullPointerException when the edit log is rolled while a checkpoint is running. "
    "The secondary NameNode had just downloaded the fsimage and the journal nodes reported a lagging segment; "
    "after the crash the standby takes over but the edit log segment stays open and has to be recovered by hand. "
    "Seen on three clusters after the upgrade, always during the nightly checkpoint window."
)
RECORDS = [
    {"id": "JETTY-39", "created": "2021-04-01T10:00:00", "title": "Upgrade to Jetty 9.4.39", "description": UPGRADE.format(version="9.4.39")},
    {"id": "JETTY-44", "created": "2021-09-01T10:00:00", "title": "Upgrade to Jetty 9.4.44", "description": UPGRADE.format(version="9.4.44")},
    {"id": "JETTY-44-AGAIN", "created": "2021-09-03T10:00:00", "title": "Upgrade to Jetty 9.4.44", "description": UPGRADE.format(version="9.4.44")},
    {"id": "CRASH", "created": "2021-10-01T10:00:00", "title": "NameNode crashes when the edit log is rolled during a checkpoint", "description": CRASH},
    {
        "id": "CRASH-AGAIN",
        "created": "2021-10-02T10:00:00",
        "title": "NameNode crashes when the edit log is rolled during a checkpoint",
        "description": CRASH.replace("three clusters", "two clusters"),
    },
]


@pytest.fixture
def app(settings: Settings, engine: Engine) -> FastAPI:
    return create_app(settings, engine=engine, encoder=HashingEncoder())


def _curated(engine: Engine, settings: Settings) -> dict[str, int]:
    ingest(engine, "hadoop", RECORDS)
    run_curation(engine, settings, encoder=HashingEncoder())
    return item_ids_by_external_id(engine)


def test_the_api_explains_a_duplicate_and_a_unique_item_with_refused_matches(live_server: LiveServer) -> None:
    ids = _curated(live_server.engine, live_server.settings)
    with live_server.client("read") as reader:
        refused, exact, near = (reader.get(f"/v1/items/{ids[name]}").json()["dedup"] for name in ("JETTY-44", "JETTY-44-AGAIN", "CRASH-AGAIN"))

    assert refused["status"] == "unique"
    why = refused["explanation"]
    assert why["matched"] is None and why["rule"] is None
    vetoed = {veto["item_id"]: veto for veto in why["vetoed"]}
    assert vetoed[ids["JETTY-39"]]["stage"] == "exact" and "9.4.39" in vetoed[ids["JETTY-39"]]["why"] and not vetoed[ids["JETTY-39"]]["sealed"]
    assert f"Refused item {ids['JETTY-39']} (exact" in why["summary"]
    assert why["thresholds"]["minhash"] == 0.65 and why["rules_version"]

    assert exact["status"] == "duplicate" and exact["duplicate_of"] == ids["JETTY-44"]
    why = exact["explanation"]
    assert (why["rule"], why["stage"], why["score"], why["threshold"], why["margin"]) == ("exact", "exact", 1.0, 1.0, 0.0)
    assert why["matched"]["item_id"] == ids["JETTY-44"] and "the same text once normalised" in why["summary"]

    assert near["status"] == "duplicate" and near["stage"] == "minhash"
    why = near["explanation"]
    assert why["rule"] == "fresh" and why["matched"]["item_id"] == ids["CRASH"] and why["threshold"] == 0.65
    assert why["margin"] == pytest.approx(why["score"] - 0.65, abs=1e-4) and why["margin"] > 0
    assert why["best_near_verbatim"]["item_id"] == ids["CRASH"] and why["p_same"] is None
    assert f"Duplicate of item {ids['CRASH']} by the fresh rule at the minhash stage" in why["summary"]


def test_the_review_queue_explains_each_entry(live_server: LiveServer) -> None:
    ids = _curated(live_server.engine, live_server.settings)
    with write_session(live_server.engine) as session:
        create_eval(session=session, data=EvalCreate(name="hadoop", sources=["hadoop"], sealed_fraction=0.0001), secret_key=TEST_SECRET_KEY, actor="test")
        session.commit()
    with live_server.client("curate") as curator:
        queue = curator.get("/v1/evals/hadoop/review-queue").json()
    entries = {entry["id"]: entry for entry in queue["entries"]}
    explanation = entries[ids["JETTY-44"]]["dedup"]["explanation"]
    assert [veto["item_id"] for veto in explanation["vetoed"]] == [ids["JETTY-39"]] and "9.4.39" in explanation["vetoed"][0]["why"]
    assert entries[ids["JETTY-39"]]["dedup"]["explanation"]["summary"].startswith("Unique")


@pytest.fixture
def cli(database_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[CliRunner]:
    with command_line(database_url, monkeypatch, encoder=HashingEncoder(), wide=("service.items.edit_cli", *REVIEW_MODULES)) as runner:
        yield runner


def test_the_command_line_prints_the_explanation(cli: CliRunner, engine: Engine, settings: Settings) -> None:
    ids = _curated(engine, settings)
    shown = cli.invoke(cli_app, ["item", "show", str(ids["CRASH-AGAIN"])])
    assert shown.exit_code == 0, shown.output
    assert f"Duplicate of item {ids['CRASH']} by the fresh rule at the minhash stage" in shown.output
    assert "rule: fresh" in shown.output and "threshold: 0.650, margin" in shown.output and f"matched: item {ids['CRASH']} (minhash" in shown.output
    refused = cli.invoke(cli_app, ["item", "show", str(ids["JETTY-44"])])
    assert f"refused item {ids['JETTY-39']} (exact 1.000): different number" in refused.output
    as_json = json.loads(cli.invoke(cli_app, ["item", "show", str(ids["JETTY-44"]), "--json"]).output)
    assert as_json["dedup"]["explanation"]["vetoed"][0]["item_id"] == ids["JETTY-39"]

    review = cli.invoke(cli_app, ["review", "--source", "hadoop", "--no-neighbours", "--limit", "2", "--margin", "0"], input="\n\n")
    assert f"Refused item {ids['JETTY-39']} (exact 1.000): different number" in review.output, review.output
