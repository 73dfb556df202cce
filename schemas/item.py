"""Items: dated incidents turned into eval candidates, and the history of their content changes."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel
from sqlalchemy import Column, String, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from schemas.common import UTCDateTime, json_column_type, utcnow
from schemas.dedup import DedupRead, OverrideRead


class ItemStatus(StrEnum):
    """Lifecycle of an item. Ingest writes `candidate`; curation and review move it on.
    `reference` marks items of a registered public corpus: matched against, never released."""

    CANDIDATE = "candidate"
    UNIQUE = "unique"
    DUPLICATE = "duplicate"
    CONTAMINATED = "contaminated"
    APPROVED = "approved"
    REJECTED = "rejected"
    RETIRED = "retired"
    REFERENCE = "reference"


class ItemContent(SQLModel):
    """What a mapped record carries: the fields that define an item's content."""

    external_id: str = Field(max_length=255)
    occurred_at: datetime = Field(sa_type=UTCDateTime, index=True)
    title: str = Field(default="", sa_type=Text)
    input: str = Field(sa_type=Text)
    reference: str = Field(default="", sa_type=Text)
    tags: list[str] = Field(default_factory=list, sa_column=Column(json_column_type(), nullable=False))


class Item(ItemContent, table=True):
    """One dated incident. `occurred_at` is the incident's date, never the insert time.

    `content_hash` is sha256 of the normalised text (the dedup fingerprint); `record_digest` is sha256
    of the stored content exactly, used to tell an unchanged re-ingest from a changed one.
    """

    __table_args__ = (UniqueConstraint("source_id", "external_id", name="uq_item_source_external_id"),)

    id: int | None = Field(default=None, primary_key=True)
    source_id: int = Field(foreign_key="source.id", index=True)
    meta: dict[str, Any] = Field(default_factory=dict, sa_column=Column("metadata", json_column_type(), nullable=False))
    content_hash: str = Field(max_length=64, index=True)
    hash_recipe: str = Field(default="n3", max_length=16)
    identity_key: str | None = Field(default=None, max_length=255)
    duplicate_of: int | None = Field(default=None, foreign_key="item.id", index=True)
    record_digest: str = Field(max_length=64)
    # The source's own version of the record (its updated time or version number, canonical text
    # of `ingest.versions`): a record with an older one is not applied. None: never versioned.
    source_version: str | None = Field(default=None, max_length=64)
    revision: int = Field(default=1)
    status: str = Field(default=ItemStatus.CANDIDATE.value, sa_type=String(16), index=True)
    ingested_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    updated_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    # Set when the item was sent somewhere that may train on it: it leaves every eval at the next refresh.
    exposed_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    exposed_reason: str | None = Field(default=None, max_length=255)


class ItemRevision(SQLModel, table=True):
    """The content an item had before a re-ingest changed it (one row per change)."""

    __tablename__ = "item_revision"

    id: int | None = Field(default=None, primary_key=True)
    item_id: int = Field(foreign_key="item.id", index=True)
    revision: int
    changed_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    previous_digest: str = Field(max_length=64)
    previous: dict[str, Any] = Field(default_factory=dict, sa_column=Column(json_column_type(), nullable=False))


class ItemRead(BaseModel):
    """An item as the API shows it (a plain pydantic model: `metadata` is reserved on tables).
    `sealed`: the item is in (or bound for) an eval's sealed slice, and its content (external id,
    text fields, metadata, tags), its dates (null) and its content hash are withheld here."""

    id: int
    source: str
    external_id: str
    occurred_at: datetime | None
    ingested_at: datetime | None
    updated_at: datetime | None
    title: str
    input: str
    reference: str
    metadata: dict[str, Any]
    tags: list[str]
    content_hash: str
    revision: int
    status: str
    sealed: bool = False


class ItemDetail(ItemRead):
    """One item as `GET /v1/items/{id}` shows it: with how dedup judged it (`{"status": "candidate"}`
    until curation decides) and people's rulings naming it on either side, oldest first (none
    shown for a sealed item)."""

    dedup: DedupRead
    overrides: list[OverrideRead] = Field(default_factory=list)


class ItemPage(BaseModel):
    """One page of `GET /v1/items`; pass `next_cursor` back as `cursor` for the next page."""

    items: list[ItemRead]
    next_cursor: str | None
