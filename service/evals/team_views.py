"""The views of an eval's review queue a team works from (`schemas.team_review.QueueView`): what
waits for one reviewer's vote, the disagreements, everything; and their counts for the tabs that
name them. A view is a list of conditions on `item` added to the queue's own
(`service.evals.review_queue.source_queue`), so each is one count and one page query.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ColumnElement, func
from sqlmodel import Session, select

from curation.team_review import disputed_conditions, mine_conditions
from curation.team_rounds import is_team_review
from schemas.evals import Eval
from schemas.item import Item
from schemas.team_review import QueueView
from service.evals.review_queue import queue_scope


def default_view(evaluation: Eval) -> QueueView:
    """`mine` on an eval reviewed by a team, else `all`."""
    return QueueView.MINE if is_team_review(evaluation) else QueueView.ALL


def view_conditions(evaluation: Eval, view: QueueView, *, actor: str, now: datetime) -> list[ColumnElement[bool]]:
    """The conditions on `item` that narrow the eval's queue to `view` for `actor`; none for `all`
    (and for `mine` on an eval decided by single decisions, where everything waits for anyone)."""
    if view is QueueView.DISPUTED:
        return disputed_conditions(evaluation)
    if view is QueueView.MINE and is_team_review(evaluation):
        return mine_conditions(evaluation, actor, now)
    return []


@dataclass(frozen=True)
class ViewCounts:
    """How many items each view of the eval's queue holds for one reviewer (no filters)."""

    mine: int
    disputed: int
    all: int


def view_counts(session: Session, evaluation: Eval, *, actor: str, now: datetime) -> ViewCounts:
    """The size of each view for `actor`: three counts on the queue's indexed columns."""
    scope = queue_scope(session, evaluation)

    def count(view: QueueView) -> int:
        conditions = scope + view_conditions(evaluation, view, actor=actor, now=now)
        return int(session.exec(select(func.count()).select_from(Item).where(*conditions)).one())

    everything = count(QueueView.ALL)
    mine = count(QueueView.MINE) if is_team_review(evaluation) else everything
    return ViewCounts(mine=mine, disputed=count(QueueView.DISPUTED) if is_team_review(evaluation) else 0, all=everything)
