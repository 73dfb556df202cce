"""Curation runs on real Hadoop reports with planted duplicates, on every backend: the stages,
the earlier-incident swap, distinct identities, idempotence, the single-writer lock, and the
index rebuilt from the database."""

from __future__ import annotations

import logging
import threading
from dataclasses import replace
from functools import partial
from pathlib import Path

import pytest
from sqlalchemy import update
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from curation.dedup.deduplicator import Deduplicator
from curation.dedup.index import MixedRecipeError, SimilarityIndex
from ingest.mapping import load_mapping
from schemas.common import utcnow
from schemas.dedup import DedupDecision, DedupStage, Embedding, ItemFingerprint
from schemas.item import Item, ItemStatus
from service.core.db import make_engine, write_transaction
from service.core.locks import exclusive
from service.core.settings import Settings
from service.dedup.encoder import get_encoder
from service.dedup.http_backend import EmbeddingEndpointRefused
from service.dedup.runner import CurationBusy, run_curation
from service.scheduler import CURATE_JOB_ID, GoldensetScheduler
from tests.conftest import new_database
from tests.dedup_support import KEV_MAPPING, CountingEncoder, MemoEncoder, hadoop_reports, ingest, planted

REPORT_COUNT = 60


def _items(session: Session) -> dict[str, Item]:
    return {item.external_id: item for item in session.exec(select(Item))}


def _newest_decision(session: Session, item_id: int | None) -> DedupDecision:
    decision = session.exec(select(DedupDecision).where(DedupDecision.item_id == item_id).order_by(col(DedupDecision.id).desc())).first()
    assert decision is not None
    return decision


def test_planted_duplicates_are_found_at_the_right_stage(engine: Engine, settings: Settings, encoder: MemoEncoder, monkeypatch: pytest.MonkeyPatch) -> None:
    reports = hadoop_reports(REPORT_COUNT)
    plants = planted(reports)
    assert ingest(engine, "hadoop", [*reports, plants["exact"], plants["near"], plants["paraphrase"]]).new == REPORT_COUNT + 3
    loads: list[Deduplicator] = []
    original_load = Deduplicator.load

    def counting_load(self: Deduplicator, session: Session) -> SimilarityIndex:
        loads.append(self)
        return original_load(self, session)

    monkeypatch.setattr(Deduplicator, "load", counting_load)
    counting = CountingEncoder(encoder)

    summary = run_curation(engine, settings, encoder=counting)
    assert summary.decided == REPORT_COUNT + 3
    assert summary.unique + summary.duplicate == summary.decided and summary.contaminated == 0
    assert summary.encoded == len(set(counting.texts)) > 0
    with Session(engine) as session:
        items = _items(session)
        assert not [item for item in items.values() if item.status == ItemStatus.CANDIDATE.value]
        assert len(session.exec(select(ItemFingerprint)).all()) == len(items)
        expected = {"exact": DedupStage.EXACT, "near": DedupStage.MINHASH, "paraphrase": DedupStage.EMBEDDING}
        for kind, stage in expected.items():
            plant, original = items[plants[kind]["id"]], items[plants[kind]["of"]]
            decision = _newest_decision(session, plant.id)
            assert original.status == ItemStatus.UNIQUE.value, kind
            assert (plant.status, plant.duplicate_of, decision.stage, decision.matched_item_id) == (ItemStatus.DUPLICATE.value, original.id, stage.value, original.id), kind
        thresholds = settings.dedup_config()
        assert (_newest_decision(session, items["PLANT-NEAR"].id).score or 0) >= thresholds.minhash_threshold
        assert (_newest_decision(session, items["PLANT-PARAPHRASE"].id).score or 0) >= thresholds.guard_embedding_threshold
        # The exact copy was never embedded: found by its normalised hash alone.
        assert not [text for text in counting.texts if "bytesPendingUpload=5531" in text]
        assert [text for text in counting.texts if "bytesPendingUpload=106716" in text]
        for decision in session.exec(select(DedupDecision)):
            assert decision.stage in {stage.value for stage in DedupStage} and "thresholds" in decision.details
            if decision.status == ItemStatus.UNIQUE.value:
                assert decision.stage == DedupStage.NONE.value
            else:
                assert decision.score is not None and decision.matched_item_id is not None and "matched_item" in decision.details

    # An incident that happened before a stored one arrives late: it becomes the root.
    assert ingest(engine, "hadoop", [plants["earlier"]]).new == 1
    later = run_curation(engine, settings, encoder=counting)
    assert (later.decided, later.unique, later.duplicate) == (1, 1, 0)
    with Session(engine) as session:
        items = _items(session)
        earlier, original = items["PLANT-EARLIER"], items[plants["earlier"]["of"]]
        assert (earlier.status, earlier.duplicate_of) == (ItemStatus.UNIQUE.value, None)
        assert _newest_decision(session, earlier.id).details["kept_over"] == original.id
        assert (original.status, original.duplicate_of) == (ItemStatus.DUPLICATE.value, earlier.id)
        swap = _newest_decision(session, original.id)
        assert (swap.status, swap.matched_item_id, swap.details["earlier_incident_arrived"]) == (ItemStatus.DUPLICATE.value, earlier.id, earlier.id)
        assert swap.stage in (DedupStage.MINHASH.value, DedupStage.EMBEDDING.value) and swap.score is not None

    # Nothing pending: nothing decided, nothing encoded.
    encoded_before = len(counting.texts)
    again = run_curation(engine, settings, encoder=counting)
    assert (again.decided, again.encoded, len(counting.texts)) == (0, 0, encoded_before)
    assert len(loads) == 1  # the in-memory index was kept between runs

    # The index rebuilt from the database equals the one curation kept up to date.
    live = loads[0].index  # the index the runs kept, and added to as they decided
    assert live is not None
    with Session(engine) as session:
        rebuilt = Deduplicator(clock=utcnow, encoder=encoder, config=settings.dedup_config()).load(session)
    rebuilt_entries, live_entries = list(rebuilt.entries()), list(live.entries())
    assert {entry.item_id: entry.root for entry in rebuilt_entries} == {entry.item_id: entry.root for entry in live_entries}
    assert {entry.item_id: entry.status for entry in rebuilt_entries} == {entry.item_id: entry.status for entry in live_entries}
    assert {entry.item_id: (entry.content_hash, entry.body_key, entry.title_key) for entry in rebuilt_entries} == {
        entry.item_id: (entry.content_hash, entry.body_key, entry.title_key) for entry in live_entries
    }
    assert len(rebuilt) >= REPORT_COUNT + 3


