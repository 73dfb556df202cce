"""Per-item membership scores from token log-probabilities, read over HTTP from an OpenAI-legacy
`/v1/completions` answer (`echo`, `logprobs`, `max_tokens` 0).

A stand-in, behind one function (`logprob_scores`), for the product's scoring where it is not
available; every score is oriented so that higher means more like a training member:

- `loss`: the mean token log-probability (minus the loss per token);
- `min_k`: Min-K% Prob (Shi et al. 2023), the mean of the lowest 20% of token log-probabilities;
- `min_k_plus_plus`: Min-K%++ (Zhang et al. 2024), each token's log-probability standardised by
  the mean and spread of log-probabilities under the next-token distribution, lowest 20% averaged;
  an endpoint returns only the top log-probabilities, so the distribution is the top ones
  renormalised (an approximation the full vocabulary would not need);
- `zlib`: the summed log-probability over the text's zlib-compressed length (Carlini et al. 2021).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

import httpx

K_SHARE = 0.2
TOP_LOGPROBS = 20


def _lowest_mean(values: Sequence[float]) -> float:
    count = max(1, math.ceil(K_SHARE * len(values)))
    return sum(sorted(values)[:count]) / count


def item_scores(text: str, token_logprobs: Sequence[float | None], top_logprobs: Sequence[Mapping[str, float] | None]) -> dict[str, float]:
    pairs = [(value, top) for value, top in zip(token_logprobs, top_logprobs, strict=True) if value is not None]
    values = [value for value, _ in pairs]
    standardised = []
    for value, top in pairs:
        if not top:
            continue
        weights = [math.exp(entry) for entry in top.values()]
        mass = sum(weights)
        mean = sum(weight * entry for weight, entry in zip(weights, top.values(), strict=True)) / mass
        spread = math.sqrt(max(sum(weight * (entry - mean) ** 2 for weight, entry in zip(weights, top.values(), strict=True)) / mass, 1e-12))
        standardised.append((value - mean) / spread)
    return {
        "loss": sum(values) / len(values),
        "min_k": _lowest_mean(values),
        "min_k_plus_plus": _lowest_mean(standardised) if standardised else float("nan"),
        "zlib": sum(values) / len(zlib.compress(text.encode())),
        "tokens": float(len(values)),
    }


def logprob_scores(client: httpx.Client, base_url: str, model: str, ids: Sequence[str], texts: Mapping[str, str]) -> dict[str, dict[str, float]]:
    """Each item's scores (by item id) from the endpoint's echoed log-probabilities of its text."""
    out: dict[str, dict[str, float]] = {}
    for item_id in ids:
        body: dict[str, Any] = {"model": model, "prompt": texts[item_id], "echo": True, "logprobs": TOP_LOGPROBS, "max_tokens": 0, "temperature": 0}
        response = client.post(f"{base_url}/completions", json=body, timeout=60.0)
        response.raise_for_status()
        logprobs = response.json()["choices"][0]["logprobs"]
        out[item_id] = item_scores(texts[item_id], logprobs["token_logprobs"], logprobs["top_logprobs"])
    return out
