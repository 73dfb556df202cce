"""Sending probe prompts to an OpenAI-compatible `/chat/completions` endpoint, through an `httpx`
client the caller owns (so the service's gate, proxies and test transports all apply).

Every request asks for greedy decoding (temperature 0) and one choice. At most
`endpoint.concurrency` requests are in flight; each attempt is bounded by
`endpoint.timeout_seconds`; timeouts, connection failures, 429 and 5xx are retried with
exponential backoff and jitter (honouring `Retry-After`) up to `endpoint.max_attempts` attempts.
A probe that still fails comes back with `error` set: one bad item never sinks the run.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import date
from email.utils import parsedate_to_datetime
from typing import Any

import httpx
from tenacity import AsyncRetrying, RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential_jitter

from curation.evidence.probe_report import probe_report
from curation.evidence.probing import plan_probes
from schemas.evidence import CutPolicy, ProbeCompletion, ProbeEndpoint, ProbeItem, ProbePrompt, ProbeReport, SimilarityMetric

Progress = Callable[[int, int], None]
"""Called with (done, total) after each probe completes, for a progress bar."""

MAX_RETRY_AFTER_SECONDS = 60.0
_EXCERPT = 300


class _Retryable(Exception):
    def __init__(self, message: str, wait_hint: float | None = None) -> None:
        super().__init__(message)
        self.wait_hint = wait_hint


class _Failed(Exception):
    """An answer not worth retrying (4xx other than 429, a body that is not a chat completion)."""


def request_body(prompt: ProbePrompt, endpoint: ProbeEndpoint) -> dict[str, Any]:
    """The JSON body of one chat-completions request: greedy, one choice, no streaming."""
    return {
        "model": endpoint.model,
        "messages": [message.model_dump() for message in prompt.messages],
        "temperature": 0,
        "top_p": 1,
        "n": 1,
        "stream": False,
        "max_tokens": prompt.max_tokens,
    }


def _headers(endpoint: ProbeEndpoint) -> dict[str, str]:
    headers = {"Accept": "application/json"}
    if endpoint.api_key is not None:
        headers["Authorization"] = f"Bearer {endpoint.api_key.get_secret_value()}"
    return headers


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after", "").strip()
    if not value:
        return None
    if value.replace(".", "", 1).isdigit():
        return min(float(value), MAX_RETRY_AFTER_SECONDS)
    try:
        return min(max(0.0, parsedate_to_datetime(value).timestamp() - time.time()), MAX_RETRY_AFTER_SECONDS)
    except (TypeError, ValueError):
        return None


def _excerpt(response: httpx.Response) -> str:
    text = " ".join(response.text.split())
    return text[:_EXCERPT] + ("…" if len(text) > _EXCERPT else "")


def _parse(response: httpx.Response, item_id: str) -> tuple[str, str | None]:
    """(content, finish_reason) of a 2xx answer; raises `_Retryable` or `_Failed` otherwise."""
    status = response.status_code
    if status == 429 or status >= 500:
        raise _Retryable(f"the endpoint answered {status}", wait_hint=_retry_after(response))
    if not 200 <= status < 300:
        raise _Failed(f"the endpoint answered {status}: {_excerpt(response)}")
    try:
        choice = response.json()["choices"][0]
        content = choice["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise _Failed(f"the answer for item {item_id} is not a chat completion: {_excerpt(response)}") from exc
    if not isinstance(content, str):
        raise _Failed(f"the answer for item {item_id} has no text content")
    finish = choice.get("finish_reason")
    return content, finish if isinstance(finish, str) else None


def _wait(backoff: wait_exponential_jitter) -> Callable[[RetryCallState], float]:
    def wait(state: RetryCallState) -> float:
        error = state.outcome.exception() if state.outcome is not None else None
        if isinstance(error, _Retryable) and error.wait_hint is not None:
            return error.wait_hint
        return float(backoff(state))

    return wait


def _transport_error(exc: httpx.TransportError) -> _Retryable:
    if isinstance(exc, httpx.TimeoutException):
        return _Retryable(f"no answer within the timeout ({type(exc).__name__})")
    return _Retryable(f"connection failed ({type(exc).__name__}: {exc})")


def _failure(exc: Exception, attempts: int) -> str:
    if isinstance(exc, _Retryable):
        return f"{exc}; gave up after {attempts} attempts"
    return str(exc)


BACKOFF = wait_exponential_jitter(multiplier=0.5, max=20.0, jitter=0.5)


def complete_sync(
    client: httpx.Client,
    prompts: Sequence[ProbePrompt],
    endpoint: ProbeEndpoint,
    *,
    sleep: Callable[[float], None] = time.sleep,
    progress: Progress | None = None,
) -> list[ProbeCompletion]:
    """Send every prompt from a pool of `endpoint.concurrency` threads; completions in prompt order."""
    url = f"{endpoint.base_url}/chat/completions"
    headers = _headers(endpoint)
    done = 0
    lock = threading.Lock()

    def one(prompt: ProbePrompt) -> ProbeCompletion:
        attempts = 0

        def attempt() -> tuple[str, str | None]:
            nonlocal attempts
            attempts += 1
            try:
                response = client.post(url, json=request_body(prompt, endpoint), headers=headers, timeout=endpoint.timeout_seconds)
            except httpx.TransportError as exc:
                raise _transport_error(exc) from exc
            return _parse(response, prompt.item_id)

        retrying = Retrying(stop=stop_after_attempt(endpoint.max_attempts), wait=_wait(BACKOFF), retry=retry_if_exception_type(_Retryable), sleep=sleep, reraise=True)
        try:
            content, finish = retrying(attempt)
        except (_Retryable, _Failed) as exc:
            return ProbeCompletion(item_id=prompt.item_id, error=_failure(exc, attempts), attempts=attempts)
        return ProbeCompletion(item_id=prompt.item_id, completion=content, finish_reason=finish, attempts=attempts)

    def tracked(prompt: ProbePrompt) -> ProbeCompletion:
        nonlocal done
        result = one(prompt)
        if progress is not None:
            with lock:
                done += 1
                progress(done, len(prompts))
        return result

    with ThreadPoolExecutor(max_workers=endpoint.concurrency, thread_name_prefix="probe") as pool:
        return list(pool.map(tracked, prompts))


async def complete_async(
    client: httpx.AsyncClient,
    prompts: Sequence[ProbePrompt],
    endpoint: ProbeEndpoint,
    *,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    progress: Progress | None = None,
) -> list[ProbeCompletion]:
    """Send every prompt with at most `endpoint.concurrency` in flight; completions in prompt order."""
    url = f"{endpoint.base_url}/chat/completions"
    headers = _headers(endpoint)
    gate = asyncio.Semaphore(endpoint.concurrency)
    done = 0

    async def one(prompt: ProbePrompt) -> ProbeCompletion:
        nonlocal done
        attempts = 0

        async def attempt() -> tuple[str, str | None]:
            nonlocal attempts
            attempts += 1
            try:
                async with gate:
                    response = await client.post(url, json=request_body(prompt, endpoint), headers=headers, timeout=endpoint.timeout_seconds)
            except httpx.TransportError as exc:
                raise _transport_error(exc) from exc
            return _parse(response, prompt.item_id)

        retrying = AsyncRetrying(stop=stop_after_attempt(endpoint.max_attempts), wait=_wait(BACKOFF), retry=retry_if_exception_type(_Retryable), sleep=sleep, reraise=True)
        try:
            answer: tuple[str, str | None] = await retrying(attempt)
            content, finish = answer
            result = ProbeCompletion(item_id=prompt.item_id, completion=content, finish_reason=finish, attempts=attempts)
        except (_Retryable, _Failed) as exc:
            result = ProbeCompletion(item_id=prompt.item_id, error=_failure(exc, attempts), attempts=attempts)
        done += 1
        if progress is not None:
            progress(done, len(prompts))
        return result

    return list(await asyncio.gather(*(one(prompt) for prompt in prompts)))


def probe_sync(
    client: httpx.Client,
    items: Sequence[ProbeItem],
    endpoint: ProbeEndpoint,
    *,
    dataset: str,
    split: str,
    cutoff: date,
    policy: CutPolicy | None = None,
    alpha: float = 0.05,
    primary_metric: SimilarityMetric = SimilarityMetric.LEVENSHTEIN,
    sleep: Callable[[float], None] = time.sleep,
    progress: Progress | None = None,
) -> ProbeReport:
    """Plan, send and score a whole probe of `items` (see `plan_probes` and `probe_report`)."""
    plan = plan_probes(items, dataset=dataset, split=split, policy=policy, max_tokens_cap=endpoint.max_tokens_cap)
    completions = complete_sync(client, plan.prompts, endpoint, sleep=sleep, progress=progress)
    return probe_report(plan, completions, cutoff=cutoff, model=endpoint.model, alpha=alpha, primary_metric=primary_metric)


async def probe_async(
    client: httpx.AsyncClient,
    items: Sequence[ProbeItem],
    endpoint: ProbeEndpoint,
    *,
    dataset: str,
    split: str,
    cutoff: date,
    policy: CutPolicy | None = None,
    alpha: float = 0.05,
    primary_metric: SimilarityMetric = SimilarityMetric.LEVENSHTEIN,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    progress: Progress | None = None,
) -> ProbeReport:
    """`probe_sync` over an `httpx.AsyncClient`."""
    plan = plan_probes(items, dataset=dataset, split=split, policy=policy, max_tokens_cap=endpoint.max_tokens_cap)
    completions = await complete_async(client, plan.prompts, endpoint, sleep=sleep, progress=progress)
    return probe_report(plan, completions, cutoff=cutoff, model=endpoint.model, alpha=alpha, primary_metric=primary_metric)
