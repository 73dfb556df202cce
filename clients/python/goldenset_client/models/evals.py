"""Evals, their review queue, and releases with their exports (`/v1/evals`)."""

import json
from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from goldenset_client.models._base import _Request, _Response
from goldenset_client.models.items import DedupExplanation

Split = Literal["dev", "sealed"]
ApprovalPolicy = Literal["manual", "auto"]
ReviewAssignment = Literal["open", "claim", "round_robin"]
"""How a team shares an eval's review queue: `open` (everyone sees every item still needing
votes), `claim` (each reviewer claims a batch), `round_robin` (each item assigned by its id)."""


class EvalCreate(_Request):
    """`POST /v1/evals`: a name and any settings (defaults: target 200, monthly on the 1st at 03:00
    UTC, maximum age 365 days, 20% sealed, manual review by one person's decision, 3 sealed reads
    per release, 30% of each release's dev split carried from the release before, composition
    balanced). Team review: `reviewers_per_item` votes (1 to 5) that must agree, asked of an
    `agreement_sample` share of the items; the queue shared by `review_assignment` (`reviewers`
    by token name for round-robin); disagreements decided by `adjudicators` (none: any admin)."""

    name: str
    description: str = ""
    sources: list[str]
    target_size: int = 200
    schedule: str = "0 3 1 * *"
    max_age_days: int | None = 365
    earliest_occurred_at: datetime | None = None
    source_quotas: dict[str, Any] = Field(default_factory=dict)
    sealed_fraction: float = 0.2
    approval_policy: ApprovalPolicy = "manual"
    sealed_read_budget: int = 3
    reviewers_per_item: int = 1
    agreement_sample: float = 1.0
    review_assignment: ReviewAssignment = "open"
    reviewers: list[str] = Field(default_factory=list)
    adjudicators: list[str] = Field(default_factory=list)
    review_guidelines: str = ""
    linking_share: float = 0.3
    balance_composition: bool = True


class EvalRead(_Response):
    """An eval as the API shows it (never its seal key). The team review settings default to one
    person's decision on an open queue, as a server older than team review reviews."""

    id: int
    name: str
    description: str
    sources: list[str]
    target_size: int
    schedule: str
    max_age_days: int | None
    earliest_occurred_at: datetime | None
    source_quotas: dict[str, Any]
    sealed_fraction: float
    approval_policy: str
    sealed_read_budget: int
    reviewers_per_item: int = 1
    agreement_sample: float = 1.0
    review_assignment: str = "open"
    reviewers: list[str] = Field(default_factory=list)
    adjudicators: list[str] = Field(default_factory=list)
    review_guidelines: str = ""
    linking_share: float = 0.3
    balance_composition: bool = True
    canary: str
    created_at: datetime
    updated_at: datetime
    latest_release: int | None = None

    @property
    def team_review(self) -> bool:
        """Whether the eval's review goes by votes (manual approval, and more than one vote per item
        or a queue shared by claims or round-robin): then each person votes with their own token."""
        return self.approval_policy == "manual" and (self.reviewers_per_item > 1 or self.review_assignment != "open")


class EvalUpdate(_Request):
    """`PATCH /v1/evals/{name}`: the settings to change. `sealed_fraction` can change only until the
    first release (membership of the sealed slice never changes after)."""

    description: str | None = None
    sources: list[str] | None = None
    target_size: int | None = None
    schedule: str | None = None
    max_age_days: int | None = None
    earliest_occurred_at: datetime | None = None
    source_quotas: dict[str, Any] | None = None
    sealed_fraction: float | None = None
    approval_policy: ApprovalPolicy | None = None
    sealed_read_budget: int | None = None
    reviewers_per_item: int | None = None
    agreement_sample: float | None = None
    review_assignment: ReviewAssignment | None = None
    reviewers: list[str] | None = None
    adjudicators: list[str] | None = None
    review_guidelines: str | None = None
    linking_share: float | None = None
    balance_composition: bool | None = None


class ExportMetadata(_Response):
    """What every export row carries besides the item: the release's canary (so a row found in a crawl
    or a training set is recognisable on its own), the eval and the release, and the item's own
    metadata as canonical JSON text (one column type whatever the sources put there)."""

    canary: str
    eval: str
    release: int
    item: str


class ExportRow(_Response):
    """One line of a JSONL export (`GET .../export.jsonl`, `goldenset export`): one item, nothing else,
    so `datasets.load_dataset("json", ...)` loads one row per item. The released content is the
    row's item fields with `metadata` replaced by `json.loads(metadata.item)`; its canonical
    JSON hashes to `content_digest` (`goldenset verify` and the manifest check it)."""

    id: int
    source: str
    external_id: str
    occurred_at: str  # ISO 8601 in UTC, exactly as released (the digest covers this text)
    title: str
    input: str
    reference: str
    tags: list[str]
    split: str
    content_digest: str
    metadata: ExportMetadata

    def item_metadata(self) -> dict[str, Any]:
        """The item's own metadata object, as released (`metadata.item` parsed)."""
        parsed = json.loads(self.metadata.item)
        return parsed if isinstance(parsed, dict) else {}


class ManifestEntry(_Response):
    item_id: int
    split: str
    content_digest: str


class QueueDecision(_Response):
    """Curation's decision in force about a queued item: its `stage` (`none`: nothing was close enough;
    `override`: a person ruled it), the `rule` that applied, the `score` and its `margin` over
    the threshold, and the item it was matched with (for a ruling, the item it was ruled apart
    from). `matched_item_id` is withheld (null) for a sealed-bound entry shown by metadata only,
    and for a match in a sealed slice; `explanation`: why (null for an entry shown by metadata only)."""

    status: str
    stage: str
    rule: str | None = None
    score: float | None = None
    margin: float | None = None
    matched_item_id: int | None = None
    decided_at: datetime
    explanation: DedupExplanation | None = None


