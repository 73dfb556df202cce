"""Membership scores from log-probabilities: how much more likely a model finds an item's text
than text it has not seen, per item, from the per-token log-probabilities an endpoint returns.

Every score is oriented "higher = more like a seen text" (`schemas.probe_tests.ProbeMetric`):

- `loss`: the mean token log-probability (minus the loss, nats per token);
- `min_k`: Min-K% Prob (Shi et al. 2023), the mean of the lowest `k` (20%) token log-probabilities;
- `min_k_plus_plus`: Min-K%++ (Zhang et al. 2024), each token's (log p(x_t) − μ_t) / σ_t, where μ_t
  and σ_t are the mean and standard deviation of log p under the model's next-token distribution
  at t, then the mean of the lowest `k`. Endpoints return only each position's top-k
  log-probabilities, so μ_t and σ_t are taken over that top-k distribution renormalised (with the
  scored token added where it is not among them): an approximation of the paper's, which uses the
  whole vocabulary. Not available without top-k;
- `zlib`: the total log-probability over the zlib-compressed length of the UTF-8 text in bytes
  (Carlini et al. 2021);
- `reference_gap`: a reference model's mean negative log-probability per UTF-8 byte minus the
  target's, on the same text (per byte, so two tokenizers compare).

The answers are read from two shapes (`parse_completions_echo`, `parse_tgi_prefill`); an answer
whose tokens do not spell out the text sent is refused (`PromptNotCovered`), so a server that
echoes the prompt without scoring it never yields a score.

Pure: no network, no service; the runner (`curation.evidence.logprob_runner`) sends the requests.
"""

from __future__ import annotations

import math
import re
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from schemas.probe_tests import ProbeMetric

MIN_K_FRACTION = 0.2
"""The share of lowest-scoring tokens Min-K% and Min-K%++ average (the papers' 20%)."""
TOP_LOGPROBS = 5
"""How many alternatives per position a completions request asks for (OpenAI's legacy completions
allow at most 5; vLLM 20 by default)."""

_SPECIAL_TOKEN = re.compile(r"^(<s>|</s>|<\|[A-Za-z0-9_]+\|>|<\|?(bos|eos|begin_of_text|startoftext|endoftext)\|?>|\[CLS\]|\[BOS\])?$")
_BYTE_TOKEN = re.compile(r"<0x[0-9A-Fa-f]{2}>|bytes:(\\x[0-9a-fA-F]{2})+")
_NOT_VISIBLE = re.compile(r"[^!-~]")


class PromptNotCovered(ValueError):
    """An endpoint's answer does not give log-probabilities for the text it was sent (it scored only
    the tokens it generated, or another text): no membership score can be read from it."""


@dataclass(frozen=True)
class TokenLogprob:
    """One scored token of a text: its text, its log-probability given the tokens before it, and
    the log-probabilities of the position's top-k alternatives (the token's own included; None where
    the endpoint gave none)."""

    text: str
    logprob: float
    top: tuple[float, ...] | None = None


@dataclass(frozen=True)
class TextLogprobs:
    """A text and the log-probabilities a model gave its tokens. `tokens` are the scored ones in
    order: the text's first token, which nothing precedes, has no log-probability and is not among
    them (nor is a beginning-of-sequence token)."""

    text: str
    tokens: tuple[TokenLogprob, ...]

    @property
    def has_top(self) -> bool:
        """Whether every scored token came with its position's top-k log-probabilities."""
        return bool(self.tokens) and all(token.top is not None for token in self.tokens)

    def logprobs(self) -> np.ndarray:
        """The scored tokens' log-probabilities, in order."""
        return np.array([token.logprob for token in self.tokens], dtype=np.float64)

    def scored_bytes(self) -> int:
        """The UTF-8 length of the scored tokens' text (at least 1)."""
        return max(1, sum(len(token.text.encode("utf-8")) for token in self.tokens))


# --- the scores ---------------------------------------------------------------------------------


def _lowest_mean(values: np.ndarray, k: float) -> float:
    count = max(1, int(len(values) * k))
    return float(np.mean(np.sort(values)[:count]))


def mean_logprob(logprobs: Sequence[float] | np.ndarray) -> float:
    """`loss`: the mean token log-probability (minus the loss in nats per token)."""
    values = _nonempty(logprobs)
    return float(np.mean(values))


def min_k_prob(logprobs: Sequence[float] | np.ndarray, k: float = MIN_K_FRACTION) -> float:
    """`min_k`: the mean of the lowest `k` share of token log-probabilities (at least one token)."""
    return _lowest_mean(_nonempty(logprobs), k)


def standardised_logprob(logprob: float, top: Sequence[float]) -> float | None:
    """(log p(x) − μ) / σ, with μ and σ the mean and standard deviation of log p under the top-k
    distribution `top` renormalised (the token's own log-probability is expected among `top`).
    None where that distribution has no spread (a single alternative, or all equal)."""
    values = np.asarray(top, dtype=np.float64)
    weights = np.exp(values - values.max())
    weights /= weights.sum()
    mu = float(np.sum(weights * values))
    sigma = math.sqrt(max(0.0, float(np.sum(weights * (values - mu) ** 2))))
    if sigma <= 1e-12:
        return None
    return (logprob - mu) / sigma


