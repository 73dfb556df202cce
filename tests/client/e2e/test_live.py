"""`goldenset_client` against a real server, on every database backend: a curator's flow (push,
list, review, refresh, releases, manifest, the streamed export), an eval pipeline's (registry,
run, items, results, score), typed errors, and the async client."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime

import pytest
from goldenset_client import (
    AsyncClient,
    Client,
    EndpointCreate,
    EvalCreate,
    Forbidden,
    InvalidRequest,
    ModelCreate,
    NotFound,
    ResultIn,
    ReviewDecision,
    SourceCreate,
    Unauthorized,
)
from sqlalchemy.engine import Engine

from curation.dedup.deduplicator import Deduplicator
from curation.dedup.rules import DedupConfig
from schemas.common import utcnow
from service.core.db import write_session
from tests.conftest import LiveServer
from tests.eval_support import HashingEncoder, distinct_words
from tests.run_support import register, released_eval


def _records(count: int) -> list[dict[str, object]]:
    return [
        {
            "external_id": f"INC-{n}",
            "occurred_at": f"2024-03-{1 + n:02d}T08:00:00Z",
            "title": f"incident {n}: the {('queue', 'cache', 'ledger', 'gateway')[n % 4]} {n} stalled",
            "input": f"Why did service {n} stop answering after deploy {n * 7}? Logs show error code E{n * 13}: {distinct_words(n)}.",
            "reference": f"Deploy {n * 7} of service {n} removed index {n}; restoring it fixed it.",
            "metadata": {"team": f"team-{n % 3}"},
        }
        for n in range(count)
    ]


def _curate(engine: Engine) -> None:
    with write_session(engine) as session:
        Deduplicator(clock=utcnow, encoder=HashingEncoder(), config=DedupConfig()).curate(session)
        session.commit()


def test_a_curator_pushes_reviews_refreshes_and_exports(live_server: LiveServer, engine: Engine) -> None:
    admin = Client(live_server.url, live_server.token("admin", name="admin"))
    # It approves items bound for the sealed slice, so it may read them (none is approved unread).
    curator = Client(live_server.url, live_server.token("curate", "ingest", "read", "sealed", name="curator"))
    with admin, curator:
        created = admin.create_source(SourceCreate(name="ops", kind="push"))
        assert created.webhook_secret and [source.name for source in admin.list_sources()] == ["ops"]
        summary = curator.push_items("ops", _records(12))
        assert (summary.read, summary.new, summary.rejected) == (12, 12, 0)
        again = curator.push_items("ops", _records(12))
        assert (again.new, again.unchanged) == (0, 12)
        with pytest.raises(InvalidRequest) as refused:
            curator.push_items("ops", [*_records(1), {"external_id": "bad"}])
        assert [error["position"] for error in refused.value.errors] == [1] and refused.value.problem["summary"]["unchanged"] == 1
        _curate(engine)

        page = curator.list_items(source="ops", limit=5)
        assert len(page.items) == 5 and page.next_cursor is not None
        items = list(curator.iter_items(source="ops", page_size=5))
        dates = [item.occurred_at for item in items if item.occurred_at is not None]
        assert len(items) == len(dates) == 12 and dates == sorted(dates, reverse=True)
        assert curator.get_item(items[0].id).dedup.status == "unique"

        admin.create_eval(EvalCreate(name="ops", sources=["ops"], max_age_days=None, sealed_fraction=0.25))
        ids = sorted(item.id for item in items)
        assert curator.approve(ids[0], reason="clear").status == "approved"
        assert curator.reject(ids[1], "an internal ticket").status == "rejected"
        outcome = curator.review([ReviewDecision(item_id=item_id, decision="approve") for item_id in ids[2:]])
        assert sorted(outcome.approved) == ids[2:] and outcome.errors == []
        assert curator.undo_review(ids[1]).undone == "reject"
        assert curator.reject(ids[1], "an internal ticket").status == "rejected"

        refreshed = admin.refresh("ops", at=datetime(2024, 4, 2, tzinfo=UTC))
        assert refreshed.created and refreshed.release.number == 1
        assert not admin.refresh("ops", at=datetime(2024, 4, 2, tzinfo=UTC)).created
        assert [release.number for release in curator.list_releases("ops")] == [1]
        manifest = curator.manifest("ops")
        dev = {entry.item_id: entry.content_digest for entry in manifest.items if entry.split == "dev"}
        assert len(manifest.items) == 11 and len(dev) == manifest.dev_count > 0

        rows = list(curator.iter_export("ops", release=1))
        assert {row.id: row.content_digest for row in rows} == dev
        assert all(row.metadata.canary == manifest.canary and row.metadata.release == 1 and row.split == "dev" for row in rows)
        assert all(row.item_metadata()["team"].startswith("team-") and row.occurred_at.startswith("2024-03-") for row in rows)
        assert list(curator.iter_export("ops", occurred_after=datetime(2030, 1, 1, tzinfo=UTC))) == []


def test_an_eval_pipeline_registers_runs_and_scores(live_server: LiveServer, engine: Engine) -> None:
    released = released_eval(engine)
    with Client(live_server.url, live_server.token("admin", name="admin")) as admin:
        admin.create_model(ModelCreate(name="acme-1", provider="acme", training_cutoff=datetime(2023, 12, 1).date()))
        endpoint = admin.create_endpoint(
            EndpointCreate(name="acme-1-rag", base_url="https://api.acme.test/v1", model="acme-1", trains_on_inputs="no", retention_days=0, augmentations=["retrieval"])
        )
        assert (endpoint.augmented, endpoint.augmentations, endpoint.sealed_allowed) == (True, ["retrieval"], True)
        assert [model.name for model in admin.list_models()] == ["acme-1"]
    with Client(live_server.url, live_server.token("read", name="pipeline")) as client:
        run = client.start_run("ops", model="acme-1", endpoint="acme-1-rag", idempotency_key="nightly-1")
        assert client.start_run("ops", model="acme-1", endpoint="acme-1-rag", idempotency_key="nightly-1").id == run.id
        assert run.augmented and run.canary == released.release.canary
        items = list(client.iter_run_items(run.id, page_size=6))
        assert [item.item_id for item in items] == [item.item_id for item in run.items] and len(items) == len(released.dev)
        accepted = client.post_results(run.id, [ResultIn(item_id=item.item_id, score=1.0 if n % 3 else 0.0) for n, item in enumerate(items)], batch=7)
        assert (accepted.scored, accepted.remaining) == (len(items), 0)
        summary = client.get_run(run.id)
        assert summary.score.n == len(items) and summary.score.method == "wilson" and summary.score.low is not None
        assert len(client.list_results(run.id)) == len(items) and [r.id for r in client.list_runs("ops")] == [run.id]
        assert client.item_exposures(items[0].item_id).exposures[0].run_id == run.id


def test_refusals_are_typed_errors(live_server: LiveServer, engine: Engine) -> None:
    released_eval(engine)
    register(engine)
    with Client(live_server.url, live_server.token("read", name="reader")) as reader:
        with pytest.raises(NotFound) as missing:
            reader.get_run(999_999)
        assert missing.value.status == 404 and missing.value.detail
        with pytest.raises(Forbidden) as gated:
            reader.start_run("ops", model="m1", endpoint="m1-no", split="sealed")
        assert gated.value.condition == "sealed_scope"
        with pytest.raises(Forbidden) as scope:
            reader.create_model(ModelCreate(name="x"))
        assert scope.value.condition is None and "admin" in scope.value.detail
        with pytest.raises(InvalidRequest) as invalid:
            reader.list_items(limit=100_000)
        assert invalid.value.status == 422
    with pytest.raises(Unauthorized), Client(live_server.url, "not-a-token") as stranger:
        stranger.list_evals()


def test_the_async_client_runs_a_pipeline_and_pages_the_audit(live_server: LiveServer, engine: Engine) -> None:
    released = released_eval(engine)
    register(engine)
    reader, admin = live_server.token("read", name="async"), live_server.token("admin", name="auditor")

    async def pipeline() -> tuple[int, int, list[str]]:
        async with AsyncClient(live_server.url, reader) as client:
            run = await client.start_run("ops", model="m1", endpoint="m1-no")
            items = [item async for item in client.iter_run_items(run.id, page_size=5)]
            await client.post_results(run.id, [ResultIn(item_id=item.item_id, score=0.5) for item in items])
            rows = [row async for row in client.iter_export("ops")]
            summary = await client.get_run(run.id)
        async with AsyncClient(live_server.url, admin) as auditor:
            actions = [event.action async for event in auditor.iter_audit(action="run.*", page_size=2)]
        assert summary.score.mean == 0.5 and len(rows) == len(released.dev)
        return len(items), summary.scored, actions

    served, scored, actions = asyncio.run(pipeline())
    assert served == scored == len(released.dev)
    assert "run.start" in actions and "run.items_read" in actions and json.dumps(actions)