class RetiredEntry(_Response):
    item_id: int
    reason: str


class ReleaseDiff(_Response):
    """What changed since the release before: items added, items retired with the reason, and members
    left out of this release only while they wait for curation or review again (their content
    changed)."""

    added: list[int]
    retired: list[RetiredEntry]
    withheld: list[int] = Field(default_factory=list)


class CrossSplitPair(_Response):
    """Two near-linked items on either side of the split (`dev`, `sealed`): the sealed one should
    be taken as seen. Releases keep near groups on one side, so only earlier releases force one."""

    dev: int
    sealed: int
    stage: str
    score: float | None = None


class StratumShare(_Response):
    """One stratum of a release's composition: its name, how many of the release's items fall in it,
    and their share."""

    value: str
    count: int
    share: float


class ReleaseComposition(_Response):
    """What a release is made of, by what is known of each item before any result: its `items` by
    source, by category (`tag`: an item's first tag; only categories its dev items carry are named,
    the rest count under `(other)`), by length band of the input and by age band at the period's
    start. `balanced_against`: the release whose shares rotation followed (None: none)."""

    items: int
    balanced_against: int | None = None
    source: list[StratumShare]
    tag: list[StratumShare]
    length: list[StratumShare]
    age: list[StratumShare]


class LinkingCore(_Response):
    """The dev items carried from the dev split of the release before (`previous_release`):
    `carried` of `dev` (`carried_share`); the eval's `share` asked for `wanted`, `could_not_keep`
    are missing because the items that could have stayed had to retire, `left_by_rule` counts the
    previous dev items that left by a rule, by reason."""

    share: float
    previous_release: int | None = None
    previous_dev: int = 0
    dev: int
    carried: int
    carried_share: float
    wanted: int
    could_not_keep: int = 0
    left_by_rule: dict[str, int] = Field(default_factory=dict)


class ReleaseWithdrawal(_Response):
    """Who withdrew a release, when and why."""

    at: datetime
    by: str
    reason: str


class ReleaseSummary(_Response):
    """A release without its item list. `withdrawn` is set once an admin withdrew it: it no longer
    counts as `latest`, and eval pipelines should not score against it."""

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
    sealed_digest: str = "sha256"  # `hmac-sha256`: sealed digests are keyed, only the server recomputes them
    diff: ReleaseDiff
    cross_split_pairs: list[CrossSplitPair] | None = None  # None: written before near links were recorded
    withdrawn: ReleaseWithdrawal | None = None
    composition: ReleaseComposition | None = None  # None: written before compositions were recorded
    linking: LinkingCore | None = None  # None: written before the linking core was recorded


class RefreshResult(_Response):
    """The release for the period asked for; `created` is false when it already existed."""

    created: bool
    release: ReleaseSummary


class ReleasedItem(_Response):
    """One item's content as released."""

    item_id: int
    split: str
    content_digest: str
    content: dict[str, Any]


class ReleaseItems(_Response):
    """`GET .../items`: the items of one split as released, newest incident first."""

    eval: str
    release: int
    split: str
    canary: str
    items: list[ReleasedItem]


class ReleaseManifest(_Response):
    """A release's manifest: every item as `(item_id, split, content_digest)`, by item id. Sealed items
    appear only so: the digests commit to their content without showing it."""

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
    sealed_digest: str = "sha256"  # `hmac-sha256`: sealed digests are keyed, only the server recomputes them
    diff: ReleaseDiff
    cross_split_pairs: list[CrossSplitPair] | None = None  # None: written before near links were recorded
    withdrawn: ReleaseWithdrawal | None = None
    composition: ReleaseComposition | None = None  # None: written before compositions were recorded
    linking: LinkingCore | None = None  # None: written before the linking core was recorded
    items: list[ManifestEntry]


class ReviewQueueEntry(_Response):
    """One pending item. `position` is its place in the queue (1 is the oldest incident), out of the
    page's `total`. `sealed`: the item is in (or bound for) an eval's sealed slice; `withheld`:
    its external id, title, input, reference, metadata and tags are withheld (empty) because the
    reader holds no open sealed review window, so it is reviewed by its source, date, status and
    dedup decision only. `source_changed_at`: the source changed the item after a curator edited
    it and nobody has looked since."""

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


class ReviewQueuePage(_Response):
    """`GET /v1/evals/{name}/review-queue`: one page of the items waiting for review (`unique`), oldest
    incident first, `total` of them in all under the filters. `withheld` counts the entries
    shown by metadata only, and `note` says why and how to see them; `sealed_review_until` is
    when the reader's sealed review window closes (null: none open)."""

    eval: str | None
    total: int
    offset: int
    limit: int
    withheld: int
    note: str | None = None
    sealed_review_until: datetime | None = None
    entries: list[ReviewQueueEntry]


class SealedReviewWindow(_Response):
    """`POST /v1/evals/{name}/sealed-review`: the window in which the token sees sealed-bound items of
    the eval's review queue in full, until `until`. `opened`: this call opened it and took one
    unit of the eval's sealed-read budget (`used` of `budget` since the eval's latest release);
    false: the token's window was already open, and nothing was counted."""

    eval: str
    until: datetime
    opened: bool
    budget: int
    used: int


class WithdrawBody(_Request):
    """`POST /v1/evals/{name}/releases/{n}/withdraw`: why the release is withdrawn (kept in the audit
    trail)."""

    reason: str
