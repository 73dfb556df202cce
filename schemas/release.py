"""Releases: immutable, numbered versions of an eval. A release is written once, whole, in one
transaction, and never updated; its items keep the content they had when it was written."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pydantic
from pydantic import BaseModel
from sqlalchemy import Column, String, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from schemas.common import UTCDateTime, json_column_type, utcnow

SHA256 = "sha256"
HMAC_SHA256 = "hmac-sha256"


class Release(SQLModel, table=True):
    """Release `number` of an eval, covering the schedule period [`period_start`, `period_end`).

    The unique `(eval_id, period_start)` pair makes a refresh exactly-once per period. `diff`
    holds `added` item ids and `retired` entries (`item_id`, `reason`) relative to the release
    before it. `dev_root` and `sealed_root` are the Merkle roots of each split
    (`curation.releases.content.merkle_root`).

    A release is never changed after it is written, but it can be withdrawn (`withdrawn_at`,
    `withdrawn_by`, `withdrawn_reason`; `curation.releases.withdrawal`): it stays readable by
    number, and no longer counts as the eval's latest nor for the order of periods."""

    __table_args__ = (
        UniqueConstraint("eval_id", "period_start", name="uq_release_eval_period"),
        UniqueConstraint("eval_id", "number", name="uq_release_eval_number"),
    )

    id: int | None = Field(default=None, primary_key=True)
    eval_id: int = Field(foreign_key="eval.id", index=True)
    number: int
    period_start: datetime = Field(sa_type=UTCDateTime)
    period_end: datetime = Field(sa_type=UTCDateTime)
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    canary: str = Field(max_length=80)
    dev_root: str = Field(max_length=64)
    sealed_root: str = Field(max_length=64)
    dev_count: int
    sealed_count: int
    diff: dict[str, Any] = Field(default_factory=dict, sa_column=Column(json_column_type(), nullable=False))
    withdrawn_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    withdrawn_by: str | None = Field(default=None, max_length=160)
    withdrawn_reason: str | None = Field(default=None, sa_type=Text)
    # How the sealed items' digests were made (`curation.releases.content`): releases written
    # before keyed digests keep `sha256`.
    sealed_digest: str = Field(default=SHA256, max_length=16, sa_column_kwargs={"server_default": SHA256})
    # The near pairs split across dev and sealed when the release was written (`CrossSplitPair`
    # as JSON); None for releases written before near links were recorded.
    cross_split_pairs: list[dict[str, Any]] | None = Field(default=None, sa_column=Column(json_column_type(), nullable=True))
    # What the release is made of (`ReleaseComposition` as JSON) and its linking core
    # (`LinkingCore`); None for releases written before they were recorded.
    composition: dict[str, Any] | None = Field(default=None, sa_column=Column(json_column_type(), nullable=True))
    linking: dict[str, Any] | None = Field(default=None, sa_column=Column(json_column_type(), nullable=True))


class ReleaseItem(SQLModel, table=True):
    """One item as released: its split, and its content frozen as canonical JSON text, whose
    digest is `content_digest`: its sha256, or for a sealed item of a release whose
    `sealed_digest` is `hmac-sha256`, its HMAC under the eval's seal key."""

    __tablename__ = "release_item"
    __table_args__ = (UniqueConstraint("release_id", "item_id", name="uq_release_item_release_item"),)

    id: int | None = Field(default=None, primary_key=True)
    release_id: int = Field(foreign_key="release.id", index=True)
    item_id: int = Field(foreign_key="item.id", index=True)
    split: str = Field(sa_type=String(8))
    occurred_at: datetime = Field(sa_type=UTCDateTime)
    content_digest: str = Field(max_length=64)
    content: str = Field(sa_type=Text)


class SealedRead(SQLModel, table=True):
    """One read of a release's sealed content (or one sealed run), counted against the eval's
    per-release budget."""

    __tablename__ = "sealed_read"

    id: int | None = Field(default=None, primary_key=True)
    release_id: int = Field(foreign_key="release.id", index=True)
    actor: str = Field(max_length=160)
    token_id: int | None = None
    purpose: str = Field(default="read", max_length=32)
    item_count: int = 0
    at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)


class RetiredEntry(BaseModel):
    item_id: int
    reason: str


class ReleaseDiff(BaseModel):
    """What changed since the release before: items added, items retired with the reason, and
    members left out of this release only while they wait for curation or review again (their
    content changed)."""

    added: list[int]
    retired: list[RetiredEntry]
    withheld: list[int] = []


class ReleaseWithdrawal(BaseModel):
    """Who withdrew a release, when and why."""

    at: datetime
    by: str
    reason: str


class WithdrawBody(BaseModel):
    """`POST /v1/evals/{name}/releases/{n}/withdraw`: why the release is withdrawn (kept in the audit trail)."""

    reason: str = pydantic.Field(min_length=1, max_length=2000, description="Why the release is withdrawn, e.g. 'refreshed for 2030 by mistake'.")


class CrossSplitPair(BaseModel):
    """Two near-linked items (`schemas.dedup.NearLink`) on either side of the split: `dev` served as
    dev content, `sealed` held sealed, by this release or (for an item it does not hold) by the
    release of any eval that recorded it. Groups of linked items are kept on one side, so such a
    pair exists only when links joined items that earlier, immutable releases had already put on
    different sides; treat its sealed item as seen."""

    dev: int
    sealed: int
    stage: str
    score: float | None = None


class StratumShare(BaseModel):
    """One stratum of a release's composition: its name, how many items of the release fall in it,
    and their share of the release (4 decimals)."""

    value: str
    count: int
    share: float


