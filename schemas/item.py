"""Items: dated incidents turned into eval candidates, the history of their content changes (by
their source or by a curator), and the API models that edit an item and show that history."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any

import pydantic
from pydantic import BaseModel, ConfigDict, StringConstraints
from sqlalchemy import Column, Index, String, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from schemas.common import NOT_BLANK, UTCDateTime, json_column_type, utcnow
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


class RevisionKind(StrEnum):
    """Who changed an item's content. `source`: a re-ingest of a changed record; `curator`: a
    person's edit; `source_held`: a change the source made to an item a curator had edited, kept
    beside the item (which keeps the curator's text) for a person to look at."""

    SOURCE = "source"
    CURATOR = "curator"
    SOURCE_HELD = "source_held"


EDITED_FIELDS = ("title", "input", "reference", "tags")
"""The fields a curator edits, and those a revision's changes are shown for."""


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
    of the source's record as last stored, used to tell an unchanged re-ingest from a changed one
    (a curator's edit leaves it as it is).
    """

    __table_args__ = (
        UniqueConstraint("source_id", "external_id", name="uq_item_source_external_id"),
        # The review queue: `unique` items of some sources, oldest incident first.
        Index("ix_item_status_occurred_at_id_source_id", "status", "occurred_at", "id", "source_id"),
    )

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
    # The revision a curator last wrote; None: the text is the source's. Once set, a change the
    # source makes to the record is held (`RevisionKind.SOURCE_HELD`) and never replaces the text.
    curated_revision: int | None = Field(default=None)
    # When the source changed the record of a curator-edited item (a held change) that no edit or
    # review decision has looked at since: the item needs a person's look again.
    source_changed_at: datetime | None = Field(default=None, sa_type=UTCDateTime)


class ItemRevision(SQLModel, table=True):
    """One change of an item's content, one row per change.

    `source` and `curator` rows hold the content the item had at `revision`, before the change made
    it `revision + 1` (`previous_digest`: the source record's digest then). A `source_held` row
    holds instead the content the source proposed (`previous`, with that record's digest) while the
    item stayed at `revision` with the curator's text; `actor` and `note` are a curator's."""

    __tablename__ = "item_revision"

    id: int | None = Field(default=None, primary_key=True)
    item_id: int = Field(foreign_key="item.id", index=True)
    revision: int
    changed_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    previous_digest: str = Field(max_length=64)
    previous: dict[str, Any] = Field(default_factory=dict, sa_column=Column(json_column_type(), nullable=False))
    kind: str = Field(default=RevisionKind.SOURCE.value, sa_type=String(16), sa_column_kwargs={"server_default": RevisionKind.SOURCE.value})
    actor: str | None = Field(default=None, max_length=160)
    note: str | None = Field(default=None, sa_type=Text)


def item_snapshot(item: Item) -> dict[str, Any]:
    """What an `ItemRevision` keeps of an item's content (JSON-ready)."""
    return {
        "occurred_at": item.occurred_at.isoformat(),
        "title": item.title,
        "input": item.input,
        "reference": item.reference,
        "metadata": item.meta,
        "tags": item.tags,
        "status": item.status,
    }


MAX_NOTE = 2000
MAX_TAGS = 100
MAX_TAG_LENGTH = 100
Tag = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_TAG_LENGTH), pydantic.Field(json_schema_extra={"pattern": NOT_BLANK})]


class ItemEdit(BaseModel):
    """`PATCH /v1/items/{id}`: the fields to change (a field left out or null stays as it is) and
    why (`note`, required). The texts are bounded by the request body limit, as ingest's are."""

    model_config = ConfigDict(extra="forbid")

    title: str | None = None
    input: str | None = pydantic.Field(default=None, json_schema_extra={"pattern": NOT_BLANK}, description="The new input: not blank (it is what the model is asked).")
    reference: str | None = None
    tags: list[Tag] | None = Field(default=None, max_length=MAX_TAGS)
    note: str = pydantic.Field(min_length=1, max_length=MAX_NOTE, json_schema_extra={"pattern": NOT_BLANK}, description="Why the item changes: not blank.")


class FieldChange(BaseModel):
    """One field a revision changed: its value before and after (null where withheld)."""

    field: str
    before: str | list[str] | None
    after: str | list[str] | None


class RevisionRead(BaseModel):
    """One revision of an item. `revision` 1 is the item as first ingested (its fields shown as
    changed from null). A `source` or `curator` revision made the item that revision; a
    `source_held` one is a change the source proposed to the curator's text at that revision, and
    its changes go from that text to the source's. A source revision that changed only the date or
    the metadata lists no changes."""

    revision: int
    kind: str
    at: datetime | None
    actor: str | None
    note: str | None
    changes: list[FieldChange]


class ItemRevisions(BaseModel):
    """`GET /v1/items/{id}/revisions`: every revision, oldest first, and whether the item's text is
    the curator's (`curated_revision`) or a source change awaits a look (`source_changed_at`). For
    an item in (or bound for) a sealed slice, read without the `sealed` scope, the dates, notes and
    values are withheld (`sealed: true`)."""

    item_id: int
    revision: int
    curated_revision: int | None
    source_changed_at: datetime | None
    sealed: bool = False
    revisions: list[RevisionRead]


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
    shown for a sealed item); `curated_revision`, the revision a curator last wrote (null: the text
    is the source's), and `source_changed_at`, when the source changed an edited item since anyone
    looked (null otherwise, and for a sealed item)."""

    dedup: DedupRead
    curated_revision: int | None = None
    source_changed_at: datetime | None = None
    overrides: list[OverrideRead] = Field(default_factory=list)


class ItemPage(BaseModel):
    """One page of `GET /v1/items`; pass `next_cursor` back as `cursor` for the next page."""

    items: list[ItemRead]
    next_cursor: str | None

