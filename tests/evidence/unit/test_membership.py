"""Membership scores from log-probabilities, and reading them from the answers of the servers that
give them: OpenAI's legacy completions and vLLM (`/completions` with `echo` and `logprobs`), TGI
(`/generate` with `decoder_input_details`), and the answers that must be refused (a server that
echoes the prompt but scores only the tokens it generates, as llama.cpp's has been reported to).

The answers are written in the shapes the servers' documentation gives."""

from __future__ import annotations

import math
import zlib
from typing import Any

import numpy as np
import pytest

from curation.evidence.membership import (
    PromptNotCovered,
    TextLogprobs,
    TokenLogprob,
    canonical,
    completions_echo_request,
    mean_logprob,
    membership_scores,
    min_k_plus_plus,
    min_k_prob,
    parse_completions_echo,
    parse_tgi_prefill,
    reference_gap,
    standardised_logprob,
    tgi_generate_request,
    zlib_score,
)
from curation.evidence.probe_report import MetricOutcome, confirmed
from schemas.evidence import MetricComparison
from schemas.probe_tests import ProbeMetric

TEXT = "The disk filled with rotated logs."


def _openai_legacy() -> dict[str, Any]:
    """OpenAI's legacy completions with `echo: true, logprobs: 2, max_tokens: 1`: the prompt's tokens
    then the generated one, the first log-probability null, offsets into `text`."""
    tokens = ["The", " disk", " filled", " with", " rotated", " logs", ".", " The"]
    offsets = [0, 3, 8, 15, 20, 28, 33, 34]
    logprobs: list[float | None] = [None, -7.1, -4.0, -1.2, -6.3, -0.4, -0.9, -2.2]
    tops: list[dict[str, float] | None] = [
        None,
        {" first": -2.1, " new": -2.5},
        {" is": -0.8, " was": -1.6},
        {" with": -1.2, " up": -1.4},
        {" old": -1.1, " the": -1.5},
        {" logs": -0.4, " files": -2.0},
        {".": -0.9, " and": -1.3},
        {" The": -2.2, "\n": -0.5},
    ]
    return {
        "id": "cmpl-7QmVI15qgYVllxK0FtxVGG6ywfzaq",
        "object": "text_completion",
        "created": 1686685730,
        "model": "davinci-002",
        "choices": [
            {
                "text": TEXT + " The",
                "index": 0,
                "logprobs": {"tokens": tokens, "token_logprobs": logprobs, "top_logprobs": tops, "text_offset": offsets},
                "finish_reason": "length",
            }
        ],
        "usage": {"prompt_tokens": 7, "completion_tokens": 1, "total_tokens": 8},
    }


def _vllm_with_bos() -> dict[str, Any]:
    """vLLM's echo for a Llama tokenizer: a `<s>` token first (counted in the offsets), the token's
    own log-probability among each position's top entries."""
    tokens = ["<s>", "The", " disk", " filled", " with", " rotated", " logs", ".", "\n"]
    offsets = [0, 3, 6, 11, 18, 23, 31, 36, 37]
    logprobs: list[float | None] = [None, -9.0, -7.1, -4.0, -1.2, -6.3, -0.4, -0.9, -0.5]
    tops: list[dict[str, float] | None] = [None, {"The": -9.0, "#": -1.0}]
    tops += [{token: float(logprob or 0.0), "x": -0.2} for token, logprob in zip(tokens[2:], logprobs[2:], strict=True)]
    logprobs_field = {"tokens": tokens, "token_logprobs": logprobs, "top_logprobs": tops, "text_offset": offsets}
    return {"object": "text_completion", "model": "llama", "choices": [{"index": 0, "text": TEXT + "\n", "logprobs": logprobs_field}]}


def _tgi() -> dict[str, Any]:
    """TGI's `/generate` with `details` and `decoder_input_details`: the prefill tokens decoded one
    by one (a SentencePiece tokenizer drops their leading spaces), the first log-probability null."""
    words = ["The", "disk", "filled", "with", "rotated", "logs", "."]
    logprobs = [-9.0, -7.1, -4.0, -1.2, -6.3, -0.4, -0.9]
    prefill: list[dict[str, Any]] = [{"id": 1, "text": "<s>", "logprob": None}]
    prefill += [{"id": 100 + index, "text": word, "logprob": logprob} for index, (word, logprob) in enumerate(zip(words, logprobs, strict=True))]
    return {
        "generated_text": "\n",
        "details": {"finish_reason": "length", "generated_tokens": 1, "seed": None, "prefill": prefill, "tokens": [{"id": 13, "text": "\n", "logprob": -0.5, "special": False}]},
    }


