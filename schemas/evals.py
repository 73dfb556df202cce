"""Evals: named, self-refreshing evaluation sets, and which items belong to each (with their split
and, once they leave, when and why)."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated

import pydantic
from pydantic import BaseModel, ConfigDict, field_validator
from sqlalchemy import Column, String, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from schemas.common import MAX_COUNT, Count, Instant, UTCDateTime, json_column_type, utcnow
from schemas.source import SOURCE_NAME_PATTERN

DEFAULT_SCHEDULE = "0 3 1 * *"
DEFAULT_SEALED_FRACTION = 0.20
DEFAULT_SEALED_READ_BUDGET = 3
DEFAULT_LINKING_SHARE = 0.3
MAX_LINKING_SHARE = 0.9
"""A release carries at most this share of its dev split from the release before: the rest is fresh."""
MAX_AGE_DAYS = 36_500
"""A century: an older maximum age would reach before the dates anyone stores."""
NAME_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,63}$"


class ApprovalPolicy(StrEnum):
    """`manual`: only items a reviewer approved enter the eval. `auto`: items dedup kept as `unique`
    count as approved too."""

    MANUAL = "manual"
    AUTO = "auto"


class ReviewAssignment(StrEnum):
    """How a team shares an eval's review queue (`curation.team_review`). `open`: every reviewer
    is shown the whole queue. `claim`: each reviewer claims a batch, and an item is shown to no
    more reviewers than it needs votes until the claims expire. `round_robin`: each item is
    assigned, in turn by its id, to as many of the named `reviewers` as it needs votes."""

    OPEN = "open"
    CLAIM = "claim"
    ROUND_ROBIN = "round_robin"


MAX_REVIEWERS_PER_ITEM = 5
MAX_GUIDELINES = 20_000
PERSON_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._@+-]{0,127}$"
"""A person as an eval's team settings name them: the name of their token (an actor is `token:<name>`)."""
PersonName = Annotated[str, pydantic.Field(pattern=PERSON_PATTERN)]


class Split(StrEnum):
    """`dev` items are for iteration; `sealed` items only for final decisions (`sealed` scope)."""

    DEV = "dev"
    SEALED = "sealed"


class RetireReason(StrEnum):
    """Why an item left an eval: older than the maximum age, marked exposed, pushed out by newer
    items (target size or a source quota), or no longer acceptable (rejected, found to duplicate
    or copy something, or withdrawn from curation altogether)."""

    AGED_OUT = "aged_out"
    EXPOSED = "exposed"
    DISPLACED = "displaced"
    REJECTED = "rejected"
    DUPLICATE = "duplicate"
    CONTAMINATED = "contaminated"
    WITHDRAWN = "withdrawn"


class EvalSettings(SQLModel):
    """What an eval's owner configures (everything but the name)."""

    description: str = Field(default="", sa_type=Text)
    sources: list[str] = Field(default_factory=list, sa_column=Column(json_column_type(), nullable=False))
    target_size: int = Field(default=200, gt=0, le=1_000_000)
    schedule: str = Field(default=DEFAULT_SCHEDULE, max_length=120, description="Refresh schedule, a crontab expression in UTC.")
    # No default here: SQLAlchemy would write a column default in place of an explicit None (no limit).
    max_age_days: int | None = Field(default=None, gt=0, description="Items older than this (at a refresh) retire; unset: no limit.")
    earliest_occurred_at: datetime | None = Field(default=None, sa_type=UTCDateTime, description="Only incidents at or after this date.")
    source_quotas: dict[str, int] = Field(default_factory=dict, sa_column=Column(json_column_type(), nullable=False))
    sealed_fraction: float = Field(default=DEFAULT_SEALED_FRACTION, ge=0, le=1)
    approval_policy: str = Field(default=ApprovalPolicy.MANUAL.value, sa_type=String(16))
    sealed_read_budget: int = Field(default=DEFAULT_SEALED_READ_BUDGET, ge=0, description="Sealed-content reads allowed per release.")
    reviewers_per_item: int = Field(default=1, ge=1, le=MAX_REVIEWERS_PER_ITEM, description="Votes an item needs; more than one must agree, or an adjudicator decides.")
    agreement_sample: float = Field(default=1.0, ge=0, le=1, description="Share of items (by a hash of the id) that need `reviewers_per_item` votes; the rest need one.")
    review_assignment: str = Field(default=ReviewAssignment.OPEN.value, sa_type=String(16))
    reviewers: list[str] = Field(default_factory=list, sa_column=Column(json_column_type(), nullable=False))
    adjudicators: list[str] = Field(default_factory=list, sa_column=Column(json_column_type(), nullable=False))
    review_guidelines: str = Field(default="", sa_type=Text)
    linking_share: float = Field(
        default=DEFAULT_LINKING_SHARE, ge=0, le=MAX_LINKING_SHARE, description="Share of each release's dev split carried from the dev split of the release before (0: none)."
    )
    balance_composition: bool = Field(default=True, description="Take items so that each release's composition follows the release before; off: newest first.")


