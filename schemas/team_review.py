"""Team review of an eval's queue: reviewers' votes on items, the batches they claim, and what the
API answers about them (`curation.team_review`). A vote is open until its round is settled: by
agreement, by an adjudicator, or by any decision that moves the item out of review."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, Field
from sqlalchemy import Index, Text, UniqueConstraint, text
from sqlmodel import Field as ColumnField
from sqlmodel import SQLModel

from schemas.common import RowId, UTCDateTime, utcnow
from schemas.review import Decision

MAX_CLAIM = 200


class ReviewVote(SQLModel, table=True):
    """One reviewer's vote on an item in one eval's review. `settled_at` is set (with `outcome`, the
    decision the item got; none when it left review otherwise) when the round closes; a reviewer
    has at most one open vote per item and eval."""

    __tablename__ = "review_vote"
    __table_args__ = (
        Index("ix_review_vote_round", "eval_id", "item_id", "settled_at"),
        Index(
            "uq_review_vote_open",
            "eval_id",
            "item_id",
            "reviewer",
            unique=True,
            sqlite_where=text("settled_at IS NULL"),
            postgresql_where=text("settled_at IS NULL"),
        ),
    )

    id: int | None = ColumnField(default=None, primary_key=True)
    eval_id: int = ColumnField(foreign_key="eval.id", index=True)
    item_id: int = ColumnField(foreign_key="item.id", index=True)
    reviewer: str = ColumnField(max_length=160, index=True)
    decision: str = ColumnField(max_length=8)
    reason: str = ColumnField(default="", sa_type=Text)
    cast_at: datetime = ColumnField(default_factory=utcnow, sa_type=UTCDateTime)
    settled_at: datetime | None = ColumnField(default=None, sa_type=UTCDateTime)
    outcome: str | None = ColumnField(default=None, max_length=8)


class ReviewClaim(SQLModel, table=True):
    """A reviewer's claim on an item of an eval's queue, until `expires_at`: while it holds, the
    item counts as taken by them when batches are handed out."""

    __tablename__ = "review_claim"
    __table_args__ = (UniqueConstraint("eval_id", "item_id", "reviewer", name="uq_review_claim"), Index("ix_review_claim_item", "eval_id", "item_id"))

    id: int | None = ColumnField(default=None, primary_key=True)
    eval_id: int = ColumnField(foreign_key="eval.id", index=True)
    item_id: int = ColumnField(foreign_key="item.id")
    reviewer: str = ColumnField(max_length=160, index=True)
    claimed_at: datetime = ColumnField(default_factory=utcnow, sa_type=UTCDateTime)
    expires_at: datetime = ColumnField(sa_type=UTCDateTime)


class QueueView(StrEnum):
    """Which part of an eval's review queue to show. `mine`: what waits for this reviewer's vote
    (their claimed batch, their assignment, or, on an open queue, every item they have not voted on
    that still needs votes). `disputed`: items whose votes disagree, for an adjudicator. `all`:
    every item waiting for review."""

    MINE = "mine"
    DISPUTED = "disputed"
    ALL = "all"


class RoundState(StrEnum):
    """Where an item's review round stands after a vote: `waiting` for more votes, `decided` (the
    votes agreed, or an adjudicator decided), `disputed` (they disagree: an adjudicator decides)."""

    WAITING = "waiting"
    DECIDED = "decided"
    DISPUTED = "disputed"


class VoteBody(BaseModel):
    """`POST /v1/evals/{name}/review/votes` and `.../adjudications`: the decision on one item; a
    rejection needs a reason."""

    item_id: RowId
    decision: Decision
    reason: str = Field(default="", max_length=2000)


class VoteRead(BaseModel):
    reviewer: str
    decision: Decision
    reason: str
    cast_at: datetime


class RoundOutcome(BaseModel):
    """An item's round after a vote or an adjudication: the votes it has (each reviewer's), how
    many it needs, its state and the item's status. Never the item's content."""

    item_id: int
    eval: str
    state: RoundState
    needed: int
    votes: list[VoteRead]
    status: str


class ClaimBody(BaseModel):
    """`POST /v1/evals/{name}/review/claims`: how many items this reviewer wants to hold."""

    size: int = Field(default=20, ge=1, le=MAX_CLAIM)


class ClaimOutcome(BaseModel):
    """The items this reviewer holds on the eval after claiming (`claimed`: the new ones), in
    queue order, until `expires_at`. Empty when nothing waits for them."""

    eval: str
    held: list[int]
    claimed: list[int]
    expires_at: datetime | None


class ReviewerProgress(BaseModel):
    """One person's review on an eval: open claims, votes cast (and how many agreed with the
    outcome their round got), and adjudications."""

    reviewer: str
    claimed: int
    votes: int
    approved: int
    rejected: int
    waiting: int
    settled: int
    agreed_with_outcome: int
    adjudicated: int
    last_at: datetime | None


class TeamReview(BaseModel):
    """`GET /v1/evals/{name}/review/team`: the eval's team settings and progress. `rounds`: rounds
    with at least two votes; `unanimous` of them; `percent_agreement` (unanimous / rounds) and
    `fleiss_kappa` (chance-corrected, over rounds with `reviewers_per_item` votes; null when it
    is undefined: fewer than two such rounds, or every vote the same)."""

    eval: str
    reviewers_per_item: int
    agreement_sample: float
    assignment: str
    reviewers: list[str]
    adjudicators: list[str]
    guidelines: str
    waiting_for_votes: int
    disputed: int
    rounds: int
    unanimous: int
    percent_agreement: float | None
    fleiss_kappa: float | None
    people: list[ReviewerProgress]
