"""Audit events: who did what to which object, how many, when."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel
from sqlalchemy import Column
from sqlmodel import Field, SQLModel

from schemas.common import UTCDateTime, json_column_type, utcnow


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
