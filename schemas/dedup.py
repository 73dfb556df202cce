"""Dedup state: per-item fingerprints (with their recipe), cached embeddings, and the decisions
curation took, each with the stage, score and matched item that explain it."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel
from sqlalchemy import Column, Float, LargeBinary, String
from sqlmodel import Field, SQLModel

from schemas.common import UTCDateTime, json_column_type, utcnow


class DedupStage(StrEnum):
    """Which test decided: `exact` (normalised hash), `minhash` (near-verbatim), `embedding`
    (paraphrase), or `none` (nothing close enough: unique)."""

    EXACT = "exact"
    MINHASH = "minhash"
    EMBEDDING = "embedding"
    NONE = "none"


class ItemFingerprint(SQLModel, table=True):
    """An item's sketches. `recipe` names the normalisation, shingling and MinHash parameters
    (e.g. `n2;word3;p128;s1;affine32`); `minhash` is the serialised LeanMinHash; `body_key` and
    `title_key` point at cached embeddings of the item under `model_id`."""

    __tablename__ = "item_fingerprint"

    item_id: int = Field(foreign_key="item.id", primary_key=True)
    recipe: str = Field(max_length=64)
    minhash: bytes = Field(sa_column=Column(LargeBinary, nullable=False))
    model_id: str | None = Field(default=None, max_length=255)
    body_key: str | None = Field(default=None, max_length=64)
    title_key: str | None = Field(default=None, max_length=64)
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)


class Embedding(SQLModel, table=True):
    """A cached embedding, keyed by the sha256 of the exact text embedded and the model: the same
    text is never encoded twice by the same model."""

    text_hash: str = Field(max_length=64, primary_key=True)
    model_id: str = Field(max_length=255, primary_key=True)
    dim: int
    vector: bytes = Field(sa_column=Column(LargeBinary, nullable=False))
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)


class DedupDecision(SQLModel, table=True):
    """One curation decision about one item (the newest per item is in force)."""

    __tablename__ = "dedup_decision"

    id: int | None = Field(default=None, primary_key=True)
    item_id: int = Field(foreign_key="item.id", index=True)
    status: str = Field(sa_type=String(16))
    stage: str = Field(sa_type=String(16))
    score: float | None = Field(default=None, sa_column=Column(Float, nullable=True))
    matched_item_id: int | None = Field(default=None, foreign_key="item.id")
    decided_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    details: dict[str, Any] = Field(default_factory=dict, sa_column=Column(json_column_type(), nullable=False))


class DedupRead(BaseModel):
    """How dedup judged an item, as `GET /v1/items/{id}` shows it."""

    status: str
    duplicate_of: int | None = None
    stage: str | None = None
    score: float | None = None
    decided_at: datetime | None = None


class SimilarRead(BaseModel):
    """One item like another (`GET /v1/items/{id}/similar`, `POST /v1/dedup/check`), best first.

    `score` fuses `cosine` (body embeddings), `title_cosine` and `lexical` (character n-gram TF-IDF
    cosine over the short list); `jaccard` is MinHash's estimate of word 3-shingle Jaccard (None
    when the item has no sketch). `sealed`: the item is in (or bound for) a sealed slice, and its
    external id and title are withheld."""

    id: int
    external_id: str
    source: str
    title: str
    occurred_at: datetime
    status: str
    score: float
    cosine: float
    title_cosine: float
    jaccard: float | None
    lexical: float
    sealed: bool = False


class DedupCheck(BaseModel):
    """A text to check against everything curated (`POST /v1/dedup/check`); nothing is stored.
    `identity` is the record's `distinct_by` identity, if its source declares one."""

    title: str = Field(default="", max_length=10_000)
    input: str = Field(min_length=1, max_length=200_000)
    reference: str = Field(default="", max_length=200_000, description="Part of the exact fingerprint only; stored items' exact hashes cover it.")
    identity: str | None = Field(default=None, max_length=255)


class DedupCheckResult(BaseModel):
    """The verdict curation would give the text now: `status` `unique`, `duplicate` or `contaminated`;
    the `stage` that decided and its `score`; `duplicate_of` the cluster's root and `matched_item`
    the item actually matched; `details` the runner-up scores; `similar` the nearest items."""

    status: str
    stage: str
    score: float | None = None
    duplicate_of: int | None = None
    matched_item: int | None = None
    details: dict[str, Any] = Field(default_factory=dict)
    similar: list[SimilarRead] = Field(default_factory=list)
