"""Contamination evidence: the inputs a caller hands over (per-item results, items to probe, the
endpoint to probe) and the reports that come back (temporal split, completion probe, public-score
inflation).

Every report is evidence about one score for one model, never a verdict: each carries a
`statement` that says so and names the sensible action on a positive result.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time
from enum import StrEnum
from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, SecretStr, field_validator

from schemas.probe_tests import TEST_SEES, ProbeMetric, ProbeTest

SplitHalfLabel = Literal["before_cutoff", "after_cutoff"]
MonthHalf = Literal["before_cutoff", "after_cutoff", "straddles_cutoff"]
ProbeBand = Literal["pre_cutoff", "control"]


def cutoff_instant(cutoff: date) -> datetime:
    """00:00 UTC on `cutoff`: items dated before it are on the pre-cutoff side, the rest after."""
    return datetime.combine(cutoff, time(0, 0), tzinfo=UTC)


class EvidenceWarning(BaseModel):
    """Something that weakens the evidence, with a stable `code` and a message a person can act on.

    Codes: `small_half`, `underpowered`, `difficulty_drift`, `human_success_partial`,
    `small_control_band`, `small_pre_cutoff_band`, `probe_failures`, `items_not_cut`, `length_drift`,
    `augmented_endpoint`, `few_reference_models`, `outside_reference_range`, `partial_coverage`,
    `reference_scatter`.
    """

    code: str
    message: str


# --- temporal split ---------------------------------------------------------------------------


class ItemResult(BaseModel):
    """One model's result on one dated item: the input of the temporal-split report.

    `item_id` is the item's id as text (an incident id, or a public benchmark's own id);
    `occurred_at` the item's date (the incident's date, never the insert time); `score` the
    model's score on the item in [0, 1] (a pass is 1.0, a graded score its fraction);
    `human_success` whether a person solved the item, where known (the difficulty control).
    """

    model_config = ConfigDict(frozen=True)

    item_id: str = Field(min_length=1)
    occurred_at: AwareDatetime
    score: float = Field(ge=0.0, le=1.0, allow_inf_nan=False)
    human_success: bool | None = None


class Interval(BaseModel):
    """A two-sided confidence interval at `level` (0.95: a 95% interval)."""

    low: float
    high: float
    level: float

    def excludes_zero(self) -> bool:
        """True where zero lies outside the interval."""
        return self.low > 0.0 or self.high < 0.0


class SplitHalf(BaseModel):
    """The items on one side of the cutoff: how many, their mean score, their date range, and the
    human success rate over the `human_n` items that have one."""

    label: SplitHalfLabel
    n: int
    mean_score: float
    first_occurred_at: AwareDatetime
    last_occurred_at: AwareDatetime
    human_n: int = 0
    human_success_rate: float | None = None


class MonthlyPoint(BaseModel):
    """Items of one calendar month (UTC), `YYYY-MM`; `half` says on which side of the cutoff the
    month lies (`straddles_cutoff` for the cutoff's own month when the cutoff is not its first day)."""

    month: str
    half: MonthHalf
    n: int
    mean_score: float
    human_success_rate: float | None = None


class TemporalSplitReport(BaseModel):
    """Score on items dated before the model's training cutoff versus after it.

    `difference` is mean(before) − mean(after) in score units (0.10: ten points), positive where
    the older items scored higher. `interval` is a percentile bootstrap interval of the difference,
    `p_value` a two-sided permutation-test p-value for "no difference". `flagged` is true only where
    the older items scored higher, `p_value < alpha` and the interval excludes zero.
    `minimum_detectable_difference` is the smallest true difference this test detects with 80%
    power at `alpha`, given the counts and the observed spread of scores.
    """

    kind: Literal["temporal_split"] = "temporal_split"
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


# --- public-score inflation -----------------------------------------------------------------


class ReferenceModelScore(BaseModel):
    """One reference model of a public-inflation report: its mean score on the target's private and
    public items (over the `private_items` and `public_items` of them it was scored on), and
    `difference_from_others`: its public score minus what the line through the other reference
    models predicts from its private score (how far models that nobody suspects stray from the line)."""

    model: str
    private_score: float
    public_score: float
    private_items: int
    public_items: int
    difference_from_others: float


class InflationFit(BaseModel):
    """The relation fitted across reference models: probit(public) = intercept + slope · probit(private),
    least squares with each model counted once, `slope` held at 0 or above (a better private score
    never predicts a worse public one)."""

    link: Literal["probit", "logit", "identity"]
    intercept: float
    slope: float


class PublicInflationReport(BaseModel):
    """Is the model's score on a public corpus higher than its score on the private eval predicts,
    judged by how the reference models' public scores follow their private ones?

    `difference` is public_score − predicted_public_score in score units (0.10: ten points), positive
    where the public score is higher than predicted. `interval` is a percentile bootstrap interval at
    1 − 2·alpha (90% at alpha 0.05), so its low end is the one-sided bound at `alpha`; every draw
    resamples the private items, the public items and the reference models. `p_value` is the
    one-sided bootstrap p-value, the share of draws (counting the observed one) in which the
    difference is 0 or below. `flagged` is true only where the difference is positive and
    `p_value < alpha`. `reference_private_low`/`high` bound the reference models' private scores: a
    target outside them is predicted by extrapolation (warned).
    """

    kind: Literal["public_inflation"] = "public_inflation"
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


# --- completion probing -----------------------------------------------------------------------


class CutMode(StrEnum):
    """Where to cut an item into a prefix (shown) and a remainder (to reproduce).

    `auto`: before the answer options where the item has them, else at a word boundary near
    `fraction` of the text. `word_boundary`: always inside the text (answer options, if any, are
    part of the remainder). `before_options`: always before the options (items without options
    cannot be cut and are reported as not cut).
    """

    AUTO = "auto"
    WORD_BOUNDARY = "word_boundary"
    BEFORE_OPTIONS = "before_options"


class CutPolicy(BaseModel):
    """How items are cut. `fraction` is where in the text (by characters) the word-boundary cut
    aims; both sides keep at least `min_prefix_words` / `min_remainder_words` words."""

    model_config = ConfigDict(frozen=True)

    mode: CutMode = CutMode.AUTO
    fraction: float = Field(default=0.5, gt=0.0, lt=1.0)
    min_prefix_words: int = Field(default=3, ge=1)
    min_remainder_words: int = Field(default=3, ge=1)


class ProbeItem(BaseModel):
    """An item to probe: its text, its answer options in their original order (empty when it has
    none) and its date. `sealed` items are refused: sealed content is never probed."""

    model_config = ConfigDict(frozen=True)

    item_id: str = Field(min_length=1)
    occurred_at: AwareDatetime
    text: str = Field(min_length=1)
    options: tuple[str, ...] = ()
    sealed: bool = False


class ProbeCut(BaseModel):
    """An item cut in two: `prefix` goes into the prompt, `remainder` is what a model that has seen
    the item would reproduce. `cut_at` is the character offset in the item's text (the text's length
    when cut before the options); `mode` the cut actually made (`word_boundary` or `before_options`)."""

    model_config = ConfigDict(frozen=True)

    item_id: str
    prefix: str
    remainder: str
    cut_at: int
    mode: CutMode


class ChatMessage(BaseModel):
    """One message of an OpenAI-style chat."""

    model_config = ConfigDict(frozen=True)

    role: Literal["system", "user", "assistant"]
    content: str


class ProbePrompt(BaseModel):
    """What is sent for one item: the chat messages and the token budget of the answer (sized from
    the remainder's length). The remainder itself is not in here."""

    model_config = ConfigDict(frozen=True)

    item_id: str
    messages: tuple[ChatMessage, ...]
    max_tokens: int = Field(ge=1)


class ProbeEndpoint(BaseModel):
    """An OpenAI-compatible endpoint: `base_url` up to and including `/v1` (the runner posts to
    `{base_url}/chat/completions`), the `model` name it expects, an optional bearer `api_key`.

    `concurrency` bounds requests in flight; `timeout_seconds` bounds each attempt; an attempt that
    times out, cannot connect, or gets 429 or 5xx is retried up to `max_attempts` attempts in all.
    """

    model_config = ConfigDict(frozen=True)

    base_url: str = Field(min_length=1)
    model: str = Field(min_length=1)
    api_key: SecretStr | None = None
    concurrency: int = Field(default=4, ge=1, le=256)
    timeout_seconds: float = Field(default=60.0, gt=0.0)
    max_attempts: int = Field(default=4, ge=1, le=20)
    max_tokens_cap: int = Field(default=512, ge=1)

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https:// (got {value!r}), e.g. https://api.example.com/v1")
        return value.rstrip("/")


class ProbeCompletion(BaseModel):
    """The endpoint's answer for one item: the completion text, or `error` (why no answer came back
    after `attempts` attempts)."""

    item_id: str
    completion: str | None = None
    finish_reason: str | None = None
    error: str | None = None
    attempts: int = 0


class ProbeItemResult(BaseModel):
    """One probed item. `remainder_chars` is the length of what was scored (the remainder it had to
    reproduce, or the whole text for a log-probability test); `similarity` its score per metric; `control_tail` per metric is the share of the
    control band scoring at least as high (for a pre-cutoff item, (k + 1) / (n + 1): a per-item
    p-value against the control band; for a control item, computed without itself);
    `above_control_p95` per metric whether it lies above the control's 95th percentile. Reports carry
    ids and numbers, never item text, so they can be shared beyond those who may read the items."""

    item_id: str
    occurred_at: AwareDatetime
    band: ProbeBand
    remainder_chars: int
    similarity: dict[ProbeMetric, float]
    control_tail: dict[ProbeMetric, float]
    above_control_p95: dict[ProbeMetric, bool]


class MetricComparison(BaseModel):
    """Pre-cutoff items against the control band on one metric.

    `median_gap` = median(pre) − median(control); `share_above_control_p95` is the share of
    pre-cutoff items above the control's 95th percentile, and `expected_share_length_matched` the
    share expected there by chance given the pre-cutoff items' remainder lengths (the share of
    control items of the same length strata above it: not 0.05 where lengths drift or many scores
    tie; None in reports stored before it was computed); `p_value` is the
    one-sided Mann–Whitney U p-value for "pre-cutoff items are not more similar";
    `length_matched_p_value` the same test within strata of similar remainder length (similarity
    moves with length, and older items are often shorter or longer). `flagged` where
    `length_matched_p_value < alpha`; for the reference test's `reference_gap`, only where the
    model's own primary metric is flagged too (an intersection-union test; otherwise the report
    warns `reference_unconfirmed`).
    """

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


class ProbeReport(BaseModel):
    """A probe of one model on one dataset: per-item results and, per metric, the comparison of
    pre-cutoff items with the control band (items dated on or after the cutoff).

    `test` is the test that ran and `test_sees` what it can and cannot see; `reference_model` and
    `reference_endpoint` name the reference of a `reference_logprob` test. `primary_metric` is the
    one the summary speaks of. For the completion test an item's `remainder_chars` and `similarity`
    are the remainder's length and the completion's similarity to it, and `cut_policy` how items
    were cut; for the log-probability tests they are the whole scored text's length and its
    membership scores, and nothing is cut. `n_control_near_pre_cutoff` items dated on or after the
    cutoff were left out of the control band before sampling, as near copies of items dated before
    it (`curation.evidence.clean_band`)."""

    kind: Literal["completion_probe"] = "completion_probe"
    test: ProbeTest = ProbeTest.COMPLETION
    test_sees: str = TEST_SEES[ProbeTest.COMPLETION]
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

    def comparison(self, metric: ProbeMetric) -> MetricComparison:
        """The comparison on `metric`."""
        for comparison in self.metrics:
            if comparison.metric == metric:
                return comparison
        raise KeyError(metric)
