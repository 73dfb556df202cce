"""The `http` embedding backend against a real OpenAI-compatible server on loopback that embeds
with the same local model (`tests/support/embedding_server.py`), on every database backend:
curation through it decides ~150 real Hadoop reports exactly as the in-process model does, through
a 429 with Retry-After, a 500 and answers in shuffled order; the embedding endpoint must pass the
sealed-run gate or nothing is sent and nothing curated; a broken answer is a clear error that
curates nothing."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import Engine, make_url
from sqlmodel import Session, col, select
from typer.testing import CliRunner

from embedding.http_encoder import EmbeddingServiceError
from schemas.common import utcnow
from schemas.dedup import DedupDecision, Embedding, ItemFingerprint
from schemas.item import Item, ItemStatus
from schemas.model_registry import EndpointCreate, ModelCreate, TrainsOnInputs
from service.app import create_app
from service.cli import app as cli_app
from service.core.db import make_engine, write_transaction
from service.core.settings import Settings, get_settings
from service.dedup.encoder import get_encoder, model_identity
from service.dedup.http_backend import EmbeddingEndpointRefused
from service.dedup.runner import run_curation, run_redecide
from service.runs.model_registry import create_endpoint, create_model
from tests.conftest import TEST_SECRET_KEY, new_database, serve
from tests.dedup_support import MemoEncoder, hadoop_reports, ingest, planted
from tests.support.embedding_server import EmbeddingServer, changed, not_finite, one_short, repeated_index, serve_embeddings, status, without_data, wrong_dimension

MODEL = "all-MiniLM-L6-v2"
ENDPOINT = "minilm-local"
REPORT_COUNT = 150
Decisions = dict[str, tuple[str, str | None, str, float | None]]


def http_settings(database_url: str, server: EmbeddingServer, **changes: Any) -> Settings:
    values: dict[str, Any] = {
        "env": "test",
        "database_url": database_url,
        "secret_key": TEST_SECRET_KEY,
        "log_json": False,
        "curate_after_ingest": False,
        "embedding_backend": "http",
        "embedding_url": server.base_url,
        "embedding_endpoint": ENDPOINT,
        "embedding_remote_model": MODEL,
        "embedding_dim": 384,
        "embedding_max_attempts": 3,
        **changes,
    }
    return Settings(**values)


def register(engine: Engine, base_url: str, *, trains: TrainsOnInputs = TrainsOnInputs.NO, checked_days_ago: int = 1) -> None:
    with write_transaction(engine) as session:
        create_model(session=session, data=ModelCreate(name="minilm-embeddings"), actor="test")
        terms = EndpointCreate(
            name=ENDPOINT,
            base_url=base_url,
            model="minilm-embeddings",
            trains_on_inputs=trains,
            terms_checked_at=utcnow() - timedelta(days=checked_days_ago),
        )
        create_endpoint(session=session, data=terms, actor="test")


@pytest.fixture
def server(encoder: MemoEncoder) -> Iterator[EmbeddingServer]:
    with serve_embeddings(encoder, model_name=MODEL) as running:
        yield running


def _decisions(engine: Engine) -> Decisions:
    """external id → (status, external id of the item it duplicates, stage, score) of its newest decision."""
    with Session(engine) as session:
        items = {item.id: item for item in session.exec(select(Item))}
        found: Decisions = {}
        for item in items.values():
            decision = session.exec(select(DedupDecision).where(DedupDecision.item_id == item.id).order_by(col(DedupDecision.id).desc())).first()
            assert decision is not None, item.external_id
            original = items[item.duplicate_of].external_id if item.duplicate_of is not None else None
            found[item.external_id] = (item.status, original, decision.stage, decision.score)
        return found


def _nothing_curated(engine: Engine) -> None:
    with Session(engine) as session:
        assert {item.status for item in session.exec(select(Item))} == {ItemStatus.CANDIDATE.value}
        assert session.exec(select(DedupDecision)).first() is None
        assert session.exec(select(Embedding)).first() is None
        assert session.exec(select(ItemFingerprint)).first() is None


def test_http_backend_decides_like_the_in_process_model(database_url: str, engine: Engine, encoder: MemoEncoder, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    templates: dict[str, str] = request.getfixturevalue("_templates")  # the migrated template per database backend
    reports = hadoop_reports(REPORT_COUNT)
    records = [*reports, *planted(reports).values()]
    backend = make_url(database_url).get_backend_name()
    folder = tmp_path / "in-process"
    folder.mkdir()
    with new_database(backend, templates, folder) as torch_url:
        torch_engine = make_engine(torch_url)
        try:
            ingest(torch_engine, "hadoop", records)
            torch_settings = Settings(env="test", database_url=torch_url, secret_key=TEST_SECRET_KEY, log_json=False, curate_after_ingest=False)
            run_curation(torch_engine, torch_settings, encoder=encoder)
            in_process = _decisions(torch_engine)
        finally:
            torch_engine.dispose()

    with serve_embeddings(encoder, model_name=MODEL, api_key="test-embedding-key", shuffle=True, delay=0.02) as server:
        register(engine, server.base_url)
        ingest(engine, "hadoop", records)
        settings = http_settings(database_url, server, embedding_api_key="test-embedding-key", embedding_concurrency=3)
        # The second request is throttled with a Retry-After, the third fails with a 500.
        server.faults.extend([None, status(429, {"Retry-After": "1"}), status(500)])
        summary = run_curation(engine, settings)  # the process's encoder for these settings
        over_http = _decisions(engine)

    assert summary.decided == len(records) and summary.duplicate >= 4
    assert {key: value[:3] for key, value in over_http.items()} == {key: value[:3] for key, value in in_process.items()}
    for key, (_, _, _, score) in over_http.items():
        assert score == pytest.approx(in_process[key][3], abs=1e-5), key

    statuses = [request.status for request in server.received]
    assert statuses.count(429) == 1 and statuses.count(500) == 1 and statuses.count(200) == len(statuses) - 2
    throttled = next(request for request in server.received if request.status == 429)
    retried = next(request for request in server.received if request.status == 200 and request.body["input"] == throttled.body["input"])
    assert retried.at - throttled.at >= 0.95  # the server asked for a second
    failed = next(request for request in server.received if request.status == 500)
    assert any(request.status == 200 and request.body["input"] == failed.body["input"] for request in server.received)
    assert all(len(request.body["input"]) <= 32 and request.body["model"] == MODEL and request.body["encoding_format"] == "float" for request in server.received)
    assert {request.authorization for request in server.received} == {"Bearer test-embedding-key"}
    assert 1 < server.most_in_flight <= 3
    # Every text the run encoded went over HTTP once; the exact copy was never sent.
    assert len(server.texts) == summary.encoded > 0
    assert not [text for text in server.texts if "bytesPendingUpload=5531" in text]

    # The vectors are the server's own: stored under its model id, never mixed with in-process ones.
    model_id = get_encoder(settings).model_id
    assert model_id == "http:127.0.0.1/all-MiniLM-L6-v2/dim384" == model_identity(settings).model_id
    with Session(engine) as session:
        assert {row.model_id for row in session.exec(select(Embedding))} == {model_id}
        assert {row.model_id for row in session.exec(select(ItemFingerprint)) if row.body_key is not None} == {model_id}


@pytest.mark.parametrize(
    ("setup", "condition"),
    [
        ("unregistered", "endpoint_not_registered"),
        ("trains", "trains_on_inputs"),
        ("unknown", "terms_unknown"),
        ("stale", "terms_stale"),
        ("elsewhere", "endpoint_url_mismatch"),
    ],
)
def test_the_gate_refuses_an_endpoint_and_nothing_is_sent(setup: str, condition: str, database_url: str, engine: Engine, server: EmbeddingServer) -> None:
    if setup == "trains":
        register(engine, server.base_url, trains=TrainsOnInputs.YES)
    elif setup == "unknown":
        register(engine, server.base_url, trains=TrainsOnInputs.UNKNOWN)
    elif setup == "stale":
        register(engine, server.base_url, checked_days_ago=91)
    elif setup == "elsewhere":
        register(engine, "https://embeddings.example.com/v1")
    ingest(engine, "hadoop", hadoop_reports(5))
    settings = http_settings(database_url, server)

    with pytest.raises(EmbeddingEndpointRefused) as refused:
        run_curation(engine, settings)
    assert refused.value.condition == condition
    assert f"curation refused ({condition})" in str(refused.value) and ENDPOINT in str(refused.value)
    assert server.received == []
    _nothing_curated(engine)


def test_redeciding_is_refused_before_any_item_is_reopened(database_url: str, engine: Engine, server: EmbeddingServer, encoder: MemoEncoder) -> None:
    ingest(engine, "hadoop", hadoop_reports(5))
    run_curation(engine, http_settings(database_url, server, embedding_backend="torch"), encoder=encoder)
    with pytest.raises(EmbeddingEndpointRefused, match="endpoint_not_registered"):
        run_redecide(engine, http_settings(database_url, server))
    with Session(engine) as session:
        assert ItemStatus.CANDIDATE.value not in {item.status for item in session.exec(select(Item))}
    assert server.received == []


def test_a_passing_endpoint_curates(database_url: str, engine: Engine, server: EmbeddingServer) -> None:
    register(engine, server.base_url, checked_days_ago=89)
    ingest(engine, "hadoop", hadoop_reports(5))
    summary = run_curation(engine, http_settings(database_url, server))
    assert summary.decided == 5 and len(server.received) == 1


@pytest.mark.parametrize(
    ("fault", "said"),
    [
        (changed(without_data), "without a `data` list"),
        (changed(one_short), "embeddings for"),
        (changed(wrong_dimension), "has 383 dimensions, not the 384 configured"),
        (changed(not_finite), "non-finite values"),
        (changed(repeated_index), "two entries of `data` have index"),
        (status(401), "answered 401; check the API key"),
    ],
    ids=["no data", "one short", "wrong dimension", "not finite", "repeated index", "unauthorised"],
)
def test_a_bad_answer_is_a_clear_error_and_curates_nothing(fault: Any, said: str, database_url: str, engine: Engine, server: EmbeddingServer) -> None:
    register(engine, server.base_url)
    ingest(engine, "hadoop", hadoop_reports(5))
    server.faults.append(fault)
    with pytest.raises(EmbeddingServiceError) as failed:
        run_curation(engine, http_settings(database_url, server))
    assert said in str(failed.value) and server.base_url in str(failed.value) and ENDPOINT in str(failed.value)
    assert len(server.received) == 1  # a broken answer is not retried
    _nothing_curated(engine)


def test_a_server_that_keeps_failing_gives_up_after_the_attempts_allowed(database_url: str, engine: Engine, server: EmbeddingServer) -> None:
    register(engine, server.base_url)
    ingest(engine, "hadoop", hadoop_reports(5))
    server.faults.extend([status(503), status(503)])
    with pytest.raises(EmbeddingServiceError, match="failed 2 attempts in a row, the last: it answered 503"):
        run_curation(engine, http_settings(database_url, server, embedding_max_attempts=2))
    assert [request.status for request in server.received] == [503, 503]
    _nothing_curated(engine)


def test_dedup_check_sends_its_text_only_through_the_gate(database_url: str, engine: Engine, server: EmbeddingServer) -> None:
    settings = http_settings(database_url, server)
    text = {"title": "NameNode hangs on startup", "input": "The NameNode never leaves safe mode after a restart when the edit log is large."}
    with serve(create_app(settings, engine=engine), engine, settings) as live, live.client("read") as reader:
        refused = reader.post("/v1/dedup/check", json=text)
        assert refused.status_code == 403 and refused.json()["condition"] == "endpoint_not_registered"
        assert server.received == []
        register(engine, server.base_url)
        ingest(engine, "hadoop", hadoop_reports(5))
        run_curation(engine, settings)
        sent = len(server.received)
        server.faults.append(changed(wrong_dimension))
        broken = reader.post("/v1/dedup/check", json=text)
        assert broken.status_code == 503 and "384 configured" in broken.json()["detail"]
        checked = reader.post("/v1/dedup/check", json=text)
        assert checked.status_code == 200 and checked.json()["status"] == "unique"
    assert len(server.received) == sent + 2 and all(text["title"] in request.body["input"][-1] for request in server.received[sent:])


def test_goldenset_curate_exits_4_naming_the_condition(database_url: str, engine: Engine, server: EmbeddingServer, monkeypatch: pytest.MonkeyPatch) -> None:
    register(engine, server.base_url, trains=TrainsOnInputs.YES)
    ingest(engine, "hadoop", hadoop_reports(3))
    environment = {
        "GOLDENSET_DATABASE_URL": database_url,
        "GOLDENSET_SECRET_KEY": TEST_SECRET_KEY,
        "GOLDENSET_EMBEDDING_BACKEND": "http",
        "GOLDENSET_EMBEDDING_URL": server.base_url,
        "GOLDENSET_EMBEDDING_ENDPOINT": ENDPOINT,
        "GOLDENSET_EMBEDDING_REMOTE_MODEL": MODEL,
        "GOLDENSET_EMBEDDING_DIM": "384",
    }
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    try:
        result = CliRunner().invoke(cli_app, ["curate"])
    finally:
        get_settings.cache_clear()
    said = re.sub(r"\s+", " ", result.output)
    assert result.exit_code == 4, said
    assert "refused (trains_on_inputs): incident texts are embedded only by a registered endpoint" in said and f"endpoint '{ENDPOINT}' trains on its inputs" in said
    assert server.received == []
    _nothing_curated(engine)
