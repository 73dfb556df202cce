"""Dedup state: per-item fingerprints (with their recipe), cached embeddings, the decisions
curation took, each with the stage, rule, score and matched item that explain it, and the
overrides people made of them."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

import pydantic
from pydantic import BaseModel
from sqlalchemy import Column, Float, LargeBinary, String, Text
from sqlmodel import Field, SQLModel

from schemas.common import NOT_BLANK, RowId, UTCDateTime, json_column_type, utcnow


class DedupStage(StrEnum):
    """Which test decided: `exact` (normalised hash), `minhash` (near-verbatim), `embedding`
    (paraphrase), `characters` (an embedding neighbour whose text the model cannot read, matched
    by character n-grams instead: `curation.dedup.readability`), `override` (a person ruled it),
    or `none` (nothing close enough: unique)."""

    EXACT = "exact"
    MINHASH = "minhash"
    EMBEDDING = "embedding"
    CHARACTERS = "characters"
    OVERRIDE = "override"
    NONE = "none"


class ItemFingerprint(SQLModel, table=True):
    """An item's sketches. `recipe` names the normalisation, shingling and MinHash parameters
    (e.g. `n2;word3;p128;s1;affine32`); `minhash` is the serialised LeanMinHash; `body_key` and
    `title_key` point at cached embeddings of the item under `model_id`."""

    __tablename__ = "item_fingerprint"

    item_id: int = Field(foreign_key="item.id", primary_key=True)
    recipe: str = Field(max_length=64)
    minhash: bytes = Field(sa_column=Column(LargeBinary, nullable=False))
    model_id: str | None = Field(default=None, max_length=255)
    body_key: str | None = Field(default=None, max_length=64)
    title_key: str | None = Field(default=None, max_length=64)
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)


class Embedding(SQLModel, table=True):
    """A cached embedding, keyed by the sha256 of the exact text embedded and the model: the same
    text is never encoded twice by the same model. `unreadable`: the share of the text the model's
    tokenizer cannot represent (`embedding.readability`), measured when it was encoded; None
    when stored before that was measured, or by an encoder that cannot measure it."""

    text_hash: str = Field(max_length=64, primary_key=True)
    model_id: str = Field(max_length=255, primary_key=True)
    dim: int
    vector: bytes = Field(sa_column=Column(LargeBinary, nullable=False))
    unreadable: float | None = Field(default=None, sa_column=Column(Float, nullable=True))
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)


class EmbeddingEquivalence(SQLModel, table=True):
    """A switch of embedding model id that kept the stored vectors: re-encoding `texts` stored
    texts with `to_model_id` gave vectors within `min_cosine` (at worst) and `mean_cosine` (on
    average) of those `from_model_id` had made, so the latter were adopted as the former's."""

    __tablename__ = "embedding_equivalence"

    id: int | None = Field(default=None, primary_key=True)
    from_model_id: str = Field(max_length=255)
    to_model_id: str = Field(max_length=255)
    texts: int
    min_cosine: float
    mean_cosine: float
    recorded_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)


class DedupDecision(SQLModel, table=True):
    """One curation decision about one item (the newest per item is in force)."""

    __tablename__ = "dedup_decision"

    id: int | None = Field(default=None, primary_key=True)
    item_id: int = Field(foreign_key="item.id", index=True)
    status: str = Field(sa_type=String(16))
    stage: str = Field(sa_type=String(16))
    score: float | None = Field(default=None, sa_column=Column(Float, nullable=True))
    matched_item_id: int | None = Field(default=None, foreign_key="item.id")
    decided_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    details: dict[str, Any] = Field(default_factory=dict, sa_column=Column(json_column_type(), nullable=False))


class NearLink(SQLModel, table=True):
    """Two items close enough at a recall-first level that they may be one incident told twice,
    whatever dedup decided about them: the item decided (`item_id`) and an earlier one
    (`other_id`), the `stage` that saw them close (`exact`, `minhash`, `embedding`, or `override`
    for a person's duplicate ruling) and its `score`. Links only accumulate: a release keeps every
    group of linked items on one side of its split (`curation.releases.groups`)."""

    __tablename__ = "near_link"

    item_id: int = Field(foreign_key="item.id", primary_key=True)
    other_id: int = Field(foreign_key="item.id", primary_key=True, index=True)
    stage: str = Field(sa_type=String(16))
    score: float | None = Field(default=None, sa_column=Column(Float, nullable=True))
    recorded_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)