def test_requests_ask_for_the_prompts_log_probabilities_with_one_greedy_token() -> None:
    body = completions_echo_request(TEXT, model="m")
    assert body == {"model": "m", "prompt": TEXT, "max_tokens": 1, "temperature": 0, "echo": True, "logprobs": 5, "stream": False}
    assert tgi_generate_request(TEXT) == {"inputs": TEXT, "parameters": {"max_new_tokens": 1, "do_sample": False, "details": True, "decoder_input_details": True}}


def test_openai_legacy_echo_keeps_the_prompts_scored_tokens_only() -> None:
    scored = parse_completions_echo(_openai_legacy(), TEXT, endpoint="davinci")
    assert [token.text for token in scored.tokens] == [" disk", " filled", " with", " rotated", " logs", "."]
    assert scored.logprobs().tolist() == [-7.1, -4.0, -1.2, -6.3, -0.4, -0.9]
    assert scored.has_top
    # " disk" was not among its position's top 2: its own log-probability joins them.
    assert scored.tokens[0].top == (-2.1, -2.5, -7.1)
    assert scored.tokens[4].top == (-0.4, -2.0)


def test_vllm_echo_after_a_beginning_of_sequence_token() -> None:
    scored = parse_completions_echo(_vllm_with_bos(), TEXT, endpoint="vllm")
    assert [token.text for token in scored.tokens] == ["The", " disk", " filled", " with", " rotated", " logs", "."]
    assert scored.logprobs()[0] == -9.0


def test_tgi_prefill_is_read_without_top_k() -> None:
    scored = parse_tgi_prefill(_tgi(), TEXT, endpoint="tgi")
    assert scored.logprobs().tolist() == [-9.0, -7.1, -4.0, -1.2, -6.3, -0.4, -0.9]
    assert not scored.has_top
    scores = membership_scores(scored)
    assert set(scores) == {ProbeMetric.LOSS, ProbeMetric.MIN_K, ProbeMetric.ZLIB}


def test_an_answer_scoring_only_generated_tokens_is_refused() -> None:
    # As reported of llama.cpp's /v1/completions (issue 27174): echo accepted, one log-probability, for the generated token.
    scored_generated = {"tokens": [" The"], "token_logprobs": [-2.2], "top_logprobs": [{" The": -2.2}], "text_offset": [34]}
    generated_only = {"choices": [{"text": TEXT + " The", "index": 0, "logprobs": scored_generated}]}
    with pytest.raises(PromptNotCovered, match=r"endpoint 'llama-cpp' .* of its 1 tokens, 1 fall inside the text and spell out 3 of its 29 visible characters.*llama\.cpp"):
        parse_completions_echo(generated_only, TEXT, endpoint="llama-cpp")
    # Its newer chat-style shape: no `tokens` at all.
    chat_style = {"choices": [{"text": " The", "logprobs": {"content": [{"token": " The", "logprob": -2.2, "bytes": [32, 84, 104, 101], "top_logprobs": []}]}}]}
    with pytest.raises(PromptNotCovered, match=r"endpoint 'llama-cpp' answered without choices\[0\]\.logprobs \(tokens, token_logprobs\): an object with keys choices"):
        parse_completions_echo(chat_style, TEXT, endpoint="llama-cpp")
    with pytest.raises(PromptNotCovered, match=r"without details\.prefill"):
        parse_tgi_prefill({"generated_text": " The"}, TEXT, endpoint="tgi")


def test_an_answer_for_another_text_is_refused_and_the_message_holds_no_text() -> None:
    other = _openai_legacy()
    other["choices"][0]["logprobs"]["tokens"][2] = " fillet"
    with pytest.raises(PromptNotCovered) as refused:
        parse_completions_echo(other, TEXT, endpoint="davinci")
    assert "(they differ)" in str(refused.value)
    assert "rotated" not in str(refused.value) and "fillet" not in str(refused.value)


def test_whitespace_word_markers_and_byte_tokens_do_not_count_against_coverage() -> None:
    assert canonical("▁The▁disk<0x0A>ĠfilledĊ") == canonical("The disk\n filled\n") == "Thediskfilled"
    text = "The disk\nfilled."
    pieces = [("▁The", None), ("▁disk", -3.0), ("<0x0A>", -1.0), ("filled", -2.0), (".", -0.5)]
    answer = {"details": {"prefill": [{"id": index, "text": piece, "logprob": logprob} for index, (piece, logprob) in enumerate(pieces)]}}
    assert parse_tgi_prefill(answer, text, endpoint="tgi").logprobs().tolist() == [-3.0, -1.0, -2.0, -0.5]


