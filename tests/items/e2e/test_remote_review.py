"""`goldenset review` walking an eval's queue on a live server over its API, as a real process
with no database configured: decisions, an undo, and each item's neighbours as the service finds
them (the server runs with the encoder the items were curated with, so `/similar` answers)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from schemas.item import Item
from service.app import create_app
from service.core.settings import Settings
from tests.conftest import LiveServer
from tests.core.e2e.test_cli_front_door import GOLDENSET
from tests.eval_support import HashingEncoder, ingest_and_curate, item_ids_by_external_id
from tests.evals.integration.test_refresh import kev


@pytest.fixture
def app(settings: Settings, engine: Engine) -> FastAPI:
    return create_app(settings, engine=engine, encoder=HashingEncoder())


def test_the_interactive_review_walks_a_remote_queue(live_server: LiveServer, engine: Engine, tmp_path: Path) -> None:
    ingest_and_curate(engine, "kev", [kev(n, f"2024-02-{n:02d}") for n in range(1, 5)])
    ids = item_ids_by_external_id(engine)
    token = live_server.token("read", "curate", "admin", name="curator")
    with httpx.Client(base_url=live_server.url, headers={"Authorization": f"Bearer {token}"}) as api:
        api.post("/v1/evals", json={"name": "ops", "sources": ["kev"], "sealed_fraction": 0}).raise_for_status()
    env = {"GOLDENSET_URL": live_server.url, "GOLDENSET_TOKEN": token, "GOLDENSET_DATABASE_URL": f"sqlite:///{tmp_path / 'none.db'}"}
    # 1: approve. 2: reject with a reason; undo it (2 is shown again); quit.
    keys = "a\nr\nnot gradable\nu\nq\n"
    walked = subprocess.run(
        [GOLDENSET, "review", "--eval", "ops", "--margin", "0", "--no-neighbours"],
        cwd=tmp_path, env={**os.environ, "COLUMNS": "200", **env}, input=keys, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert walked.returncode == 0, walked.stdout + walked.stderr
    assert "4 item(s) to review in ops, oldest incident first" in walked.stdout
    assert walked.stdout.count("2 of 4 · item") == 2  # shown, then again after the undo
    assert f"undid the rejection of item {ids['CVE-2024-0002']} (taken by token:curator" in walked.stdout
    assert "approved 1, rejected 0, skipped 0, undone 1" in walked.stdout
    with Session(engine) as session:
        statuses = {item.external_id: item.status for item in session.exec(select(Item))}
    assert statuses == {"CVE-2024-0001": "approved", "CVE-2024-0002": "unique", "CVE-2024-0003": "unique", "CVE-2024-0004": "unique"}
    # with neighbours: the service's similar items for the one shown (approved item 1 among them)
    shown = subprocess.run(
        [GOLDENSET, "review", "--eval", "ops", "--margin", "0"],
        cwd=tmp_path, env={**os.environ, "COLUMNS": "200", **env}, input="q\n", capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert re.search(rf"\n\s*{ids['CVE-2024-0001']}\s+│\s+[0-9.]+\s+│\s+approved\s+│\s+2024-02-01", shown.stdout), shown.stdout
    assert not (tmp_path / "none.db").exists()
