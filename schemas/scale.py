"""The common scale of an eval's releases (`curation.scale`): each stored fit, and what the API
answers from it: per release its difficulty index, per model and per run the ability, per run its
equated score on the reference release, and a score change split into the set and the model."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field
from sqlalchemy import Column, LargeBinary, UniqueConstraint
from sqlmodel import Field as ColumnField
from sqlmodel import SQLModel

from schemas.common import UTCDateTime, json_column_type, utcnow


class ScaleFit(SQLModel, table=True):
    """One fit of an eval's scale (`version` counts up per eval). `results_through`: the newest
    result id it saw, so a newer result makes it stale. `summary`: what `GET .../scale` shows;
    `parameters`: the mode (`models`, `runs`, `items` by id) and the release of each run and the
    items of each release; `draws`: posterior draws of every parameter (float32, `draw_count`
    rows), kept for the newest fit only, for score changes between any two runs."""

    __tablename__ = "scale_fit"
    __table_args__ = (UniqueConstraint("eval_id", "version", name="uq_scale_fit_version"),)

    id: int | None = ColumnField(default=None, primary_key=True)
    eval_id: int = ColumnField(foreign_key="eval.id", index=True)
    version: int
    fitted_at: datetime = ColumnField(default_factory=utcnow, sa_type=UTCDateTime)
    method: str = ColumnField(max_length=64)
    results_through: int
    observations: int
    log_posterior: float
    converged: bool
    summary: dict[str, Any] = ColumnField(default_factory=dict, sa_column=Column(json_column_type(), nullable=False))
    parameters: dict[str, Any] = ColumnField(default_factory=dict, sa_column=Column(json_column_type(), nullable=False))
    draw_count: int = 0
    draws: bytes | None = ColumnField(default=None, sa_column=Column(LargeBinary, nullable=True))


class ScaleEstimate(BaseModel):
    """An estimate with its 95% interval (posterior mean and percentiles over the fit's draws)."""

    value: float
    low: float
    high: float


class ReleaseScale(BaseModel):
    """A release on the scale: its items in the fit and its difficulty index, the score (0-100)
    the reference ability (the mean model's) is expected to get on them: lower is harder."""

    number: int
    items: int
    difficulty_index: ScaleEstimate


class ModelScale(BaseModel):
    name: str
    ability: ScaleEstimate
    runs: int


class RunScale(BaseModel):
    """A run on the scale: its release, its raw mean score (0-100), its ability, and its equated
    score, what its ability is expected to score on the reference release (0-100)."""

    id: int
    model: str
    release: int
    mean_score: float
    ability: ScaleEstimate
    equated_score: ScaleEstimate


class RunOnScale(BaseModel):
    """Where one dev run stands on its eval's newest common-scale fit (`version`, made at
    `fitted_at`; `stale` when results arrived after it, so the next refit may move it): its ability
    and its equated score, what that ability is expected to score (0-100) on `reference_release`."""

    fit_version: int
    fitted_at: datetime
    stale: bool
    reference_release: int
    ability: ScaleEstimate
    equated_score: ScaleEstimate


class EvalScale(BaseModel):
    """`GET /v1/evals/{name}/scale`: the newest fit. `stale`: results arrived after it (the
    scheduler refits; `goldenset scale refit` does now)."""

    eval: str
    version: int
    fitted_at: datetime
    method: str
    stale: bool
    observations: int
    reference_release: int
    releases: list[ReleaseScale]
    models: list[ModelScale]
    runs: list[RunScale]
    note: str


class ScoreChangePart(BaseModel):
    value: float
    low: float
    high: float
    excludes_zero: bool


class ScoreChangeReport(BaseModel):
    """`GET /v1/reports/score-change`: run B's expected score on its release minus run A's on its
    own (`total`, points), split into `set` (A's ability on B's release minus on A's) and `model`
    (B's ability minus A's, on B's release); the parts add up to the total."""

    eval: str
    fit_version: int
    run_a: RunScale
    run_b: RunScale
    total: ScoreChangePart
    set: ScoreChangePart
    model: ScoreChangePart
    observed_change: float = Field(description="The raw mean scores' difference (points), for comparison.")
    wording: str
