"""Review decisions: approving or rejecting items that dedup kept as `unique`."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, Field

from schemas.common import RowId
from schemas.problem import RecordError


class Decision(StrEnum):
    APPROVE = "approve"
    REJECT = "reject"


class ApproveBody(BaseModel):
    """`POST /v1/items/{id}/approve`: an optional note."""

    reason: str = Field(default="", max_length=2000)


class RejectBody(BaseModel):
    """`POST /v1/items/{id}/reject`: why (required)."""

    reason: str = Field(min_length=1, max_length=2000)


class ReviewDecision(BaseModel):
    item_id: RowId
    decision: Decision
    reason: str = Field(default="", max_length=2000)


class ReviewBatch(BaseModel):
    """`POST /v1/items/review`: decisions to apply; each is judged alone."""

    decisions: list[ReviewDecision] = Field(min_length=1, max_length=5000)


class ReviewOutcome(BaseModel):
    """Which items were approved and rejected; `errors` names each decision refused, by position
    (the others are kept)."""

    approved: list[int]
    rejected: list[int]
    errors: list[RecordError]
