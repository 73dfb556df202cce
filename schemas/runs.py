"""Runs, the exposure ledger and results.

A run sends one split of one release of an eval to one model endpoint. Every item it serves is a
`RunItem`: the exposure ledger row recording that the item went to that endpoint, in that run,
from that release, at that time, under the endpoint's terms as they stood. Results are per item,
so the item's incident date (`RunItem.occurred_at`) and the model's training cutoff (run → model)
are reachable from every score.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

import pydantic
from pydantic import BaseModel
from sqlalchemy import String, UniqueConstraint
from sqlmodel import Field, SQLModel

from schemas.common import Instant, RowId, UTCDateTime, utcnow
from schemas.scale import RunOnScale


class Run(SQLModel, table=True):
    """One run of a model over a release's split. `idempotency_key` (unique per actor) makes a
    retried start return the run already started. `token_id` is the token that started it (None:
    the command line, or a run started before tokens were recorded by id): re-reading a sealed
    run's items and posting its results are checked against it, `actor` is only a label."""

    __table_args__ = (UniqueConstraint("actor", "idempotency_key", name="uq_run_actor_idempotency_key"),)

    id: int | None = Field(default=None, primary_key=True)
    eval_id: int = Field(foreign_key="eval.id", index=True)
    release_id: int = Field(foreign_key="release.id", index=True)
    model_id: int = Field(foreign_key="model.id", index=True)
    endpoint_id: int = Field(foreign_key="endpoint.id", index=True)
    split: str = Field(sa_type=String(8))
    actor: str = Field(max_length=160)
    token_id: int | None = None
    idempotency_key: str | None = Field(default=None, max_length=128)
    occurred_after: datetime | None = Field(default=None, sa_type=UTCDateTime)
    item_count: int = 0
    # The endpoint's terms when the run started: what the ledger judged exposure by.
    trains_on_inputs: str = Field(sa_type=String(8))
    terms_checked_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    exposes_items: bool = False
    # Whether the endpoint was augmented (retrieval, web search, tools) when the run started.
    augmented: bool = False
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, index=True)


class RunItem(SQLModel, table=True):
    """The exposure ledger: one item served by one run (so sent to the run's endpoint)."""

    __tablename__ = "run_item"
    __table_args__ = (UniqueConstraint("run_id", "item_id", name="uq_run_item_run_item"),)

    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="run.id", index=True)
    item_id: int = Field(foreign_key="item.id", index=True)
    endpoint_id: int = Field(foreign_key="endpoint.id", index=True)
    release_id: int = Field(foreign_key="release.id", index=True)
    split: str = Field(sa_type=String(8))
    occurred_at: datetime = Field(sa_type=UTCDateTime)
    content_digest: str = Field(max_length=64)
    at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)


class Result(SQLModel, table=True):
    """A model's score on one item of a run, with the human success rate on it when known."""

    __table_args__ = (UniqueConstraint("run_id", "item_id", name="uq_result_run_item"),)

    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="run.id", index=True)
    item_id: int = Field(foreign_key="item.id", index=True)
    score: float
    human_success: float | None = None
    actor: str = Field(max_length=160)
    token_id: int | None = None
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)


class RunCreate(BaseModel):
    """`POST /v1/evals/{name}/runs`: which model, through which endpoint, on what."""

    model: str = pydantic.Field(description="A registered model's name.")
    endpoint: str = pydantic.Field(description="A registered endpoint's name; it must serve `model`.")
    release: RowId | str = pydantic.Field(default="latest", description="A release number, or 'latest'.")
    split: str = pydantic.Field(default="dev", pattern=r"^(dev|sealed)$", description="`dev`, or `sealed` (sealed scope; gated and budgeted).")
    occurred_after: Instant | None = pydantic.Field(default=None, description="Only items that occurred at or after this time (with zone).")


class RunItemRead(BaseModel):
    """One item to evaluate, as released (frozen content)."""

    item_id: int
    split: str
    occurred_at: datetime
    content_digest: str
    content: dict[str, Any]