class ReleaseComposition(BaseModel):
    """What a release is made of, by what is known of each item before any result exists
    (`curation.releases.composition`): its `items` (both splits) by `source`, by `tag` (the
    category: an item's first tag, `(none)` without one; at most 12 named, and only those its dev
    items carry, the rest under `(other)`, so a sealed item's tags are never shown), by `length`
    band of the input (characters) and by `age` band at the period's start (days).
    `balanced_against`: the release whose shares rotation followed (null: the first release, or
    the eval takes the newest items)."""

    items: int
    balanced_against: int | None = None
    source: list[StratumShare]
    tag: list[StratumShare]
    length: list[StratumShare]
    age: list[StratumShare]


class LinkingCore(BaseModel):
    """How much of a release's dev split was carried from the dev split of the release before
    (`previous_release`, which had `previous_dev` dev items): `carried` of its `dev` items
    (`carried_share`). The eval's `share` asked for `wanted` (the share of `dev`, rounded up);
    `could_not_keep` are missing because the previous dev items that could have stayed had to
    retire first, and `left_by_rule` counts the previous dev items that left by a rule (exposed,
    aged out, rejected, ...) or were withheld for review, by reason. Sealed items are never carried
    as the core."""

    share: float
    previous_release: int | None = None
    previous_dev: int = 0
    dev: int
    carried: int
    carried_share: float
    wanted: int
    could_not_keep: int = 0
    left_by_rule: dict[str, int] = pydantic.Field(default_factory=dict)


class ReleaseSummary(BaseModel):
    """A release without its item list. `withdrawn` is set once an admin withdrew it: it no
    longer counts as `latest`, and eval pipelines should not score against it."""

    eval: str
    number: int
    period_start: datetime
    period_end: datetime
    created_at: datetime
    canary: str
    dev_merkle_root: str
    sealed_merkle_root: str
    dev_count: int
    sealed_count: int
    sealed_digest: str = pydantic.Field(
        default=SHA256,
        description="How sealed items' digests are made: `hmac-sha256` (keyed with the eval's seal key, so only the server can recompute them) "
        "or `sha256` (releases written before keyed digests). Dev digests are always the sha256 of the item's canonical JSON."
    )
    diff: ReleaseDiff
    cross_split_pairs: list[CrossSplitPair] | None = pydantic.Field(
        default=None,
        description="Near-linked dev-sealed pairs when the release was written (the goal: none; each is forced by earlier releases); null for releases written before near links.",
    )
    withdrawn: ReleaseWithdrawal | None = None
    composition: ReleaseComposition | None = pydantic.Field(
        default=None, description="Shares by source, category, length band and age band; null for releases written before compositions were recorded."
    )
    linking: LinkingCore | None = pydantic.Field(
        default=None, description="The dev items carried from the release before (the linking core); null for releases written before it was recorded."
    )


class ManifestEntry(BaseModel):
    item_id: int
    split: str
    content_digest: str


class ReleaseManifest(ReleaseSummary):
    """A release's manifest: every item as `(item_id, split, content_digest)`, by item id. Sealed
    items appear only so: the digests commit to their content without showing it, and under
    `sealed_digest` `hmac-sha256` they are keyed, so knowing an item's text does not let anyone
    without the eval's seal key confirm it is in the sealed slice."""

    items: list[ManifestEntry]


class ExportMetadata(BaseModel):
    """What every export row carries besides the item: the release's canary (so a row found in
    a crawl or a training set is recognisable on its own), the eval and the release, and the
    item's own metadata as canonical JSON text (one column type whatever the sources put there)."""

    canary: str
    eval: str
    release: int
    item: str = pydantic.Field(description="The item's metadata as canonical JSON text; parse it to get the released `metadata` object.")


class ExportRow(BaseModel):
    """One line of a JSONL export (`GET .../export.jsonl`, `goldenset export`): one item, nothing
    else, so `datasets.load_dataset("json", ...)` loads one row per item. The released content is
    the row's item fields with `metadata` replaced by `json.loads(metadata.item)`; its canonical
    JSON hashes to `content_digest` (`goldenset verify` and the manifest check it)."""

    id: int
    source: str
    external_id: str
    occurred_at: str = pydantic.Field(description="When the incident occurred: ISO 8601 in UTC, as released.")
    title: str
    input: str
    reference: str
    tags: list[str]
    split: str
    content_digest: str
    metadata: ExportMetadata


class ReleasedItem(BaseModel):
    """One item's content as released."""

    item_id: int
    split: str
    content_digest: str
    content: dict[str, Any]


class ReleaseItems(BaseModel):
    """`GET .../items`: the items of one split as released, newest incident first."""

    eval: str
    release: int
    split: str
    canary: str
    items: list[ReleasedItem]


class RefreshResult(BaseModel):
    """The release for the period asked for; `created` is false when it already existed."""

    created: bool
    release: ReleaseSummary


class VerifyReport(BaseModel):
    """`goldenset verify`: stored digests and roots against those recomputed from frozen content.
    `sealed_unchecked`: keyed sealed digests taken as recorded because the seal key was not given.
    `cross_split_pairs`: near-linked items on either side of the split, by the links stored now."""

    eval: str
    release: int
    items: int
    mismatches: list[str]
    sealed_unchecked: int = 0
    cross_split_pairs: list[CrossSplitPair] = pydantic.Field(
        default_factory=list, description="Near-linked dev-sealed pairs of the release by the links stored now (not a mismatch: releases never change)."
    )

    @property
    def ok(self) -> bool:
        return not self.mismatches
