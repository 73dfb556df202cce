"""Acceptance, with the real embedding model: after a dev run to an endpoint that trains on its
inputs, the next refresh retires exactly the items sent, and a paraphrase of one of them ingested
later is judged a duplicate of it (exposed items stay in dedup history), so it never returns to
the eval as a fresh item."""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from curation.dedup.deduplicator import Deduplicator
from curation.dedup.rules import DedupConfig
from schemas.common import utcnow
from schemas.evals import EvalCreate
from schemas.item import Item, ItemStatus
from schemas.model_registry import TrainsOnInputs
from schemas.release import ReleaseItem
from service.core.db import write_session, write_transaction
from service.evals.definitions import create_eval
from service.evals.refresh import refresh_eval
from tests.conftest import TEST_SECRET_KEY
from tests.dedup_support import PARAPHRASE, MemoEncoder, hadoop_reports, ingest
from tests.run_support import KEY, auth, register, token

ORIGINAL = "13396628"  # Avoid possible class loading deadlock with VerifierNone initialization


def _curate(engine: Engine, encoder: MemoEncoder) -> None:
    with write_session(engine) as session:
        Deduplicator(clock=utcnow, encoder=encoder, config=DedupConfig()).curate(session)
        session.commit()


def test_exposed_items_retire_at_the_next_refresh_and_their_paraphrases_stay_out(engine: Engine, app: FastAPI, encoder: MemoEncoder) -> None:
    reports = [report for report in hadoop_reports(60) if report["created"] >= "2021-08-01"]
    assert any(report["id"] == ORIGINAL for report in reports)
    ingest(engine, "hadoop", reports)
    _curate(engine, encoder)
    with write_transaction(engine) as session:
        data = EvalCreate(name="hadoop-ops", sources=["hadoop"], approval_policy="auto", max_age_days=None, sealed_fraction=0.2, target_size=500)
        create_eval(session=session, data=data, secret_key=TEST_SECRET_KEY, actor="test", key=KEY)
    first = refresh_eval(engine, name="hadoop-ops", at=datetime(2021, 10, 1, 3, tzinfo=UTC), secret_key=TEST_SECRET_KEY, actor="test").release
    register(engine, endpoints={"trains": TrainsOnInputs.YES})
    with Session(engine) as session:
        original = session.exec(select(Item).where(Item.external_id == ORIGINAL)).one()
        dev = sorted(session.exec(select(ReleaseItem.item_id).where(ReleaseItem.release_id == first.id, ReleaseItem.split == "dev")).all())
    assert original.id in dev

    with TestClient(app) as api:
        # Only the newer half of the dev items goes to the training endpoint, the original among them.
        run = api.post(
            "/v1/evals/hadoop-ops/runs", json={"model": "m1", "endpoint": "trains", "occurred_after": original.occurred_at.isoformat()}, headers=auth(token(engine, "read"))
        )
    assert run.status_code == 201, run.text
    sent = sorted(item["item_id"] for item in run.json()["items"])
    assert original.id in sent and 0 < len(sent) < len(dev)

    second = refresh_eval(engine, name="hadoop-ops", at=datetime(2021, 11, 1, 3, tzinfo=UTC), secret_key=TEST_SECRET_KEY, actor="test").release
    retired = {entry["item_id"]: entry["reason"] for entry in second.diff["retired"]}
    assert retired == dict.fromkeys(sent, "exposed")
    with Session(engine) as session:
        remaining = set(session.exec(select(ReleaseItem.item_id).where(ReleaseItem.release_id == second.id)).all())
    assert remaining.isdisjoint(sent) and set(dev) - set(sent) <= remaining

    paraphrase = {"id": "LATER-PARAPHRASE", "created": "2021-11-10T09:00:00", "title": "VerifierNone static init can deadlock class loading", "description": PARAPHRASE}
    ingest(engine, "hadoop", [paraphrase])
    _curate(engine, encoder)
    with Session(engine) as session:
        later = session.exec(select(Item).where(Item.external_id == "LATER-PARAPHRASE")).one()
        exposed = session.get(Item, original.id)
        assert exposed is not None and exposed.exposed_at is not None
    assert later.status == ItemStatus.DUPLICATE.value and later.duplicate_of == original.id

    third = refresh_eval(engine, name="hadoop-ops", at=datetime(2021, 12, 1, 3, tzinfo=UTC), secret_key=TEST_SECRET_KEY, actor="test").release
    assert later.id not in third.diff["added"]
    with Session(engine) as session:
        assert session.exec(select(ReleaseItem).where(ReleaseItem.release_id == third.id, col(ReleaseItem.item_id).in_([later.id, *sent]))).all() == []
