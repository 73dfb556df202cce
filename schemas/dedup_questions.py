"""Dedup questions: the pairs curation asks a curator about (`curation.dedup.questions`), stored
with the evidence that decided and the curator's answer, and their API shapes (`GET
/v1/dedup/questions`, `POST /v1/dedup/questions/{id}/answer`)."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

import pydantic
from pydantic import BaseModel, ConfigDict
from sqlalchemy import Column, Float, String, Text
from sqlmodel import Field, SQLModel

from schemas.common import UTCDateTime, json_column_type, utcnow
from schemas.item import ItemRead


class QuestionState(StrEnum):
    """Where a dedup question stands: `open` (waits for a curator), `answered` (ruled), or
    `withdrawn` (curation decided the item again and no longer asks, or a ruling on the pair
    made by other means settled it)."""

    OPEN = "open"
    ANSWERED = "answered"
    WITHDRAWN = "withdrawn"


class QuestionRuling(StrEnum):
    """A curator's answer: `same` (one incident: the later item becomes a duplicate of the earlier)
    or `distinct` (two incidents: the pair is ruled apart and never matched again)."""

    SAME = "same"
    DISTINCT = "distinct"


class DedupQuestion(SQLModel, table=True):
    """A pair curation asks a curator about (`curation.dedup.questions`): the item decided
    (`item_id`, kept `unique` while the question is open) and the earlier item it may repeat
    (`other_id`); the judge's probability `p_same`; `rules_outcome`, what the rules alone decided
    (`duplicate`: a paraphrase merge the judge does not confirm; `unique`: a near pair the judge
    finds likely the same); `evidence`, the rule, stage, scores and pair features that decided.
    At most one question per item is open. An answer records the `ruling`, the token that gave it
    (`ruled_by`, null from the local CLI), when and a `note`."""

    __tablename__ = "dedup_question"

    id: int | None = Field(default=None, primary_key=True)
    item_id: int = Field(foreign_key="item.id", index=True)
    other_id: int = Field(foreign_key="item.id", index=True)
    p_same: float = Field(sa_column=Column(Float, nullable=False))
    rules_outcome: str = Field(sa_type=String(16))
    evidence: dict[str, Any] = Field(default_factory=dict, sa_column=Column(json_column_type(), nullable=False))
    asked_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    state: str = Field(default=QuestionState.OPEN.value, sa_type=String(16), index=True)
    ruling: str | None = Field(default=None, sa_type=String(16))
    ruled_by: int | None = Field(default=None)
    ruled_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    note: str | None = Field(default=None, sa_type=Text)


class QuestionEvidence(BaseModel):
    """What the rules and the judge saw of a question's pair: the body and title embedding
    cosines, the word-shingle Jaccard that MinHash estimates, the character similarity of bodies
    and titles, and what the two titles name differently (`title_differences`: another version,
    CVE, module, host, template target or scope; empty when they name nothing different)."""

    model_config = ConfigDict(extra="forbid")

    body_cosine: float | None = None
    title_cosine: float | None = None
    minhash: float | None = None
    body_characters: float | None = None
    title_characters: float | None = None
    title_differences: list[str] = Field(default_factory=list)


class DedupQuestionRead(BaseModel):
    """A dedup question (`GET /v1/dedup/questions`): the two items side by side (`item`, the one
    curation asked about, and `other`, the earlier item it may repeat), each shaped for the reader
    (a sealed item's content withheld, `sealed: true`); `p_same`, the judge's probability that they
    are one incident; `rules_outcome` (`duplicate` or `unique`) and `why` they were asked; the
    `rule` and `stage` that decided (or saw the pair near); the pair `features` the judge weighed
    and the matched `evidence`. Features and evidence are left out (empty, null) when either item
    is withheld: its scores beside the other's text would tell what it is like. Answered
    questions carry the `ruling`, `ruled_by` (token id), `ruled_at` and `note`."""

    model_config = ConfigDict(extra="forbid")

    id: int
    state: QuestionState
    asked_at: datetime
    item: ItemRead
    other: ItemRead
    p_same: float
    rules_outcome: str
    why: str
    rule: str | None = None
    stage: str | None = None
    features: dict[str, float] = Field(default_factory=dict)
    evidence: QuestionEvidence | None = None
    ruling: QuestionRuling | None = None
    ruled_by: int | None = None
    ruled_at: datetime | None = None
    note: str | None = None


class DedupQuestionPage(BaseModel):
    """One page of dedup questions, oldest asked first; pass `next_cursor` as `cursor` for the next (null on the last)."""

    model_config = ConfigDict(extra="forbid")

    questions: list[DedupQuestionRead]
    next_cursor: str | None = None


class QuestionAnswer(BaseModel):
    """`POST /v1/dedup/questions/{id}/answer`: the `ruling` (`same` or `distinct`) and an optional `note`."""

    model_config = ConfigDict(extra="forbid")

    ruling: QuestionRuling
    note: str = pydantic.Field(default="", max_length=2000, description="Why (optional): kept with the ruling and in the audit trail.")
