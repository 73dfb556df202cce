"""Contamination evidence: temporal-split and public-inflation reports, corpus results and
completion probes (`/v1/reports`, `/v1/corpora`, `/v1/probes`)."""

from datetime import date, datetime
from typing import Any, Literal

from pydantic import Field

from goldenset_client.models._base import _Request, _Response


class CorpusResultError(_Response):
    """One refused result: its `position` in `results` (0-based), a `reason` code and a `detail`."""

    position: int
    external_id: str
    reason: str
    detail: str


class CorpusResultIn(_Request):
    """One item's result, the item named by the corpus's own id (`external_id`, e.g. a CVE id)."""

    external_id: str
    score: float
    human_success: float | None = None


class CorpusResultsAccepted(_Response):
    """What an upload did: `stored` new results, `replaced` changed ones, `unchanged` repeats;
    `rejected` results are listed in `errors` (the rest of the batch is kept). `scored`: the
    model's results on the corpus now, of `corpus_items`."""

    corpus: str
    model: str
    stored: int
    replaced: int
    unchanged: int
    rejected: int
    errors: list[CorpusResultError]
    scored: int
    corpus_items: int


class CorpusResultsPost(_Request):
    """`POST /v1/corpora/{name}/results`: one model's per-item results on the corpus. `replace` lets a
    different score overwrite a stored one (otherwise 409 names the items)."""

    model: str
    results: list[CorpusResultIn]
    replace: bool = False


CutMode = Literal["auto", "word_boundary", "before_options"]


class CutPolicy(_Response):
    """How items are cut. `fraction` is where in the text (by characters) the word-boundary cut aims;
    both sides keep at least `min_prefix_words` / `min_remainder_words` words."""

    mode: CutMode = "auto"
    fraction: float = 0.5
    min_prefix_words: int = 3
    min_remainder_words: int = 3


class EvidenceWarning(_Response):
    """Something that weakens the evidence, with a stable `code` and a message a person can act on."""

    code: str
    message: str


class InflationFit(_Response):
    """The relation fitted across reference models: probit(public) = intercept + slope · probit(private)."""

    link: Literal["probit", "logit", "identity"]
    intercept: float
    slope: float


class Interval(_Response):
    """A two-sided confidence interval at `level` (0.95: a 95% interval)."""

    low: float
    high: float
    level: float


ProbeMetric = Literal["levenshtein", "lcs_ratio", "levenshtein_margin", "loss", "min_k", "min_k_plus_plus", "zlib", "reference_gap"]
ProbeTest = Literal["completion", "logprob", "reference_logprob"]
ProbeTestChoice = Literal["auto", "completion", "logprob", "reference_logprob"]


class MetricComparison(_Response):
    """Pre-cutoff items against the control band on one metric; `expected_share_length_matched` is
    the share of pre-cutoff items expected above the control's 95th percentile by chance, given
    their remainder lengths (read `share_above_control_p95` against it, not against 5%)."""

    metric: ProbeMetric
    pre_median: float
    control_median: float
    median_gap: float
    control_p95: float
    share_above_control_p95: float
    expected_share_length_matched: float | None = None
    mann_whitney_u: float
    p_value: float
    length_matched_p_value: float
    flagged: bool


class MonthlyPoint(_Response):
    """Items of one calendar month (UTC), `YYYY-MM`; `half` says on which side of the cutoff the month
    lies (`straddles_cutoff` for the cutoff's own month when the cutoff is not its first day)."""

    month: str
    half: Literal["before_cutoff", "after_cutoff", "straddles_cutoff"]
    n: int
    mean_score: float
    human_success_rate: float | None = None


class ProbeCreate(_Request):
    """`POST /v1/probes`: probe `model` through `endpoint` on an eval's dev items (`eval`, with
    `release`) or on a registered public corpus (`corpus`); exactly one of the two. `test` picks
    the test (`auto`: the strongest the endpoints allow); `reference_endpoint` is the reference
    test's."""

    eval: str | None = None
    release: int | str = "latest"
    corpus: str | None = None
    model: str
    endpoint: str
    limit: int | None = None
    cut_policy: CutPolicy = Field(default_factory=CutPolicy)
    alpha: float = 0.05
    test: ProbeTestChoice = "auto"
    reference_endpoint: str | None = None
    reference_model: str | None = None
    reference_api_key: str | None = None
    primary_metric: ProbeMetric | None = None
    allow_exposure: bool = False
    dataset_name: str | None = None
    split_name: str | None = None
    remote_model: str | None = None
    concurrency: int = 4
    timeout_seconds: float = 60.0
    max_attempts: int = 4
    api_key: str | None = None