class Eval(EvalSettings, table=True):
    """A named eval. `seal_key` is the per-eval HMAC key that assigns the sealed slice, encrypted
    with GOLDENSET_SECRET_KEY; it never leaves the server. `canary` marks every export."""

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(max_length=64, sa_column_kwargs={"unique": True}, index=True)
    canary: str = Field(max_length=80)
    seal_key: str = Field(sa_type=Text)
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    updated_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)


class EvalItem(SQLModel, table=True):
    """An item's membership of one eval: its split (fixed at its first release) and, once retired,
    the release it left at, when and why. A retired item never returns to the eval."""

    __tablename__ = "eval_item"
    __table_args__ = (UniqueConstraint("eval_id", "item_id", name="uq_eval_item_eval_item"),)

    id: int | None = Field(default=None, primary_key=True)
    eval_id: int = Field(foreign_key="eval.id", index=True)
    item_id: int = Field(foreign_key="item.id", index=True)
    split: str = Field(sa_type=String(8))
    first_release: int
    retired_release: int | None = None
    retired_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    retired_reason: str | None = Field(default=None, max_length=32)


SourceName = Annotated[str, pydantic.Field(pattern=SOURCE_NAME_PATTERN.pattern)]
"""A source's name as an eval's settings give it (whether that source exists is checked on save)."""
SourceQuotas = Annotated[dict[SourceName, Count], pydantic.Field(json_schema_extra={"additionalProperties": False})]
"""Items at most per source, keyed by source name: no other key is taken."""


class _EvalInput(BaseModel):
    # A misspelt setting is refused, not taken as the default (`schemas.validation`).
    model_config = ConfigDict(extra="forbid")

    @field_validator("source_quotas", check_fields=False)
    @classmethod
    def _quotas(cls, value: dict[str, int] | None) -> dict[str, int] | None:
        if value is not None and any(quota < 0 for quota in value.values()):
            raise ValueError("source quotas must be zero or more items")
        return value