class OverrideKind(StrEnum):
    """A person's ruling on a pair: `not_duplicate` (the pair may never be matched: a cannot-link),
    or `duplicate_of` (the item is a duplicate of the other: a must-link)."""

    NOT_DUPLICATE = "not_duplicate"
    DUPLICATE_OF = "duplicate_of"


class DedupOverride(SQLModel, table=True):
    """A person overruling dedup about `item_id` and `other_id`. Every run, re-fingerprint and
    re-decide keeps it; the newest override of a pair is in force."""

    __tablename__ = "dedup_override"

    id: int | None = Field(default=None, primary_key=True)
    item_id: int = Field(foreign_key="item.id", index=True)
    other_id: int = Field(foreign_key="item.id", index=True)
    kind: str = Field(sa_type=String(16))
    note: str = Field(sa_type=Text)
    actor: str = Field(max_length=160)
    at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)


class DedupCandidate(BaseModel):
    """An item a dedup decision weighed: the one it matched, the best runner-ups, or one it refused.

    `stage` and `score`: the test that weighed it and its score there (Jaccard estimate for
    `minhash`, body cosine for `embedding`, character n-gram similarity for `characters`);
    `title_cosine`: the titles' cosine, when known. For a refused (vetoed) match, `why` it was
    refused and the fields either text of the pair `unreadable` by the model (with the larger
    share). `sealed`: the item is in (or bound for) a sealed slice the reader may not see; it is
    then not named (`item_id` null, "a sealed item"), its `why` is cut to its kind (the whole
    reason quotes words of both titles) and its `unreadable` shares are left out."""

    item_id: int | None = None
    sealed: bool = False
    stage: str | None = None
    score: float | None = None
    title_cosine: float | None = None
    why: str | None = None
    unreadable: dict[str, float] = Field(default_factory=dict)


class DedupExplanation(BaseModel):
    """Why dedup decided as it did, from the decision's stored details (`GET /v1/items/{id}`,
    the review queue, the item and review pages, `goldenset review`).

    `summary`: the explanation in one or two sentences. `rule`: the rule that applied (`exact`,
    `fresh`, `guard`, `machine`, `override`; null for a unique verdict); `stage`, `score`, the
    `threshold` it cleared and its `margin` over it; `p_same`: the calibrated probability that
    the pair is one incident, when the decider recorded one, and the pair `features` it weighed.
    `matched`: the item matched. `best_near_verbatim` and `best_paraphrase`: the closest MinHash
    and embedding candidates whatever was decided. `vetoed`: matches refused, each with why.
    `unreadable`: the fields of the item the model cannot read (share unknown or spelled out),
    and `read_as_characters`: the character similarity such a match was made on instead.
    `kept_over`: a later report of the same incident this item was kept over; `ruled_apart_from`,
    `ruled_by` and `note`: a person's ruling. `thresholds`: every threshold that applied, by name,
    and `rules_version` the rule set that decided. Items of a sealed slice the reader may not see
    are not named (`DedupCandidate.sealed`); an item itself shown without its content has no
    explanation at all (its matches and their scores would tell what it is like)."""

    summary: str
    rule: str | None = None
    stage: str | None = None
    score: float | None = None
    threshold: float | None = None
    margin: float | None = None
    p_same: float | None = None
    features: dict[str, float] = Field(default_factory=dict)
    matched: DedupCandidate | None = None
    best_near_verbatim: DedupCandidate | None = None
    best_paraphrase: DedupCandidate | None = None
    vetoed: list[DedupCandidate] = Field(default_factory=list)
    unreadable: dict[str, float] = Field(default_factory=dict)
    read_as_characters: dict[str, float] = Field(default_factory=dict)
    kept_over: DedupCandidate | None = None
    ruled_apart_from: DedupCandidate | None = None
    ruled_by: str | None = None
    note: str | None = None
    thresholds: dict[str, float] = Field(default_factory=dict)
    rules_version: str | None = None


class DedupRead(BaseModel):
    """How dedup judged an item, as `GET /v1/items/{id}` shows it; `stage` is `override` when a
    person ruled it (`POST /v1/items/{id}/not-duplicate`, `/duplicate-of`). `explanation`: why
    (`DedupExplanation`), null while the item is a candidate, was never judged, or is shown
    without its content."""

    status: str
    duplicate_of: int | None = None
    stage: str | None = None
    score: float | None = None
    decided_at: datetime | None = None
    explanation: DedupExplanation | None = None


