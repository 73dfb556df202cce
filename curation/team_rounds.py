"""The rounds of team review, as every decision on an item sees them: how many votes an item needs
on an eval, which evals ask more than one vote of an item's source, and closing an item's open
round when the item leaves review (`curation.review.decide`, an edit, a ruling).

An item needs `reviewers_per_item` votes on an eval when it falls in the eval's agreement sample,
else one. The sample is a fixed hash of the item's id (Knuth's multiplicative hash, taken modulo
2^32), the same in Python and in SQL, so which items are double-checked never changes and needs
no stored state.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import BigInteger, ColumnElement, case, cast, delete, literal, update
from sqlalchemy.orm import Mapped
from sqlmodel import Session, col, select

from schemas.evals import ApprovalPolicy, Eval, ReviewAssignment
from schemas.item import Item
from schemas.team_review import ReviewClaim, ReviewVote

HASH_MULTIPLIER = 2_654_435_761
HASH_SPACE = 2**32


def is_team_review(evaluation: Eval) -> bool:
    """Whether the eval's review goes by votes: more than one reviewer per item, or a queue shared
    out by claims or round-robin. (An `open` queue with one reviewer per item is decided directly.)"""
    return evaluation.approval_policy == ApprovalPolicy.MANUAL.value and (
        evaluation.reviewers_per_item > 1 or evaluation.review_assignment != ReviewAssignment.OPEN.value
    )


def _threshold(evaluation: Eval) -> int:
    return round(evaluation.agreement_sample * HASH_SPACE)


def votes_needed(evaluation: Eval, item_id: int) -> int:
    """How many votes `item_id` needs on `evaluation`: `reviewers_per_item` when the item is in the
    agreement sample, else one."""
    if evaluation.reviewers_per_item <= 1:
        return 1
    return evaluation.reviewers_per_item if (item_id * HASH_MULTIPLIER) % HASH_SPACE < _threshold(evaluation) else 1


def votes_needed_column(evaluation: Eval, item_id: Mapped[int] | None = None) -> ColumnElement[int]:
    """`votes_needed` as a SQL expression over `item_id` (default `item.id`; 64-bit arithmetic on
    both databases)."""
    column = col(Item.id) if item_id is None else item_id
    if evaluation.reviewers_per_item <= 1:
        return case((column.is_not(None), 1), else_=1)
    wide = cast(column, BigInteger)
    sampled = (wide * literal(HASH_MULTIPLIER, BigInteger)) % literal(HASH_SPACE, BigInteger) < literal(_threshold(evaluation), BigInteger)
    return case((sampled, evaluation.reviewers_per_item), else_=1)


def agreement_evals(session: Session, source: str) -> list[Eval]:
    """The evals with manual approval that take `source` and ask more than one vote per item."""
    evals = session.exec(select(Eval).where(col(Eval.reviewers_per_item) > 1, Eval.approval_policy == ApprovalPolicy.MANUAL.value)).all()
    return [evaluation for evaluation in evals if source in evaluation.sources]


def votes_required_by(session: Session, item_id: int, source: str) -> Eval | None:
    """The eval whose team review asks more than one vote of this item (the one asking most), if
    any: then no single person's decision settles it, only agreeing votes or an adjudicator."""
    needing = [(votes_needed(evaluation, item_id), evaluation.name, evaluation) for evaluation in agreement_evals(session, source)]
    needing = [entry for entry in needing if entry[0] > 1]
    return max(needing, key=lambda entry: (entry[0], entry[1]))[2] if needing else None


def open_votes(session: Session, eval_id: int, item_id: int) -> list[ReviewVote]:
    """The open votes of the item's round on the eval, oldest first."""
    query = select(ReviewVote).where(ReviewVote.eval_id == eval_id, ReviewVote.item_id == item_id, col(ReviewVote.settled_at).is_(None))
    return list(session.exec(query.order_by(col(ReviewVote.id))).all())


def close_rounds(session: Session, item_ids: Sequence[int], *, now: datetime, outcome: str | None) -> None:
    """Close the open rounds of `item_ids` on every eval (their votes settled at `now` with
    `outcome`, the decision the items got, or none when they left review otherwise) and drop the
    claims on them. Does not commit."""
    if not item_ids:
        return
    ids = sorted(set(item_ids))
    session.exec(update(ReviewVote).where(col(ReviewVote.item_id).in_(ids), col(ReviewVote.settled_at).is_(None)).values(settled_at=now, outcome=outcome))
    session.exec(delete(ReviewClaim).where(col(ReviewClaim.item_id).in_(ids)))
