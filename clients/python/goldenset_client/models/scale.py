"""The common scale of an eval's releases (`GET /v1/evals/{name}/scale`) and a score change split
into the set and the model (`GET /v1/reports/score-change`)."""

from datetime import datetime

from goldenset_client.models._base import _Response


class ScaleEstimate(_Response):
    """An estimate with its 95% interval."""

    value: float
    low: float
    high: float


class ReleaseScale(_Response):
    """A release on the scale: its scored dev items and its difficulty index (the mean model's
    expected score, 0-100; lower is harder)."""

    number: int
    items: int
    difficulty_index: ScaleEstimate


class ModelScale(_Response):
    name: str
    ability: ScaleEstimate
    runs: int


class RunScale(_Response):
    """A run on the scale: its release, raw mean score (0-100), ability, and equated score on the
    reference release (0-100)."""

    id: int
    model: str
    release: int
    mean_score: float
    ability: ScaleEstimate
    equated_score: ScaleEstimate


class RunOnScale(_Response):
    """Where a dev run stands on its eval's newest scale fit: ability and equated score on the
    reference release (0-100); `stale` when results arrived after the fit."""

    fit_version: int
    fitted_at: datetime
    stale: bool
    reference_release: int
    ability: ScaleEstimate
    equated_score: ScaleEstimate


class EvalScale(_Response):
    """The eval's newest scale fit; `stale` when results arrived after it."""

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


class ScoreChangePart(_Response):
    value: float
    low: float
    high: float
    excludes_zero: bool


class ScoreChangeReport(_Response):
    """Run B's expected score minus run A's (`total`, points), split into `set` and `model`."""

    eval: str
    fit_version: int
    run_a: RunScale
    run_b: RunScale
    total: ScoreChangePart
    set: ScoreChangePart
    model: ScoreChangePart
    observed_change: float
    wording: str
