"""Team review of an eval's queue (`/v1/evals/{name}/review/...`): claimed batches, votes, the
round an item is in, adjudication, and the team's progress and agreement."""

from datetime import datetime
from typing import Literal

from goldenset_client.models._base import _Request, _Response
from goldenset_client.models.items import Decision

QueueView = Literal["mine", "disputed", "all"]
"""Which part of an eval's review queue to read: `mine` (what waits for this token's vote; the
default on an eval reviewed by a team), `disputed` (votes that disagree, for an adjudicator), `all`."""
RoundState = Literal["waiting", "decided", "disputed"]
"""Where an item's round stands: `waiting` for more votes, `decided` (the votes agreed, or an
adjudicator decided), `disputed` (the votes differ: an adjudicator decides)."""


class ClaimBody(_Request):
    """`POST /v1/evals/{name}/review/claims`: how many items to hold (1 to 200)."""

    size: int = 20


class ClaimOutcome(_Response):
    """The items this token's owner holds on the eval after claiming (`claimed`: the new ones), in
    queue order, until `expires_at`; empty (and `expires_at` null) when nothing waits for them."""

    eval: str
    held: list[int]
    claimed: list[int]
    expires_at: datetime | None


class VoteBody(_Request):
    """`POST /v1/evals/{name}/review/votes` and `.../adjudications`: the decision on one item; a
    rejection needs a reason."""

    item_id: int
    decision: Decision
    reason: str = ""


class VoteRead(_Response):
    """One reviewer's vote in a round (`reviewer` as the audit trail names them: `token:<name>`)."""

    reviewer: str
    decision: Decision
    reason: str
    cast_at: datetime


class RoundOutcome(_Response):
    """An item's round after a vote, a vote taken back or an adjudication: the open votes, how many
    it `needed`, its `state` and the item's `status` (`approved` or `rejected` once decided).
    Never the item's content."""

    item_id: int
    eval: str
    state: RoundState
    needed: int
    votes: list[VoteRead]
    status: str


class ReviewerProgress(_Response):
    """One person's review on an eval: open claims, votes cast (approve, reject, still open,
    settled, and how many agreed with the outcome their round got), adjudications, last activity."""

    reviewer: str
    claimed: int
    votes: int
    approved: int
    rejected: int
    waiting: int
    settled: int
    agreed_with_outcome: int
    adjudicated: int
    last_at: datetime | None


class TeamReview(_Response):
    """`GET /v1/evals/{name}/review/team`: the eval's team settings and progress. `waiting_for_votes`
    counts what waits for this token's vote, `disputed` the disagreements; `rounds` have two votes
    or more, `unanimous` of them agreed; `percent_agreement` and `fleiss_kappa` are null when
    undefined."""

    eval: str
    reviewers_per_item: int
    agreement_sample: float
    assignment: str
    reviewers: list[str]
    adjudicators: list[str]
    guidelines: str
    waiting_for_votes: int
    disputed: int
    rounds: int
    unanimous: int
    percent_agreement: float | None
    fleiss_kappa: float | None
    people: list[ReviewerProgress]
