"""Per-item results of a model on a registered public corpus (a reference source), so that the
temporal-split report runs on any dated benchmark, not only on an eval's runs.

One row per (model, item): a benchmark item has one score per model. Uploading the same score
again is a no-op; a different one is refused unless the upload says `replace`.
"""

from __future__ import annotations

from datetime import datetime

import pydantic
from pydantic import BaseModel, StrictBool
from sqlmodel import Field, SQLModel, UniqueConstraint

from schemas.common import UTCDateTime, utcnow


class CorpusResult(SQLModel, table=True):
    """A model's score on one item of a public corpus, with the share of people who solved it when known."""

    __tablename__ = "corpus_result"
    __table_args__ = (UniqueConstraint("model_id", "item_id", name="uq_corpus_result_model_item"),)

    id: int | None = Field(default=None, primary_key=True)
    model_id: int = Field(foreign_key="model.id", index=True)
    item_id: int = Field(foreign_key="item.id", index=True)
    score: float
    human_success: float | None = None
    actor: str = Field(max_length=160)
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    updated_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)


class CorpusResultIn(BaseModel):
    """One item's result, the item named by the corpus's own id (`external_id`, e.g. a CVE id)."""

    external_id: str = pydantic.Field(min_length=1, max_length=255)
    score: float = pydantic.Field(ge=0.0, le=1.0, allow_inf_nan=False, description="The model's score on the item, in [0, 1] (1: solved).")
    human_success: float | None = pydantic.Field(default=None, ge=0.0, le=1.0, description="Share of people who solved the item, when known.")


class CorpusResultsPost(BaseModel):
    """`POST /v1/corpora/{name}/results`: one model's per-item results on the corpus. `replace`
    lets a different score overwrite a stored one (otherwise 409 names the items)."""

    model: str = pydantic.Field(description="A registered model's name.")
    results: list[CorpusResultIn] = pydantic.Field(min_length=1, max_length=50_000)
    replace: StrictBool = False


class CorpusResultError(BaseModel):
    """One refused result: its `position` in `results` (0-based), a `reason` code and a `detail`."""

    position: int
    external_id: str
    reason: str
    detail: str


class CorpusResultsAccepted(BaseModel):
    """What an upload did: `stored` new results, `replaced` changed ones, `unchanged` repeats;
    `rejected` results are listed in `errors` (the rest of the batch is kept). `scored`: the
    model's results on the corpus now, of `corpus_items`."""

    corpus: str
    model: str
    stored: int
    replaced: int
    unchanged: int
    rejected: int
    errors: list[CorpusResultError]
    scored: int
    corpus_items: int
