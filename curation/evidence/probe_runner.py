"""Sending probe prompts to an OpenAI-compatible `/chat/completions` endpoint, through an `httpx`
client the caller owns (so the service's gate, proxies and test transports all apply).

Every request asks for greedy decoding (temperature 0) and one choice. At most
`endpoint.concurrency` requests are in flight; each attempt is bounded by
`endpoint.timeout_seconds`; timeouts, connection failures, 429 and 5xx are retried up to
`endpoint.max_attempts` attempts, waiting as long as the endpoint asks (`Retry-After` or a
rate-limit reset, read by `ingest.http`, at most `MAX_RETRY_AFTER_SECONDS`), else with exponential
backoff and jitter. A probe that still fails comes back with `error` set: one bad item never sinks
the run.

The whole flow is `probing.plan_probes` → `complete_sync` here → `probe_report.probe_report`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt

from curation.clock import EpochClock
from ingest.http import Retryable, retry_after_seconds, wait_hint_or_backoff
from schemas.evidence import ProbeCompletion, ProbeEndpoint, ProbePrompt

Progress = Callable[[int, int], None]
"""Called with (done, total) after each probe completes, for a progress bar."""

MAX_RETRY_AFTER_SECONDS = 60.0
"""Longer waits asked for by the endpoint are cut to this, so that one throttled item cannot stall a whole probe."""
_EXCERPT = 300


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


def _excerpt(response: httpx.Response) -> str:
    text = " ".join(response.text.split())
    return text[:_EXCERPT] + ("…" if len(text) > _EXCERPT else "")


def _parse(response: httpx.Response, item_id: str, clock: EpochClock) -> tuple[str, str | None]:
    """(content, finish_reason) of a 2xx answer; raises `Retryable` or `_Failed` otherwise (a
    rate-limit reset is read against `clock`)."""
    status = response.status_code
    if status == 429 or status >= 500:
        raise Retryable(f"the endpoint answered {status}", wait_hint=retry_after_seconds(response, clock()))
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


def _transport_error(exc: httpx.TransportError) -> Retryable:
    if isinstance(exc, httpx.TimeoutException):
        return Retryable(f"no answer within the timeout ({type(exc).__name__})")
    return Retryable(f"connection failed ({type(exc).__name__}: {exc})")


def _failure(exc: Exception, attempts: int) -> str:
    if isinstance(exc, Retryable):
        return f"{exc}; gave up after {attempts} attempts"
    return str(exc)


WAIT = wait_hint_or_backoff(max_wait=MAX_RETRY_AFTER_SECONDS, multiplier=0.5, max_backoff=20.0, jitter=0.5)


def complete_sync(
    client: httpx.Client,
    prompts: Sequence[ProbePrompt],
    endpoint: ProbeEndpoint,
    *,
    clock: EpochClock,
    sleep: Callable[[float], None] = time.sleep,
    progress: Progress | None = None,
) -> list[ProbeCompletion]:
    """Send every prompt from a pool of `endpoint.concurrency` threads; completions in prompt order.
    `clock` (seconds since the epoch, e.g. `time.time`) is what an endpoint's rate-limit reset
    time is read against."""
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
            return _parse(response, prompt.item_id, clock)

        retrying = Retrying(stop=stop_after_attempt(endpoint.max_attempts), wait=WAIT, retry=retry_if_exception_type(Retryable), sleep=sleep, reraise=True)
        try:
            content, finish = retrying(attempt)
        except (Retryable, _Failed) as exc:
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
