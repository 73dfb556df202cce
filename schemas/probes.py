"""Completion probes as the service keeps them: what was probed (an eval's release or a public
corpus), through which endpoint, how far the work has got, and the report when done.

A probe of an eval's items is also a dev run (`run_id`): every item it sends is in the exposure
ledger before the first request goes out. A probe of a public corpus has no run.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

import pydantic
from pydantic import BaseModel, SecretStr, StrictBool, model_validator
from sqlalchemy import Column, String, Text
from sqlmodel import Field, SQLModel

from schemas.common import RowId, UTCDateTime, json_column_type, utcnow
from schemas.evidence import CutPolicy, ProbeReport
from schemas.probe_tests import ProbeMetric, ProbeTest, ProbeTestChoice


class ProbeStatus(StrEnum):
    """`queued` → `running` → `done` or `failed`."""

    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


class Probe(SQLModel, table=True):
    """One probe. `test` is the test chosen (`schemas.probe_tests.ProbeTest`); a reference test's
    reference model and endpoint, and its items' dev run of the reference model
    (`reference_run_id`), are recorded beside the target's. `item_ids` are the goldenset item ids
    sent, in the order sent; `report` is the `schemas.evidence.ProbeReport` as JSON once `done`. No
    item text and no credential is stored here."""

    id: int | None = Field(default=None, primary_key=True)
    eval_id: int | None = Field(default=None, foreign_key="eval.id", index=True)
    release_id: int | None = Field(default=None, foreign_key="release.id")
    source_id: int | None = Field(default=None, foreign_key="source.id", index=True)
    model_id: int = Field(foreign_key="model.id", index=True)
    endpoint_id: int = Field(foreign_key="endpoint.id", index=True)
    run_id: int | None = Field(default=None, foreign_key="run.id")
    test: str = Field(default=ProbeTest.COMPLETION.value, sa_type=String(24))
    reference_model_id: int | None = Field(default=None, foreign_key="model.id")
    reference_endpoint_id: int | None = Field(default=None, foreign_key="endpoint.id")
    reference_run_id: int | None = Field(default=None, foreign_key="run.id")
    dataset: str = Field(max_length=255)
    split: str = Field(max_length=64)
    status: str = Field(default=ProbeStatus.QUEUED.value, sa_type=String(16), index=True)
    settings: dict[str, Any] = Field(default_factory=dict, sa_column=Column(json_column_type(), nullable=False))
    item_ids: list[int] = Field(default_factory=list, sa_column=Column(json_column_type(), nullable=False))
    total: int = 0
    done: int = 0
    report: dict[str, Any] | None = Field(default=None, sa_column=Column(json_column_type(), nullable=True))
    error: str | None = Field(default=None, sa_type=Text)
    actor: str = Field(max_length=160)
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    started_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    finished_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    heartbeat_at: datetime | None = Field(default=None, sa_type=UTCDateTime)


TEST_HELP = (
    "completion (greedy text through chat completions), logprob (the endpoint's log-probabilities of each item's whole text), "
    "reference_logprob (those compared with a reference endpoint's), or auto (default): the strongest the endpoints' "
    "recorded logprobs allow."
)
PRIMARY_HELP = "The metric the summary speaks of (default: levenshtein, min_k_plus_plus where top-k came back else min_k, reference_gap, by test)."


class ProbeCreate(BaseModel):
    """`POST /v1/probes`: probe `model` through `endpoint` on an eval's dev items (`eval`, with
    `release`) or on a registered public corpus (`corpus`); exactly one of the two.

    `test` picks the test (`schemas.probe_tests.ProbeTestChoice`: default `auto`, the strongest the
    endpoints allow); `reference_endpoint` (serving `reference_model`) is the reference test's,
    held to every rule the target's endpoint is (the bare-model guard, the gate, the ledger).

    `limit` caps the items sent, drawn evenly from both sides of the model's training cutoff (a
    fixed sample: the same request probes the same items). `allow_exposure` accepts sending an
    eval's items to an endpoint whose terms fail the gate (it trains on inputs, its terms are
    unknown, unchecked or stale): they are then marked exposed and leave the eval at its next
    refresh. `api_key` (`reference_api_key` for the reference) is held in memory for this probe
    only, never stored or logged; without it the service reads `GOLDENSET_ENDPOINT_KEY_<ENDPOINT>`
    from its environment.
    """

    # Exactly one of `eval` and `corpus`, stated in the document: each branch requires its own
    # member as text, so giving both (or neither) matches no branch or two.
    model_config = pydantic.ConfigDict(
        extra="forbid",
        json_schema_extra={"oneOf": [{"required": ["eval"], "properties": {"eval": {"type": "string"}}}, {"required": ["corpus"], "properties": {"corpus": {"type": "string"}}}]},
    )

    eval: str | None = None
    release: RowId | str = pydantic.Field(default="latest", description="A release number, or 'latest' (evals only).")
    corpus: str | None = pydantic.Field(default=None, description="A registered public corpus (a reference source).")
    model: str
    endpoint: str
    limit: int | None = pydantic.Field(default=None, ge=4, le=20_000)
    cut_policy: CutPolicy = CutPolicy()
    alpha: float = pydantic.Field(default=0.05, gt=0.0, lt=1.0)
    test: ProbeTestChoice = pydantic.Field(default=ProbeTestChoice.AUTO, description=TEST_HELP)
    reference_endpoint: str | None = pydantic.Field(default=None, description="The reference test's endpoint: a registered endpoint that gives log-probabilities.")
    reference_model: str | None = pydantic.Field(default=None, description="The registered model the reference endpoint serves (default: the one it is registered for).")
    reference_api_key: SecretStr | None = None
    primary_metric: ProbeMetric | None = pydantic.Field(default=None, description=PRIMARY_HELP)
    allow_exposure: StrictBool = False
    dataset_name: str | None = pydantic.Field(default=None, max_length=255, description="The dataset's name in the prompt (default: the eval's or corpus's name).")
    split_name: str | None = pydantic.Field(default=None, max_length=64, description="The split's name in the prompt (default: 'dev' for an eval, 'test' for a corpus).")
    remote_model: str | None = pydantic.Field(default=None, max_length=255, description="The model name the endpoint expects (default: the registered model's name).")
    concurrency: int = pydantic.Field(default=4, ge=1, le=64)
    timeout_seconds: float = pydantic.Field(default=60.0, gt=0.0, le=600.0)
    max_attempts: int = pydantic.Field(default=4, ge=1, le=10)
    api_key: SecretStr | None = None

    @model_validator(mode="after")
    def _one_target(self) -> ProbeCreate:
        if (self.eval is None) == (self.corpus is None):
            raise ValueError("give exactly one of 'eval' (an eval's dev items) or 'corpus' (a registered public corpus)")
        return self


class ProbeRead(BaseModel):
    """A probe: what it probes, the test it runs (with a reference test's reference model,
    endpoint and dev run), its progress (`total` requests, counting the reference's), and its
    `report` once `status` is `done` (`error` says why when `failed`). `exposes_items`: whether its
    runs marked its items exposed."""

    id: int
    status: ProbeStatus
    eval: str | None
    release: int | None
    corpus: str | None
    model: str
    endpoint: str
    run_id: int | None
    test: ProbeTest
    reference_model: str | None = None
    reference_endpoint: str | None = None
    reference_run_id: int | None = None
    dataset: str
    split: str
    total: int
    done: int
    exposes_items: bool
    settings: dict[str, Any]
    error: str | None
    actor: str
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    report: ProbeReport | None = None
