"""The scaled layout on real processes over one PostgreSQL database: two API replicas
(`goldenset serve --no-scheduler`) and one curation writer (`goldenset scheduler`, with the real
embedding model). Concurrent pushes lose nothing and leave one survivor per planted duplicate
cluster (exact copies, near-verbatim copies and paraphrases written by hand); concurrent
refreshes write one release; a replica killed mid-push loses nothing and the retried batch is
idempotent; `/healthz` answers 503 while the database refuses connections and 200 again once it
accepts them, without a restart.

PostgreSQL only, whatever GOLDENSET_TEST_DATABASES says: these tests fail when it is unreachable."""

from __future__ import annotations

import copy
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import func
from sqlalchemy.engine import Engine, make_url
from sqlmodel import Session, col, select

from ingest.store import CHUNK_SIZE
from schemas.dedup import DedupDecision, DedupStage
from schemas.evals import EvalCreate, EvalItem
from schemas.item import Item, ItemStatus
from schemas.release import Release
from schemas.source import SourceCreate
from service.core.db import write_session, write_transaction
from service.core.tokens import create_token
from service.evals.definitions import create_eval
from service.sources.definitions import create_source
from tests.conftest import TEST_SECRET_KEY, _pg_admin
from tests.dedup_support import HADOOP_MAPPING, KEV_MAPPING, hadoop_reports
from tests.eval_support import ingest_and_curate, kev_records
from tests.processes import Replica, replicas, start_scheduler, start_serve

BATCH = 50
CLUSTERS = 25
PARAPHRASES = Path(__file__).resolve().parents[2] / "support" / "hadoop_paraphrases.json"
CURATION_SECONDS = 300


def _source(engine: Engine, name: str, mapping: Path) -> str:
    """Create push source `name` with `mapping` and return a token with `ingest,read,admin`."""
    from ingest.mapping import load_mapping

    document = load_mapping(mapping).model_copy(update={"format": "jsonl", "records": None}).model_dump(mode="json", exclude_defaults=True)
    with write_transaction(engine) as session:
        create_source(session=session, data=SourceCreate(name=name, kind="push", mapping=document), secret_key=TEST_SECRET_KEY, actor="test")
        token, _ = create_token(session=session, name="pusher", scopes=["ingest", "read", "admin"])
        session.commit()
    return token


def _push(url: str, token: str, source: str, records: list[dict[str, Any]]) -> dict[str, Any]:
    answer = httpx.post(f"{url}/v1/sources/{source}/items", json=records, headers={"Authorization": f"Bearer {token}"}, timeout=60)
    assert answer.status_code in (200, 201), answer.text
    body: dict[str, Any] = answer.json()
    return body


def _later(created: str, days: int) -> str:
    return (datetime.fromisoformat(created) + timedelta(days=days)).isoformat()