class RunRead(BaseModel):
    """A run: what was sent where, under which terms; `canary` marks every payload."""

    id: int
    eval: str
    release: int
    split: str
    model: str
    endpoint: str
    training_cutoff: date | None
    trains_on_inputs: str
    terms_checked_at: datetime | None
    exposes_items: bool
    augmented: bool
    occurred_after: datetime | None
    item_count: int
    actor: str
    token_id: int | None = pydantic.Field(default=None, description="The id of the token that started the run (null: the command line, or a run started before ids were recorded).")
    created_at: datetime
    canary: str


class RunStarted(RunRead):
    """`POST /v1/evals/{name}/runs`: the run and every item to evaluate. `warning` says when the
    items were sent to an endpoint that may train on them (they leave the eval at its next refresh)."""

    warning: str | None = None
    items: list[RunItemRead]


class RunItemPage(BaseModel):
    """One page of a run's items; pass `next_cursor` as `cursor` for the next."""

    run_id: int
    canary: str
    items: list[RunItemRead]
    next_cursor: str | None


class ResultIn(BaseModel):
    item_id: RowId
    score: float = pydantic.Field(ge=0.0, le=1.0, description="The model's score on the item, in [0, 1] (1: solved).")
    human_success: float | None = pydantic.Field(default=None, ge=0.0, le=1.0, description="Share of people who solved the item, when known.")


class ResultsPost(BaseModel):
    """`POST /v1/runs/{id}/results`: scores of items of the run. Each item is scored once: the
    same score again is accepted (a retried request), a different one refused (409)."""

    results: list[ResultIn] = pydantic.Field(min_length=1, max_length=10_000)


class ResultsAccepted(BaseModel):
    """`stored`: new scores; `unchanged`: scores already stored with the same values; `scored`
    and `remaining`: the run's items with and without a score now."""

    run_id: int
    stored: int
    unchanged: int
    scored: int
    remaining: int


class ResultRead(BaseModel):
    item_id: int
    occurred_at: datetime
    score: float
    human_success: float | None
    created_at: datetime


class ScoreInterval(BaseModel):
    """The mean score with a two-sided interval at `confidence`. `method`: `wilson` (every score 0
    or 1: the Wilson score interval) or `bootstrap` (percentile bootstrap of the mean, fixed seed)."""

    n: int
    mean: float | None
    low: float | None
    high: float | None
    confidence: float
    method: str


class RunSummary(RunRead):
    """`GET /v1/runs/{id}`: the run with its score so far."""

    scored: int
    remaining: int
    score: ScoreInterval
    human_success_mean: float | None
    human_success_n: int
    scale: RunOnScale | None = pydantic.Field(
        default=None,
        description="The run on its eval's newest common-scale fit (ability, equated score on the reference release); null for a sealed run or one the fit does not hold yet.",
    )


class ExposureRead(BaseModel):
    """One exposure of an item: the run that served it, where it went and under which terms."""

    run_id: int
    eval: str
    release: int
    split: str
    endpoint: str
    model: str
    trains_on_inputs: str
    exposes_items: bool
    at: datetime
    actor: str


class ItemExposures(BaseModel):
    """`GET /v1/items/{id}/exposures`: every run that served the item, oldest first, and whether
    it is marked exposed (it leaves every eval at the next refresh)."""

    item_id: int
    exposed_at: datetime | None
    exposed_reason: str | None
    exposures: list[ExposureRead]


class EndpointShare(BaseModel):
    """What one endpoint saw of a release: distinct items (and how many of them sealed), their
    share of the release, the runs, and the endpoint's terms now."""

    endpoint: str
    provider: str
    model: str
    trains_on_inputs: str
    terms_checked_at: datetime | None
    runs: int
    items: int
    sealed_items: int
    share: float


class ReleaseExposure(BaseModel):
    release: int
    items: int
    exposed_items: int
    endpoints: list[EndpointShare]


class EvalExposure(BaseModel):
    """`GET /v1/evals/{name}/exposure`: per release, which endpoints saw what share of it, under
    which terms. `exposed_items`: the release's items marked exposed (by any eval's runs)."""

    eval: str
    releases: list[ReleaseExposure]
