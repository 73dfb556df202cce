"""Shared by the run, exposure and audit tests: a released eval over a slice of the CISA KEV
catalogue (curated with the hashing encoder), registered models and endpoints, and tokens."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from schemas.common import utcnow
from schemas.evals import EvalCreate, Split
from schemas.model_registry import EndpointCreate, ModelCreate, TrainsOnInputs
from schemas.release import Release, ReleaseItem
from service.core.db import write_transaction
from service.core.tokens import create_token
from service.evals.definitions import create_eval
from service.evals.refresh import refresh_eval
from service.runs.model_registry import create_endpoint, create_model
from tests.conftest import TEST_SECRET_KEY, TOKEN_NUMBERS
from tests.eval_support import ingest_and_curate, kev_records

KEY = b"s" * 32
REFRESH_AT = datetime.fromisoformat("2024-06-01T03:00:00+00:00")


@dataclass(frozen=True)
class Released:
    """A released eval: its release, and the item ids of each split."""

    release: Release
    dev: list[int]
    sealed: list[int]


def released_eval(
    engine: Engine, *, count: int = 40, name: str = "ops", sealed_fraction: float = 0.3, budget: int = 2, records: list[dict[str, Any]] | None = None
) -> Released:
    """Ingest `count` KEV records of early 2024 (or `records`, KEV records dated before June
    2024), curate them, define an eval taking every unique item, and write its first release."""
    ingest_and_curate(engine, "kev", kev_records(since="2024-01-01", until="2024-05-01")[:count] if records is None else records)
    with write_transaction(engine) as session:
        data = EvalCreate(name=name, sources=["kev"], approval_policy="auto", max_age_days=None, sealed_fraction=sealed_fraction, sealed_read_budget=budget, target_size=500)
        create_eval(session=session, data=data, secret_key=TEST_SECRET_KEY, actor="test", key=KEY)
    release = refresh_eval(engine, name=name, at=REFRESH_AT, secret_key=TEST_SECRET_KEY, actor="test").release
    with Session(engine) as session:
        rows = session.exec(select(ReleaseItem.item_id, ReleaseItem.split).where(ReleaseItem.release_id == release.id).order_by(col(ReleaseItem.item_id))).all()
    return Released(release, [i for i, s in rows if s == Split.DEV.value], [i for i, s in rows if s == Split.SEALED.value])


def register(engine: Engine, *, model: str = "m1", endpoints: dict[str, TrainsOnInputs] | None = None, checked_days_ago: float | None = 1.0) -> None:
    """Register `model` and endpoints named after their terms (`<model>-<terms>` by default)."""
    wanted = endpoints if endpoints is not None else {f"{model}-{terms.value}": terms for terms in TrainsOnInputs}
    with write_transaction(engine) as session:
        create_model(session=session, data=ModelCreate(name=model, provider="acme", training_cutoff=datetime(2023, 12, 1).date()), actor="test")
    for endpoint, terms in wanted.items():
        checked = utcnow() - timedelta(days=checked_days_ago) if checked_days_ago is not None and terms is not TrainsOnInputs.UNKNOWN else None
        data = EndpointCreate(name=endpoint, base_url="https://api.acme.test/v1", provider="acme", model=model, trains_on_inputs=terms, terms_checked_at=checked, retention_days=30)
        with write_transaction(engine) as session:
            create_endpoint(session=session, data=data, actor="test")


def token(engine: Engine, *scopes: str, name: str | None = None) -> str:
    """A new token with `scopes`; without `name`, a fresh one (names are unique among active tokens)."""
    with write_transaction(engine) as session:
        plaintext, _ = create_token(session=session, name=name or f"t-{next(TOKEN_NUMBERS)}", scopes=list(scopes))
    return plaintext


def auth(value: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {value}"}