def _planted_clusters(reports: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Plant an exact copy and a near-verbatim copy (dated after it) of `CLUSTERS` long reports, and
    a paraphrase written by hand (`PARAPHRASES`, dated after both) of each report it names; the
    copies are appended to `reports`. Returns each cluster's external ids, original first, the
    paraphrase (`<id>-PARAPHRASE`) last."""
    paraphrases = {paraphrase["of"]: paraphrase for paraphrase in json.loads(PARAPHRASES.read_text(encoding="utf-8"))["paraphrases"]}
    long_reports = [report for report in reports if len(report.get("description") or "") > 900][:CLUSTERS]
    originals = [*long_reports, *(report for report in reports if report["id"] in paraphrases and report not in long_reports)]
    missing = paraphrases.keys() - {report["id"] for report in originals}
    assert not missing, f"paraphrases of reports not among the {len(reports)}: {sorted(missing)}"
    clusters: dict[str, list[str]] = {}
    for original in originals:
        exact = copy.deepcopy(original)
        exact.update(id=f"{original['id']}-EXACT", created=_later(original["created"], 3))
        near = copy.deepcopy(original)
        near.update(id=f"{original['id']}-NEAR", created=_later(original["created"], 5))
        near["description"] = original["description"] + "\nSeen again on another cluster."
        reports.extend([exact, near])
        clusters[original["id"]] = [original["id"], exact["id"], near["id"]]
        if (paraphrase := paraphrases.get(original["id"])) is not None:
            retold = copy.deepcopy(original)
            retold.update(id=f"{original['id']}-PARAPHRASE", created=_later(original["created"], 7), title=paraphrase["title"], description=paraphrase["description"])
            reports.append(retold)
            clusters[original["id"]].append(retold["id"])
    return clusters


def _curate_with_worker(pg_url: str, pg_engine: Engine, log: Path) -> None:
    """Run `goldenset scheduler` over `pg_url` (curating every 2 s) until no item is a candidate,
    then stop it; fails with the candidates left and the end of its log after `CURATION_SECONDS`."""
    worker = start_scheduler(pg_url, log, env={"CURATE_INTERVAL_SECONDS": "2", "LOG_LEVEL": "INFO"})
    try:
        deadline = time.monotonic() + CURATION_SECONDS
        while True:
            with Session(pg_engine) as session:
                pending = session.exec(select(func.count()).select_from(Item).where(Item.status == ItemStatus.CANDIDATE.value)).one()
            if not pending:
                return
            assert worker.process.poll() is None, f"goldenset scheduler exited with {worker.process.returncode}:\n{_log_tail(worker)}"
            assert time.monotonic() < deadline, f"{pending} items still candidates after {CURATION_SECONDS} s of curation by goldenset scheduler:\n{_log_tail(worker)}"
            time.sleep(1)
    finally:
        worker.stop()


def _log_tail(worker: Replica) -> str:
    """The end of `worker`'s log, without APScheduler's notes that a tick was skipped because the
    previous curation run was still going."""
    return "\n".join(line for line in worker.output().splitlines() if "maximum number of running instances" not in line)[-4000:]


def test_two_replicas_take_concurrent_pushes_and_one_writer_leaves_one_survivor_per_cluster(
    pg_url: str, pg_engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # the worker loads the model from its package, never from a hub
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    token = _source(pg_engine, "hadoop", HADOOP_MAPPING)
    records = hadoop_reports(950)
    clusters = _planted_clusters(records)
    # Each cluster's members arrive through different replicas, in separate batches.
    batches = [records[start : start + BATCH] for start in range(0, len(records), BATCH)]
    with replicas(pg_url, tmp_path) as (first, second):
        with ThreadPoolExecutor(max_workers=8) as pool:
            summaries = list(pool.map(lambda pair: _push((first, second)[pair[0] % 2].url, token, "hadoop", pair[1]), enumerate(batches)))
        assert sum(summary["new"] for summary in summaries) == len(records)
        assert all(summary["rejected"] == 0 for summary in summaries)
        health = [httpx.get(f"{replica.url}/healthz").json() for replica in (first, second)]
        assert health == [{"status": "ok", "database": "ok", "role": "api"}] * 2
    with Session(pg_engine) as session:
        # API replicas never curate: everything waits for the one writer.
        assert session.exec(select(func.count()).select_from(Item).where(Item.status == ItemStatus.CANDIDATE.value)).one() == len(records)
    _curate_with_worker(pg_url, pg_engine, tmp_path / "worker.log")
    with Session(pg_engine) as session:
        stored = {item.external_id: item for item in session.exec(select(Item))}
        paraphrases = {members[-1]: original for original, *members in clusters.values() if members[-1].endswith("-PARAPHRASE")}
        decisions = {
            external: session.exec(select(DedupDecision).where(DedupDecision.item_id == stored[external].id).order_by(col(DedupDecision.id).desc())).first()
            for external in paraphrases
        }
    assert len(paraphrases) >= 8
    assert len(stored) == len(records) == len({record["id"] for record in records})
    assert not [item for item in stored.values() if item.status == ItemStatus.CANDIDATE.value]
    for original, *copies in clusters.values():
        survivors = [external for external in (original, *copies) if stored[external].status != ItemStatus.DUPLICATE.value]
        assert survivors == [original], {external: (stored[external].status, stored[external].duplicate_of) for external in (original, *copies)}
        assert {stored[external].duplicate_of for external in copies} == {stored[original].id}
    for external, original in paraphrases.items():
        decision = decisions[external]
        assert decision is not None and (decision.stage, decision.matched_item_id) == (DedupStage.EMBEDDING.value, stored[original].id), (external, decision)
    planted = {external for members in clusters.values() for external in members}
    roots = {stored[original].id for original in clusters}
    assert not [item.external_id for item in stored.values() if item.external_id not in planted and item.duplicate_of in roots]


def test_concurrent_refreshes_through_both_replicas_write_one_release(pg_url: str, pg_engine: Engine, tmp_path: Path) -> None:
    ingest_and_curate(pg_engine, "kev", kev_records(since="2024-01-01", until="2024-05-01"))
    with write_session(pg_engine) as session:
        create_eval(
            session=session, data=EvalCreate(name="ops", sources=["kev"], approval_policy="auto", max_age_days=365), secret_key=TEST_SECRET_KEY, actor="test", key=bytes(range(32))
        )
        token, _ = create_token(session=session, name="admin", scopes=["admin"])
        session.commit()
    with replicas(pg_url, tmp_path) as (first, second):
        start = threading.Barrier(8)

        def refresh(number: int) -> httpx.Response:
            start.wait()
            url = (first, second)[number % 2].url
            return httpx.post(f"{url}/v1/evals/ops/refresh", params={"at": "2024-05-02T10:00:00Z"}, headers={"Authorization": f"Bearer {token}"}, timeout=90)

        with ThreadPoolExecutor(max_workers=8) as pool:
            answers = list(pool.map(refresh, range(8)))
    assert sorted(answer.status_code for answer in answers) == [200] * 7 + [201], [answer.text for answer in answers]
    assert {answer.json()["release"]["number"] for answer in answers} == {1}
    with Session(pg_engine) as session:
        releases = session.exec(select(Release)).all()
        assert len(releases) == 1
        assert session.exec(select(func.count()).select_from(EvalItem)).one() == releases[0].dev_count + releases[0].sealed_count > 0


def test_a_replica_killed_mid_push_loses_nothing_and_the_retried_batch_is_idempotent(pg_url: str, pg_engine: Engine, tmp_path: Path) -> None:
    token = _source(pg_engine, "kev", KEV_MAPPING)
    records = kev_records(since="2021-11-01")
    victim = start_serve(pg_url, tmp_path / "victim.log")
    survivor = start_serve(pg_url, tmp_path / "survivor.log")
    try:
        outcome: dict[str, Any] = {}

        def push() -> None:
            try:
                outcome["answer"] = httpx.post(f"{victim.url}/v1/sources/kev/items", json=records, headers={"Authorization": f"Bearer {token}"}, timeout=60)
            except httpx.HTTPError as exc:
                outcome["error"] = exc

        pusher = threading.Thread(target=push)
        pusher.start()
        time.sleep(0.4)  # the body is sent and the replica is storing it
        victim.kill()
        pusher.join(timeout=30)
        assert "error" in outcome, f"the push finished before the kill ({outcome}); send a larger batch"
        with Session(pg_engine) as session:
            before = session.exec(select(func.count()).select_from(Item)).one()
        # A batch is committed chunk by chunk: a kill keeps whole chunks, never part of one.
        assert before % CHUNK_SIZE == 0 and before < len(records)
        retried = _push(survivor.url, token, "kev", records)
        assert retried["new"] + retried["unchanged"] == len(records) and retried["rejected"] == 0
        again = _push(survivor.url, token, "kev", records)
        assert (again["new"], again["updated"], again["unchanged"]) == (0, 0, len(records))
        with Session(pg_engine) as session:
            assert session.exec(select(func.count()).select_from(Item)).one() == len(records)
            assert len(set(session.exec(select(col(Item.external_id))).all())) == len(records)
    finally:
        victim.stop()
        survivor.stop()


def test_healthz_is_503_while_the_database_refuses_connections_and_recovers_without_a_restart(pg_url: str, tmp_path: Path) -> None:
    name = str(make_url(pg_url).database)
    replica = start_serve(pg_url, tmp_path / "replica.log")
    try:
        assert httpx.get(f"{replica.url}/healthz").json() == {"status": "ok", "database": "ok", "role": "api"}
        with _pg_admin() as conn:
            conn.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,))
        for _ in range(3):  # pooled connections were cut and new ones are refused
            down = httpx.get(f"{replica.url}/healthz", timeout=30)
            assert down.status_code == 503, down.text
            assert down.headers["content-type"].startswith("application/problem+json")
            assert "the database is unreachable" in down.json()["detail"]
        with _pg_admin() as conn:
            conn.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
        deadline = time.monotonic() + 20
        while (up := httpx.get(f"{replica.url}/healthz", timeout=30)).status_code != 200:
            assert time.monotonic() < deadline, up.text
            time.sleep(0.2)
        assert up.json() == {"status": "ok", "database": "ok", "role": "api"}
        assert replica.process.poll() is None
    finally:
        replica.stop()
