"""Audit events: who did what to which object, how many, when."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel
from sqlalchemy import Column
from sqlmodel import Field, SQLModel

from schemas.common import UTCDateTime, json_column_type, utcnow


class AuditAction(StrEnum):
    """Every audit action but an item's moves (`schemas.lifecycle.ItemAction`): one name each, so a
    reader filtering the audit log (`GET /v1/audit?action=`) finds every event of a kind. Actions
    holding `sealed` are about the sealed slice (`service.core.audit.is_sealed_action`)."""

    ITEM_READ = "item.read"
    ITEM_SIMILAR_READ = "item.similar_read"
    ITEM_SEALED_SIMILAR_READ = "item.sealed_similar_read"
    ITEM_SEALED_REVIEW_READ = "item.sealed_review_read"
    ITEM_SEALED_READ = "item.sealed_read"
    ITEM_SEALED_QUESTION_READ = "item.sealed_question_read"
    ITEM_SEALED_CHECK_MATCHED = "item.sealed_check_matched"
    ITEM_REVISIONS_READ = "item.revisions_read"
    ITEM_SEALED_REVISIONS_READ = "item.sealed_revisions_read"
    ITEM_EXPOSED = "item.exposed"
    ITEMS_INGEST = "items.ingest"
    SOURCE_CREATE = "source.create"
    SOURCE_UPDATE = "source.update"
    SOURCE_MAPPING = "source.mapping"
    SOURCE_DELETE = "source.delete"
    SOURCE_PULL = "source.pull"
    SOURCE_TEST = "source.test"
    TOKEN_CREATE = "token.create"
    TOKEN_REVOKE = "token.revoke"
    TOKEN_BOOTSTRAP = "token.bootstrap"
    UI_SIGN_IN = "ui.sign_in"
    UI_SIGN_OUT = "ui.sign_out"
    UI_SIGN_IN_REFUSED = "ui.sign_in_refused"
    EVAL_CREATE = "eval.create"
    EVAL_UPDATE = "eval.update"
    EVAL_DELETE = "eval.delete"
    EVAL_SEALED_REVIEW_OPENED = "eval.sealed_review_opened"
    EVAL_SEALED_REVIEW_REFUSED = "eval.sealed_review_refused"
    RELEASE_CREATE = "release.create"
    RELEASE_WITHDRAWN = "release.withdrawn"
    RELEASE_ITEMS_READ = "release.items_read"
    RELEASE_EXPORT = "release.export"
    RELEASE_SEALED_ITEMS_READ = "release.sealed_items_read"
    RELEASE_SEALED_EXPORT = "release.sealed_export"
    RELEASE_SEALED_READ = "release.sealed_read"
    RELEASE_SEALED_RUN = "release.sealed_run"
    RELEASE_SEALED_REFUSED = "release.sealed_refused"
    RELEASE_DIFF_READ = "release.diff_read"
    RUN_START = "run.start"
    RUN_SEALED_START = "run.sealed_start"
    RUN_SEALED_REFUSED = "run.sealed_refused"
    RUN_ITEMS_READ = "run.items_read"
    RUN_SEALED_ITEMS_READ = "run.sealed_items_read"
    RUN_RESULTS = "run.results"
    MODEL_CREATE = "model.create"
    MODEL_UPDATE = "model.update"
    ENDPOINT_CREATE = "endpoint.create"
    ENDPOINT_UPDATE = "endpoint.update"
    ENDPOINT_DELETE = "endpoint.delete"
    PROBE_START = "probe.start"
    PROBE_REFUSED = "probe.refused"
    CORPUS_RESULTS = "corpus.results"
    DEDUP_STATS_READ = "dedup.stats_read"
    DEDUP_CHECK_READ = "dedup.check_read"
    DEDUP_QUESTIONS_READ = "dedup.questions_read"
    DEDUP_QUESTION_ANSWER = "dedup.question_answer"
    REVIEW_VOTE = "review.vote"
    REVIEW_VOTE_WITHDRAWN = "review.vote_withdrawn"
    REVIEW_DISPUTED = "review.disputed"
    REVIEW_CLAIM = "review.claim"
    REVIEW_CLAIMS_RELEASED = "review.claims_released"


class AuditEvent(SQLModel, table=True):
    """An append-only record of a change or a read of item content. `actor` labels who acted
    (`token:<name>`, `cli`, `scheduler`, ...); `token_id` is the token's id when a token acted,
    since a name may be used again by a later token once the first is revoked or expired."""

    __tablename__ = "audit_event"

    id: int | None = Field(default=None, primary_key=True)
    actor: str = Field(max_length=160, index=True)
    token_id: int | None = Field(default=None, index=True)
    action: str = Field(max_length=64, index=True)
    object_type: str = Field(max_length=32)
    object_id: str | None = Field(default=None, max_length=255)
    count: int = Field(default=1)
    at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, index=True)
    details: dict[str, Any] = Field(default_factory=dict, sa_column=Column(json_column_type(), nullable=False))


class AuditEventRead(BaseModel):
    """An audit event as `GET /v1/audit` shows it; `sealed` marks events about the sealed slice
    (its reads, sealed runs, refusals), which a reviewer should look at first."""

    id: int
    actor: str
    token_id: int | None = None
    action: str
    object_type: str
    object_id: str | None
    count: int
    at: datetime
    sealed: bool
    details: dict[str, Any]


class AuditPage(BaseModel):
    """One page of audit events, newest first; pass `next_cursor` as `cursor` for the next."""

    events: list[AuditEventRead]
    next_cursor: str | None


class AuditItemSet(SQLModel, table=True):
    """A set of item ids named by its digest, stored once however many audit events name it: a
    read that served many items (a release's dev split, read by every pipeline run) records
    `item_set` (the digest) instead of repeating the ids in each event."""

    __tablename__ = "audit_item_set"

    digest: str = Field(primary_key=True, max_length=64)
    count: int
    item_ids: list[int] = Field(sa_column=Column(json_column_type(), nullable=False))
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
