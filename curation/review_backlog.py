"""The review backlog: how many items wait for a person's review on each eval, counted once for
every reader (the review queue's total, the pages that list evals, the
`goldenset_review_backlog_items` gauge), so they cannot disagree.

An item waits for review on an eval when it is `unique` in one of the eval's sources, unless the
eval approves automatically and already took it (`taken_without_review`): such an item waits for
nobody. Counting costs two grouped queries whatever the number of evals or items: the `unique`
items by source, and the members of evals with automatic approval that are still `unique`, by eval
and source. No query is made per eval or per item.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import func
from sqlmodel import Session, col, select

from schemas.evals import ApprovalPolicy, Eval, EvalItem
from schemas.item import Item, ItemStatus
from schemas.source import Source


def taken_without_review(evaluation: Eval) -> int | None:
    """The id of `evaluation` when its approval is automatic, else None. Such an eval takes a
    `unique` item at its next refresh without a review, and an item it retired never comes back:
    its members, in force or retired, wait for nobody's review on it. (An eval with manual review
    keeps them: a member that is `unique` again had its content changed and is withheld until a
    person approves it again.)"""
    return evaluation.id if evaluation.approval_policy == ApprovalPolicy.AUTO.value else None


def waiting_for_review(session: Session, evaluations: Sequence[Eval]) -> dict[str, int]:
    """How many items wait for review on each of `evaluations`, by name: the `total` its review
    queue shows without filters. Two grouped counts (see the module), read-only."""
    wanted = sorted({source for evaluation in evaluations for source in evaluation.sources})
    if not wanted:
        return {evaluation.name: 0 for evaluation in evaluations}
    unique = (col(Item.status) == ItemStatus.UNIQUE.value, col(Source.name).in_(wanted))
    counted = select(Source.name, func.count()).join(Item, col(Item.source_id) == col(Source.id)).where(*unique).group_by(col(Source.name))
    by_source: dict[str, int] = dict(session.exec(counted).all())
    takers = sorted({taker for evaluation in evaluations if (taker := taken_without_review(evaluation)) is not None})
    taken: dict[tuple[int, str], int] = {}
    if takers and by_source:
        members = (
            select(EvalItem.eval_id, Source.name, func.count())
            .select_from(Item)
            .join(Source, col(Source.id) == col(Item.source_id))
            .join(EvalItem, col(EvalItem.item_id) == col(Item.id))
            .where(*unique, col(EvalItem.eval_id).in_(takers))
            .group_by(col(EvalItem.eval_id), col(Source.name))
        )
        taken = {(eval_id, source): count for eval_id, source, count in session.exec(members).all()}
    waiting = {}
    for evaluation in evaluations:
        sources = set(evaluation.sources)
        count = sum(by_source.get(source, 0) for source in sources)
        taker = taken_without_review(evaluation)
        if taker is not None:
            count -= sum(taken.get((taker, source), 0) for source in sources)
        waiting[evaluation.name] = count
    return waiting
