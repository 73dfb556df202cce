"""The per-item results evidence reports compare, gathered from the database: a model's scores in
an eval's runs, or the results uploaded for it on a registered public corpus (the temporal split);
and every model's scores in an eval's dev runs and on a corpus (the public-inflation report).

An item scored in several runs counts once, with the mean of its scores (the reports need one
result per item). Human success is stored as the share of people who solved an item; the report
counts an item as solved by people where that share is at least one half.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime

import numpy as np
from sqlalchemy import func
from sqlalchemy import select as sa_select
from sqlmodel import Session, col

from schemas.corpus_results import CorpusResult
from schemas.evals import Eval, Split
from schemas.evidence import ItemResult
from schemas.item import Item
from schemas.model_registry import Model
from schemas.runs import Result, Run, RunItem
from schemas.source import Source

HUMAN_SOLVED_SHARE = 0.5


def _one_per_item(rows: Iterable[tuple[str, datetime, float, float | None]]) -> list[ItemResult]:
    scores: dict[str, list[float]] = defaultdict(list)
    humans: dict[str, list[float]] = defaultdict(list)
    dates: dict[str, datetime] = {}
    for item_id, occurred_at, score, human in rows:
        scores[item_id].append(score)
        dates[item_id] = occurred_at
        if human is not None:
            humans[item_id].append(human)
    return [
        ItemResult(
            item_id=item_id,
            occurred_at=dates[item_id],
            score=float(np.mean(values)),
            human_success=(float(np.mean(humans[item_id])) >= HUMAN_SOLVED_SHARE) if humans[item_id] else None,
        )
        for item_id, values in scores.items()
    ]


def eval_item_results(*, session: Session, evaluation: Eval, model: Model) -> list[ItemResult]:
    """One result per item the model was scored on in any dev run of the eval (mean over runs),
    dated by the item's incident date as served. Sealed runs never count: their per-item results
    are for the `sealed` scope, and a report made of these is for `read` (a month holding one
    sealed item would show its score)."""
    rows = session.execute(
        sa_select(col(Result.item_id), col(RunItem.occurred_at), col(Result.score), col(Result.human_success))
        .join(RunItem, (col(RunItem.run_id) == col(Result.run_id)) & (col(RunItem.item_id) == col(Result.item_id)))
        .join(Run, col(Run.id) == col(Result.run_id))
        .where(col(Run.eval_id) == evaluation.id, col(Run.model_id) == model.id, col(Run.split) == Split.DEV.value)
    ).all()
    return _one_per_item((str(item_id), at, score, human) for item_id, at, score, human in rows)


def corpus_item_results(*, session: Session, corpus: Source, model: Model) -> list[ItemResult]:
    """The model's uploaded results on the corpus, by the corpus's own item ids."""
    rows = session.execute(
        sa_select(col(Item.external_id), col(Item.occurred_at), col(CorpusResult.score), col(CorpusResult.human_success))
        .join(Item, col(Item.id) == col(CorpusResult.item_id))
        .where(col(Item.source_id) == corpus.id, col(CorpusResult.model_id) == model.id)
    ).all()
    return _one_per_item((external_id, at, score, human) for external_id, at, score, human in rows)


ScoresByModel = dict[int, dict[int, float]]
"""Model id → item id → the model's (mean) score on the item."""


def dev_scores_by_model(*, session: Session, evaluation: Eval) -> ScoresByModel:
    """Every model's scores on the eval's items over its dev runs only (an item scored in several
    dev runs, of one release or several, counts once with its mean). Sealed runs never count: their
    per-item results are for the sealed scope, and these scores feed reports a read token gets."""
    rows = session.execute(
        sa_select(col(Run.model_id), col(Result.item_id), func.avg(col(Result.score)))
        .join(Run, col(Run.id) == col(Result.run_id))
        .where(col(Run.eval_id) == evaluation.id, col(Run.split) == Split.DEV.value)
        .group_by(col(Run.model_id), col(Result.item_id))
    ).all()
    scores: ScoresByModel = defaultdict(dict)
    for model_id, item_id, score in rows:
        scores[int(model_id)][int(item_id)] = float(score)
    return dict(scores)


def corpus_scores_by_model(*, session: Session, corpus: Source) -> ScoresByModel:
    """Every model's uploaded scores on the corpus's items (one per model and item)."""
    rows = session.execute(
        sa_select(col(CorpusResult.model_id), col(CorpusResult.item_id), col(CorpusResult.score))
        .join(Item, col(Item.id) == col(CorpusResult.item_id))
        .where(col(Item.source_id) == corpus.id)
    ).all()
    scores: ScoresByModel = defaultdict(dict)
    for model_id, item_id, score in rows:
        scores[int(model_id)][int(item_id)] = float(score)
    return dict(scores)