class EvalCreate(_EvalInput):
    """`POST /v1/evals`: a name and any settings (defaults: target 200, monthly on the 1st at
    03:00 UTC, maximum age 365 days, 20% sealed, manual review, 3 sealed reads per release, 30%
    of each release's dev split carried from the release before, composition balanced)."""

    name: str = pydantic.Field(pattern=NAME_PATTERN, description="Lowercase letters, digits, '.', '_' and '-'.")
    description: str = ""
    sources: list[SourceName] = pydantic.Field(min_length=1, description="Names of the sources whose items the eval takes.")
    target_size: int = pydantic.Field(default=200, gt=0, le=1_000_000)
    schedule: str = DEFAULT_SCHEDULE
    max_age_days: int | None = pydantic.Field(default=365, gt=0, le=MAX_AGE_DAYS)
    earliest_occurred_at: Instant | None = None
    source_quotas: SourceQuotas = pydantic.Field(default_factory=dict)
    sealed_fraction: float = pydantic.Field(default=DEFAULT_SEALED_FRACTION, ge=0, le=1)
    approval_policy: ApprovalPolicy = ApprovalPolicy.MANUAL
    sealed_read_budget: int = pydantic.Field(default=DEFAULT_SEALED_READ_BUDGET, ge=0, le=MAX_COUNT)
    reviewers_per_item: int = pydantic.Field(default=1, ge=1, le=MAX_REVIEWERS_PER_ITEM, description="Votes each reviewed item needs (agreeing, else an adjudicator decides).")
    agreement_sample: float = pydantic.Field(default=1.0, ge=0, le=1, description="Share of items that need `reviewers_per_item` votes; the others need one.")
    review_assignment: ReviewAssignment = ReviewAssignment.OPEN
    reviewers: list[PersonName] = pydantic.Field(default_factory=list, max_length=100, description="Round-robin: the people (token names) items are assigned to.")
    adjudicators: list[PersonName] = pydantic.Field(default_factory=list, max_length=100, description="Who decides disagreements (token names); none named: any admin.")
    review_guidelines: str = pydantic.Field(default="", max_length=MAX_GUIDELINES, description="Shown beside every item under review.")
    linking_share: float = pydantic.Field(
        default=DEFAULT_LINKING_SHARE,
        ge=0,
        le=MAX_LINKING_SHARE,
        description="Share of each release's dev split carried from the dev split of the release before (the linking core), 0 to 0.9; 0 turns it off.",
    )
    balance_composition: bool = pydantic.Field(
        default=True, description="Take items so that each release's shares by source, category, length band and age band follow the release before; false: newest first."
    )


class EvalUpdate(_EvalInput):
    """`PATCH /v1/evals/{name}`: the settings to change. `sealed_fraction` can change only until
    the first release (membership of the sealed slice never changes after)."""

    description: str | None = None
    sources: list[SourceName] | None = pydantic.Field(default=None, min_length=1)
    target_size: int | None = pydantic.Field(default=None, gt=0, le=1_000_000)
    schedule: str | None = None
    max_age_days: int | None = pydantic.Field(default=None, gt=0, le=MAX_AGE_DAYS)
    earliest_occurred_at: Instant | None = None
    source_quotas: SourceQuotas | None = None
    sealed_fraction: float | None = pydantic.Field(default=None, ge=0, le=1)
    approval_policy: ApprovalPolicy | None = None
    sealed_read_budget: int | None = pydantic.Field(default=None, ge=0, le=MAX_COUNT)
    reviewers_per_item: int | None = pydantic.Field(default=None, ge=1, le=MAX_REVIEWERS_PER_ITEM)
    agreement_sample: float | None = pydantic.Field(default=None, ge=0, le=1)
    review_assignment: ReviewAssignment | None = None
    reviewers: list[PersonName] | None = pydantic.Field(default=None, max_length=100)
    adjudicators: list[PersonName] | None = pydantic.Field(default=None, max_length=100)
    review_guidelines: str | None = pydantic.Field(default=None, max_length=MAX_GUIDELINES)
    linking_share: float | None = pydantic.Field(default=None, ge=0, le=MAX_LINKING_SHARE)
    balance_composition: bool | None = None


class EvalRead(BaseModel):
    """An eval as the API shows it (never its seal key)."""

    id: int
    name: str
    description: str
    sources: list[str]
    target_size: int
    schedule: str
    max_age_days: int | None
    earliest_occurred_at: datetime | None
    source_quotas: dict[str, int]
    sealed_fraction: float
    approval_policy: str
    sealed_read_budget: int
    reviewers_per_item: int = 1
    agreement_sample: float = 1.0
    review_assignment: str = ReviewAssignment.OPEN.value
    reviewers: list[str] = []
    adjudicators: list[str] = []
    review_guidelines: str = ""
    linking_share: float = DEFAULT_LINKING_SHARE
    balance_composition: bool = True
    canary: str
    created_at: datetime
    updated_at: datetime
    latest_release: int | None = None
