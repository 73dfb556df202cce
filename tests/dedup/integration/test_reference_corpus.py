"""Public reference corpora: their items are indexed, never curated; a candidate that copies or
paraphrases one becomes `contaminated`, pointing at it."""

from __future__ import annotations

from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from ingest.mapping import load_mapping
from schemas.item import Item, ItemStatus
from schemas.source import SourceCreate
from service.core.db import write_transaction
from service.core.settings import Settings
from service.dedup.runner import run_curation
from service.sources.definitions import create_source
from tests.dedup_support import HADOOP_MAPPING, MemoEncoder, hadoop_reports, ingest, planted


def test_copies_and_paraphrases_of_reference_items_are_contaminated(engine: Engine, settings: Settings, encoder: MemoEncoder) -> None:
    reports = hadoop_reports(60)
    with write_transaction(engine) as session:
        document = load_mapping(HADOOP_MAPPING).model_dump(mode="json", exclude_defaults=True)
        create_source(session=session, data=SourceCreate(name="public-bench", kind="reference", mapping=document), secret_key="x" * 40, actor="test")
    ingest(engine, "public-bench", reports)
    plants = planted(reports)
    fresh = {**reports[0], "id": "FRESH", "title": "Completely new incident about a quota", "description": "A tenant hit a storage quota nobody configured."}
    ingest(engine, "ops", [plants["exact"], plants["paraphrase"], fresh])
    summary = run_curation(engine, settings, encoder=encoder)
    assert summary.references == 60
    with Session(engine) as session:
        items = {item.external_id: item for item in session.exec(select(Item))}
        references = {item.id for item in items.values() if item.status == ItemStatus.REFERENCE.value}
        assert len(references) == 60
        for key in (plants["exact"]["id"], plants["paraphrase"]["id"]):
            assert items[key].status == ItemStatus.CONTAMINATED.value, key
            assert items[key].duplicate_of in references
        assert items["FRESH"].status == ItemStatus.UNIQUE.value
    again = run_curation(engine, settings, encoder=encoder)
    assert (again.decided, again.references) == (0, 0)