def test_records_with_different_identities_are_never_duplicates(engine: Engine, settings: Settings, encoder: MemoEncoder) -> None:
    record = {
        "vendorProject": "Acme",
        "product": "Gateway",
        "vulnerabilityName": "Acme Gateway Improper Authentication Vulnerability",
        "shortDescription": "Acme Gateway contains an improper authentication vulnerability that allows a remote attacker to bypass login.",
        "requiredAction": "Apply mitigations per vendor instructions or discontinue use of the product if mitigations are unavailable.",
        "dateAdded": "2024-03-01",
    }
    kev = load_mapping(KEV_MAPPING).model_copy(update={"format": "jsonl", "records": None})
    first, second = {**record, "cveID": "CVE-2024-0001"}, {**record, "cveID": "CVE-2024-0002", "dateAdded": "2024-03-05"}
    assert ingest(engine, "kev", [first, second], kev).new == 2
    # The same text in a source without `distinct_by` is an exact duplicate.
    assert ingest(engine, "mirror", [{**record, "cveID": "CVE-2024-0003", "dateAdded": "2024-03-09"}], kev.model_copy(update={"distinct_by": []})).new == 1
    summary = run_curation(engine, settings, encoder=encoder)
    assert (summary.decided, summary.unique, summary.duplicate) == (3, 2, 1)
    with Session(engine) as session:
        items = _items(session)
        assert items["CVE-2024-0001"].identity_key == "CVE-2024-0001"
        assert items["CVE-2024-0001"].content_hash == items["CVE-2024-0002"].content_hash
        assert [items[f"CVE-2024-000{n}"].status for n in (1, 2)] == [ItemStatus.UNIQUE.value] * 2
        assert (items["CVE-2024-0003"].status, items["CVE-2024-0003"].duplicate_of) == (ItemStatus.DUPLICATE.value, items["CVE-2024-0001"].id)
        assert _newest_decision(session, items["CVE-2024-0003"].id).stage == DedupStage.EXACT.value


def test_one_curation_run_at_a_time(engine: Engine, settings: Settings, encoder: MemoEncoder) -> None:
    ingest(engine, "hadoop", hadoop_reports(3))
    blocking = CountingEncoder(encoder, release=threading.Event())
    results: list[object] = []
    worker = threading.Thread(target=lambda: results.append(run_curation(engine, settings, encoder=blocking)))
    worker.start()
    try:
        assert blocking.entered.wait(timeout=60)
        with pytest.raises(CurationBusy):
            run_curation(engine, settings, encoder=encoder)
    finally:
        assert blocking.release is not None
        blocking.release.set()
        worker.join(timeout=60)
    assert len(results) == 1 and getattr(results[0], "decided", None) == 3
    # Another process holding the database lock (a PostgreSQL advisory lock, or SQLite's lock file).
    ingest(engine, "hadoop", hadoop_reports(4)[3:])
    with exclusive(engine, "curation"), pytest.raises(CurationBusy, match="another process"):
        run_curation(engine, settings, encoder=encoder)
    assert run_curation(engine, settings, encoder=encoder).decided == 1


