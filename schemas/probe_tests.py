"""Which test a probe runs and what each test scores.

A probe compares items dated before a model's training cutoff with a control band of items dated
after it. How an item is scored depends on what the endpoint gives back:

- the **completion** test sees only greedy text (does the model write the rest of an item word for
  word?), so it sees verbatim-level memorisation;
- the **logprob** test reads the log-probability the model gives each token of an item's whole
  text, so it also sees partial memorisation, an item the model finds likelier than it would
  unseen without being able to write it out;
- the **reference_logprob** test compares those log-probabilities with a reference model's on the
  same text, which cancels what is simply easy text for any model.
"""

from __future__ import annotations

from enum import StrEnum


class ProbeMetric(StrEnum):
    """How a probe scores one item; every metric is oriented so that higher means more like a text
    the model has seen.

    Completion test (a completion against the true remainder, both in [0, 1]):
    `levenshtein`: normalised Levenshtein similarity (1 − edit distance / longer length).
    `lcs_ratio`: the longest common substring's length over the remainder's length (the longest
    verbatim run reproduced).
    `levenshtein_margin`: the completion's Levenshtein similarity to its own remainder minus its mean
    similarity to the remainders of the 8 other items of its band with the nearest remainder
    lengths, the words of the item's prefix left out of all of them, in [-1, 1]: how much more it
    reproduces its own item than items like it, beyond what it was shown
    (`curation.evidence.completion_margin`).

    Log-probability tests (the model's log-probabilities of the item's whole text, in nats):
    `loss`: the mean token log-probability, that is minus the loss per token.
    `min_k`: Min-K% Prob (Shi et al. 2023), the mean of the lowest 20% of token log-probabilities.
    `min_k_plus_plus`: Min-K%++ (Zhang et al. 2024), each token's log-probability standardised by
    the mean and spread of log-probabilities under the model's next-token distribution, then the
    mean of the lowest 20%; only where the endpoint gives each position's top-k log-probabilities.
    `zlib`: the total log-probability over the zlib-compressed length of the text in bytes
    (Carlini et al. 2021): text that is merely repetitive compresses well and scores no higher.
    `reference_gap`: the reference model's loss per UTF-8 byte minus the target's (the reference
    test only): how much likelier the target finds the text than a model that has not seen it.
    """

    LEVENSHTEIN = "levenshtein"
    LCS_RATIO = "lcs_ratio"
    LEVENSHTEIN_MARGIN = "levenshtein_margin"
    LOSS = "loss"
    MIN_K = "min_k"
    MIN_K_PLUS_PLUS = "min_k_plus_plus"
    ZLIB = "zlib"
    REFERENCE_GAP = "reference_gap"


class ProbeTest(StrEnum):
    """The test a probe ran: `completion` (greedy text through chat completions), `logprob` (the
    target's log-probabilities of each item's text) or `reference_logprob` (the same, compared with
    a reference model's)."""

    COMPLETION = "completion"
    LOGPROB = "logprob"
    REFERENCE_LOGPROB = "reference_logprob"


class ProbeTestChoice(StrEnum):
    """The test a probe request asks for: one of `ProbeTest`, or `auto`, the strongest the
    endpoints allow (`reference_logprob` when a reference endpoint with log-probabilities is given
    and the target gives them, else `logprob` when the target's endpoint gives an item's
    log-probabilities, else `completion`)."""

    AUTO = "auto"
    COMPLETION = "completion"
    LOGPROB = "logprob"
    REFERENCE_LOGPROB = "reference_logprob"


COMPLETION_METRICS: tuple[ProbeMetric, ...] = (ProbeMetric.LEVENSHTEIN_MARGIN, ProbeMetric.LEVENSHTEIN, ProbeMetric.LCS_RATIO)
"""The metrics of the completion test."""
LOGPROB_METRICS: tuple[ProbeMetric, ...] = (ProbeMetric.LOSS, ProbeMetric.MIN_K, ProbeMetric.MIN_K_PLUS_PLUS, ProbeMetric.ZLIB)
"""The target's own log-probability metrics (`min_k_plus_plus` only where top-k log-probabilities came back)."""

TEST_SEES: dict[ProbeTest, str] = {
    ProbeTest.COMPLETION: (
        "The completion test reads only the text the model writes greedily when shown the first part of an item, so it sees "
        "verbatim-level memorisation: a model that saw an item a few times among much other text, and remembers it only in "
        "its probabilities, passes it unseen. Its score, levenshtein_margin, is how much closer an answer is to its own item "
        "than to items of similar length from the same side of the cutoff, the words it was shown left out: about 0 for a "
        "model that writes what is common or what it was given, higher the more of its own item it reproduces."
    ),
    ProbeTest.LOGPROB: (
        "The log-probability test reads how likely the model finds each token of an item's whole text, so it also sees "
        "partial memorisation that never shows in greedy text; an item that is simply easy, predictable text for any model "
        "scores high too, which the control band of items dated after the cutoff accounts for only on average."
    ),
    ProbeTest.REFERENCE_LOGPROB: (
        "The reference-calibrated test compares, item by item, how likely the model finds an item's whole text with how "
        "likely a reference model finds it, so it sees partial memorisation in the probabilities and also cancels what is "
        "simply easy text for any model; it cannot see an item the reference model has seen as well."
    ),
}
"""What each test can and cannot see, in a sentence a report carries."""


def primary_metric_for(test: ProbeTest, *, has_top_logprobs: bool) -> ProbeMetric:
    """The metric a report's summary speaks of by default: `levenshtein_margin` for the completion test,
    `min_k_plus_plus` for the log-probability test where each position's top-k came back (else
    `min_k`), `reference_gap` for the reference test."""
    if test is ProbeTest.COMPLETION:
        return ProbeMetric.LEVENSHTEIN_MARGIN
    if test is ProbeTest.REFERENCE_LOGPROB:
        return ProbeMetric.REFERENCE_GAP
    return ProbeMetric.MIN_K_PLUS_PLUS if has_top_logprobs else ProbeMetric.MIN_K
