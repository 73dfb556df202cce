"""Items, review decisions and dedup (`/v1/items`, `/v1/dedup`)."""

from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from goldenset_client.models._base import _Request, _Response
from goldenset_client.models.common import RecordError

ItemStatus = Literal["candidate", "unique", "duplicate", "contaminated", "approved", "rejected", "retired", "reference"]


class ApproveBody(_Request):
    """`POST /v1/items/{id}/approve`: an optional note."""

    reason: str = ""


class ClusterRead(_Response):
    """One cluster: its representative (the item the others' `duplicate_of` chains lead to), that
    item's `status` and `title`, and how many items it holds. `sealed`: the representative is in
    (or bound for) a sealed slice, and its title is withheld."""

    representative: int
    status: str
    title: str
    size: int
    sealed: bool = False


class ClusterSize(_Response):
    """How many clusters hold `size` items (the representative included)."""

    size: int
    clusters: int


Decision = Literal["approve", "reject"]


class DecisionCount(_Response):
    """How many decisions in force came from one `stage` and `rule` (`rule` null for a unique verdict)."""

    stage: str
    rule: str | None
    count: int


class DedupCheck(_Request):
    """A text to check against everything curated (`POST /v1/dedup/check`); nothing is stored.
    `identity` is the record's `distinct_by` identity, if its source declares one."""

    title: str = ""
    input: str
    reference: str = ""
    identity: str | None = None


class SimilarRead(_Response):
    """One item like another (`GET /v1/items/{id}/similar`, `POST /v1/dedup/check`), best first."""

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


class DedupCheckResult(_Response):
    """The verdict curation would give the text now: `status` `unique`, `duplicate` or `contaminated`;
    the `stage` that decided and its `score`; `duplicate_of` the cluster's root and
    `matched_item` the item actually matched; `details` the runner-up scores; `similar` the
    nearest items."""

    status: str
    stage: str
    score: float | None = None
    duplicate_of: int | None = None
    matched_item: int | None = None
    details: dict[str, Any] = Field(default_factory=dict)
    similar: list[SimilarRead] = Field(default_factory=list)


class DedupCandidate(_Response):
    """An item a dedup decision weighed (matched, a runner-up, or refused with `why`); `sealed`:
    in a sealed slice the reader may not see, so not named (`item_id` null)."""

    item_id: int | None = None
    sealed: bool = False
    stage: str | None = None
    score: float | None = None
    title_cosine: float | None = None
    why: str | None = None
    unreadable: dict[str, float] = Field(default_factory=dict)


class DedupExplanation(_Response):
    """Why dedup decided as it did: a `summary`, the `rule`, the `threshold` the `score` cleared
    and its `margin`, `p_same` (when the decider recorded one), the item `matched`, the best
    near-verbatim and paraphrase candidates, the `vetoed` matches and why, the `unreadable` fields."""

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


class DedupRead(_Response):
    """How dedup judged an item, as `GET /v1/items/{id}` shows it; `stage` is `override` when a person
    ruled it (`POST /v1/items/{id}/not-duplicate`, `/duplicate-of`); `explanation`: why."""

    status: str
    duplicate_of: int | None = None
    stage: str | None = None
    score: float | None = None
    decided_at: datetime | None = None
    explanation: DedupExplanation | None = None


class DedupStats(_Response):
    """`GET /v1/dedup/stats`, `goldenset dedup stats`."""

    items: int
    by_status: dict[str, Any]
    decisions: list[DecisionCount]
    cluster_sizes: list[ClusterSize]
    largest_clusters: list[ClusterRead]
    overrides: dict[str, Any]
    duplicate_share: float


class DuplicateOfBody(_Request):
    """`POST /v1/items/{id}/duplicate-of`: the item it duplicates (`item_id`), and why."""

    item_id: int
    note: str


class FieldChange(_Response):
    """One field a revision changed: its value before and after (null where withheld)."""

    field: str
    before: str | list[str] | None
    after: str | list[str] | None


OverrideKind = Literal["not_duplicate", "duplicate_of"]


class OverrideRead(_Response):
    """A person's ruling about a pair of items; `in_force` when it is the newest ruling of its pair."""

    id: int
    item_id: int
    other_id: int
    kind: OverrideKind
    note: str
    actor: str
    at: datetime
    in_force: bool


class ItemDetail(_Response):
    """One item as `GET /v1/items/{id}` shows it: with how dedup judged it (`{"status": "candidate"}`
    until curation decides) and people's rulings naming it on either side, oldest first (none
    shown for a sealed item); `curated_revision`, the revision a curator last wrote (null: the
    text is the source's), and `source_changed_at`, when the source changed an edited item since
    anyone looked (null otherwise, and for a sealed item)."""

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
    dedup: DedupRead
    curated_revision: int | None = None
    source_changed_at: datetime | None = None
    overrides: list[OverrideRead] = Field(default_factory=list)