def min_k_plus_plus(tokens: Sequence[TokenLogprob], k: float = MIN_K_FRACTION) -> float | None:
    """`min_k_plus_plus`: the mean of the lowest `k` share of standardised token log-probabilities
    (`standardised_logprob`). None when no token has a top-k with spread (the endpoint gave none)."""
    scores = [score for token in tokens if token.top is not None and (score := standardised_logprob(token.logprob, token.top)) is not None]
    if not scores:
        return None
    return _lowest_mean(np.asarray(scores, dtype=np.float64), k)


def zlib_score(logprobs: Sequence[float] | np.ndarray, text: str) -> float:
    """`zlib`: the total log-probability of the text over its zlib-compressed length in bytes."""
    return float(np.sum(_nonempty(logprobs))) / len(zlib.compress(text.encode("utf-8")))


def loss_per_byte(scored: TextLogprobs) -> float:
    """The mean negative log-probability per UTF-8 byte of the scored tokens' text."""
    return -float(np.sum(_nonempty(scored.logprobs()))) / scored.scored_bytes()


def reference_gap(target: TextLogprobs, reference: TextLogprobs) -> float:
    """`reference_gap`: the reference's loss per byte minus the target's (`loss_per_byte`), on the
    same text; positive where the target finds the text likelier than the reference does."""
    if " ".join(target.text.split()) != " ".join(reference.text.split()):
        raise ValueError("the target and the reference scored different texts; the gap compares one text")
    return loss_per_byte(reference) - loss_per_byte(target)


def membership_scores(target: TextLogprobs, reference: TextLogprobs | None = None, *, k: float = MIN_K_FRACTION) -> dict[ProbeMetric, float]:
    """Every score the log-probabilities allow: `loss`, `min_k` and `zlib` always, `min_k_plus_plus`
    where the target's tokens came with top-k log-probabilities, `reference_gap` where a reference's
    log-probabilities of the same text are given. Raises `ValueError` for a text with no scored token."""
    logprobs = target.logprobs()
    scores = {
        ProbeMetric.LOSS: mean_logprob(logprobs),
        ProbeMetric.MIN_K: min_k_prob(logprobs, k),
        ProbeMetric.ZLIB: zlib_score(logprobs, target.text),
    }
    if target.has_top and (plus := min_k_plus_plus(target.tokens, k)) is not None:
        scores[ProbeMetric.MIN_K_PLUS_PLUS] = plus
    if reference is not None:
        scores[ProbeMetric.REFERENCE_GAP] = reference_gap(target, reference)
    return scores


def _nonempty(logprobs: Sequence[float] | np.ndarray) -> np.ndarray:
    values = np.asarray(logprobs, dtype=np.float64)
    if values.size == 0:
        raise ValueError("no scored token: the text is a single token, or the answer held no log-probabilities")
    if not np.all(np.isfinite(values)) or np.any(values > 1e-6):
        raise ValueError("log-probabilities must be finite and at most 0")
    return values


# --- the requests and the answers ---------------------------------------------------------------


def completions_echo_request(text: str, *, model: str, top_logprobs: int = TOP_LOGPROBS) -> dict[str, Any]:
    """The body of an OpenAI-compatible `/completions` request that scores `text`: the text as the
    prompt, echoed with each token's log-probability and its position's top alternatives, greedy.
    One token is generated: vLLM refuses `max_tokens` 0 ("must be at least 1"), and the generated
    token is left out when the answer is read."""
    return {"model": model, "prompt": text, "max_tokens": 1, "temperature": 0, "echo": True, "logprobs": top_logprobs, "stream": False}


def tgi_generate_request(text: str) -> dict[str, Any]:
    """The body of a text-generation-inference `/generate` request that scores `text`: one greedy
    token, with the prompt's tokens and their log-probabilities (`decoder_input_details`)."""
    return {"inputs": text, "parameters": {"max_new_tokens": 1, "do_sample": False, "details": True, "decoder_input_details": True}}


def canonical(text: str) -> str:
    """The characters two spellings of a text must share to count as the same text: byte tokens
    (`<0x0A>`, `bytes:\\xe2`) dropped, then every character but visible ASCII (whitespace, the
    tokenizers' word markers `▁` and `Ġ`, any non-ASCII letter) dropped."""
    return _NOT_VISIBLE.sub("", _BYTE_TOKEN.sub("", text))


