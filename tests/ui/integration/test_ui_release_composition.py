"""The composition and linking core of a release, as the manifest (`GET /v1/evals/{name}/releases/{n}`),
the release page and the diff page show them: shares by source, category, length band and age
band, and the dev items carried from the release before, with no category only sealed items
carry; and the linking share and rotation on the settings form, checked as the API checks them."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import update
from sqlalchemy.engine import Engine
from sqlmodel import Session, col

from curation.releases.visibility import sealed_item_ids
from schemas.evals import EvalCreate
from schemas.item import Item
from service.core.db import write_session, write_transaction
from service.evals.definitions import create_eval, require_eval, seal_keys
from service.evals.refresh import refresh_eval
from tests.conftest import TEST_SECRET_KEY
from tests.eval_support import ingest_and_curate
from tests.eval_support import item_ids_by_external_id as _ids
from tests.evals.integration.test_refresh import kev
from tests.ui_support import make_token, newest_csrf, sign_in

SECRET_TAG = "CWE-ONLY-SEALED"


@pytest.fixture
def browser(app: FastAPI) -> Iterator[TestClient]:
    with TestClient(app, follow_redirects=False) as client:
        yield client


@pytest.fixture
def released(engine: Engine) -> Engine:
    """Eval `ops`: 28 January and 28 February incidents, two releases of 20 (half the dev split
    linked); one sealed-bound item carries a category no other item does."""
    records = [{**kev(month * 100 + day, f"2024-0{month}-{day:02d}"), "cwes": ["CWE-79" if day % 2 else "CWE-787"]} for month in (1, 2) for day in range(1, 29)]
    ingest_and_curate(engine, "kev", records)
    ids = _ids(engine)
    with write_transaction(engine) as session:
        data = EvalCreate(name="ops", sources=["kev"], approval_policy="auto", target_size=20, linking_share=0.5)
        create_eval(session=session, data=data, secret_key=TEST_SECRET_KEY, actor="test", key=b"k" * 32)
        january = [item_id for external_id, item_id in ids.items() if external_id.startswith("CVE-2024-01")]
        sealed = sorted(sealed_item_ids(session=session, item_ids=january, seal_key_of=seal_keys(secret_key=TEST_SECRET_KEY)), reverse=True)
    with write_session(engine) as session:
        session.exec(update(Item).where(col(Item.id) == sealed[0]).values(tags=[SECRET_TAG]))  # the newest sealed-bound: in release 1
        session.commit()
    for at in (datetime(2024, 2, 1, 3, tzinfo=UTC), datetime(2024, 3, 1, 3, tzinfo=UTC)):
        refresh_eval(engine, name="ops", at=at, secret_key=TEST_SECRET_KEY, actor="test")
    return engine


def test_the_manifest_shows_composition_and_linking_core(browser: TestClient, released: Engine) -> None:
    token, _ = make_token(released, "reader", "read")
    answer = browser.get("/v1/evals/ops/releases/2", headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    composition, linking = body["composition"], body["linking"]
    assert composition["items"] == 20 and composition["balanced_against"] == 1
    assert {entry["value"] for entry in composition["source"]} == {"kev"} and sum(entry["count"] for entry in composition["tag"]) == 20
    assert [entry["value"] for entry in composition["length"]] and [entry["value"] for entry in composition["age"]]
    assert linking["previous_release"] == 1 and linking["share"] == 0.5 and linking["carried"] >= linking["wanted"] == -(-body["dev_count"] // 2)
    first = browser.get("/v1/evals/ops/releases/1", headers={"Authorization": f"Bearer {token}"})
    assert SECRET_TAG not in first.text and any(entry["value"] == "(other)" for entry in first.json()["composition"]["tag"])
    assert first.json()["linking"]["previous_release"] is None


def test_the_release_and_diff_pages_show_composition_without_sealed_content(browser: TestClient, released: Engine) -> None:
    reader, _ = make_token(released, "reader", "read")
    sign_in(browser, reader)
    page = browser.get("/ui/evals/ops/releases/2")
    assert page.status_code == 200
    text = re.sub(r"\s+", " ", page.text)
    assert "Composition and linking core" in text and "carried from release 1's dev split" in text
    for caption in ("Source", "Category (first tag)", "Input length (characters)", "Age at the start of the period"):
        assert f"<caption>{caption}</caption>" in text
    assert "CWE-787" in text and SECRET_TAG not in browser.get("/ui/evals/ops/releases/1").text
    diff = browser.get("/ui/evals/ops/releases/1/diff/2")
    assert diff.status_code == 200
    text = re.sub(r"\s+", " ", diff.text)
    assert "Dev items in both releases" in text and "Change (points)" in text and "Release 1</th>" in text and "Release 2</th>" in text
    assert "carried from release 1's dev split" in text and SECRET_TAG not in text


def test_the_settings_form_changes_the_linking_share_within_0_and_0_9(browser: TestClient, released: Engine) -> None:
    admin, _ = make_token(released, "lead", "admin")
    sign_in(browser, admin)
    page = browser.get("/ui/evals/ops/releases")
    assert 'name="linking_share"' in page.text and "at least 50% of each dev split" in page.text
    refused = browser.post("/ui/evals/ops/settings", data={"csrf": newest_csrf(released), "linking_share": "0.95"})
    assert refused.status_code == 422 and "Linking share" in refused.text
    saved = browser.post("/ui/evals/ops/settings", data={"csrf": newest_csrf(released), "linking_share": "0", "balance_composition": "false"})
    assert saved.status_code == 303
    with Session(released) as session:
        evaluation = require_eval(session=session, name="ops")
        assert (evaluation.linking_share, evaluation.balance_composition) == (0.0, False)
    assert "newest first" in browser.get("/ui/evals/ops/releases").text
