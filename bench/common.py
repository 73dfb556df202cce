"""Helpers shared by the benchmarks: a migrated SQLite database, sources, and ingest of records."""

from __future__ import annotations

import os
from functools import partial
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from ingest.mapping import Mapping, parse_mapping
from ingest.readers import RawRecord
from schemas.source import Source
from service.core.db import make_engine, migrate, write_transaction
from service.sources.ingestion import ingest_records

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("GOLDENSET_DATA", ROOT.parent / "shared" / "data"))


def database(path: Path, *, fresh_decisions: bool = False) -> Engine:
    """A migrated SQLite database at `path`, kept between runs so cached embeddings are reused.
    With `fresh_decisions`, earlier dedup decisions and fingerprints are dropped (items go back to
    `candidate`), so a rerun decides everything again without encoding anything."""
    path.parent.mkdir(parents=True, exist_ok=True)
    engine = make_engine(f"sqlite:///{path}")
    migrate(engine)
    if fresh_decisions:
        with engine.begin() as connection:
            connection.exec_driver_sql("DELETE FROM dedup_decision")
            connection.exec_driver_sql("DELETE FROM item_fingerprint")
            connection.exec_driver_sql("UPDATE item SET status = 'candidate', duplicate_of = NULL")
    return engine


def ingest(engine: Engine, source_name: str, records: list[dict[str, Any]], mapping: dict[str, Any] | Mapping, *, workers: int = 1) -> None:
    """Store `records` into a source (created if new) through the normal ingest path (`workers`
    processes preparing records, as `goldenset ingest` does for a large file)."""
    parsed = mapping if isinstance(mapping, Mapping) else parse_mapping(mapping)
    with write_transaction(engine) as session:
        source = session.exec(select(Source).where(Source.name == source_name)).first()
        if source is None:
            source = Source(name=source_name, kind="file", mapping=parsed.model_dump(mode="json", exclude_defaults=True))
            session.add(source)
    raw = [RawRecord(i, f"index {i}", value=r) for i, r in enumerate(records)]
    ingest_records(units=partial(write_transaction, engine), source=source, records=raw, mapping=parsed, actor="bench", workers=workers)


def session(engine: Engine) -> Session:
    return Session(engine, expire_on_commit=False)
