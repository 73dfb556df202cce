"""Shared by the evidence tests of the service: the CISA KEV catalog registered as a public corpus
(a reference source), a model with a training cutoff, and endpoints with each kind of terms."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

from sqlalchemy.engine import Engine

from ingest.mapping import load_mapping
from schemas.common import utcnow
from schemas.model_registry import EndpointCreate, ModelCreate, TrainsOnInputs
from schemas.source import SourceCreate
from service.core.db import write_transaction
from service.runs.model_registry import create_endpoint, create_model
from service.sources.definitions import create_source
from tests.dedup_support import KEV_MAPPING, ingest


def register_corpus(engine: Engine, name: str, records: list[dict[str, Any]]) -> None:
    """Register `records` (KEV JSON objects) as the public corpus `name`, as `goldenset reference add` does."""
    mapping = load_mapping(KEV_MAPPING).model_copy(update={"format": "jsonl", "records": None})
    with write_transaction(engine) as session:
        document = mapping.model_dump(mode="json", exclude_defaults=True)
        create_source(session=session, data=SourceCreate(name=name, kind="reference", mapping=document), secret_key="x" * 40, actor="test")
    summary = ingest(engine, name, records, mapping)
    assert summary.rejected == 0, summary.errors[:3]


def register_model(engine: Engine, name: str, *, cutoff: date | None, base_url: str = "https://api.acme.test/v1", endpoints: dict[str, TrainsOnInputs] | None = None) -> None:
    """Register model `name` with `cutoff` and its endpoints (name → terms), terms checked a day ago."""
    with write_transaction(engine) as session:
        create_model(session=session, data=ModelCreate(name=name, provider="acme", training_cutoff=cutoff), actor="test")
    for endpoint, terms in (endpoints or {}).items():
        checked = utcnow() - timedelta(days=1) if terms is not TrainsOnInputs.UNKNOWN else None
        data = EndpointCreate(name=endpoint, base_url=base_url, provider="acme", model=name, trains_on_inputs=terms, terms_checked_at=checked)
        with write_transaction(engine) as session:
            create_endpoint(session=session, data=data, actor="test")
