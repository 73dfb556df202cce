"""Review: approving or rejecting items that dedup kept as `unique`, undoing a decision, the
review queue and the sealed review window."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field

from schemas.common import NOT_BLANK, RowId
from schemas.dedup import DedupExplanation
from schemas.problem import RecordError


class Decision(StrEnum):
    APPROVE = "approve"
    REJECT = "reject"


class ApproveBody(BaseModel):
    """`POST /v1/items/{id}/approve`: an optional note."""

    reason: str = Field(default="", max_length=2000)


class RejectBody(BaseModel):
    """`POST /v1/items/{id}/reject`: why (required)."""

    reason: str = Field(min_length=1, max_length=2000, json_schema_extra={"pattern": NOT_BLANK}, description="Why: not blank.")


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


class ReviewUndone(BaseModel):
    """`POST /v1/items/{id}/undo-review`: the decision undone (`undone`, with its reason, who took
    it and when); the item is `unique` again and back in the review queue."""

    item_id: int
    status: str
    undone: Decision
    reason: str
    decided_by: str
    decided_at: datetime


class QueueDecision(BaseModel):
    """Curation's decision in force about a queued item: its `stage` (`none`: nothing was close
    enough; `override`: a person ruled it), the `rule` that applied, the `score` and its `margin`
    over the threshold, and the item it was matched with (for a ruling, the item it was ruled apart
    from). `matched_item_id` is withheld (null) for a sealed-bound entry shown by metadata only,
    and for a match in a sealed slice the reader may not see. `explanation`: why
    (`schemas.dedup.DedupExplanation`; null for an entry shown by metadata only)."""

    status: str
    stage: str
    rule: str | None = None
    score: float | None = None
    margin: float | None = None
    matched_item_id: int | None = None
    decided_at: datetime
    explanation: DedupExplanation | None = None


class ReviewQueueEntry(BaseModel):
    """One pending item. `position` is its place in the queue (1 is the oldest incident), out of
    the page's `total`. `sealed`: the item is in (or bound for) an eval's sealed slice; `withheld`:
    its external id, title, input, reference, metadata and tags are withheld (empty) because the
    reader holds no open sealed review window, so it is reviewed by its source, date, status and
    dedup decision only. `source_changed_at`: the source changed the item after a curator edited it
    and nobody has looked since."""

    position: int
    id: int
    source: str
    external_id: str
    occurred_at: datetime
    ingested_at: datetime
    title: str
    input: str
    reference: str
    metadata: dict[str, Any]
    tags: list[str]
    status: str
    sealed: bool = False
    withheld: bool = False
    source_changed_at: datetime | None = None
    dedup: QueueDecision | None = None


class ReviewQueuePage(BaseModel):
    """`GET /v1/evals/{name}/review-queue`: one page of the items waiting for review (`unique`),
    oldest incident first, `total` of them in all under the filters. `withheld` counts the entries
    shown by metadata only, and `note` says why and how to see them; `sealed_review_until` is when
    the reader's sealed review window closes (null: none open)."""

    eval: str | None
    total: int
    offset: int
    limit: int
    withheld: int
    note: str | None = None
    sealed_review_until: datetime | None = None
    entries: list[ReviewQueueEntry]


class SealedReviewWindow(BaseModel):
    """`POST /v1/evals/{name}/sealed-review`: the window in which the token sees sealed-bound
    items of the eval's review queue in full, until `until`. `opened`: this call opened it and
    took one unit of the eval's sealed-read budget (`used` of `budget` since the eval's latest
    release); false: the token's window was already open, and nothing was counted."""

    eval: str
    until: datetime
    opened: bool
    budget: int
    used: int
