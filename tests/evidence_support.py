"""Shared by the evidence tests of the service: the CISA KEV catalog registered as a public corpus
(a reference source), a model with a training cutoff, and endpoints with each kind of terms; and for
the public-inflation report, an eval and a corpus of a few hundred items each with simulated
models' scores posted over HTTP."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

import httpx
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from ingest.mapping import load_mapping
from schemas.common import utcnow
from schemas.item import Item
from schemas.model_registry import Augmentation, EndpointCreate, LogprobSupport, ModelCreate, TrainsOnInputs
from schemas.source import Source, SourceCreate
from service.core.db import write_transaction
from service.runs.model_registry import create_endpoint, create_model
from service.sources.definitions import create_source
from tests.dedup_support import KEV_MAPPING, ingest
from tests.eval_support import kev_records
from tests.run_support import released_eval


def register_corpus(engine: Engine, name: str, records: list[dict[str, Any]]) -> None:
    """Register `records` (KEV JSON objects) as the public corpus `name`, as `goldenset reference add` does."""
    mapping = load_mapping(KEV_MAPPING).model_copy(update={"format": "jsonl", "records": None})
    with write_transaction(engine) as session:
        document = mapping.model_dump(mode="json", exclude_defaults=True)
        create_source(session=session, data=SourceCreate(name=name, kind="reference", mapping=document), secret_key="x" * 40, actor="test")
    summary = ingest(engine, name, records, mapping)
    assert summary.rejected == 0, summary.errors[:3]


def register_model(
    engine: Engine,
    name: str,
    *,
    cutoff: date | None,
    base_url: str = "https://api.acme.test/v1",
    endpoints: dict[str, TrainsOnInputs] | None = None,
    logprobs: LogprobSupport = LogprobSupport.NONE,
    augmentations: Sequence[Augmentation] = (),
) -> None:
    """Register model `name` with `cutoff` and its endpoints (name → terms), terms checked a day
    ago, each giving log-probabilities as `logprobs` says and with `augmentations`."""
    with write_transaction(engine) as session:
        create_model(session=session, data=ModelCreate(name=name, provider="acme", training_cutoff=cutoff), actor="test")
    for endpoint, terms in (endpoints or {}).items():
        checked = utcnow() - timedelta(days=1) if terms is not TrainsOnInputs.UNKNOWN else None
        data = EndpointCreate(
            name=endpoint, base_url=base_url, provider="acme", model=name, trains_on_inputs=terms, terms_checked_at=checked, logprobs=logprobs, augmentations=list(augmentations)
        )
        with write_transaction(engine) as session:
            create_endpoint(session=session, data=data, actor="test")


PUBLIC_CORPUS = "public-kev"


@dataclass(frozen=True)
class InflationBench:
    """An eval `ops` and the public corpus `public-kev`: the eval's dev item ids (ascending) and
    the corpus's items as (id, external id), ascending by id."""

    dev: list[int]
    sealed: list[int]
    corpus: list[tuple[int, str]]


def inflation_bench(engine: Engine, models: Sequence[str], *, eval_records: int = 430, corpus_records: int = 300) -> InflationBench:
    """The last `eval_records` KEV records before May 2024 as the eval `ops` (a fifth of the near
    groups sealed: about 300 dev items of 430), the first `corpus_records` of the catalog as the public
    corpus, and `models` registered, each with an endpoint `<model>-api` that does not train on inputs."""
    released = released_eval(engine, records=kev_records(until="2024-05-01")[-eval_records:], sealed_fraction=0.2)
    register_corpus(engine, PUBLIC_CORPUS, kev_records()[:corpus_records])
    for model in models:
        register_model(engine, model, cutoff=None, endpoints={f"{model}-api": TrainsOnInputs.NO})
    with Session(engine) as session:
        corpus = session.exec(select(Source).where(Source.name == PUBLIC_CORPUS)).one()
        items = session.exec(select(Item.id, Item.external_id).where(Item.source_id == corpus.id).order_by(col(Item.id))).all()
    return InflationBench(dev=released.dev, sealed=released.sealed, corpus=[(item_id, str(external_id)) for item_id, external_id in items if item_id is not None])


def post_scores(client: httpx.Client, bench: InflationBench, model: str, private: Iterable[float], public: Iterable[float]) -> None:
    """A dev run of `model` on `ops` with `private[k]` as its score on the k-th dev item, and
    `public[k]` uploaded as its result on the k-th corpus item, both over HTTP."""
    run = client.post("/v1/evals/ops/runs", json={"model": model, "endpoint": f"{model}-api"})
    assert run.status_code == 201, run.text
    assert sorted(item["item_id"] for item in run.json()["items"]) == bench.dev
    results = [{"item_id": item_id, "score": float(score)} for item_id, score in zip(bench.dev, private, strict=True)]
    assert client.post(f"/v1/runs/{run.json()['id']}/results", json={"results": results}).status_code == 200
    body = {"model": model, "results": [{"external_id": external_id, "score": float(score)} for (_, external_id), score in zip(bench.corpus, public, strict=True)]}
    uploaded = client.post(f"/v1/corpora/{PUBLIC_CORPUS}/results", json=body)
    assert uploaded.status_code == 200 and uploaded.json()["rejected"] == 0, uploaded.text