def parse_completions_echo(answer: Any, text: str, *, endpoint: str) -> TextLogprobs:
    """The log-probabilities of `text` in an OpenAI-compatible completions answer with `echo`:
    `choices[0].logprobs` = {tokens, token_logprobs (the first null), top_logprobs (per position a
    token → log-probability object, or null), text_offset}.

    The text's tokens are those whose `text_offset` lies inside the text (counted from the first
    token after a beginning-of-sequence token); without offsets, the tokens that spell out the text.
    They must spell out the text sent (whitespace, word markers and byte tokens aside), or
    `PromptNotCovered` says what came back instead: a server that scores only the tokens it
    generates is refused, never read as a score."""
    try:
        logprobs = answer["choices"][0]["logprobs"]
        tokens = [str(token) for token in logprobs["tokens"]]
        values = list(logprobs["token_logprobs"])
        tops = logprobs.get("top_logprobs") or [None] * len(tokens)
        offsets = logprobs.get("text_offset")
    except (KeyError, IndexError, TypeError, AttributeError) as exc:
        raise PromptNotCovered(f"endpoint {endpoint!r} answered without choices[0].logprobs (tokens, token_logprobs): {_shape(answer)}") from exc
    if not (len(values) == len(tokens) == len(tops)) or (offsets is not None and len(offsets) != len(tokens)):
        raise PromptNotCovered(
            f"endpoint {endpoint!r} answered with {len(tokens)} tokens, {len(values)} log-probabilities and {len(tops)} top-k entries; they must be one per token"
        )
    start = _after_special(tokens, text)
    if offsets is not None and start < len(tokens):
        base = int(offsets[start])
        end = start
        while end < len(tokens) and int(offsets[end]) - base < len(text):
            end += 1
    else:
        end = _spelled_out(tokens, start, text)
    _require_covered(tokens[start:end], text, endpoint=endpoint, shape="/completions with echo and logprobs", total=len(tokens))
    scored = [
        TokenLogprob(tokens[index], float(values[index]), _top_of(tokens[index], float(values[index]), tops[index]))
        for index in range(start, end)
        if values[index] is not None
    ]
    return TextLogprobs(text=text, tokens=tuple(scored))


def parse_tgi_prefill(answer: Any, text: str, *, endpoint: str) -> TextLogprobs:
    """The log-probabilities of `text` in a text-generation-inference `/generate` answer with
    `details` and `decoder_input_details`: `details.prefill` = [{id, text, logprob}] for the prompt's
    tokens, the first logprob null. TGI gives no top-k for the prompt, so no Min-K%++. The prefill
    must spell out the text sent, or `PromptNotCovered`."""
    try:
        prefill = answer["details"]["prefill"]
        tokens = [str(token["text"]) for token in prefill]
        values = [token.get("logprob") for token in prefill]
    except (KeyError, IndexError, TypeError, AttributeError) as exc:
        raise PromptNotCovered(f"endpoint {endpoint!r} answered without details.prefill (send decoder_input_details): {_shape(answer)}") from exc
    start = _after_special(tokens, text)
    _require_covered(tokens[start:], text, endpoint=endpoint, shape="/generate with decoder_input_details", total=len(tokens))
    scored = [TokenLogprob(tokens[index], float(value)) for index in range(start, len(tokens)) if (value := values[index]) is not None]
    return TextLogprobs(text=text, tokens=tuple(scored))


def _after_special(tokens: Sequence[str], text: str) -> int:
    """The index of the first token after leading beginning-of-sequence tokens (`<s>`,
    `<|begin_of_text|>`, an empty token ...) that the text itself does not start with."""
    start = 0
    while start < len(tokens) and _SPECIAL_TOKEN.match(tokens[start]) and not (tokens[start] and text.startswith(tokens[start])):
        start += 1
    return start


def _spelled_out(tokens: Sequence[str], start: int, text: str) -> int:
    """The end of the shortest run of tokens from `start` whose canonical text is as long as the text's."""
    wanted = len(canonical(text))
    have = 0
    end = start
    while end < len(tokens) and have < wanted:
        have += len(canonical(tokens[end]))
        end += 1
    return end


def _require_covered(tokens: Sequence[str], text: str, *, endpoint: str, shape: str, total: int) -> None:
    spelled, wanted = canonical("".join(tokens)), canonical(text)
    if spelled == wanted and spelled:
        return
    raise PromptNotCovered(
        f"endpoint {endpoint!r} ({shape}) did not return log-probabilities for the text it was sent: of its {total} tokens, "
        f"{len(tokens)} fall inside the text and spell out {len(spelled)} of its {len(wanted)} visible characters"
        f"{' (they differ)' if len(spelled) == len(wanted) else ''}. Some servers (llama.cpp's /v1/completions among them) accept "
        "echo but score only the tokens they generate; record this endpoint's logprobs as 'chat' or 'none' "
        f"(PATCH /v1/endpoints/{endpoint}) so probes use the completion test, or serve the model with vLLM or TGI"
    )


def _top_of(token: str, logprob: float, top: Mapping[str, float] | None) -> tuple[float, ...] | None:
    """The position's top-k log-probabilities, the token's own added where it is not among them."""
    if not top:
        return None
    values = [float(value) for value in top.values()]
    if token not in top:
        values.append(logprob)
    return tuple(values)


def _shape(answer: Any) -> str:
    """What an answer holds, by its keys only: an answer may echo the item's text, which an error
    message must not carry."""
    if isinstance(answer, Mapping):
        return "an object with keys " + ", ".join(sorted(str(key) for key in answer)[:12])
    return f"a JSON {type(answer).__name__}"