class SimilarRead(BaseModel):
    """One item like another (`GET /v1/items/{id}/similar`, `POST /v1/dedup/check`), best first.

    `score` fuses `cosine` (body embeddings), `title_cosine` and `lexical` (character n-gram TF-IDF
    cosine over the short list); `jaccard` is MinHash's estimate of word 3-shingle Jaccard (None
    when the item has no sketch). `sealed`: the item is in (or bound for) a sealed slice, and its
    external id and title are withheld."""

    id: int
    external_id: str
    source: str
    title: str
    occurred_at: datetime
    status: str
    score: float
    cosine: float
    title_cosine: float
    jaccard: float | None
    lexical: float
    sealed: bool = False


class DedupCheck(BaseModel):
    """A text to check against everything curated (`POST /v1/dedup/check`); nothing is stored.
    `identity` is the record's `distinct_by` identity, if its source declares one."""

    title: str = Field(default="", max_length=10_000)
    input: str = Field(min_length=1, max_length=200_000)
    reference: str = Field(default="", max_length=200_000, description="Part of the exact fingerprint only; stored items' exact hashes cover it.")
    identity: str | None = Field(default=None, max_length=255)


class DedupCheckResult(BaseModel):
    """The verdict curation would give the text now: `status` `unique`, `duplicate` or `contaminated`;
    the `stage` that decided and its `score`; `duplicate_of` the cluster's root and `matched_item`
    the item actually matched; `details` the runner-up scores; `similar` the nearest items."""

    status: str
    stage: str
    score: float | None = None
    duplicate_of: int | None = None
    matched_item: int | None = None
    details: dict[str, Any] = Field(default_factory=dict)
    similar: list[SimilarRead] = Field(default_factory=list)


class NotDuplicateBody(BaseModel):
    """`POST /v1/items/{id}/not-duplicate`: why the item is not a duplicate of the item it was matched with."""

    note: str = pydantic.Field(min_length=1, max_length=2000, json_schema_extra={"pattern": NOT_BLANK}, description="Why: not blank.")


class DuplicateOfBody(BaseModel):
    """`POST /v1/items/{id}/duplicate-of`: the item it duplicates (`item_id`), and why."""

    item_id: RowId
    note: str = pydantic.Field(min_length=1, max_length=2000, json_schema_extra={"pattern": NOT_BLANK}, description="Why: not blank.")


class OverrideRead(BaseModel):
    """A person's ruling about a pair of items; `in_force` when it is the newest ruling of its pair."""

    id: int
    item_id: int
    other_id: int
    kind: OverrideKind
    note: str
    actor: str
    at: datetime
    in_force: bool


class DecisionCount(BaseModel):
    """How many decisions in force came from one `stage` and `rule` (`rule` null for a unique verdict)."""

    stage: str
    rule: str | None
    count: int


class ClusterSize(BaseModel):
    """How many clusters hold `size` items (the representative included)."""

    size: int
    clusters: int


class ClusterRead(BaseModel):
    """One cluster: its representative (the item the others' `duplicate_of` chains lead to), that
    item's `status` and `title`, and how many items it holds. `sealed`: the representative is in
    (or bound for) a sealed slice, and its title is withheld."""

    representative: int
    status: str
    title: str
    size: int
    sealed: bool = False


class DedupStats(BaseModel):
    """`GET /v1/dedup/stats`, `goldenset dedup stats`.

    `items`: every item; `by_status`: items per status. `decisions`: the decision in force of each
    item (its newest), counted by stage and rule. `cluster_sizes`: every item but candidates
    belongs to the cluster its `duplicate_of` chain leads to (an item with none represents its own,
    a reference item included); `largest_clusters`: the ten largest holding two or more items.
    `overrides`: people's rulings in force (the newest of each pair), by kind. `duplicate_share`:
    the share of the items dedup decided (all but candidates and reference items) that are `duplicate`."""

    items: int
    by_status: dict[str, int]
    decisions: list[DecisionCount]
    cluster_sizes: list[ClusterSize]
    largest_clusters: list[ClusterRead]
    overrides: dict[str, int]
    duplicate_share: float


class LowMarginDuplicate(BaseModel):
    """A duplicate decided with little to spare (`GET /v1/dedup/low-margin`, `goldenset review`):
    its decision in force matched `matched_item_id` by the `fresh` or `guard` rule, at `score`, only
    `margin` above the threshold that applied. `duplicate_of` is the item it names now."""

    item_id: int
    source: str
    status: str
    matched_item_id: int
    duplicate_of: int | None
    stage: str
    rule: str
    score: float
    margin: float
    decided_at: datetime