def test_the_scores_by_hand() -> None:
    logprobs = np.array([-0.1, -0.2, -3.0, -0.3, -5.0, -0.1, -0.2, -0.4, -0.1, -1.0])
    assert mean_logprob(logprobs) == pytest.approx(-1.04)
    assert min_k_prob(logprobs) == pytest.approx(-4.0)  # the lowest 20% of 10 tokens: -5.0 and -3.0
    assert min_k_prob(logprobs[:3]) == pytest.approx(-3.0)  # never fewer than one token
    assert zlib_score(logprobs, TEXT) == pytest.approx(-10.4 / len(zlib.compress(TEXT.encode())))
    with pytest.raises(ValueError, match="no scored token"):
        mean_logprob([])
    with pytest.raises(ValueError, match="at most 0"):
        mean_logprob([0.5])


def test_min_k_plus_plus_standardises_by_the_renormalised_top_k() -> None:
    top = (math.log(0.5), math.log(0.3), math.log(0.1))
    weights = np.array([0.5, 0.3, 0.1]) / 0.9
    mu = float(np.sum(weights * np.array(top)))
    sigma = math.sqrt(float(np.sum(weights * (np.array(top) - mu) ** 2)))
    assert standardised_logprob(math.log(0.1), top) == pytest.approx((math.log(0.1) - mu) / sigma)
    assert standardised_logprob(-1.0, (-1.0,)) is None
    tokens = [TokenLogprob("a", math.log(0.5), top), TokenLogprob("b", math.log(0.1), top), TokenLogprob("c", -2.0, None)]
    assert min_k_plus_plus(tokens) == pytest.approx((math.log(0.1) - mu) / sigma)
    assert min_k_plus_plus([TokenLogprob("c", -2.0, None)]) is None


def test_a_likelier_text_scores_higher_on_every_metric() -> None:
    def scored(below_top: float) -> TextLogprobs:
        """Each word `below_top` nats under its position's likeliest alternative."""
        rng = np.random.default_rng(7)
        tokens = []
        for word in TEXT.split():
            top = tuple(-rng.gamma(2.0, 1.0, size=4))
            own = max(top) - below_top
            tokens.append(TokenLogprob(" " + word, own, (*top, own)))
        return TextLogprobs(TEXT, tuple(tokens))

    seen, unseen = scored(0.0), scored(2.0)
    seen_scores, unseen_scores = membership_scores(seen), membership_scores(unseen)
    assert set(seen_scores) == {ProbeMetric.LOSS, ProbeMetric.MIN_K, ProbeMetric.MIN_K_PLUS_PLUS, ProbeMetric.ZLIB}
    for metric, value in seen_scores.items():
        assert value > unseen_scores[metric], metric


def test_the_reference_gap_is_per_byte_and_signed() -> None:
    target = TextLogprobs(TEXT, (TokenLogprob(" disk filled", -1.0), TokenLogprob(" with rotated logs.", -2.0)))
    reference = TextLogprobs(TEXT, tuple(TokenLogprob(ch, -0.5) for ch in " disk filled with rotated logs."))
    per_byte_target = 3.0 / len(" disk filled with rotated logs.")
    per_byte_reference = 0.5
    assert reference_gap(target, reference) == pytest.approx(per_byte_reference - per_byte_target)
    assert membership_scores(target, reference)[ProbeMetric.REFERENCE_GAP] > 0
    with pytest.raises(ValueError, match="different texts"):
        reference_gap(target, TextLogprobs("another text", reference.tokens))


def _comparison(metric: ProbeMetric, p: float) -> MetricComparison:
    return MetricComparison(
        metric=metric, pre_median=0.0, control_median=0.0, median_gap=0.0, control_p95=0.0, share_above_control_p95=0.0,
        mann_whitney_u=0.0, p_value=p, length_matched_p_value=p, flagged=p < 0.05,
    )  # fmt: skip


@pytest.mark.parametrize(("gap_p", "own_p", "flagged", "warned"), [(0.001, 0.01, True, False), (0.001, 0.4, False, True), (0.3, 0.001, False, False), (0.3, 0.4, False, False)])
def test_the_reference_gap_flags_only_where_the_models_own_test_does_too(gap_p: float, own_p: float, flagged: bool, warned: bool) -> None:
    """An intersection-union test: a reference that differs from the model on unseen text can move
    the gap by itself (21% false positives on the bench's clean model with one reference), the
    model's own Min-K%++ cannot; together they flag 1.7%."""
    gap = MetricOutcome(_comparison(ProbeMetric.REFERENCE_GAP, gap_p), threshold=0.0, tails={})
    outcome, warning = confirmed(gap, _comparison(ProbeMetric.MIN_K_PLUS_PLUS, own_p))
    assert outcome.comparison.flagged is flagged and outcome.comparison.length_matched_p_value == gap_p
    assert (warning is not None) is warned
    if warning is not None:
        assert warning.code == "reference_unconfirmed" and "min_k_plus_plus is not (p = 0.400)" in warning.message