class ProbeItemResult(_Response):
    """One probed item. `remainder_chars` is the length of what it had to reproduce; `similarity` per
    metric; `control_tail` per metric is the share of the control band scoring at least as high
    (for a pre-cutoff item, (k + 1) / (n + 1): a per-item p-value against the control band; for
    a control item, computed without itself); `above_control_p95` per metric whether it lies
    above the control's 95th percentile. Reports carry ids and numbers, never item text, so they
    can be shared beyond those who may read the items."""

    item_id: str
    occurred_at: datetime
    band: Literal["pre_cutoff", "control"]
    remainder_chars: int
    similarity: dict[str, Any]
    control_tail: dict[str, Any]
    above_control_p95: dict[str, Any]


class ProbeReport(_Response):
    """A probe of one model on one dataset: per-item results and, per metric, the comparison of
    pre-cutoff items with the control band (items dated on or after the cutoff). `test` is the test
    that ran and `test_sees` what it can and cannot see; `primary_metric` is the one the summary
    speaks of."""

    kind: str = "completion_probe"
    test: ProbeTest = "completion"
    test_sees: str = ""
    model: str
    reference_model: str | None = None
    reference_endpoint: str | None = None
    dataset: str
    split: str
    cutoff: date
    alpha: float
    cut_policy: CutPolicy | None = None
    n_pre_cutoff: int
    n_control: int
    n_failed: int
    n_not_cut: int
    n_control_near_pre_cutoff: int = 0
    pre_remainder_median_chars: float
    control_remainder_median_chars: float
    primary_metric: ProbeMetric
    metrics: list[MetricComparison]
    items: list[ProbeItemResult]
    warnings: list[EvidenceWarning]
    summary: str
    statement: str


ProbeStatus = Literal["queued", "running", "done", "failed"]


class ProbeRead(_Response):
    """A probe: what it probes, its progress, and its `report` once `status` is `done` (`error` says
    why when `failed`). `exposed_items`: how many of its items the run marked exposed."""

    id: int
    status: ProbeStatus
    eval: str | None
    release: int | None
    corpus: str | None
    model: str
    endpoint: str
    run_id: int | None
    test: ProbeTest
    reference_model: str | None = None
    reference_endpoint: str | None = None
    reference_run_id: int | None = None
    dataset: str
    split: str
    total: int
    done: int
    exposes_items: bool
    settings: dict[str, Any]
    error: str | None
    actor: str
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    report: ProbeReport | None = None


class ReferenceModelScore(_Response):
    """One reference model of a public-inflation report: its scores on the target's items, and how far
    its public score lies from the line through the other reference models."""

    model: str
    private_score: float
    public_score: float
    private_items: int
    public_items: int
    difference_from_others: float


class PublicInflationReport(_Response):
    """A model's public score against what its private eval score predicts across reference models:
    `difference` (observed − predicted), its `interval` (at 1 − 2·alpha), a one-sided `p_value`;
    `flagged` only where the difference is positive and p < alpha. Evidence, never a verdict."""

    kind: str = "public_inflation"
    model: str
    eval: str
    corpus: str
    alpha: float
    private_score: float
    private_items: int
    public_score: float
    public_items: int
    predicted_public_score: float
    difference: float
    interval: Interval
    p_value: float
    flagged: bool
    fit: InflationFit
    reference_private_low: float
    reference_private_high: float
    references: list[ReferenceModelScore]
    bootstrap_resamples: int
    warnings: list[EvidenceWarning]
    summary: str
    statement: str


class SplitHalf(_Response):
    """The items on one side of the cutoff: how many, their mean score, their date range, and the human
    success rate over the `human_n` items that have one."""

    label: Literal["before_cutoff", "after_cutoff"]
    n: int
    mean_score: float
    first_occurred_at: datetime
    last_occurred_at: datetime
    human_n: int = 0
    human_success_rate: float | None = None


class TemporalSplitReport(_Response):
    """Score on items dated before the model's training cutoff versus after it."""

    kind: str = "temporal_split"
    model: str
    corpus: str
    score_name: str
    cutoff: date
    alpha: float
    before: SplitHalf
    after: SplitHalf
    difference: float
    interval: Interval
    p_value: float
    flagged: bool
    minimum_detectable_difference: float
    human_difference: float | None = None
    bootstrap_resamples: int
    permutation_resamples: int
    monthly: list[MonthlyPoint]
    warnings: list[EvidenceWarning]
    summary: str
    statement: str