def test_a_kept_index_is_rebuilt_after_another_writer_or_a_changed_item(engine: Engine, settings: Settings, encoder: MemoEncoder, monkeypatch: pytest.MonkeyPatch) -> None:
    loads: list[int] = []
    original_load = Deduplicator.load

    def counting_load(self: Deduplicator, session: Session) -> SimilarityIndex:
        loads.append(id(self))
        return original_load(self, session)

    monkeypatch.setattr(Deduplicator, "load", counting_load)
    reports = hadoop_reports(6)
    ingest(engine, "hadoop", reports[:3])
    run_curation(engine, settings, encoder=encoder)
    ingest(engine, "hadoop", reports[3:4])
    run_curation(engine, settings, encoder=encoder)
    assert len(loads) == 1
    # Another writer (here: another encoder object, so another in-memory index) decides an item.
    ingest(engine, "hadoop", reports[4:5])
    run_curation(engine, settings, encoder=CountingEncoder(encoder))
    ingest(engine, "hadoop", reports[5:6])
    run_curation(engine, settings, encoder=encoder)
    assert len(loads) == 3 and loads[0] == loads[2]
    # A decided item whose text changed goes back to candidate; the kept index still holds its old
    # text, so it is rebuilt rather than letting the item match its own former self.
    changed = {**reports[1], "description": reports[1]["description"].replace("the", "a", 2) + " Seen again."}
    assert ingest(engine, "hadoop", [changed]).updated == 1
    again = run_curation(engine, settings, encoder=encoder)
    assert (again.decided, again.unique, len(loads)) == (1, 1, 4)
    with Session(engine) as session:
        item = session.exec(select(Item).where(Item.external_id == reports[1]["id"])).one()
        assert (item.status, item.duplicate_of) == (ItemStatus.UNIQUE.value, None)


def test_fingerprints_of_another_recipe_are_never_mixed(engine: Engine, settings: Settings, encoder: MemoEncoder) -> None:
    ingest(engine, "hadoop", hadoop_reports(3))
    run_curation(engine, settings, encoder=encoder)
    with Session(engine) as session:
        fingerprint = session.exec(select(ItemFingerprint)).first()
        assert fingerprint is not None
        recipe = fingerprint.recipe
        session.exec(update(ItemFingerprint).where(col(ItemFingerprint.item_id) == fingerprint.item_id).values(recipe="n1;word5;p64;s7;affine32"))
        session.commit()
        deduplicator = Deduplicator(clock=utcnow, encoder=encoder)
        assert deduplicator.recipe.key == recipe
        with pytest.raises(MixedRecipeError, match="1 fingerprints were made with another recipe"):
            deduplicator.load(session)


