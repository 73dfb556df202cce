"""What the run pages show of a run, and the CSV of a list of runs.

A run's score is its summary exactly as `GET /v1/runs/{id}` gives it
(`service.runs.runs.run_summary`: the mean with its Wilson or bootstrap interval), for dev and
sealed runs alike, as that route does for any token with `read`: a sealed run shows only that
aggregate, never its items. Beside it: its release's date, whether the release was withdrawn,
and a status saying how far its results came.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func
from sqlmodel import Session, col, select

from schemas.evals import Eval
from schemas.model_registry import Model
from schemas.release import Release
from schemas.runs import Run, RunSummary
from service.runs.runs import run_summary

NO_ITEMS = "no items"
AWAITING = "awaiting results"
PARTLY = "partly scored"
SCORED = "scored"
CSV_COLUMNS = (
    "run_id", "eval", "release", "release_withdrawn", "split", "model", "endpoint", "created_at", "item_count", "scored", "remaining",
    "mean", "low", "high", "confidence", "method", "status",
)  # fmt: skip


@dataclass(frozen=True)
class RunRow:
    summary: RunSummary
    release_date: datetime
    release_withdrawn: bool
    status: str


def run_status(*, item_count: int, scored: int) -> str:
    """How far a run's results came: `no items`, `awaiting results`, `partly scored` or `scored`."""
    if item_count == 0:
        return NO_ITEMS
    if scored == 0:
        return AWAITING
    return PARTLY if scored < item_count else SCORED


def run_rows(session: Session, runs: Sequence[Run]) -> list[RunRow]:
    """Each run with its summary (the API's), its release's date and its status, in order."""
    rows = []
    for run in runs:
        summary = run_summary(session=session, run=run)
        release = session.get(Release, run.release_id)
        assert release is not None
        rows.append(RunRow(summary, release.created_at, release.withdrawn_at is not None, run_status(item_count=summary.item_count, scored=summary.scored)))
    return rows


def _filtered(query: Any, evaluation: Eval | None, model: Model | None) -> Any:
    if evaluation is not None:
        query = query.where(Run.eval_id == evaluation.id)
    if model is not None:
        query = query.where(Run.model_id == model.id)
    return query


def newest_runs(session: Session, *, evaluation: Eval | None = None, model: Model | None = None, offset: int = 0, limit: int | None = None) -> list[Run]:
    """Runs (of the eval and model, when given), newest first."""
    query = _filtered(select(Run), evaluation, model).order_by(col(Run.created_at).desc(), col(Run.id).desc()).offset(offset)
    if limit is not None:
        query = query.limit(limit)
    return list(session.exec(query).all())


def count_runs(session: Session, *, evaluation: Eval | None = None, model: Model | None = None) -> int:
    return int(session.exec(_filtered(select(func.count()).select_from(Run), evaluation, model)).one())


def _number(value: float | None) -> str:
    return "" if value is None else repr(value)


def runs_csv(rows: Sequence[RunRow]) -> str:
    """The rows as CSV (`CSV_COLUMNS`), numbers at full precision, times in ISO 8601."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for row in rows:
        summary, score = row.summary, row.summary.score
        writer.writerow(
            [
                summary.id, summary.eval, summary.release, str(row.release_withdrawn).lower(), summary.split, summary.model, summary.endpoint,
                summary.created_at.isoformat(), summary.item_count, summary.scored, summary.remaining,
                _number(score.mean), _number(score.low), _number(score.high), score.confidence, score.method, row.status,
            ]
        )  # fmt: skip
    return out.getvalue()
