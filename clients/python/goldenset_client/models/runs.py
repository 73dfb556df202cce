"""The model registry, runs with their results and exposure reports, and the audit trail
(`/v1/models`, `/v1/endpoints`, `/v1/evals/{name}/runs`, `/v1/runs`, `/v1/audit`)."""

from datetime import date, datetime
from typing import Any, Literal

from pydantic import Field

from goldenset_client.models._base import _Request, _Response


class AuditEventRead(_Response):
    """An audit event as `GET /v1/audit` shows it; `sealed` marks events about the sealed slice (its
    reads, sealed runs, refusals), which a reviewer should look at first."""

    id: int
    actor: str
    token_id: int | None = None  # the acting token's id: names are labels, ids identities
    action: str
    object_type: str
    object_id: str | None
    count: int
    at: datetime
    sealed: bool
    details: dict[str, Any]


class AuditPage(_Response):
    """One page of audit events, newest first; pass `next_cursor` as `cursor` for the next."""

    events: list[AuditEventRead]
    next_cursor: str | None


Augmentation = Literal["retrieval", "web_search", "tools", "other"]
LogprobSupport = Literal["none", "completions_echo", "tgi_prefill", "chat"]


TrainsOnInputs = Literal["yes", "no", "unknown"]


class EndpointCreate(_Request):
    """`POST /v1/endpoints`. Terms default to `unknown`, which exposes every item sent there.
    `terms_checked_at` defaults to now when `trains_on_inputs` is given as yes or no;
    `checked_by` to the calling token."""

    name: str
    base_url: str
    provider: str = ""
    model: str
    trains_on_inputs: TrainsOnInputs = "unknown"
    retention_days: int | None = None
    terms_url: str = ""
    terms_checked_at: datetime | None = None
    checked_by: str | None = None
    augmented: bool | None = None
    augmentations: list[Augmentation] = Field(default_factory=list)
    logprobs: LogprobSupport = "none"


class EndpointRead(_Response):
    """An endpoint with its terms; `terms_age_days` is how long ago they were checked (null: never),
    `sealed_allowed` whether a sealed run may go there now (terms permitting), `logprobs` how it
    gives log-probabilities."""

    id: int
    name: str
    base_url: str
    provider: str
    model: str
    trains_on_inputs: TrainsOnInputs
    retention_days: int | None
    terms_url: str
    terms_checked_at: datetime | None
    checked_by: str
    terms_age_days: int | None
    sealed_allowed: bool
    augmented: bool
    augmentations: list[Augmentation]
    logprobs: LogprobSupport
    created_at: datetime
    updated_at: datetime


class EndpointShare(_Response):
    """What one endpoint saw of a release: distinct items (and how many of them sealed), their share of
    the release, the runs, and the endpoint's terms now."""

    endpoint: str
    provider: str
    model: str
    trains_on_inputs: str
    terms_checked_at: datetime | None
    runs: int
    items: int
    sealed_items: int
    share: float


class EndpointUpdate(_Request):
    """`PATCH /v1/endpoints/{name}`: the fields to change. Changing the terms without giving
    `terms_checked_at` records them as checked now, by the calling token."""

    base_url: str | None = None
    provider: str | None = None
    model: str | None = None
    trains_on_inputs: TrainsOnInputs | None = None
    retention_days: int | None = None
    terms_url: str | None = None
    terms_checked_at: datetime | None = None
    checked_by: str | None = None
    augmented: bool | None = None
    augmentations: list[Augmentation] | None = None
    logprobs: LogprobSupport | None = None


class ReleaseExposure(_Response):
    release: int
    items: int
    exposed_items: int
    endpoints: list[EndpointShare]


class EvalExposure(_Response):
    """`GET /v1/evals/{name}/exposure`: per release, which endpoints saw what share of it, under which
    terms. `exposed_items`: the release's items marked exposed (by any eval's runs)."""

    eval: str
    releases: list[ReleaseExposure]


class ExposureRead(_Response):
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


class ItemExposures(_Response):
    """`GET /v1/items/{id}/exposures`: every run that served the item, oldest first, and whether it is
    marked exposed (it leaves every eval at the next refresh)."""

    item_id: int
    exposed_at: datetime | None
    exposed_reason: str | None
    exposures: list[ExposureRead]


class ModelCreate(_Request):
    """`POST /v1/models`."""

    name: str
    provider: str = ""
    training_cutoff: date | None = None
    release_date: date | None = None
    notes: str = ""


class ModelRead(_Response):
    id: int
    name: str
    provider: str
    training_cutoff: date | None
    release_date: date | None
    notes: str
    created_at: datetime
    updated_at: datetime


class ModelUpdate(_Request):
    """`PATCH /v1/models/{name}`: the fields to change."""

    provider: str | None = None
    training_cutoff: date | None = None
    release_date: date | None = None
    notes: str | None = None


class ResultIn(_Request):
    item_id: int
    score: float
    human_success: float | None = None


class ResultRead(_Response):
    item_id: int
    occurred_at: datetime
    score: float
    human_success: float | None
    created_at: datetime


class ResultsAccepted(_Response):
    """`stored`: new scores; `unchanged`: scores already stored with the same values; `scored` and
    `remaining`: the run's items with and without a score now."""

    run_id: int
    stored: int
    unchanged: int
    scored: int
    remaining: int


class ResultsPost(_Request):
    """`POST /v1/runs/{id}/results`: scores of items of the run. Each item is scored once: the same
    score again is accepted (a retried request), a different one refused (409)."""

    results: list[ResultIn]


class RunCreate(_Request):
    """`POST /v1/evals/{name}/runs`: which model, through which endpoint, on what."""

    model: str
    endpoint: str
    release: int | str = "latest"
    split: str = "dev"
    occurred_after: datetime | None = None


class RunItemRead(_Response):
    """One item to evaluate, as released (frozen content)."""

    item_id: int
    split: str
    occurred_at: datetime
    content_digest: str
    content: dict[str, Any]


class RunItemPage(_Response):
    """One page of a run's items; pass `next_cursor` as `cursor` for the next."""

    run_id: int
    canary: str
    items: list[RunItemRead]
    next_cursor: str | None


class RunRead(_Response):
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
    token_id: int | None = None  # the token that started the run; `actor` is its name, a label
    created_at: datetime
    canary: str


class RunStarted(_Response):
    """`POST /v1/evals/{name}/runs`: the run and every item to evaluate. `warning` says when the items
    were sent to an endpoint that may train on them (they leave the eval at its next refresh)."""

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
    token_id: int | None = None  # the token that started the run; `actor` is its name, a label
    created_at: datetime
    canary: str
    warning: str | None = None
    items: list[RunItemRead]


class ScoreInterval(_Response):
    """The mean score with a two-sided interval at `confidence`. `method`: `wilson` (every score 0 or
    1: the Wilson score interval) or `bootstrap` (percentile bootstrap of the mean, fixed seed)."""

    n: int
    mean: float | None
    low: float | None
    high: float | None
    confidence: float
    method: str


class RunSummary(_Response):
    """`GET /v1/runs/{id}`: the run with its score so far."""

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
    token_id: int | None = None  # the token that started the run; `actor` is its name, a label
    created_at: datetime
    canary: str
    scored: int
    remaining: int
    score: ScoreInterval
    human_success_mean: float | None
    human_success_n: int