def test_scheduled_curation_logs_failures_and_never_raises(engine: Engine, settings: Settings, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    scheduler = GoldensetScheduler(engine, settings)

    def broken(*_: object, **__: object) -> None:
        raise RuntimeError("model exploded")

    def busy(*_: object, **__: object) -> None:
        raise CurationBusy("another process is curating")

    with caplog.at_level(logging.INFO, logger="goldenset.scheduler"):
        monkeypatch.setattr("service.scheduler.run_curation", broken)
        scheduler.curate()
        monkeypatch.setattr("service.scheduler.run_curation", busy)
        scheduler.curate()
    messages = [record.getMessage() for record in caplog.records]
    assert "scheduled curation failed; the next run retries" in messages
    assert "scheduled curation skipped: another process is curating" in messages
    monkeypatch.undo()
    scheduler.start()  # the first curation run comes one interval later
    try:
        job = scheduler.scheduler.get_job(CURATE_JOB_ID)
        assert job is not None and job.trigger.interval.total_seconds() == settings.curate_interval_seconds
    finally:
        scheduler.shutdown()


def test_scheduled_jobs_log_a_refusal_as_one_line_with_its_reason(engine: Engine, settings: Settings, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    scheduler = GoldensetScheduler(engine, settings)

    def refused(*_: object, **__: object) -> None:
        raise EmbeddingEndpointRefused("endpoint_not_registered", "register the embedding server")

    monkeypatch.setattr("service.scheduler.run_curation", refused)
    with caplog.at_level(logging.INFO, logger="goldenset.scheduler"):
        scheduler.curate()
        scheduler.pull("nowhere")
    logged = {record.getMessage(): record for record in caplog.records}
    gate = "incident texts are embedded only by a registered endpoint that passes the sealed-run gate"
    curation = logged[f"scheduled curation refused (endpoint_not_registered): {gate}; register the embedding server"]
    pull = logged["scheduled pull of nowhere refused (not_found): source 'nowhere' does not exist"]
    assert (curation.levelno, curation.exc_info) == (logging.WARNING, None)  # a gate a person must open
    assert (pull.levelno, pull.exc_info) == (logging.INFO, None)


def test_the_model_is_loaded_once_and_shared_safely_by_threads(encoder: MemoEncoder) -> None:
    model = get_encoder(Settings())
    assert get_encoder(Settings()) is model and encoder.inner is model
    texts = [f"namenode {n} lost its heartbeat with datanode {n + 1} during a rolling restart" for n in range(8)]
    expected = model.encode(texts)
    results: dict[int, object] = {}

    def encode(n: int) -> None:
        try:
            results[n] = model.encode(texts)
        except Exception as exc:  # "Already borrowed" from a tokenizer shared without a lock
            results[n] = exc

    threads = [threading.Thread(target=encode, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(results) == 4
    for result in results.values():
        assert not isinstance(result, Exception), result
        assert abs(result - expected).max() < 1e-4  # type: ignore[operator]


def test_ingest_can_write_while_curation_encodes(engine: Engine, settings: Settings, encoder: MemoEncoder) -> None:
    """The model encodes outside the write transaction: on SQLite that transaction holds the
    database's only write lock, so ingest (another process, or the API) would wait for the model."""
    ingest(engine, "hadoop", hadoop_reports(4))
    blocking = CountingEncoder(encoder, release=threading.Event())
    results: list[object] = []
    worker = threading.Thread(target=lambda: results.append(run_curation(engine, settings, encoder=blocking)))
    worker.start()
    try:
        assert blocking.entered.wait(timeout=60)
        written = threading.Thread(target=lambda: ingest(engine, "hadoop", hadoop_reports(6)[4:]))
        written.start()
        written.join(timeout=20)
        assert not written.is_alive(), "ingest waited for the model: curation held the write lock while encoding"
    finally:
        assert blocking.release is not None
        blocking.release.set()
        worker.join(timeout=60)
    assert len(results) == 1 and getattr(results[0], "decided", 0) >= 4
    with Session(engine) as session:
        assert {item.status for item in session.exec(select(Item))} <= {ItemStatus.UNIQUE.value, ItemStatus.DUPLICATE.value}


def test_batches_prepared_ahead_decide_as_batches_prepared_in_turn(
    engine: Engine, request: pytest.FixtureRequest, tmp_path: Path, settings: Settings, encoder: MemoEncoder
) -> None:
    """Small batches, so planted copies and their originals fall in different batches, and some
    copies are prepared while the batch holding their original is still being decided."""
    reports = hadoop_reports(REPORT_COUNT)
    plants = planted(reports)
    records = [*reports, plants["exact"], plants["near"], plants["paraphrase"], plants["earlier"]]
    config = replace(settings.dedup_config(), batch_size=7)
    outcomes = []
    folder = tmp_path / "ahead"
    folder.mkdir()
    with new_database(request.node.callspec.params["database_url"], request.getfixturevalue("_templates"), folder) as other_url:
        other = make_engine(other_url)
        try:
            for target, ahead in ((engine, False), (other, True)):
                ingest(target, "hadoop", records)
                counting = CountingEncoder(encoder)
                deduplicator = Deduplicator(clock=utcnow, encoder=counting, config=config)
                summary = deduplicator.curate_in_steps(partial(Session, target), partial(write_transaction, target), ahead=ahead)
                with Session(target) as session:
                    ids = {item.id: item.external_id for item in session.exec(select(Item))}
                    decided = {item.external_id: (item.status, ids.get(item.duplicate_of)) for item in session.exec(select(Item))}
                    decisions = len(session.exec(select(DedupDecision)).all())
                    stored = len(session.exec(select(Embedding)).all())
                outcomes.append((summary.decided, decided, decisions, sorted(counting.texts), stored))
        finally:
            other.dispose()
    in_turn, ahead_of_time = outcomes
    assert in_turn[0] == len(records) and in_turn[1][plants["exact"]["id"]] == (ItemStatus.DUPLICATE.value, plants["exact"]["of"])
    assert ahead_of_time == in_turn, "same decisions, the same texts encoded once each, the same vectors stored"
    assert len(set(in_turn[3])) == len(in_turn[3])