class ItemEdit(_Request):
    """`PATCH /v1/items/{id}`: the fields to change (a field left out or null stays as it is) and why
    (`note`, required). The texts are bounded by the request body limit, as ingest's are."""

    title: str | None = None
    input: str | None = None
    reference: str | None = None
    tags: list[str] | None = None
    note: str


class ItemRead(_Response):
    """An item as the API shows it (a plain pydantic model: `metadata` is reserved on tables).
    `sealed`: the item is in (or bound for) an eval's sealed slice, and its content (external
    id, text fields, metadata, tags), its dates (null) and its content hash are withheld here."""

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


class ItemPage(_Response):
    """One page of `GET /v1/items`; pass `next_cursor` back as `cursor` for the next page."""

    items: list[ItemRead]
    next_cursor: str | None


class RevisionRead(_Response):
    """One revision of an item. `revision` 1 is the item as first ingested (its fields shown as changed
    from null). A `source` or `curator` revision made the item that revision; a `source_held`
    one is a change the source proposed to the curator's text at that revision, and its changes
    go from that text to the source's. A source revision that changed only the date or the
    metadata lists no changes."""

    revision: int
    kind: str
    at: datetime | None
    actor: str | None
    note: str | None
    changes: list[FieldChange]


class ItemRevisions(_Response):
    """`GET /v1/items/{id}/revisions`: every revision, oldest first, and whether the item's text is the
    curator's (`curated_revision`) or a source change awaits a look (`source_changed_at`). For
    an item in (or bound for) a sealed slice, read without the `sealed` scope, the dates, notes
    and values are withheld (`sealed: true`)."""

    item_id: int
    revision: int
    curated_revision: int | None
    source_changed_at: datetime | None
    sealed: bool = False
    revisions: list[RevisionRead]


class LowMarginDuplicate(_Response):
    """A duplicate decided with little to spare (`GET /v1/dedup/low-margin`, `goldenset review`): its
    decision in force matched `matched_item_id` by the `fresh` or `guard` rule, at `score`, only
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


class NotDuplicateBody(_Request):
    """`POST /v1/items/{id}/not-duplicate`: why the item is not a duplicate of the item it was matched
    with."""

    note: str


class RejectBody(_Request):
    """`POST /v1/items/{id}/reject`: why (required)."""

    reason: str


class ReviewDecision(_Request):
    item_id: int
    decision: Decision
    reason: str = ""


class ReviewBatch(_Request):
    """`POST /v1/items/review`: decisions to apply; each is judged alone."""

    decisions: list[ReviewDecision]


class ReviewOutcome(_Response):
    """Which items were approved and rejected; `errors` names each decision refused, by position (the
    others are kept)."""

    approved: list[int]
    rejected: list[int]
    errors: list[RecordError]


class ReviewUndone(_Response):
    """`POST /v1/items/{id}/undo-review`: the decision undone (`undone`, with its reason, who took it
    and when); the item is `unique` again and back in the review queue."""

    item_id: int
    status: str
    undone: Decision
    reason: str
    decided_by: str
    decided_at: datetime


QuestionState = Literal["open", "answered", "withdrawn"]
QuestionRuling = Literal["same", "distinct"]


class QuestionEvidence(_Response):
    """What the rules and the judge saw of a question's pair: embedding cosines, the word-shingle
    Jaccard MinHash estimates, character similarities, and what the titles name differently."""

    body_cosine: float | None = None
    title_cosine: float | None = None
    minhash: float | None = None
    body_characters: float | None = None
    title_characters: float | None = None
    title_differences: list[str] = Field(default_factory=list)


class DedupQuestionRead(_Response):
    """A pair dedup asks a curator about (`GET /v1/dedup/questions`): both items side by side (a
    sealed one without its content), the judge's `p_same`, the `rules_outcome` and `why` it was
    asked, the pair `features` and `evidence` (empty when either item is withheld), and the answer."""

    id: int
    state: QuestionState
    asked_at: datetime
    item: ItemRead
    other: ItemRead
    p_same: float
    rules_outcome: str
    why: str
    rule: str | None = None
    stage: str | None = None
    features: dict[str, float] = Field(default_factory=dict)
    evidence: QuestionEvidence | None = None
    ruling: QuestionRuling | None = None
    ruled_by: int | None = None
    ruled_at: datetime | None = None
    note: str | None = None


class DedupQuestionPage(_Response):
    """One page of dedup questions, oldest asked first; pass `next_cursor` as `cursor` for the next."""

    questions: list[DedupQuestionRead]
    next_cursor: str | None = None


class QuestionAnswer(_Request):
    """`POST /v1/dedup/questions/{id}/answer`: `same` or `distinct`, and an optional note."""

    ruling: QuestionRuling
    note: str = ""
