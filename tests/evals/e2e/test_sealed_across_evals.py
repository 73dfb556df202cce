"""Attack: two (then three) evals over one source, each with its own seal key. An item sealed for one
eval must never be served as dev content by any other, now or later, and an item served as dev must
never become sealed elsewhere. Checked over HTTP with a read token, through every path that serves
dev content: release items, exports, dev runs and the item API."""

from __future__ import annotations

import json
from datetime import datetime

import httpx
from sqlalchemy import update
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from curation.releases.groups import anchor, near_groups
from curation.releases.sealing import is_sealed
from schemas.evals import EvalCreate, EvalItem, Split
from service.core.db import write_session, write_transaction
from service.evals.definitions import create_eval, require_eval
from service.evals.refresh import refresh_eval
from tests.conftest import TEST_SECRET_KEY, LiveServer
from tests.eval_support import ingest_and_curate, kev_records
from tests.run_support import auth, register, token

AT = datetime.fromisoformat("2024-06-01T03:00:00+00:00")
KEYS = {"alpha": b"a" * 32, "beta": b"b" * 32, "gamma": b"c" * 32}


def _eval(engine: Engine, name: str) -> None:
    with write_transaction(engine) as session:
        data = EvalCreate(name=name, sources=["kev"], approval_policy="auto", max_age_days=None, sealed_fraction=0.3, target_size=500)
        create_eval(session=session, data=data, secret_key=TEST_SECRET_KEY, actor="test", key=KEYS[name])


def _splits(client: httpx.Client, name: str) -> dict[int, str]:
    manifest = client.get(f"/v1/evals/{name}/releases/latest")
    assert manifest.status_code == 200, manifest.text
    return {entry["item_id"]: entry["split"] for entry in manifest.json()["items"]}


def _served_dev(client: httpx.Client, name: str) -> set[int]:
    """Every item id whose content a read token gets from the eval's dev split: items and export."""
    items = client.get(f"/v1/evals/{name}/releases/latest/items", params={"split": "dev"})
    assert items.status_code == 200, items.text
    served = {item["item_id"] for item in items.json()["items"]}
    export = client.get(f"/v1/evals/{name}/releases/latest/export.jsonl")
    assert export.status_code == 200
    assert served == {json.loads(line)["id"] for line in export.text.splitlines()}
    return served


def test_evals_over_one_source_agree_on_every_sealed_item_now_and_later(live_server: LiveServer) -> None:
    engine = live_server.engine
    ingest_and_curate(engine, "kev", kev_records(since="2024-01-01", until="2024-05-01")[:60])
    for name in ("alpha", "beta"):
        _eval(engine, name)
    # Each key alone seals a different 30%: the evals disagree unless one rule holds for both.
    for name in ("alpha", "beta"):
        refresh_eval(engine, name=name, at=AT, secret_key=TEST_SECRET_KEY, actor="test")
    with httpx.Client(base_url=live_server.url, headers=auth(token(engine, "read")), timeout=30) as client:
        splits = {name: _splits(client, name) for name in ("alpha", "beta")}
        shared = set(splits["alpha"]) & set(splits["beta"])
        assert set(splits["alpha"]) == set(splits["beta"]) and len(shared) >= 40
        assert {item for item in shared if splits["alpha"][item] != splits["beta"][item]} == set()
        sealed = {item for item in shared if splits["alpha"][item] == Split.SEALED.value}
        with Session(engine) as session:
            anchors = {item: anchor(group) for item, group in near_groups(session, shared).items()}  # near groups are sealed together
        alone = {name: {item for item in shared if is_sealed(KEYS[name], anchors[item], 0.3)} for name in ("alpha", "beta")}
        assert alone["alpha"] != alone["beta"] and sealed == alone["alpha"] | alone["beta"]
        for name in ("alpha", "beta"):
            assert _served_dev(client, name) & sealed == set()

        # A third eval, created after both released, follows the recorded splits: nothing served
        # as dev becomes sealed, nothing sealed is served, whatever its own key says.
        _eval(engine, "gamma")
        refresh_eval(engine, name="gamma", at=AT, secret_key=TEST_SECRET_KEY, actor="test")
        gamma = _splits(client, "gamma")
        assert {item for item, split in gamma.items() if split == Split.SEALED.value} == sealed
        assert any(is_sealed(KEYS["gamma"], anchors[item], 0.3) for item in shared - sealed)
        assert _served_dev(client, "gamma") & sealed == set()

        # No sealed item's content through the item API either.
        for item in sealed:
            shown = client.get(f"/v1/items/{item}").json()
            assert shown["sealed"] is True and shown["input"] == "" and shown["title"] == ""


def test_a_release_written_before_the_rule_never_serves_an_item_sealed_elsewhere(live_server: LiveServer) -> None:
    """Data from before the rule may hold an item dev in one eval and sealed in another: every dev
    path of the first eval leaves it out."""
    engine = live_server.engine
    ingest_and_curate(engine, "kev", kev_records(since="2024-01-01", until="2024-05-01")[:30])
    for name in ("alpha", "beta"):
        _eval(engine, name)
        refresh_eval(engine, name=name, at=AT, secret_key=TEST_SECRET_KEY, actor="test")
    with Session(engine) as session:
        beta = require_eval(session=session, name="beta")
        victim = session.exec(select(EvalItem.item_id).where(EvalItem.eval_id == beta.id, EvalItem.split == Split.DEV.value)).first()
    assert victim is not None
    with write_session(engine) as session:  # as an older release of beta would have recorded it
        session.exec(update(EvalItem).where(col(EvalItem.eval_id) == beta.id, col(EvalItem.item_id) == victim).values(split=Split.SEALED.value))
        session.commit()
    register(engine)
    with httpx.Client(base_url=live_server.url, headers=auth(token(engine, "read")), timeout=30) as client:
        assert victim not in _served_dev(client, "alpha")
        run = client.post("/v1/evals/alpha/runs", json={"model": "m1", "endpoint": "m1-no", "split": "dev"})
        assert run.status_code == 201, run.text
        assert victim not in {item["item_id"] for item in run.json()["items"]}
        assert client.get(f"/v1/items/{victim}").json()["sealed"] is True
